"""The formats albert_hf reads and writes: which tokenizer a model folder holds, and whether a model is saved in
transformers' own format.

Tokenizers. An ALBERT holds one of two vocabularies:

- a SentencePiece model (`spiece.model`): the released English ALBERTs and everything albert_hf trains. albert_hf
  loads `AlbertHFTokenizer` on it, the original tokenization exactly;
- a BERT WordPiece vocabulary (`vocab.txt`, with its `do_lower_case`): Google's Chinese ALBERTs (albert_*_zh),
  brightmart's, and the Chinese ALBERTs on the Hub, which pair AlbertModel with BertTokenizer; `albert-hf import`
  writes such a folder for them. albert_hf loads transformers' `BertTokenizer` on it, BERT's tokenization: basic
  tokenization (every CJK character a word of its own, punctuation split off, lower-casing and accent stripping
  with `do_lower_case`), then WordPiece, whose "##" pieces continue a word.

[`load_tokenizer`] is the one loader every job, pipeline and export asks: a folder (or Hub name) of either kind, or a
bare `spiece.model` / `vocab.txt` file.

Stock or albert_hf folders. A model that transformers' own ALBERT describes exactly is saved in transformers' format
(model_type "albert", no custom code): `AlbertConfig.stock_albert_problems` says what stock ALBERT has no place for
(another sharing, exits, a head of one's own), and [`stock_tokenizer_problem`] whether transformers' tokenizer format
can stand for the tokenizer ([`stock_format_problems`] asks both: the one predicate). A tokenizer it cannot express
makes its model an albert_hf one too: [`pair_with_tokenizer`] records the tokenizer's class in the model's config
(`tokenizer_class`), so that every later save of the model, by any code, decides alike. Trainers pair their model
and tokenizer when built, `albert_hf.hub.save_for_hub` when it saves; each job says in one line which format it wrote
([`save_format_line`]).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .configuration import AlbertConfig, is_transformers_tokenizer
from .errors import MissingFileError, UserError

SENTENCEPIECE = "sentencepiece"
WORDPIECE = "wordpiece"

# The files that say which kind of tokenizer a folder holds.
SENTENCEPIECE_FILE = "spiece.model"
WORDPIECE_FILE = "vocab.txt"
# transformers' tokenizer classes on a WordPiece vocabulary, by the name a `tokenizer_config.json` gives.
WORDPIECE_CLASSES = ("BertTokenizer", "BertTokenizerFast", "ElectraTokenizer", "DistilBertTokenizer")
# The special tokens of every BERT vocabulary.
WORDPIECE_SPECIAL_TOKENS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")


# --------------------------------------------------------------------------------------------------------------------
# Which tokenizer a source holds, and loading it
# --------------------------------------------------------------------------------------------------------------------


def is_sentencepiece_model(path: str | os.PathLike) -> bool:
    """Whether `path` holds a SentencePiece model (a serialized ModelProto), not a text vocabulary."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(Path(path).read_bytes())
    except Exception:
        return False
    return True


def read_wordpiece_vocabulary(path: str | os.PathLike) -> dict[str, int]:
    """token -> id of a BERT `vocab.txt` (one token a line, the line number its id, as BERT's `load_vocab`)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path}: neither a SentencePiece model nor a UTF-8 WordPiece vocabulary ({error.reason})"
        ) from None
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {token.rstrip("\r"): index for index, token in enumerate(lines)}
    missing = [token for token in WORDPIECE_SPECIAL_TOKENS if token not in vocab]
    if missing:
        raise UserError(
            f"{path}: not a BERT WordPiece vocabulary (it lacks {', '.join(missing)}); a SentencePiece model "
            "(spiece.model, 30k-clean.model) or a vocab.txt is expected"
        )
    return vocab


def wordpiece_tokenizer(vocab_file: str | os.PathLike, do_lower_case: bool = True):
    """transformers' `BertTokenizer` on a `vocab.txt` file, with `do_lower_case` (BERT's default, and the Chinese
    ALBERTs': uncased)."""
    from transformers import BertTokenizer

    # Given the file (`vocab_file=`), transformers 5's BertTokenizer maps every token to [UNK]; given the mapping, it
    # builds its WordPiece model from it.
    return BertTokenizer(vocab=read_wordpiece_vocabulary(vocab_file), do_lower_case=do_lower_case)


def _folder_file(source: str, name: str) -> str | None:
    """The path of file `name` of a local folder or Hub repository `source` (downloaded, or from the cache when
    offline), or None where it has none."""
    if os.path.isdir(source):
        path = os.path.join(source, name)
        return path if os.path.isfile(path) else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HFValidationError, LocalEntryNotFoundError

    try:
        return hf_hub_download(source, name)
    except (EntryNotFoundError, LocalEntryNotFoundError, HFValidationError, OSError):
        return None


def _json_file(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def tokenizer_kind(source: str | os.PathLike) -> str:
    """`SENTENCEPIECE` or `WORDPIECE`: which vocabulary a tokenizer source holds.

    A file is a SentencePiece model or else a WordPiece `vocab.txt`. A folder (or Hub repository) is WordPiece when its
    `tokenizer_config.json` names a WordPiece class, or it holds `vocab.txt` and no `spiece.model`, or its
    `tokenizer.json` has a WordPiece model; SentencePiece when it holds `spiece.model` or a `tokenizer.json` with a
    Unigram model (transformers 5's AlbertTokenizer saves only that). Raises `MissingFileError` for anything else.
    """
    source = os.fspath(source)
    if os.path.isfile(source):
        return SENTENCEPIECE if is_sentencepiece_model(source) else WORDPIECE
    tokenizer_class = str(_json_file(_folder_file(source, "tokenizer_config.json")).get("tokenizer_class") or "")
    if tokenizer_class in WORDPIECE_CLASSES:
        return WORDPIECE
    if _folder_file(source, SENTENCEPIECE_FILE) is not None:
        return SENTENCEPIECE
    if _folder_file(source, WORDPIECE_FILE) is not None:
        return WORDPIECE
    model = _json_file(_folder_file(source, "tokenizer.json")).get("model") or {}
    kinds = {"Unigram": SENTENCEPIECE, "WordPiece": WORDPIECE}
    if model.get("type") in kinds:
        return kinds[model["type"]]
    raise MissingFileError(
        f"{source}: no tokenizer here: an ALBERT tokenizer folder holds spiece.model (SentencePiece) or vocab.txt "
        "(BERT WordPiece, as the Chinese ALBERTs), or the tokenizer.json of one; a spiece.model or vocab.txt file "
        "may be given as it is."
    )


def load_tokenizer(source: str | os.PathLike):
    """The tokenizer of a folder, a Hub repository or a vocabulary file ([`tokenizer_kind`]): albert_hf's
    `AlbertHFTokenizer` (the original SentencePiece tokenization exactly, settings from the folder's
    `tokenizer_config.json`), or transformers' `BertTokenizer` for a WordPiece vocabulary (`do_lower_case` from the
    folder's `tokenizer_config.json`, else BERT's default, lower-casing)."""
    from .tokenization import AlbertHFTokenizer

    source = os.fspath(source)
    kind = tokenizer_kind(source)
    folder = os.path.dirname(os.path.abspath(source))
    if (
        kind == SENTENCEPIECE
        and os.path.basename(source) == "spiece.model"
        and os.path.isfile(os.path.join(folder, "tokenizer_config.json"))
    ):
        # The model file of a saved tokenizer: its settings (lower-casing, accents, a word segmenter) are in the
        # folder's tokenizer_config.json, and the file alone would tokenize otherwise, quietly.
        return AlbertHFTokenizer.from_pretrained(folder)
    if os.path.isfile(source):
        return AlbertHFTokenizer(vocab_file=source) if kind == SENTENCEPIECE else wordpiece_tokenizer(source)
    if kind == SENTENCEPIECE:
        return AlbertHFTokenizer.from_pretrained(source)
    from transformers import BertTokenizer

    return BertTokenizer.from_pretrained(source)


# --------------------------------------------------------------------------------------------------------------------
# Stock (transformers' own format) or albert_hf's
# --------------------------------------------------------------------------------------------------------------------


def stock_tokenizer_problem(tokenizer) -> str | None:
    """Why transformers' tokenizer format cannot stand for `tokenizer` in a folder loaded without albert_hf, or None
    when it can: the tokenizer's own answer where it gives one (`AlbertHFTokenizer.stock_format_problem`: None, or
    the step that format has no place for, such as a word segmenter), None for transformers' own classes, and for
    any other class that it is no transformers class."""
    own_answer = getattr(tokenizer, "stock_format_problem", None)
    if callable(own_answer):
        return own_answer()
    if type(tokenizer).__module__.startswith("transformers."):
        return None
    return f"{type(tokenizer).__name__} is not one of transformers' tokenizers"


def _config_of(model_or_config) -> AlbertConfig:
    return model_or_config if isinstance(model_or_config, AlbertConfig) else model_or_config.config


def stock_format_problems(model_or_config, tokenizer=None) -> list[str]:
    """Why a model (or config), saved with `tokenizer`, needs albert_hf's code; [] when it is saved in transformers'
    own format. The one predicate: what transformers' ALBERT has no place for (`AlbertConfig.stock_albert_problems`,
    with the model's class when a model is given), and a tokenizer transformers' tokenizer format cannot express
    ([`stock_tokenizer_problem`]; one recorded in the config by [`pair_with_tokenizer`] is counted once)."""
    config = _config_of(model_or_config)
    architectures = None if isinstance(model_or_config, AlbertConfig) else [type(model_or_config).__name__]
    problems = config.stock_albert_problems(architectures)
    tokenizer_problem = None if tokenizer is None else stock_tokenizer_problem(tokenizer)
    if tokenizer_problem is not None:
        # The tokenizer at hand says why; the config's record of the pairing only names its class.
        recorded = f"its tokenizer ({type(tokenizer).__name__}) needs albert_hf's code"
        problems = [problem for problem in problems if problem != recorded]
        problems.append(f"its tokenizer needs albert_hf's code: {tokenizer_problem}")
    return problems


def pair_with_tokenizer(model_or_config, tokenizer) -> None:
    """Record in the config whether the model's tokenizer needs albert_hf's code: its class name as the config's
    `tokenizer_class` when transformers' tokenizer format cannot express it (the model is then saved with albert_hf's
    code as well: a stock model whose tokenizer needs code would load without it and tokenize otherwise), and no
    such name when it can. Any save of the model, by any code, then decides as the pair requires."""
    config = _config_of(model_or_config)
    if tokenizer is None:
        return
    recorded = getattr(config, "tokenizer_class", None)
    if stock_tokenizer_problem(tokenizer) is not None:
        config.tokenizer_class = type(tokenizer).__name__
    elif recorded is not None and not is_transformers_tokenizer(recorded):
        del config.tokenizer_class  # an earlier pairing's, which this tokenizer does not need


def save_format_line(model, tokenizer=None) -> str:
    """The one line a job says about the folder it writes: transformers' own ALBERT (loads anywhere, no
    `trust_remote_code`), or albert_hf's, and why."""
    problems = stock_format_problems(model, tokenizer)
    if not problems:
        return (
            "Saved as transformers' ALBERT (model_type albert, no custom code): transformers' Auto classes load it "
            "without albert_hf or trust_remote_code."
        )
    return (
        "Saved as an albert_hf model (model_type albert_hf, its code beside it: load it with albert_hf installed, or "
        f"trust_remote_code=True) because {'; '.join(problems)}."
    )


__all__ = [
    "SENTENCEPIECE",
    "WORDPIECE",
    "is_sentencepiece_model",
    "load_tokenizer",
    "pair_with_tokenizer",
    "read_wordpiece_vocabulary",
    "save_format_line",
    "stock_format_problems",
    "stock_tokenizer_problem",
    "tokenizer_kind",
    "wordpiece_tokenizer",
]
