"""Placeholder until the linear script lands: `albert-hf glue`."""

from albert_hf.tasks.glue import main  # noqa: F401
