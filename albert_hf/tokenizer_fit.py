"""Whether a tokenizer and a model fit together, asked before any training by every job: the vocabulary rule (ids the
embedding has rows for; also asked by `albert_hf.hub` before a model is saved with its tokenizer), the special ids and
single-token specials pretraining needs, and the positions a sequence length needs. A model config and a tokenizer that
disagree, or sequences longer than the position embeddings, let training run: the loss just never gets good, or the
run fails hours in. Each check raises an error naming both sides (`PretrainingSetupError`, `SequenceLengthError`).
"""

from __future__ import annotations

from .errors import UserError

# Embedding rows a model may have beyond its tokenizer's pieces. transformers pads embedding matrices to a multiple
# (`resize_token_embeddings(pad_to_multiple_of=...)`: 8 or 64 for tensor cores, 128 for tensor parallelism); ids
# never reach the padding rows, so the pair works. A model with more rows than that was trained with another
# vocabulary: every id would index a row learned for another piece.
EMBEDDING_PADDING_MULTIPLE = 128


def vocabulary_problem(num_pieces: int, vocab_size: int) -> str | None:
    """Why a tokenizer of `num_pieces` pieces cannot feed an embedding of `vocab_size` rows, or None when it can: no
    more pieces than rows, and no more rows than the pieces padded to a multiple of `EMBEDDING_PADDING_MULTIPLE`."""
    if num_pieces > vocab_size:
        return f"ids {vocab_size} to {num_pieces - 1} have no embedding row"
    padded = -(-num_pieces // EMBEDDING_PADDING_MULTIPLE) * EMBEDDING_PADDING_MULTIPLE
    if vocab_size > padded:
        return (
            f"more rows than padding to a multiple of {EMBEDDING_PADDING_MULTIPLE} explains ({padded}): the model was "
            "trained with another vocabulary, and the ids would index embedding rows learned for other pieces"
        )
    return None


def vocabulary_mismatch(tokenizer, vocab_size: int, config_source: str = "the model config") -> str | None:
    """The message when `tokenizer` cannot feed a model of `vocab_size` embedding rows (`vocabulary_problem`), naming
    both sides and what to do, or None: the one rule wherever a tokenizer meets a model (pretraining's start-of-run
    checks, `albert_hf.hub` before saving a model with its tokenizer)."""
    problem = vocabulary_problem(len(tokenizer), vocab_size)
    if problem is None:
        return None
    return (
        f"The tokenizer ({tokenizer_name(tokenizer)}) has {len(tokenizer)} pieces but {config_source} has "
        f"vocab_size {vocab_size}: {problem}. Use the tokenizer the model was trained with, or start a fresh "
        "model (no --model_name_or_path) sized to this tokenizer."
    )


def tokenizer_name(tokenizer) -> str:
    """How messages name a tokenizer: its vocabulary file, else where it was loaded from, else its class."""
    return (
        getattr(tokenizer, "vocab_file", None) or getattr(tokenizer, "name_or_path", None) or type(tokenizer).__name__
    )


# --------------------------------------------------------------------------------------------------------------------
# The tokenizer against the model's config
# --------------------------------------------------------------------------------------------------------------------

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
    """The rule between a tokenizer and a model's vocabulary ([`vocabulary_mismatch`]), asked before training."""
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


class SequenceLengthError(PretrainingSetupError):
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
