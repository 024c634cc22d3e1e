"""Optional Weights & Biases sink for `Logger` (`pip install 'jaxrl[wandb]'`).

One `WandbSink` is one W&B run, bound to one run dir: its files go under `<run_dir>/wandb/`
and its run id is kept in `<run_dir>/wandb_id.txt`, so resuming a run dir continues the same
W&B run (W&B keeps steps increasing: chunks that a resume computes again, after the last
checkpoint, are dropped by W&B where it already holds those steps). Several sinks can be open
in one process (e.g. sweep members, which share a `group`).

Without an account the sink needs no network: when neither `WANDB_MODE` nor `WANDB_API_KEY`
is set and no `wandb login` credentials are found, the run is written offline to
`<run_dir>/wandb/offline-run-*`; upload it later with

    wandb sync <run_dir>/wandb/offline-run-*

Set `WANDB_MODE=online` (or `offline`, `disabled`) to choose the mode yourself.
"""

from __future__ import annotations

import os
import secrets
import string

_MISSING = "`--logger wandb` needs the wandb package: pip install 'jaxrl[wandb]'"
ID_FILE = "wandb_id.txt"
_ID_CHARS = string.ascii_lowercase + string.digits


def run_id(run_dir: str) -> str:
    """The W&B run id of `run_dir`: read from `<run_dir>/wandb_id.txt`, made on first use."""
    path = os.path.join(run_dir, ID_FILE)
    if os.path.exists(path):
        with open(path) as f:
            saved = f.read().strip()
        if saved:
            return saved
    new = "".join(secrets.choice(_ID_CHARS) for _ in range(8))
    os.makedirs(run_dir, exist_ok=True)
    with open(path, "w") as f:
        f.write(new + "\n")
    return new


def _has_credentials() -> bool:
    """Whether W&B credentials exist (env, `wandb login`'s netrc, settings), never prompting.

    Uses wandb internals; if those move, answers False, so the run goes offline, not to a
    login prompt.
    """
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib import wbauth

        settings = wandb_setup.singleton().settings
        return bool(settings.api_key) or wbauth.read_netrc_auth(host=settings.base_url) is not None
    except Exception:
        return False


def resolve_mode() -> str | None:
    """The W&B mode for a new run: `$WANDB_MODE` if set; None (wandb's own choice) when a
    mode is stored in wandb's settings (`wandb offline`) or credentials exist; else `"offline"`.

    So a machine without a W&B account never gets a login prompt. Online without
    credentials (`WANDB_MODE=online`, not logged in) is wandb's business: a non-interactive
    run raises there instead of prompting.
    """
    if os.environ.get("WANDB_MODE"):
        # Passed explicitly: wandb reads the environment once per process (`wandb.setup`).
        return os.environ["WANDB_MODE"]
    try:
        from wandb.sdk import wandb_setup

        if wandb_setup.singleton().settings.mode not in ("online", "run"):
            return None  # `wandb offline` or a settings file chose the mode
    except Exception:
        pass
    return None if _has_credentials() else "offline"


class WandbSink:
    """Logs a `Logger`'s scalar metrics to one W&B run, at `step` = env steps.

    Args:
        run_dir: the run's folder; W&B writes to `<run_dir>/wandb/` (offline runs in
            `<run_dir>/wandb/offline-run-*`, to upload with `wandb sync`) and the run id
            is kept in `<run_dir>/wandb_id.txt`, so a resumed run dir continues its W&B run.
        name: the W&B run name (e.g. the sweep member's name).
        group: the W&B group; members of one sweep share it, so W&B shows them together.
        config: the run's resolved configuration (JSON-able dict).
        project: the W&B project; default `$WANDB_PROJECT`, else `jaxrl`.

    Raises:
        ImportError: wandb is not installed.
    """

    def __init__(self, run_dir: str, name: str, group: str | None, config: dict,
                 project: str | None = None):
        try:
            import wandb
        except ImportError as e:
            raise ImportError(_MISSING) from e
        run_dir = os.path.abspath(run_dir)
        self.run_dir = run_dir
        self.id = run_id(run_dir)
        self.run = wandb.init(
            project=project or os.environ.get("WANDB_PROJECT", "jaxrl"),
            name=name,
            group=group,
            config=config,
            dir=run_dir,
            id=self.id,
            resume="allow",
            # Several runs open in one process (sweep members); `wandb.run` stays unset.
            reinit="create_new",
            mode=resolve_mode(),
            # No console capture (the progress bar owns stderr), no wandb chatter; a
            # `.wandb/` folder in run_dir would otherwise be chosen over `wandb/`.
            settings=wandb.Settings(silent=True, console="off", use_dot_wandb=False),
        )
        self._open = True

    def log(self, metrics: dict, step: int) -> None:
        """Logs `metrics` at `step`.

        Args:
            metrics: `group/name` -> finite number (`Logger` passes a record through
                `jaxrl.run.logging.scalar_metrics`, as TensorBoard gets it).
            step: the W&B step, the record's env steps (must not decrease within a run).
        """
        if metrics:
            self.run.log(metrics, step=int(step))

    def finish(self) -> None:
        """Finishes this run only (other open sinks go on); a second call does nothing.

        wandb's background service (`wandb-core`) stays up for the process's other runs
        and exits with the process (or `wandb.teardown()`).
        """
        if self._open:
            self._open = False
            self.run.finish()
