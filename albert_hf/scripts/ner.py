"""Placeholder until the linear script lands: `albert-hf ner`."""

from albert_hf.tasks.ner import main  # noqa: F401
