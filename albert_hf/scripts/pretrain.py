"""Placeholder until the linear script lands: `albert-hf pretrain`."""

from albert_hf.pretraining.run import main  # noqa: F401
