"""A stuck run says so: `Watchdog` dumps every thread's stack and exits when nothing finishes.

The runner arms it before compiling and beats it after every chunk. When the next beat does not
come within `RunConfig.watchdog_seconds` (a deadlock in a collective, a host callback that
never returns, a thread pool waiting on a futex forever), the watchdog thread writes the Python
stacks of all threads (`faulthandler.dump_traceback`) to `<run_dir>/stuck-<time>.txt` (the
temp folder without a run dir), prints one line naming the file and what the run was waiting
for, and ends the process with `os._exit(EXIT_CODE)`: a stuck main thread cannot be unwound,
and a scheduler (SLURM, a sweep script) sees a failure instead of a job that runs until its
time limit. The last complete checkpoint stays the latest, so `jaxrl train --resume` continues.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import time

EXIT_CODE = 3


class Watchdog:
    """Context manager; `beat(waiting_for)` restarts the clock.

    Args:
        seconds: allowed time between beats; None disables the watchdog (no thread).
        run_dir: folder for the stack dump (None: the temp folder).
    """

    def __init__(self, seconds: float | None, run_dir: str | None):
        self.seconds = seconds
        self.run_dir = run_dir
        self._deadline = 0.0
        self._waiting_for = "the first chunk"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = None

    def beat(self, waiting_for: str) -> None:
        """Something finished; the next thing (`waiting_for`, for the message) has `seconds`."""
        with self._lock:
            self._deadline = time.monotonic() + (self.seconds or 0.0)
            self._waiting_for = waiting_for

    def __enter__(self) -> Watchdog:
        if self.seconds is not None:
            self.beat(self._waiting_for)
            self._thread = threading.Thread(target=self._watch, name="jaxrl-watchdog",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while True:
            with self._lock:
                left = self._deadline - time.monotonic()
            if left <= 0:
                self._fire()
                return
            if self._stop.wait(min(left, 5.0)):
                return

    def _fire(self) -> None:
        folder = self.run_dir or tempfile.gettempdir()
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(os.path.abspath(folder),
                            f"stuck-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt")
        with open(path, "w") as f:
            f.write(f"jaxrl watchdog: nothing finished within {self.seconds:g} s while waiting "
                    f"for {self._waiting_for}; Python stacks of all threads:\n\n")
            f.flush()
            faulthandler.dump_traceback(file=f, all_threads=True)
        sys.stderr.write(
            f"\nerror: the run looks stuck: {self._waiting_for} did not finish within "
            f"{self.seconds:g} s (RunConfig.watchdog_seconds, --watchdog-seconds). Stacks of "
            f"all threads: {path}\n")
        sys.stderr.flush()
        os._exit(EXIT_CODE)
