"""Placeholder until the linear script lands: `albert-hf classify`."""

from albert_hf.tasks.classify import main  # noqa: F401
