"""The package version (kept apart so modules can read it without the public API)."""

__version__ = "0.1.0"
