"""Off-policy replay schedule arithmetic, checked before compiling.

`train` below is a `loop.TrainConfig`: each `update` collects T = `unroll_length *
unrolls_per_update` vectorized steps from `num_envs` envs into the buffer, then runs
`updates_per_call` gradient steps on sampled batches. `capacity_per_env` turns a transition
budget into rows per env for `storage.init`; `check_schedule` rejects schedules that cannot run.
"""

from __future__ import annotations


def updates_per_call(utd_ratio: float, train) -> int:
    """Gradient steps per `update`: `utd_ratio * unroll_length * unrolls_per_update`, rounded
    (`train` is a `loop.TrainConfig`)."""
    return int(round(utd_ratio * train.unroll_length * train.unrolls_per_update))


def capacity_per_env(buffer_size: int, num_envs: int) -> int:
    """Rows per env of a buffer holding about `buffer_size` transitions."""
    return max(1, buffer_size // num_envs)


def check_schedule(*, utd_ratio: float, batch_size: int, buffer_size: int,
                   learning_starts: int, train) -> None:
    """Checks an off-policy replay schedule before compiling (`train`: a `loop.TrainConfig`).

    Raises:
        ValueError: `utd_ratio * T` (T = unroll_length * unrolls_per_update) is not a positive
            whole number of gradient steps; `batch_size` or `buffer_size` is not positive; the
            buffer cannot hold one update's T rows per env; `batch_size` exceeds what the buffer
            holds when learning starts; or `learning_starts` is not below the run's env steps.
    """
    n, t = train.num_envs, train.unroll_length * train.unrolls_per_update
    steps = updates_per_call(utd_ratio, train)
    if not utd_ratio > 0 or abs(utd_ratio * t - steps) > 1e-6 or steps < 1:
        raise ValueError(f"utd_ratio * unroll_length * unrolls_per_update = {utd_ratio * t} "
                         "gradient steps per update is not a positive whole number: change "
                         "utd_ratio or unroll_length.")
    for name, value in (("batch_size", batch_size), ("buffer_size", buffer_size)):
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}.")
    rows = capacity_per_env(buffer_size, n)
    if t > rows:
        raise ValueError(f"buffer_size / num_envs = {rows} rows cannot hold one update's {t} "
                         "steps per env: raise buffer_size.")
    held = min(max(learning_starts, n * t), rows * n)
    if batch_size > held:
        raise ValueError(
            f"batch_size = {batch_size} is larger than the {held} transitions the buffer holds "
            f"when learning starts (learning_starts = {learning_starts}, buffer_size = "
            f"{buffer_size}, num_envs = {n}): lower batch_size or raise learning_starts.")
    if learning_starts >= train.real_total_env_steps:
        raise ValueError(f"learning_starts = {learning_starts} is not below the run's "
                         f"{train.real_total_env_steps} env steps: no gradient step would run. "
                         "Lower learning_starts or raise total_env_steps.")
