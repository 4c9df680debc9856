"""Texts (and text pairs) as the model reads them for sequence classification, `[CLS] a [SEP] (b [SEP])`, with the
inputs that lost tokens to the length limit counted, never hidden: what the GLUE and classify jobs encode their
`sentence1` (and `sentence2`) columns with, and what the multiple-choice pairs count their truncation with.
"""

from __future__ import annotations

import numpy as np
from datasets import Dataset

from .caching import map_fingerprint


def tokenize_text_pairs(
    dataset: Dataset, tokenizer, max_seq_length: int, pad_to_max_length: bool = False
) -> tuple[Dataset, int]:
    """Tokenize `[CLS] sentence1 [SEP] (sentence2 [SEP])`; returns the dataset and how many inputs were truncated.

    By default inputs are not padded here: the collator pads each batch to its longest input (dynamic padding).
    """
    text_columns = [name for name in ("sentence1", "sentence2") if name in dataset.column_names]

    def encode(batch: dict[str, list]) -> dict[str, list]:
        texts = [batch[name] for name in text_columns]
        encoded = tokenizer(
            *texts,
            truncation=True,
            max_length=max_seq_length,
            padding="max_length" if pad_to_max_length else False,
            return_token_type_ids=True,
        )
        encoded["truncated"] = find_truncated(tokenizer, texts, encoded["attention_mask"], max_seq_length)
        return encoded

    fingerprint = map_fingerprint(dataset, encode, tokenizer, max_seq_length=max_seq_length, pad=pad_to_max_length)
    encoded = dataset.map(encode, batched=True, remove_columns=text_columns, new_fingerprint=fingerprint)
    num_truncated = int(np.sum(encoded["truncated"])) if len(encoded) else 0
    return encoded.remove_columns("truncated"), num_truncated


def find_truncated(
    tokenizer, texts: list[list[str]], attention_masks: list[list[int]], max_seq_length: int
) -> list[bool]:
    """Which inputs lost tokens to max_seq_length, so truncation is counted, never hidden.

    Only inputs that fill max_seq_length can have been cut; just those are tokenized again without truncation.
    """
    truncated = [False] * len(attention_masks)
    full = [i for i, mask in enumerate(attention_masks) if sum(mask) >= max_seq_length]
    if full:
        lengths = [len(ids) for ids in tokenizer(*[[column[i] for i in full] for column in texts])["input_ids"]]
        for i, length in zip(full, lengths):
            truncated[i] = length > max_seq_length
    return truncated
