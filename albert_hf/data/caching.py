"""Fingerprints for `datasets.Dataset.map`, so that its cache works (and stays quiet) for functions that hold a
tokenizer.

`datasets` names the result of a `map` by hashing the function with everything it holds. albert_hf's tokenizer has a
Python normalizer step that cannot be serialized, so that hash fails: `datasets` then warns ("Parameter 'function'=...
couldn't be hashed properly") and uses a random fingerprint, which turns its cache off. [`map_fingerprint`] names the
same result from what determines it instead, and every `map` over tokenized text here passes it as `new_fingerprint`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from datasets import Dataset
from datasets.fingerprint import Hasher


def tokenizer_fingerprint(tokenizer) -> str:
    """A stable hash of what a tokenizer does, for `datasets`' cache.

    `datasets` hashes the tokenizer object itself where it can; a tokenizer with a Python normalizer step cannot be
    serialized that way, and is then identified by its class, SentencePiece model, vocabulary and settings.
    """
    try:
        return Hasher.hash(tokenizer)
    except Exception:  # noqa: BLE001 - any serialization failure: fall back to the tokenizer's definition
        return Hasher.hash(
            [
                type(tokenizer).__qualname__,
                getattr(tokenizer, "sp_model_proto", None),
                sorted(tokenizer.get_vocab().items()),
                str(sorted((key, str(value)) for key, value in tokenizer.init_kwargs.items())),
            ]
        )


@cache
def _source_hash(path: str) -> str:
    return Hasher.hash(Path(path).read_bytes())


def map_fingerprint(dataset: Dataset, function: Callable, tokenizer=None, **settings: Any) -> str:
    """The fingerprint of `dataset.map(function)`: the input's fingerprint, the function's name and the source of its
    module (a change to the code, or to a helper beside it, is a new result), the tokenizer's fingerprint and the
    settings the function was built with (every value its closure or `fn_kwargs` holds besides the tokenizer)."""
    source = inspect.getsourcefile(function)
    return Hasher.hash(
        [
            dataset._fingerprint,  # `datasets` has no public name for it; `map` itself reads it so
            function.__module__,
            function.__qualname__,
            _source_hash(source) if source else None,
            None if tokenizer is None else tokenizer_fingerprint(tokenizer),
            sorted((name, repr(value)) for name, value in settings.items()),
        ]
    )
