"""The package version, in one place (read by the CLI, caches and reports)."""

__version__ = "0.1.0"
