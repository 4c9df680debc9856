"""`DataCollatorForSOP`: pads sentence-order instances and masks them on the fly with ALBERT's n-gram masking.

ALBERT masks whole words in n-grams of up to 3 words, with p(n) proportional to 1/n (6/11, 3/11, 2/11), 15% of the
tokens of each sequence up to `max_predictions_per_seq`, and replaces each chosen token by [MASK] 80% of the time, a
random token 10% and itself 10%. transformers has nothing like it for SentencePiece vocabularies (its whole-word
collator assumes WordPiece's "##"), and its SOP collator is deprecated; this one does both.

Words start where a piece starts with "▁" (or is punctuation), as in the original; for text without spaces the
instances bring their own word starts ("word_starts", found by a word segmenter when the data was prepared:
word_segmentation.py), since there "▁" only marks the start of a sentence.

How spans are placed (the only part that differs from `create_masked_lm_predictions`, and why): the original walks
the words in random order, draws n for each and *skips* the candidate when one of its words is already masked. That
rejects long n-grams more often than short ones (a 3-gram overlaps three times as much), so the lengths it produces
are not 6/11, 3/11, 2/11. Here the length is drawn first and the span is then placed uniformly among the positions
where it fits (inside one segment, on unmasked words; n - 1 words where n fit nowhere, as in very short segments).
The span that would overrun the budget keeps the whole words that fit, and what is left of the budget goes to single
words. So lengths follow 1/n exactly for every span placed while the budget could still hold any n-gram (tested on
real text).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .word_segmentation import START_PUNCTUATION, WORD_START_MARKER, is_start_piece, piece_rule_table

__all__ = ["DataCollatorForSOP", "START_PUNCTUATION", "WORD_START_MARKER", "is_start_piece", "sample_ngram_spans"]


@dataclass
class DataCollatorForSOP:
    """Pad SOP/NSP instances and mask them on the fly (whole-word n-gram masking, 80/10/10).

    Each feature is a dict with `input_ids` (`[CLS] A [SEP] B [SEP]`), `token_type_ids` (optional, else zeros),
    `word_starts` (optional: 1 where a token starts a word, else the "▁" rule) and `sentence_order_label`
    (optional; all features or none). The batch has `input_ids`, `attention_mask`,
    `token_type_ids`, `labels` (the original id where masked, -100 elsewhere) and `sentence_order_label`.

    Args:
        tokenizer: provides the vocabulary (pieces, for word starts) and the [MASK]/[CLS]/[SEP]/pad ids.
        masked_lm_prob: fraction of the tokens of a sequence (special tokens included, padding not) to predict.
        max_predictions_per_seq: cap on predictions per sequence (20 in the paper at length 512).
        max_ngram: longest span in words; n in 1..max_ngram with p(n) proportional to 1/n.
        mask_replace_prob / random_replace_prob: of the chosen tokens, the share set to [MASK] / to a random
            non-special token; the rest keep their token.
        pad_to_multiple_of: pad the batch length up to a multiple of this (8 for tensor cores), else to the longest.
        seed: the masks are a function of this seed and the batch's token ids only: reproducible with any number
            of dataloader workers, exact when training resumes from a checkpoint, and fresh each epoch as shuffling
            changes the batches (with batches of one sequence, a sequence keeps its masks across epochs).
    """

    tokenizer: Any
    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    max_ngram: int = 3
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    pad_to_multiple_of: int | None = None
    seed: int = 0

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}.")
        if self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}.")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}.")
        if self.max_ngram < 1:
            raise ValueError(f"max_ngram must be at least 1, got {self.max_ngram}.")
        if min(self.mask_replace_prob, self.random_replace_prob) < 0 or (
            self.mask_replace_prob + self.random_replace_prob > 1.0
        ):
            raise ValueError(
                f"mask_replace_prob ({self.mask_replace_prob}) and random_replace_prob ({self.random_replace_prob}) "
                "must be non-negative and sum to at most 1."
            )
        tokenizer = self.tokenizer
        for name in ("mask_token_id", "pad_token_id", "cls_token_id", "sep_token_id"):
            if getattr(tokenizer, name, None) is None:
                raise ValueError(f"DataCollatorForSOP: the tokenizer has no {name.removesuffix('_id')}.")
        vocab_size = len(tokenizer)
        special_ids = sorted(set(tokenizer.all_special_ids))
        # Word starts by piece id, as the original's `_is_start_piece`: a piece starting with the word-boundary marker
        # or with "<", or a single punctuation piece (ALBERT's vocabulary splits ( ) " - . off as pieces of their own).
        # Special pieces (<unk> included) count as words of their own. Features with "word_starts" (text without
        # spaces, segmented into words when the data was prepared: word_segmentation.py) bring their own.
        self._is_word_start = piece_rule_table(tokenizer)
        # Never masked: [CLS], [SEP], padding.
        self._is_unmaskable = np.zeros(vocab_size, dtype=bool)
        self._is_unmaskable[[tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]] = True
        # Random replacements are real pieces, never a special token.
        self._random_token_ids = np.setdiff1d(np.arange(vocab_size), special_ids)
        lengths = np.arange(1, self.max_ngram + 1)
        self._ngram_probs = (1.0 / lengths) / (1.0 / lengths).sum()

    # ---- batch assembly ---------------------------------------------------------------------------------------------

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        if not features:
            raise ValueError("DataCollatorForSOP: empty batch.")
        rows = [_as_int_array(feature, "input_ids", index) for index, feature in enumerate(features)]
        token_types = [
            _as_int_array(feature, "token_type_ids", index) if "token_type_ids" in feature else np.zeros_like(row)
            for index, (feature, row) in enumerate(zip(features, rows))
        ]
        for index, (row, types) in enumerate(zip(rows, token_types)):
            if len(row) == 0:
                raise ValueError(f"DataCollatorForSOP: feature {index} has empty input_ids.")
            if row.min() < 0 or row.max() >= len(self._is_word_start):
                raise ValueError(
                    f"DataCollatorForSOP: feature {index} has token id {row.max() if row.max() > 0 else row.min()} "
                    f"outside the tokenizer's vocabulary (size {len(self._is_word_start)})."
                )
            if len(types) != len(row):
                raise ValueError(
                    f"DataCollatorForSOP: feature {index} has {len(row)} input_ids but {len(types)} token_type_ids."
                )

        batch_length = max(len(row) for row in rows)
        if self.pad_to_multiple_of:
            batch_length = -(-batch_length // self.pad_to_multiple_of) * self.pad_to_multiple_of
        shape = (len(rows), batch_length)
        input_ids = np.full(shape, self.tokenizer.pad_token_id, dtype=np.int64)
        token_type_ids = np.zeros(shape, dtype=np.int64)
        attention_mask = np.zeros(shape, dtype=np.int64)
        labels = np.full(shape, -100, dtype=np.int64)

        word_starts = [_word_starts(feature, row, index) for index, (feature, row) in enumerate(zip(features, rows))]
        rng = self._numpy_rng(rows)
        for i, (row, types, starts) in enumerate(zip(rows, token_types, word_starts)):
            masked_row, row_labels = self.mask_tokens(row, rng, starts)
            input_ids[i, : len(row)] = masked_row
            labels[i, : len(row)] = row_labels
            token_type_ids[i, : len(row)] = types
            attention_mask[i, : len(row)] = 1

        batch = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(attention_mask),
            "token_type_ids": torch.from_numpy(token_type_ids),
            "labels": torch.from_numpy(labels),
        }
        order_labels = _sentence_order_labels(features)
        if order_labels is not None:
            batch["sentence_order_label"] = order_labels
        return batch

    # ---- masking ----------------------------------------------------------------------------------------------------

    def mask_tokens(
        self, input_ids: np.ndarray, rng: np.random.Generator, word_starts: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Mask one unpadded sequence: returns (masked ids, labels with -100 where not predicted)."""
        positions = self.sample_masked_positions(input_ids, rng, word_starts)
        masked = input_ids.copy()
        labels = np.full_like(input_ids, -100)
        labels[positions] = input_ids[positions]
        # 80% [MASK], 10% a random piece, 10% unchanged, decided per token.
        draw = rng.random(len(positions))
        to_mask = positions[draw < self.mask_replace_prob]
        random_limit = self.mask_replace_prob + self.random_replace_prob
        to_random = positions[(draw >= self.mask_replace_prob) & (draw < random_limit)]
        masked[to_mask] = self.tokenizer.mask_token_id
        masked[to_random] = rng.choice(self._random_token_ids, size=len(to_random))
        return masked, labels

    def sample_masked_positions(
        self, input_ids: np.ndarray, rng: np.random.Generator, word_starts: np.ndarray | None = None
    ) -> np.ndarray:
        """Token positions to predict in one unpadded sequence: whole words, in n-gram spans, within the budget.
        `word_starts` (1 where a token starts a word) replaces the "▁" rule where the data brings it."""
        word_starts, word_lengths, word_segments = self.words(input_ids, word_starts)
        spans = sample_ngram_spans(word_lengths, word_segments, self.budget(len(input_ids)), self._ngram_probs, rng)
        positions = [
            np.arange(word_starts[first], word_starts[first + n - 1] + word_lengths[first + n - 1])
            for first, n in spans
        ]
        return np.sort(np.concatenate(positions)) if positions else np.zeros(0, dtype=np.int64)

    def budget(self, length: int) -> int:
        """Tokens to predict in a sequence of `length` tokens: masked_lm_prob of them, at least one, at most
        max_predictions_per_seq."""
        return min(self.max_predictions_per_seq, max(1, round(length * self.masked_lm_prob)))

    def maskable(self, input_ids: np.ndarray) -> np.ndarray:
        """Which tokens masking may choose: all but [CLS], [SEP] and padding."""
        return ~self._is_unmaskable[input_ids]

    def words(
        self, input_ids: np.ndarray, word_starts: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The maskable words of a sequence: (first position, number of pieces, segment index) per word.

        A word starts at a piece beginning with "▁", at a special piece (or where `word_starts`, when given, says
        one does), or right after an unmaskable token, so words never straddle [CLS]/[SEP]; the segment index counts
        the unmaskable tokens before the word, so an n-gram never crosses [SEP] either.
        """
        unmaskable = self._is_unmaskable[input_ids]
        after_unmaskable = np.concatenate([[True], unmaskable[:-1]])
        starts = self._is_word_start[input_ids] if word_starts is None else np.asarray(word_starts, dtype=bool)
        starts_word = ~unmaskable & (starts | after_unmaskable)
        word_starts = np.flatnonzero(starts_word)
        word_index = np.cumsum(starts_word) - 1  # for every maskable piece, the word it belongs to
        word_lengths = np.bincount(word_index[~unmaskable], minlength=len(word_starts))
        word_segments = np.cumsum(unmaskable)[word_starts]
        return word_starts, word_lengths, word_segments

    # ---- randomness -------------------------------------------------------------------------------------------------

    def _numpy_rng(self, rows: Sequence[np.ndarray]) -> np.random.Generator:
        """The generator of one batch, keyed by the seed and the batch's token ids.

        Keying by content (not by how many batches came before) makes the masks independent of dataloader workers
        and prefetching, and lets a run resumed from a checkpoint mask its batches exactly as the uninterrupted run
        did. Shuffling changes the batches of every epoch, so every epoch gets fresh masks.
        """
        digest = hashlib.blake2b(digest_size=16)
        for row in rows:
            digest.update(len(row).to_bytes(4, "little"))
            digest.update(row.tobytes())
        key = np.frombuffer(digest.digest(), dtype=np.uint32)
        return np.random.default_rng(np.random.SeedSequence([self.seed, *key.tolist()]))


def sample_ngram_spans(
    word_lengths: np.ndarray,
    word_segments: np.ndarray,
    budget: int,
    ngram_probs: np.ndarray,
    rng: np.random.Generator,
) -> list[tuple[int, int]]:
    """Choose non-overlapping n-gram spans of whole words: a list of (first word, number of words).

    Repeatedly draw n with probability `ngram_probs[n - 1]` and place the span uniformly among the first words
    where n consecutive words are unmasked and in one segment (n - 1 if there is no such place). The span keeps
    the whole words that fit in the remaining `budget` of pieces; once a span has been cut short by the budget,
    what is left of it is filled with single words that fit. So every span placed while the budget could still
    hold any n-gram has exactly its drawn length.
    """
    covered = np.zeros(len(word_lengths), dtype=bool)
    pieces_before = np.concatenate([[0], np.cumsum(word_lengths)])
    spans: list[tuple[int, int]] = []
    remaining = budget
    # Every span takes at least one piece, so `budget` draws are enough; drawing them at once is much faster.
    drawn_lengths = rng.choice(len(ngram_probs), size=budget, p=ngram_probs) + 1
    placements = rng.random(budget)
    for n, placement in zip(drawn_lengths.tolist(), placements.tolist()):
        candidates = _free_first_words(n, covered, word_segments)
        while not len(candidates) and n > 1:
            n -= 1
            candidates = _free_first_words(n, covered, word_segments)
        if not len(candidates):
            break
        first = int(candidates[int(placement * len(candidates))])
        # Whole words of the span that fit in the budget.
        fitting = int(
            np.searchsorted(pieces_before[first + 1 : first + n + 1] - pieces_before[first], remaining, side="right")
        )
        if fitting:
            covered[first : first + fitting] = True
            remaining -= int(pieces_before[first + fitting] - pieces_before[first])
            spans.append((first, fitting))
        if fitting < n or remaining == 0:
            break
    # Spend what is left on single words that fit, as the original spends it on further candidates.
    while remaining > 0:
        fitting_words = np.flatnonzero(~covered & (word_lengths <= remaining))
        if not len(fitting_words):
            break
        word = int(fitting_words[rng.integers(len(fitting_words))])
        covered[word] = True
        remaining -= int(word_lengths[word])
        spans.append((word, 1))
    return spans


def _free_first_words(n: int, covered: np.ndarray, word_segments: np.ndarray) -> np.ndarray:
    """First words w such that words w..w+n-1 exist, are not masked yet and lie in one segment."""
    num_words = len(covered)
    if n > num_words:
        return np.zeros(0, dtype=np.int64)
    covered_before = np.concatenate([[0], np.cumsum(covered)])
    uncovered = covered_before[n:] - covered_before[:-n] == 0
    same_segment = word_segments[n - 1 :] == word_segments[: num_words - n + 1]
    return np.flatnonzero(uncovered & same_segment)


def _as_int_array(feature: dict[str, Any], key: str, index: int) -> np.ndarray:
    if key not in feature:
        raise ValueError(f"DataCollatorForSOP: feature {index} has no {key!r} (keys: {sorted(feature)}).")
    value = feature[key]
    if torch.is_tensor(value):
        value = value.numpy()
    return np.asarray(value, dtype=np.int64).reshape(-1)


def _word_starts(feature: dict[str, Any], row: np.ndarray, index: int) -> np.ndarray | None:
    if "word_starts" not in feature:
        return None
    starts = _as_int_array(feature, "word_starts", index)
    if len(starts) != len(row):
        raise ValueError(f"DataCollatorForSOP: feature {index} has {len(row)} input_ids but {len(starts)} word_starts.")
    return starts


def _sentence_order_labels(features: Sequence[dict[str, Any]]) -> torch.Tensor | None:
    present = ["sentence_order_label" in feature for feature in features]
    if not any(present):
        return None
    if not all(present):
        missing = present.index(False)
        raise ValueError(
            f"DataCollatorForSOP: feature {missing} has no 'sentence_order_label' while others do: "
            "give it to all features or to none."
        )
    return torch.tensor([int(feature["sentence_order_label"]) for feature in features], dtype=torch.long)
