"""Placeholder until the linear script lands: `albert-hf multiple-choice`."""

from albert_hf.tasks.multiple_choice import main  # noqa: F401
