"""Device-resident replay ring buffer that lives inside an agent state.

- `storage`: the buffer (`ReplayState`), `init`, `add` and `num_transitions`; a pytree of
  arrays that works under `jit`, `vmap`, `lax.scan` and `lax.cond`.
- `samplers`: row draws (uniform, or Sample Weight Decay with `swd_weights`), n-step batches
  (`Batch`, `sample`) and goal relabeling with a future state of the same episode
  (`FutureBatch`, `sample_future`, and JaxGCRL's whole-window batches `sample_windows`).
- `schedule`: off-policy schedule arithmetic checked before compiling (`updates_per_call`,
  `capacity_per_env`, `check_schedule`).

Every name is re-exported here, so `from jaxrl.learning import replay; replay.sample(...)` works.
"""

from jaxrl.learning.replay.samplers import (
    Batch,
    FutureBatch,
    sample,
    sample_future,
    sample_windows,
    swd_weights,
    uniform_below,
)
from jaxrl.learning.replay.schedule import capacity_per_env, check_schedule, updates_per_call
from jaxrl.learning.replay.storage import ReplayState, add, init, num_transitions

__all__ = [
    "Batch",
    "FutureBatch",
    "ReplayState",
    "add",
    "capacity_per_env",
    "check_schedule",
    "init",
    "num_transitions",
    "sample",
    "sample_future",
    "sample_windows",
    "swd_weights",
    "uniform_below",
    "updates_per_call",
]
