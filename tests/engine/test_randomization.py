"""Domain randomization: a fresh model per reset, within the randomizer's ranges, part of the
run state (bit-identical resume), no traced value left in the env, clear errors on bad input.

The mechanics run on `CartpoleBalance` with our generic `friction_and_mass` randomizer (cheap
compiles); Playground's own Go1 randomizer is checked by drawing from it without stepping Go1.
"""

import contextlib
import dataclasses
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct
from tree_helpers import assert_trees_equal

from jaxrl import configs
from jaxrl.engine import loop, randomization, wrappers
from jaxrl.envs import make, randomizers, toy
from jaxrl.run import runner

GENERIC = "jaxrl.envs.randomizers:friction_and_mass"


@pytest.fixture(scope="module")
def cartpole():
    return make("CartpoleBalance")  # builds, never compiles here


def test_playground_go1_randomizer_draws_within_its_ranges():
    """Playground's Go1 randomizer (`go1/randomize.py`): floor friction U(0.4, 1.0), link masses
    x U(0.9, 1.1) plus U(-1, 1) kg on the torso; different per key."""
    base = make("Go1JoystickFlatTerrain")
    env = randomization.DomainRandomization(base, randomization.resolve("playground", base))
    assert set(env.fields) == {"geom_friction", "body_mass", "body_ipos", "qpos0",
                               "dof_frictionloss", "dof_armature"}
    draws = jax.jit(jax.vmap(env.draw))(jax.random.split(jax.random.PRNGKey(0), 64))
    floor = np.asarray(draws["geom_friction"][:, 0, 0])
    assert floor.min() >= 0.4 and floor.max() <= 1.0 and np.unique(floor).size == 64
    nominal = np.asarray(base.sim_model.body_mass)
    ratio = np.asarray(draws["body_mass"])[:, 2:] / nominal[2:]
    assert ratio.min() >= 0.9 - 1e-6 and ratio.max() <= 1.1 + 1e-6
    torso = np.asarray(draws["body_mass"][:, 1]) - nominal[1]
    assert np.all(np.abs(torso) <= 0.1 * nominal[1] + 1.0 + 1e-5)
    assert isinstance(base.env._mjx_model.geom_friction, jax.Array)  # nominal model kept


@struct.dataclass
class ToyModel:
    """The two fields `friction_and_mass` randomizes, with `mjx.Model`'s names."""

    geom_friction: jax.Array
    body_mass: jax.Array
    ngeom: int = struct.field(pytree_node=False, default=3)
    nbody: int = struct.field(pytree_node=False, default=2)

    def tree_replace(self, fields):
        return self.replace(**fields)


class ModelPointMass(toy.PointMass):
    """PointMass1D whose observation shows its simulator model (sliding frictions, masses)."""

    name = "ModelPointMass"

    def __init__(self):
        super().__init__()
        self._model = ToyModel(geom_friction=jnp.array([[1.0, 0.1, 0.1]] * 3),
                               body_mass=jnp.array([0.0, 2.0]))

    @property
    def sim_model(self):
        return self._model

    @contextlib.contextmanager
    def using_model(self, model):
        nominal, self._model = self._model, model
        try:
            yield
        finally:
            self._model = nominal

    def _show(self, state):
        shown = jnp.concatenate([self._model.geom_friction[:, 0], self._model.body_mass])
        return state.replace(obs=jnp.concatenate([state.obs, shown]))

    def reset(self, key):
        return self._show(super().reset(key))

    def step(self, state, action):
        return self._show(super().step(state.replace(obs=state.obs[:2]), action))


def test_fresh_model_at_every_reset_and_per_slot():
    base = ModelPointMass()
    env = randomization.maybe_randomize(base, GENERIC)
    assert set(env.fields) == {"body_mass", "geom_friction"}
    venv = wrappers.wrap_for_training(env, num_envs=4, episode_length=2)
    state = jax.jit(venv.reset)(jax.random.PRNGKey(0))
    step = jax.jit(venv.step)
    frictions = [np.asarray(state.info["randomized"]["geom_friction"][:, :, 0])]
    for _ in range(4):
        state = step(state, jnp.zeros((4, 1)))
        frictions.append(np.asarray(state.info["randomized"]["geom_friction"][:, :, 0]))
        # The env simulated with the slot's randomized model (it shows it in obs).
        np.testing.assert_array_equal(np.asarray(state.obs[:, 2:5]), frictions[-1])
    # Episodes last 2 steps: the model is kept within an episode and re-drawn at each reset.
    np.testing.assert_array_equal(frictions[0], frictions[1])
    assert not np.array_equal(frictions[1], frictions[2])
    np.testing.assert_array_equal(frictions[2], frictions[3])
    assert not np.array_equal(frictions[3], frictions[4])
    assert len({f[0].tobytes() for f in frictions[::2]}) == 3  # slot 0: 3 different models
    assert np.unique(frictions[0][:, 1]).size == 4  # different across slots
    lo, hi = randomizers.FRICTION_SCALE
    assert np.stack(frictions).min() >= lo - 1e-6 and np.stack(frictions).max() <= hi + 1e-6
    mass = np.asarray(state.info["randomized"]["body_mass"][:, 1]) / 2.0
    assert mass.min() >= randomizers.MASS_SCALE[0] and mass.max() <= randomizers.MASS_SCALE[1]
    # No traced model stayed in the env object: an un-jitted step on the same env works.
    out = base.step(base.reset(jax.random.PRNGKey(1)), jnp.zeros(1))
    np.testing.assert_array_equal(np.asarray(out.obs[2:]), [1.0, 1.0, 1.0, 0.0, 2.0])


def _shapes_changed(model, rng):
    out, axes = randomizers.friction_and_mass(model, rng)
    return out.tree_replace({"body_mass": out.body_mass[:, :-1]}), axes


def test_bad_input_is_a_clear_error(cartpole, capsys):
    capsys.readouterr()
    with pytest.raises(ValueError, match="no domain randomizer.*Go1JoystickFlatTerrain"):
        randomization.resolve("playground", cartpole)
    # Playground prints a line for each env it has no randomizer for: not to our users.
    assert capsys.readouterr() == ("", "")
    with pytest.raises(ValueError, match="module:function"):
        randomization.resolve("friction", cartpole)
    with pytest.raises(ValueError, match="cannot import"):
        randomization.resolve("jaxrl.envs.randomizers:nothing", cartpole)
    with pytest.raises(ValueError, match="body_mass.*keep shapes"):
        randomization.DomainRandomization(cartpole, _shapes_changed)
    with pytest.raises(ValueError, match="no simulator model"):
        randomization.resolve(GENERIC, make("PointMass1D"))


def _cfg():
    preset = configs.get("ppo-dmc-cpu")
    cfg = dataclasses.replace(preset.train, num_envs=8, unroll_length=4, num_chunks=4,
                              total_env_steps=4 * 8 * 4, episode_length=6, num_eval_envs=2,
                              domain_randomization=GENERIC)
    return cfg, preset.agent_config


def test_build_rejects_randomization_before_compiling():
    cfg, agent_cfg = _cfg()
    with pytest.raises(ValueError, match="no domain randomizer"):
        runner.build("ppo", "CartpoleBalance", dataclasses.replace(
            cfg, domain_randomization="playground"), agent_cfg)


@pytest.mark.slow
def test_resume_with_randomization_is_bit_identical_and_evaluates(tmp_path):
    cfg, agent_cfg = _cfg()
    straight_dir, run_dir = str(tmp_path / "a"), str(tmp_path / "b")
    straight = runner.train("ppo", "CartpoleBalance", cfg, agent_cfg, run_dir=straight_dir,
                            progress=False, run=loop.RunConfig(keep_checkpoints=4))
    values = straight.runner.env_state.info["randomized"]["body_mass"]
    assert values.shape[:2] == (1, 8) and np.unique(np.asarray(values[0, :, 1])).size == 8
    assert np.isfinite(straight.records[-1]["eval/episode_return"])  # randomized evaluation
    shutil.copytree(straight_dir, run_dir)
    for chunk in (3, 4):
        shutil.rmtree(os.path.join(run_dir, "checkpoints", str(chunk)))
    resumed = runner.resume(run_dir, progress=False)
    assert_trees_equal(straight.runner, resumed.runner)
    # Evaluation after training, with and without randomization, on the same env object.
    from jaxrl.run import checkpoint

    loaded = checkpoint.load_run(run_dir)
    nominal = runner.evaluate_run(loaded, 2, randomize=False)
    assert np.isfinite(nominal["eval/episode_return"]).all()
    env = loaded.env  # un-jitted steps on the env object that training and evaluation traced
    out = env.step(env.reset(jax.random.PRNGKey(0)), jnp.zeros(env.action_size))
    assert np.isfinite(float(out.reward))
