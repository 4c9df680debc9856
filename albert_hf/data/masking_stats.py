"""What whole-word masking does to a corpus: the share of tokens masked, the length of words, and punctuation.

Whole-word masking only reaches `masked_lm_prob` when words are short beside the budget: on text whose "words" are
whole clauses (Japanese or Chinese read by the "▁" rule) the collator masks far fewer tokens than asked, and what it
can mask is mostly punctuation. `albert-hf pretrain` and the quickstart log these figures for their first training
instances (`albert_hf.pretraining.run.masking_log`), so that a run says what it trains on before it spends any time.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from .collator import DataCollatorForSOP

# How far the masked share may be from masked_lm_prob before the log warns.
MASKED_SHARE_TOLERANCE = 0.02


def is_punctuation_piece(piece: str) -> bool:
    """A piece made of punctuation only (Unicode category P*: 。 、 「 」 … as well as . , ( ), "▁" aside)."""
    text = piece.replace("\u2581", "")
    return bool(text) and all(unicodedata.category(char).startswith("P") for char in text)


@dataclasses.dataclass
class MaskingStatistics:
    """Counts over masked sequences. Tokens are those of the sequences (special tokens included, padding not), as
    `masked_lm_prob` counts them; words and pieces are the maskable ones ([CLS]/[SEP] aside)."""

    masked_lm_prob: float
    source: str
    sequences: int = 0
    tokens: int = 0
    masked: int = 0
    budget: int = 0
    words: int = 0
    word_pieces: int = 0
    masked_punctuation: int = 0
    text_punctuation: int = 0

    @property
    def masked_share(self) -> float:
        return self.masked / max(1, self.tokens)

    @property
    def pieces_per_word(self) -> float:
        return self.word_pieces / max(1, self.words)

    @property
    def punctuation_share_of_masks(self) -> float:
        return self.masked_punctuation / max(1, self.masked)

    @property
    def punctuation_share_of_text(self) -> float:
        return self.text_punctuation / max(1, self.word_pieces)

    def describe(self) -> str:
        return (
            f"masking: {self.masked_share:.1%} of tokens masked (masked_lm_prob {self.masked_lm_prob:g}), words of "
            f"{self.pieces_per_word:.1f} pieces on average, word boundaries from {self.source}"
        )

    def warning(self) -> str | None:
        """Why the masked share is more than `MASKED_SHARE_TOLERANCE` from masked_lm_prob, or None."""
        if abs(self.masked_share - self.masked_lm_prob) <= MASKED_SHARE_TOLERANCE:
            return None
        budget_share = self.budget / max(1, self.tokens)
        if budget_share < self.masked_lm_prob - MASKED_SHARE_TOLERANCE:
            reason = (
                f"max_predictions_per_seq caps the predictions of a sequence at {budget_share:.1%} of its tokens "
                "(raise it for long sequences)"
            )
        else:
            reason = (
                f"whole words of {self.pieces_per_word:.1f} pieces on average do not fit the budget, and "
                f"{self.punctuation_share_of_masks:.0%} of the masked tokens are punctuation against "
                f"{self.punctuation_share_of_text:.0%} of the text; for text without spaces, find words with "
                "--word_segmenter (docs/japanese.md)"
            )
        return (
            f"masking: {self.masked_share:.1%} of tokens masked is more than {MASKED_SHARE_TOLERANCE:.0%} from "
            f"masked_lm_prob {self.masked_lm_prob:g}: {reason}."
        )


def masking_statistics(
    collator: DataCollatorForSOP, features: Sequence[dict[str, Any]], source: str, batch_size: int = 64
) -> MaskingStatistics:
    """Mask `features` with `collator` (in batches, as training does) and count what it masked.

    `source` names where the word boundaries come from (`describe_word_segmenter`)."""
    tokenizer = collator.tokenizer
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    punctuation = np.array([is_punctuation_piece(piece) for piece in pieces], dtype=bool)
    stats = MaskingStatistics(collator.masked_lm_prob, source)
    for start in range(0, len(features), batch_size):
        chunk = features[start : start + batch_size]
        labels = collator(chunk)["labels"].numpy()
        for row, feature in zip(labels, chunk):
            ids = np.asarray(feature["input_ids"], dtype=np.int64)
            word_starts = feature.get("word_starts")
            _, word_lengths, _ = collator.words(ids, None if word_starts is None else np.asarray(word_starts))
            masked = row[: len(ids)] != -100
            maskable = collator.maskable(ids)
            stats.sequences += 1
            stats.tokens += len(ids)
            stats.masked += int(masked.sum())
            stats.budget += collator.budget(len(ids))
            stats.words += len(word_lengths)
            stats.word_pieces += int(word_lengths.sum())
            stats.masked_punctuation += int(punctuation[ids[masked]].sum())
            stats.text_punctuation += int(punctuation[ids[maskable]].sum())
    return stats
