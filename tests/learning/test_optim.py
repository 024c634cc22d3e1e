"""The step-size rules of `jaxrl.learning.optim`: hand-computed values."""

import jax.numpy as jnp
import pytest

from jaxrl.learning import optim


@pytest.mark.parametrize("kl,want", [
    (0.05, 1e-3 / 1.5),   # above 2 x 0.01: shrink
    (0.021, 1e-3 / 1.5),
    (0.02, 1e-3),         # inside [0.005, 0.02]: keep
    (0.01, 1e-3),
    (0.005, 1e-3),
    (0.004, 1.5e-3),      # below 0.01 / 2: grow
    (0.0, 1.5e-3),
])
def test_adapt_to_kl_hand_values(kl, want):
    got = optim.adapt_to_kl(jnp.float32(1e-3), jnp.float32(kl), 0.01)
    assert float(got) == pytest.approx(want, rel=1e-6)


def test_adapt_to_kl_clips_to_bounds():
    assert float(optim.adapt_to_kl(jnp.float32(9e-3), 0.0, 0.01)) == pytest.approx(1e-2)
    assert float(optim.adapt_to_kl(jnp.float32(1.2e-5), 1.0, 0.01)) == pytest.approx(1e-5)
    assert float(optim.adapt_to_kl(jnp.float32(1e-3), 1.0, 0.01, low=8e-4)) == pytest.approx(8e-4)


def test_rescale_rate_hand_values():
    # The step size was the rate itself: it becomes the new rate.
    assert float(optim.rescale_rate(jnp.float32(3e-4), jnp.float32(3e-4), 1e-4)) == \
        pytest.approx(1e-4)
    # Adapted to twice the rate: twice the new rate.
    assert float(optim.rescale_rate(jnp.float32(6e-4), jnp.float32(3e-4), 1e-4)) == \
        pytest.approx(2e-4)
    # An old rate of 0 cannot be scaled from: the new rate.
    assert float(optim.rescale_rate(jnp.float32(5e-4), jnp.float32(0.0), 1e-4)) == \
        pytest.approx(1e-4)


def test_replace_hp_merges_and_rescales_the_step_size():
    from flax import struct

    @struct.dataclass
    class S:
        hp: dict
        learning_rate: object

    state = S(hp={"learning_rate": jnp.float32(3e-4), "gamma": jnp.float32(0.99)},
              learning_rate=jnp.float32(6e-4))
    out = optim.replace_hp(state, {"learning_rate": jnp.float32(1e-4)})
    assert float(out.hp["learning_rate"]) == pytest.approx(1e-4)
    assert float(out.hp["gamma"]) == pytest.approx(0.99)
    assert float(out.learning_rate) == pytest.approx(2e-4)  # adapted to 2x: stays 2x
    same = optim.replace_hp(state, {"gamma": jnp.float32(0.9)})
    assert float(same.learning_rate) == pytest.approx(6e-4) and float(same.hp["gamma"]) == \
        pytest.approx(0.9)


# cos(pi / 4) = sqrt(1/2): a quarter of the way, 0.1 + 0.9 * (1 + 0.7071) / 2 = 0.8682.
@pytest.mark.parametrize("frac,want", [(0.0, 1.0), (0.5, 0.55), (1.0, 0.1), (0.25, 0.868198)])
def test_cosine_decay_hand_values(frac, want):
    assert float(optim.cosine_decay(jnp.float32(frac), 0.1)) == pytest.approx(want, rel=1e-6)
