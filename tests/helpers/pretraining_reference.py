"""The instance creation as it was written on Python token lists (one list per sentence), kept as the reference that
the span/Arrow implementation in albert_hf.data.sentence_order must reproduce draw for draw: same pairs, same labels,
same truncation, for SOP and NSP. Only tests import this module."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Literal

Objective = Literal["sop", "nsp"]


def draw_target_length(rng: random.Random, max_num_tokens: int, short_seq_prob: float) -> int:
    """Usually fill the sequence; with probability short_seq_prob aim shorter, to match fine-tuning lengths."""
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_num_tokens)
    return max_num_tokens


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, one token at a time from a random end, until the pair fits (in place)."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        # Random end, so that neither the starts nor the ends of segments are systematically lost.
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _flatten(segments: Sequence[Sequence[int]]) -> list[int]:
    return [token for segment in segments for token in segment]


def _random_segment_run(
    pool: Sequence[Sequence[Sequence[int]]], document_index: int, target_length: int, rng: random.Random
) -> list[int]:
    """NSP's random B: consecutive sentences of another document of `pool`, from a random start, up to the target."""
    for _ in range(10):  # as the original: ten tries to find another document, else use this one
        random_index = rng.randint(0, len(pool) - 1)
        if random_index != document_index and pool[random_index]:
            break
    # A document whose sentences all tokenized to nothing is empty: fall back to this (non-empty) one.
    document = pool[random_index] or pool[document_index]
    tokens: list[int] = []
    for segment in document[rng.randint(0, len(document) - 1) :]:
        tokens.extend(segment)
        if len(tokens) >= target_length:
            break
    return tokens


def sentence_pairs_from_document(
    pool: Sequence[Sequence[Sequence[int]]],
    document_index: int,
    rng: random.Random,
    max_num_tokens: int,
    short_seq_prob: float = 0.1,
    objective: Objective = "sop",
) -> Iterator[tuple[list[int], list[int], int]]:
    """Yield (tokens_a, tokens_b, label) from `pool[document_index]`, a list of tokenized sentences.

    Sentences are gathered into a chunk until it reaches a target length (max_num_tokens, or with probability
    short_seq_prob a random shorter one); the chunk is cut at a random sentence boundary into A and B. SOP swaps A
    and B with probability 0.5 (label 1); NSP replaces B with sentences of another document of `pool` with
    probability 0.5 (label 1). The pair is then truncated to max_num_tokens.
    """
    document = pool[document_index]
    if objective == "sop" and len(document) < 2:
        return
    chunk: list[Sequence[int]] = []
    chunk_length = 0
    target_length = draw_target_length(rng, max_num_tokens, short_seq_prob)
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        if not _chunk_is_complete(chunk, chunk_length, target_length, i, len(document), objective):
            i += 1
            continue
        a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
        tokens_a = _flatten(chunk[:a_end])
        if objective == "sop":
            tokens_b = _flatten(chunk[a_end:])
            label = int(rng.random() < 0.5)
            if label:
                tokens_a, tokens_b = tokens_b, tokens_a
        elif len(chunk) == 1 or rng.random() < 0.5:
            label = 1
            tokens_b = _random_segment_run(pool, document_index, target_length - len(tokens_a), rng)
            # The sentences of the chunk after A were not used: put them back for the next chunk.
            i -= len(chunk) - a_end
        else:
            label = 0
            tokens_b = _flatten(chunk[a_end:])
        truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
        yield tokens_a, tokens_b, label
        chunk, chunk_length = [], 0
        target_length = draw_target_length(rng, max_num_tokens, short_seq_prob)
        i += 1


def _chunk_is_complete(
    chunk: list, chunk_length: int, target_length: int, position: int, document_length: int, objective: Objective
) -> bool:
    is_last_sentence = position == document_length - 1
    if objective == "nsp":
        return is_last_sentence or chunk_length >= target_length
    # SOP needs two sentences per chunk, and must not leave the document's last sentence alone for the next chunk.
    if is_last_sentence:
        return True
    return chunk_length >= target_length and len(chunk) >= 2 and position != document_length - 2


def instances(pool, indices, rng_for, max_seq_length, short_seq_prob, dupe_factor, objective, cls, sep) -> dict:
    """The former batch function: the instances of the documents `pool` (global `indices`), rng_for(dupe, index)."""
    output: dict[str, list] = {"input_ids": [], "token_type_ids": [], "sentence_order_label": []}
    for dupe in range(dupe_factor):
        for position, document_index in enumerate(indices):
            rng = rng_for(dupe, document_index)
            for tokens_a, tokens_b, label in sentence_pairs_from_document(
                pool, position, rng, max_seq_length - 3, short_seq_prob, objective
            ):
                output["input_ids"].append([cls, *tokens_a, sep, *tokens_b, sep])
                output["token_type_ids"].append([0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1))
                output["sentence_order_label"].append(label)
    return output
