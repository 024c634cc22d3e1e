"""The evaluator's two policies: the mode (default) and sampled actions (`deterministic_eval`,
`jaxrl eval --actions`)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.engine.loop import TrainConfig
from jaxrl.envs.toy import TwoModes
from jaxrl.run.evaluation import make_evaluator


@dataclasses.dataclass(frozen=True)
class ModeOrSign:
    """Mode 0 (between `TwoModes`' two good actions); a sample is +-0.7 by the key's coin, so
    every sampled episode earns `TwoModes`' full reward 1 and the mode earns
    `exp(-(0.7 / 0.15)^2)`."""

    def act(self, state, obs, key, deterministic=False):
        n = obs.shape[0]
        if deterministic:
            return jnp.zeros((n, 1)), {}
        return 0.7 * jnp.sign(jax.random.normal(key, (n, 1))), {}


@pytest.mark.parametrize("deterministic", [True, False])
def test_evaluator_follows_deterministic_eval(deterministic):
    cfg = TrainConfig(num_eval_envs=16, episode_length=1, deterministic_eval=deterministic)
    evaluator = make_evaluator(ModeOrSign(), TwoModes(), cfg)
    ev = evaluator(jnp.zeros((2,)), jax.random.PRNGKey(0))  # 2 "seeds" of a stateless agent
    expected = np.exp(-((0.7 / 0.15) ** 2)) if deterministic else 1.0
    np.testing.assert_allclose(ev["eval/episode_return"], [expected, expected], rtol=1e-5)
    np.testing.assert_array_equal(ev["eval/num_episodes"], [16.0, 16.0])
