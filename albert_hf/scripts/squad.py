"""Placeholder until the linear script lands: `albert-hf squad`."""

from albert_hf.tasks.squad import main  # noqa: F401
