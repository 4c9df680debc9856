"""Start-of-run checks for pretraining: mismatches that would otherwise train for days without a word.

A model config and a tokenizer that disagree (another vocabulary, other special ids), a [MASK] the tokenizer splits
into pieces, sequences longer than the position embeddings, or padding among the MLM targets all let training run:
the loss just never gets good, or the model learns to predict padding. Each check raises [`PretrainingSetupError`]
naming both sides. `albert-hf pretrain` runs them before training (`--no_sanity_checks` skips them).
"""

from __future__ import annotations

import torch

from ..errors import UserError
from ..vocabulary import tokenizer_name, vocabulary_mismatch

# Config field -> tokenizer attribute holding the same special id. ALBERT's config calls [CLS] and [SEP] bos / eos.
SPECIAL_ID_FIELDS = (
    ("pad_token_id", "pad_token_id", "padding"),
    ("bos_token_id", "cls_token_id", "[CLS]"),
    ("eos_token_id", "sep_token_id", "[SEP]"),
    ("mask_token_id", "mask_token_id", "[MASK]"),
)


class PretrainingSetupError(UserError):
    """The tokenizer, the model config and the data do not fit together; the message names both sides."""


def check_tokenizer_matches_config(tokenizer, config, config_source: str = "the model config") -> None:
    """The tokenizer fits the vocabulary (`check_tokenizer_fits_vocabulary`) and both have the same pad/[CLS]/[SEP]/[MASK] ids (a missing config field is not
    compared: configs written by other code may lack mask_token_id); [MASK] and [SEP] single tokens."""
    name = tokenizer_name(tokenizer)
    check_tokenizer_fits_vocabulary(tokenizer, config.vocab_size, config_source)
    for config_field, tokenizer_field, what in SPECIAL_ID_FIELDS:
        config_id, tokenizer_id = getattr(config, config_field, None), getattr(tokenizer, tokenizer_field, None)
        if config_id is not None and config_id != tokenizer_id:
            raise PretrainingSetupError(
                f"The {what} id differs: {tokenizer_field}={tokenizer_id} in the tokenizer ({name}) but "
                f"{config_field}={config_id} in {config_source}."
            )
    for token_field in ("mask_token", "sep_token"):
        check_single_token(tokenizer, token_field)


def check_tokenizer_fits_vocabulary(tokenizer, vocab_size: int, config_source: str = "the model config") -> None:
    """The rule between a tokenizer and a model's vocabulary (`albert_hf.vocabulary.vocabulary_mismatch`), asked
    before pretraining."""
    message = vocabulary_mismatch(tokenizer, vocab_size, config_source)
    if message is not None:
        raise PretrainingSetupError(message)


def check_single_token(tokenizer, token_field: str) -> None:
    """The special token `token_field` ("mask_token", "sep_token") is one token whose id is the tokenizer's id."""
    token, token_id = getattr(tokenizer, token_field, None), getattr(tokenizer, f"{token_field}_id", None)
    if token is None or token_id is None:
        raise PretrainingSetupError(f"The tokenizer ({tokenizer_name(tokenizer)}) has no {token_field}.")
    ids = tokenizer(str(token), add_special_tokens=False)["input_ids"]
    if list(ids) != [token_id]:
        pieces = tokenizer.convert_ids_to_tokens(list(ids))
        raise PretrainingSetupError(
            f"The tokenizer ({tokenizer_name(tokenizer)}) splits {token_field} {str(token)!r} into {len(ids)} "
            f"tokens {pieces} (ids {list(ids)}), not the single id {token_field}_id={token_id}: text holding it "
            "would not reach the model as that token."
        )


# A share of <unk> tokens above this is warned about at the start of pretraining (with the share); above
# `--max_unknown_share` (0.2 unless given) the run is refused.
UNKNOWN_SHARE_WARNING = 0.01


def unknown_share(features: list[dict], tokenizer) -> float:
    """The share of <unk> among the tokens of `features` (their `input_ids`), special tokens other than <unk> left
    out: how much of the text the tokenizer's vocabulary does not cover. 0.0 for no tokens."""
    unk = tokenizer.unk_token_id
    special = set(tokenizer.all_special_ids) - {unk}
    ids = [int(token) for feature in features for token in feature["input_ids"] if int(token) not in special]
    return sum(token == unk for token in ids) / len(ids) if ids else 0.0


def check_unknown_share(features: list[dict], tokenizer, limit: float, warn=None) -> float:
    """Warn (through `warn`) when more than `UNKNOWN_SHARE_WARNING` of the tokens of `features` are <unk>, and raise
    [`PretrainingSetupError`] when more than `limit` are; returns the share."""
    if not 0.0 <= limit <= 1.0:
        raise PretrainingSetupError(f"--max_unknown_share must be between 0 and 1, got {limit}.")
    share = unknown_share(features, tokenizer)
    described = (
        f"<unk> is {share:.1%} of the tokens of the first {len(features)} training instances: the vocabulary of "
        f"the tokenizer ({tokenizer_name(tokenizer)}) does not cover this text (another language or script?)"
    )
    if share > limit:
        raise PretrainingSetupError(
            f"{described}, above --max_unknown_share {limit:g}. Train a tokenizer on this corpus (albert-hf "
            "train-tokenizer), or pass a higher --max_unknown_share (1 allows any share) to train anyway."
        )
    if share > UNKNOWN_SHARE_WARNING and warn is not None:
        warn(f"{described}; the model learns nothing from those tokens.")
    return share


class SequenceLengthError(PretrainingSetupError, UserError):
    """--max_seq_length asks for more positions than the model has: refused before any training, by every job."""


def check_sequence_length(
    max_seq_length: int, config, config_source: str = "the model config", option: str = "--max_seq_length"
) -> None:
    """The one rule on sequence lengths, asked by pretraining and every fine-tuning job before training: no input may
    be longer than the model's position embeddings (a longer batch fails in the embedding lookup, at its first
    occurrence, hours into a run or only in evaluation)."""
    limit = config.max_position_embeddings
    if max_seq_length > limit:
        raise SequenceLengthError(
            f"{option} {max_seq_length} exceeds max_position_embeddings {limit} of {config_source}: positions past "
            f"it have no embedding. Pass {option} {limit} or less, or a model with more positions."
        )


def check_batch(batch: dict[str, torch.Tensor], tokenizer, config, source: str = "the data collator") -> None:
    """A collated training batch fits the model: no longer than the position embeddings, no padding as a target."""
    length = batch["input_ids"].shape[1]
    if length > config.max_position_embeddings:
        raise PretrainingSetupError(
            f"{source} made a batch of length {length}, longer than the model config's max_position_embeddings "
            f"{config.max_position_embeddings}."
        )
    labels = batch.get("labels")
    if labels is None:
        return
    targets = labels != -100
    pad_id = tokenizer.pad_token_id
    padded = targets & (batch["attention_mask"] == 0) if "attention_mask" in batch else torch.zeros_like(targets)
    if padded.any() or (labels[targets] == pad_id).any():
        count = int((padded | (targets & (labels == pad_id))).sum())
        raise PretrainingSetupError(
            f"{source} chose padding as an MLM target {count} times (label = the tokenizer's pad id {pad_id}, or a "
            "position outside the attention mask): the model would learn to predict padding."
        )
