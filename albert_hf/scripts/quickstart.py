"""Placeholder until the linear script lands: `albert-hf quickstart`."""

from albert_hf.pretraining.run import quickstart_main as main  # noqa: F401
