"""Replay schedule arithmetic: gradient steps per update, rows per env, checks before compiling."""

import pytest

from jaxrl.engine.loop import TrainConfig
from jaxrl.learning import replay

# T = unroll_length * unrolls_per_update = 16 rows per update; 2 chunks * 50 iterations * 64 steps.
TRAIN = TrainConfig(num_envs=4, unroll_length=8, unrolls_per_update=2, total_env_steps=6400,
                    num_chunks=2)
OK = {"utd_ratio": 0.5, "batch_size": 64, "buffer_size": 1000, "learning_starts": 100}


def test_updates_per_call_and_capacity_per_env_hand_computed():
    assert TRAIN.real_total_env_steps == 6400
    assert replay.updates_per_call(0.5, TRAIN) == 8
    assert replay.updates_per_call(0.25, TRAIN) == 4
    assert replay.updates_per_call(1 / 3, TRAIN) == 5  # 5.33 rounded
    assert replay.capacity_per_env(1000, 4) == 250
    assert replay.capacity_per_env(1003, 4) == 250
    assert replay.capacity_per_env(3, 4) == 1  # at least one row


def test_check_schedule_accepts_a_runnable_schedule():
    assert replay.check_schedule(**OK, train=TRAIN) is None
    # batch_size may equal what the buffer holds when learning starts; learning_starts one
    # below the run's env steps still leaves a gradient step.
    assert replay.check_schedule(**dict(OK, batch_size=100), train=TRAIN) is None
    assert replay.check_schedule(**dict(OK, learning_starts=6399, batch_size=16),
                                 train=TRAIN) is None


@pytest.mark.parametrize("change, match", [
    ({"utd_ratio": 1 / 3}, "not a positive whole number"),
    ({"utd_ratio": 0.0}, "not a positive whole number"),
    ({"utd_ratio": -0.5}, "not a positive whole number"),
    ({"batch_size": 0}, "batch_size must be positive"),
    ({"buffer_size": -1}, "buffer_size must be positive"),
    ({"buffer_size": 60}, "15 rows cannot hold one update's 16 steps"),
    ({"batch_size": 101}, "larger than the 100 transitions"),
    ({"learning_starts": 0, "batch_size": 65}, "larger than the 64 transitions"),  # one update
    ({"buffer_size": 64, "learning_starts": 5000, "batch_size": 65}, "than the 64 transitions"),
    ({"learning_starts": 6400, "batch_size": 16}, "not below the run's 6400 env steps"),
])
def test_check_schedule_rejects(change, match):
    with pytest.raises(ValueError, match=match):
        replay.check_schedule(**dict(OK, **change), train=TRAIN)
