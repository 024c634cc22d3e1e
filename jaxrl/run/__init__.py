"""Host side of a run: build and drive training (`runner`), checkpoints, logs, CLI, plots.

The only part of the core that sees the registered agents, envs and presets.
"""
