"""What tests/test_hub.py and tests/test_convert.py share: the tiny model on the real 30k vocabulary, texts to encode,
and the files a Hub repository of an albert_hf model must hold."""

from __future__ import annotations

import functools
from pathlib import Path

from .tiny import TINY_CONFIG
from .tiny import tiny_config as _tiny_config

# The real ALBERT vocabulary, so the real tokenizer's ids fit.
TINY = dict(TINY_CONFIG, vocab_size=30000, num_hidden_layers=2)
TEXTS = [("Hello world, 1,000 people came.", "Did they?"), ("ALBERT shares its layers.", "Yes: all of them.")]
tiny_config = functools.partial(_tiny_config, **TINY)


# What a repository of a model transformers' own ALBERT describes holds (besides its card): no code.
STOCK_FILES = {"config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json"}
# What a repository of a model that needs albert_hf's code holds to load with trust_remote_code and no albert_hf
# installed, plus its card.
REMOTE_CODE_FILES = {
    "config.json",
    "model.safetensors",
    "modeling.py",
    "configuration.py",
    "spiece.model",
    "tokenizer_config.json",
    "tokenization.py",
    "README.md",
}


def files_in(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def encode(tokenizer, texts=TEXTS) -> dict:
    return dict(tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, return_tensors="pt"))
