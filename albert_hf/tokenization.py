"""ALBERT's tokenizer: the original SentencePiece tokenization, exactly, as a transformers tokenizer.

ALBERT checkpoints only work with the tokenization they were pretrained with. The original (google-research/albert,
`tokenization.py`, as `run_classifier.py` and `run_pretraining.py`'s data script call it) does, for every text:

1. `preprocess_text`: collapse whitespace (`" ".join(text.split())`), NFKD and drop combining characters (unless
   `keep_accents`), lowercase with Python's `str.lower` (unless `do_lower_case=False`). It leaves `` and '' alone
   (XLNet's version and transformers v4's AlbertTokenizer turn them into "; `replace_quotes=True` does that here);
2. SentencePiece `EncodeAsPieces` on the result (the model's own normalization rule, e.g. `nmt_nfkc`, its whitespace
   handling and dummy "▁" prefix, then Unigram Viterbi);
3. re-split every piece that ends in a digit followed by a comma ("▁1990," -> "▁1990" ","), so that numbers are
   tokenized the same whether or not a comma follows.

Backend choice. `AlbertHFTokenizer` is a `TokenizersBackend` (Rust `tokenizers`) whose pipeline reproduces those steps,
rather than a class that calls the `sentencepiece` package per text, because the Rust backend gives everything
transformers users rely on for free and correctly: batching, padding, truncation strategies, overflowing windows with
stride, pairs, `word_ids()`, and character offsets into the raw, unnormalized input even where lowercasing, NFKD or
accent stripping changed the text (every Rust normalizer tracks the alignment of each character). A sentencepiece-
backed class would have to rebuild offsets and all of that in Python, one text at a time.
Speed (`benchmarks/bench_tokenizer.py`, side by side with transformers' AlbertTokenizer): each text takes the
cheapest of four `tokenizers.Tokenizer` routes that gives the original's tokens (`_Backend`). Text of printable ASCII
characters, most of an English corpus, is only lower-cased before the Unigram model (the other steps cannot change
it); other text takes the full normalizer, and the Python steps run only on the texts they can change. The backend's
resting pipeline, what transformers reads from it, is the exact one. No user-defined-symbol split where the
vocabulary already forces those pieces (ALBERT's does), no quote rewrites by default. Where only ids are wanted
(pretraining data), `encode_plain_texts` runs the original's own steps through SentencePiece's C++ encoder.

The pipeline, step by step (`build_normalizer`, `build_pre_tokenizer`, `_OriginalPieceMarks`,
`_JoinAfterAddedTokens`):

- normalizer: the whitespace characters that no later step turns into a space -> " "; NFKD and removal of every
  character whose canonical combining class is not 0 (exactly `unicodedata.combining`, not the same set as
  `StripAccents`); Python's word-final sigma, then lowercase; the model's precompiled SentencePiece charsmap (e.g.
  nmt_nfkc); SentencePiece's removal of extra spaces and the original's strip; then `_OriginalPieceMarks`, a small
  Python step;
- pre-tokenizer: split on spaces, "▁" in front of every word (SentencePiece's dummy prefix and escaped spaces), every
  user-defined symbol of the model as a piece of its own (SentencePiece always emits them alone; a split only where
  the vocabulary does not already force it), and a split wherever `_OriginalPieceMarks` left a marker;
- model: Unigram with the model's pieces and scores;
- post-processor: `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]`, token type ids 0 / 1, returned by default
  (transformers 5's `AlbertTokenizer` stops returning them, its issue #48128).

Two things a static Unigram pipeline gets wrong: the original's re-split of "<digit>," pieces depends on which pieces
Viterbi picks, and SentencePiece never matches control pieces ("<unk>", "<pad>", ...) in text while a Unigram model
does. `_OriginalPieceMarks` only looks further at texts with a comma or a control-piece string; for the few words
concerned it computes the original's pieces and marks their boundaries, so the model then sees one original piece per
split. A Python component cannot be serialized by `tokenizers`, so `save_pretrained` writes `spiece.model` (the
format of the official ALBERT repos), from which loading and pickling rebuild the pipeline; beside it, stock by
default, a `tokenizer.json` of everything the Rust components can state (`stock_pipeline`), which transformers reads
where albert_hf is not installed.

Ids equal google-research's code on all the text of the shared data (262,000 texts,
`benchmarks/tokenizer_agreement.py`) except 5 distinct texts where two segmentations of one word score the same or
within 1e-3 ("66" "6" against "6" "66"): SentencePiece adds scores in float32 along the whole text, and the rounding
of that running sum, not the scores of the word, decides between them.

Special-token strings written in the text ("[MASK]", "<unk>") are recognized as those tokens, as in every
transformers tokenizer; `split_special_tokens=True` treats them as plain text, as the original always did. Text
written right after an added token, with no space between, continues the word the token stands for and gets no "▁"
of its own: "吾輩は[MASK]である。" gives "▁吾輩は" [MASK] "である" "。" (not a stray "▁" piece before "である"), as
the original's pretraining data has it after masking a piece of "▁吾輩は" "猫" "である" "。"; in English
"Paris is the [MASK]." gives [MASK] "." as the masked "▁france" "." would. Text after a space keeps its "▁"
("the [MASK] is" -> "▁the" [MASK] "▁is", as before). A token with rstrip=True absorbs the space after it, so the
text after it continues the word too. Languages written without spaces (Japanese, Chinese) thus get pieces the
model saw in pretraining on both sides of [MASK].

Word-bounded vocabularies (Japanese, Chinese). A vocabulary that `train_tokenizer` learned inside the words of a
segmenter (`word_segmenter="fugashi"`: MeCab with unidic-lite; `"jieba"`) is encoded the same way: the segmenter
reads the text as SentencePiece does (after this normalization and the model's charsmap) and every word is encoded on
its own, with a "▁" in front only where a space or the start of the text comes before it (`_WordBoundaries`, the last
pre-tokenizer step; `encode_plain_texts` encodes the words through SentencePiece itself). Pieces then never cross a
word, so an answer or an entity at word boundaries is always a whole number of pieces. The segmenter is named in
tokenizer_config.json (with its dictionary) and imported where the tokenizer is loaded: without it, loading fails
with the install command rather than giving other ids. A tokenizer without a segmenter is the original tokenization
above, unchanged.

This file travels with every checkpoint as remote code, so it holds the tokenizer only: training a new vocabulary
with the ALBERT recipe (`train_tokenizer`) is in albert_hf/vocabulary.py.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import functools
import itertools
import json
import os
import re
import sys
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tokenizers import NormalizedString, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram
from transformers import TokenizersBackend
from transformers.utils import logging

logger = logging.get_logger(__name__)

SPIECE_UNDERLINE = "▁"
VOCAB_FILES_NAMES = {"vocab_file": "spiece.model", "tokenizer_file": "tokenizer.json"}

# A Unicode noncharacter ("for internal use"): marks where `_OriginalPieceMarks` wants a split. It never reaches the
# model: the pre-tokenizer splits on it and removes it.
_SPLIT_MARKER = "\ufdd0"

# SentencePiece ModelProto piece types (sentencepiece_model.proto).
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6
_UNIGRAM = 1


# ----------------------------------------------------------------------------------------------------------------------
# Reading SentencePiece models
# ----------------------------------------------------------------------------------------------------------------------


def _model_proto_class():
    """sentencepiece's generated protobuf class (needs the `protobuf` package)."""
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as error:  # protobuf missing
        raise ImportError(
            "Reading a SentencePiece model file needs the `protobuf` package: pip install protobuf"
        ) from error
    return sentencepiece_model_pb2.ModelProto


def read_sentencepiece_model(path: str | os.PathLike):
    """Parse a SentencePiece `.model` file into its `ModelProto`, with an error that names the file if it is unusable.

    Raises `FileNotFoundError` for a missing file and `ValueError` for a file that is not a Unigram SentencePiece model
    (truncated, corrupt, another format, or a BPE/char/word model).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SentencePiece model file not found: {path}")
    return parse_sentencepiece_model(path.read_bytes(), source=str(path))


def parse_sentencepiece_model(data: bytes, source: str = "<bytes>"):
    """Parse and validate serialized SentencePiece model bytes; `source` names them in errors."""
    import sentencepiece as spm

    try:
        # sentencepiece's own loader validates far more than protobuf does (protobuf accepts most byte strings).
        spm.SentencePieceProcessor(model_proto=data)
        proto = _model_proto_class().FromString(data)
    except ImportError:
        raise
    except Exception as error:
        raise ValueError(f"{source} is not a valid SentencePiece model file ({error})") from error
    if proto.trainer_spec.model_type != _UNIGRAM:
        raise ValueError(
            f"{source}: ALBERT uses a Unigram SentencePiece model, this one has model_type "
            f"{proto.trainer_spec.model_type} (1 = unigram)"
        )
    if not proto.normalizer_spec.add_dummy_prefix or not proto.normalizer_spec.escape_whitespaces:
        raise ValueError(f"{source}: models without add_dummy_prefix/escape_whitespaces are not supported")
    if any(SPIECE_UNDERLINE in piece.piece[1:] for piece in proto.pieces):
        raise ValueError(f"{source}: pieces spanning several words (split_by_whitespace=false) are not supported")
    return proto


def sentencepiece_model_from_tokenizer_json(path: str | os.PathLike, control_tokens: Iterable[str]):
    """Rebuild the `ModelProto` of a folder saved by transformers' `AlbertTokenizer` (only `tokenizer.json`).

    transformers 5 saves no `spiece.model`; its `tokenizer.json` keeps every piece with its score, the precompiled
    charsmap and, as added tokens, the control and user-defined symbols. `control_tokens` are the special tokens
    (`[CLS]`, `<pad>`, ...): other added tokens that are pieces of the vocabulary were user-defined symbols.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        model = data["model"]
        pieces, unk_id = model["vocab"], model["unk_id"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} is not a tokenizer.json with a Unigram model ({error})") from error
    if model.get("type") != "Unigram":
        raise ValueError(f"{path}: expected a Unigram model, found {model.get('type')!r}")

    proto = _model_proto_class()()
    control_tokens = set(control_tokens)
    added = {token["content"] for token in data.get("added_tokens", [])}
    for index, (piece, score) in enumerate(pieces):
        entry = proto.pieces.add(piece=piece, score=score, type=_NORMAL)
        if index == unk_id:
            entry.type = _UNKNOWN
        elif piece in control_tokens:
            entry.type = _CONTROL
        elif piece in added:
            entry.type = _USER_DEFINED
    proto.trainer_spec.model_type = _UNIGRAM
    proto.trainer_spec.unk_id = unk_id
    proto.trainer_spec.vocab_size = len(pieces)
    spec = proto.normalizer_spec
    spec.name, spec.add_dummy_prefix, spec.remove_extra_whitespaces, spec.escape_whitespaces = "nmt_nfkc", 1, 1, 1
    for step in _normalizer_steps(data.get("normalizer")):
        if step.get("type") == "Precompiled":
            spec.precompiled_charsmap = base64.b64decode(step["precompiled_charsmap"])
    return parse_sentencepiece_model(proto.SerializeToString(), source=str(path))


def _normalizer_steps(config: dict | None) -> list[dict]:
    if not config:
        return []
    return config["normalizers"] if config.get("type") == "Sequence" else [config]


# ----------------------------------------------------------------------------------------------------------------------
# The pipeline
# ----------------------------------------------------------------------------------------------------------------------


def _regex_char_class(chars: Iterable[str]) -> str:
    """An Oniguruma character class matching exactly `chars`, written as code point ranges."""
    code_points = sorted(ord(char) for char in chars)
    ranges: list[list[int]] = []
    for code_point in code_points:
        if ranges and code_point == ranges[-1][1] + 1:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    return "[" + "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" if hi > lo else f"\\x{{{lo:X}}}" for lo, hi in ranges) + "]"


@functools.cache
def _python_whitespace() -> tuple[str, ...]:
    """Characters `str.split()` splits on (more than Unicode White_Space: also \\x1c-\\x1f)."""
    return tuple(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


@functools.cache
def _combining_class() -> str:
    """Characters the original drops after NFKD: `unicodedata.combining(c) != 0` (not the same set as "Mn")."""
    return _regex_char_class(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c)))


# Python's Final_Sigma context (CPython's unicodeobject.c): the nearest character before that is not case-ignorable
# is cased (up to 20 case-ignorable ones between), and the nearest one after that is not case-ignorable is not cased.
_FINAL_SIGMA = r"(?<=[\p{Cased}&&\P{Case_Ignorable}]\p{Case_Ignorable}{0,20})Σ(?!\p{Case_Ignorable}*+\p{Cased})"


def build_normalizer(
    precompiled_charsmap: bytes,
    do_lower_case: bool = True,
    remove_space: bool = True,
    keep_accents: bool = False,
    replace_quotes: bool = False,
) -> list[normalizers.Normalizer]:
    """The serializable normalizer steps: the original `preprocess_text`, then SentencePiece's own normalization.

    `preprocess_text` collapses runs of Python's whitespace into one space and strips the ends; SentencePiece's
    `remove_extra_whitespaces` does the same with spaces at the end of the pipeline. So whitespace is rewritten here
    one character at a time, and the final collapse and strip do the rest: the same text, with one cheap step instead
    of a regex over runs and a second strip. With accents stripped, only the characters that the steps in between do
    not already turn into a space need that rewrite (for ALBERT's nmt_nfkc model: \\v, \\x1c-\\x1f and \\x85).
    """
    middle: list[normalizers.Normalizer] = []
    if replace_quotes:
        middle += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if not keep_accents:
        middle += [normalizers.NFKD(), normalizers.Replace(Regex(_combining_class()), "")]
    if do_lower_case:  # Python's str.lower() writes a word-final capital sigma as "ς"; Rust lowercases per character
        middle += [normalizers.Replace(Regex(_FINAL_SIGMA), "ς"), normalizers.Lowercase()]
    if precompiled_charsmap:
        middle.append(normalizers.Precompiled(precompiled_charsmap))
    # SentencePiece's remove_extra_whitespaces (the charsmap can map characters to spaces), and the original's strip.
    end = [normalizers.Replace(Regex(" {2,}"), " "), normalizers.Strip()]
    if not remove_space:
        return middle + end
    if keep_accents:  # combining marks reach the charsmap, which maps some "<space><mark>" pairs as one unit
        unmapped = [char for char in _python_whitespace() if char != " "]
    else:  # per character: NFKD, mark removal and lower-casing are, and no mark is left for the charsmap to join
        rest = normalizers.Sequence(middle)
        unmapped = [char for char in _python_whitespace() if rest.normalize_str(f"a{char}a") != "a a"]
    return ([normalizers.Replace(Regex(_regex_char_class(unmapped)), " ")] if unmapped else []) + middle + end


def build_printable_ascii_normalizer(
    precompiled_charsmap: bytes, do_lower_case: bool = True, replace_quotes: bool = False
) -> list[normalizers.Normalizer]:
    """The steps of [`build_normalizer`] that can change a text of printable ASCII characters (" " to "~").

    On such a text the other steps do nothing the tokens can see: no whitespace but " " to rewrite, nothing for NFKD
    or the combining-mark removal, no capital sigma, and the collapse of spaces and the strip only remove spaces, which
    the pre-tokenizer's whitespace split removes anyway (offsets point into the raw text either way). The charsmap
    step is left out too where it maps every printable ASCII character to itself (ALBERT's does): `Precompiled`
    looks characters up one grapheme cluster at a time, and each printable ASCII character is a cluster of its own.
    Most text of an English corpus is such text, and what is left costs a fraction of the whole normalizer.
    """
    steps: list[normalizers.Normalizer] = []
    if replace_quotes:
        steps += [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if do_lower_case:
        steps.append(normalizers.Lowercase())
    if precompiled_charsmap:
        charsmap = normalizers.Precompiled(precompiled_charsmap)
        if any(charsmap.normalize_str(char) != char for char in map(chr, range(32, 127))):
            steps.append(charsmap)
    return steps


def build_pre_tokenizer(user_defined_symbols: Iterable[str], pieces: Iterable[str] = ()) -> pre_tokenizers.PreTokenizer:
    """Words with a "▁" prefix and user-defined symbols isolated (`_Backend` adds the split at the marks).

    SentencePiece always emits a user-defined symbol as a piece of its own. When every symbol is one character that no
    other piece of the vocabulary contains, Viterbi can only cover that character with the symbol's own piece, so the
    segmentation is the same without splitting there, and the split (a regex over every word) is left out.
    """
    steps = [
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always", split=True),
    ]
    symbols = set(user_defined_symbols)
    forced = all(len(symbol) == 1 for symbol in symbols) and not any(
        symbol in piece for piece in pieces if piece not in symbols for symbol in symbols
    )
    if symbols and not forced:
        steps.append(pre_tokenizers.Split(Regex(_alternation(symbols)), behavior="isolated"))
    return pre_tokenizers.Sequence(steps)


def _alternation(symbols: Iterable[str]) -> str:
    """Regex matching any of `symbols`, longest first (as SentencePiece's prefix matcher does)."""
    symbols = sorted(set(symbols), key=len, reverse=True)
    if symbols and all(len(symbol) == 1 for symbol in symbols):
        return "[" + "".join(re.escape(symbol) for symbol in symbols) + "]"  # a class is faster than alternatives
    return "|".join(re.escape(symbol) for symbol in symbols)


def _has_digit_comma(text: str) -> bool:
    comma = text.find(",", 1)
    while comma > 0:
        if text[comma - 1].isdigit():
            return True
        comma = text.find(",", comma + 1)
    return False


def _is_digit_comma_piece(piece: str) -> bool:
    """The original's test for pieces to re-split: longer than one character, ends in a digit and a comma."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


class _OriginalPieceMarks:
    """Custom normalizer (the last step): marks the original's piece boundaries where plain Viterbi would differ.

    Two things the Rust Unigram pass alone gets wrong, both rare and both decided here per word:

    - the original re-splits a piece that ends in "<digit>,": "▁1990," becomes "▁1990" ","; a piece without "▁" is
      re-encoded as "▁" + piece[:-1] with the leading "▁" dropped ("0," -> "0" ",");
    - SentencePiece never matches control and unknown pieces ("<unk>", "<pad>", "[CLS]", ...) in text; a Unigram
      model matches every piece it holds.

    For such a word, this step segments it as the original does (a Unigram model without the control pieces, then
    the re-split) and marks every boundary between the original's pieces with a zero-width `_SPLIT_MARKER`, scoped
    to that exact word (every occurrence of a word segments the same way). The pre-tokenizer splits there, so the
    model sees one original piece per split, and each character keeps its alignment to the input. Every boundary is
    marked, not only those around the comma: a span segmented on its own could break a tie between equal-score
    segmentations ("666": "6" "66" or "66" "6") differently from the whole word.
    """

    def __init__(self, proto):
        # Control/unknown/unused pieces are renamed to strings text can never contain (ids do not matter here).
        vocab = [
            (piece.piece, piece.score) if piece.type in (_NORMAL, _USER_DEFINED) else (_SPLIT_MARKER + piece.piece, 0.0)
            for piece in proto.pieces
        ]
        self.model = Unigram(vocab, unk_id=proto.trainer_spec.unk_id, byte_fallback=False)
        self.unmatchable = [piece.piece for piece in proto.pieces if piece.type not in (_NORMAL, _USER_DEFINED)]
        pattern = _alternation(piece.piece for piece in proto.pieces if piece.type == _USER_DEFINED)
        self.user_defined = re.compile(pattern) if pattern else None
        self._marks_cache: dict[str, Regex | None] = {}

    def changes(self, text: str) -> bool:
        """Whether this step can change the normalized `text` (it has a "<digit>," or a control-piece string)."""
        return _has_digit_comma(text) or self._has_unmatchable(text)

    def normalize(self, normalized: NormalizedString) -> None:
        text = normalized.normalized
        if "," not in text and not self._has_unmatchable(text):  # most texts
            return
        for word in self._special_words(text):
            marks = self._word_marks(word)
            if marks is not None:
                normalized.replace(marks, _SPLIT_MARKER)

    def _special_words(self, text: str) -> set[str]:
        """The words (between spaces) of `text` that hold a "<digit>," or a control-piece string.

        Found from those strings outwards, with C-speed searches (a regex over the text, or a Python loop over its
        words, costs as much as the Unigram model on long paragraphs with commas).
        """
        anchors = []
        comma = text.find(",", 1)
        while comma > 0:
            if text[comma - 1].isdigit():
                anchors.append(comma)
            comma = text.find(",", comma + 1)
        for piece in self.unmatchable:
            at = text.find(piece)
            while at >= 0:
                anchors.append(at)
                at = text.find(piece, at + 1)
        words = set()
        for at in anchors:
            end = text.find(" ", at)
            words.add(text[text.rfind(" ", 0, at) + 1 : end if end >= 0 else len(text)])
        return words

    def _word_marks(self, word: str) -> Regex | None:
        """The zero-width matches, in any text, of this word's boundaries between the original's pieces (or None).

        Cached per word: a word segments the same way wherever it is, and long texts repeat their numbers.
        """
        if word not in self._marks_cache:
            if len(self._marks_cache) > 10_000:
                self._marks_cache.clear()
            pattern = "|".join(
                f"(?<=\\A{re.escape(word[:i])}|\\ {re.escape(word[:i])})(?={re.escape(word[i:])}(?:\\ |\\z))"
                for i in sorted(self.boundaries(word))
            )
            self._marks_cache[word] = Regex(pattern) if pattern else None
        return self._marks_cache[word]

    def boundaries(self, word: str, prefix: str = SPIECE_UNDERLINE) -> set[int]:
        """Positions in `word` (normalized, no "▁") between the original's pieces; empty where Viterbi agrees.

        `prefix` is what SentencePiece puts before the word: "▁" for a word after a space, "" for a word that
        follows another without a space (a tokenizer that carries a word segmenter encodes such words alone)."""
        points: set[int] = set()
        differs = self._has_unmatchable(word)
        for unit_start, unit in self._units(prefix + word):
            position = unit_start - len(prefix)  # position in `word` of the next piece; the prefix sits before 0
            for token in self.model.tokenize(unit):
                piece, start = token.value, position
                position += len(piece)
                points.add(position)
                if not _is_digit_comma_piece(piece):
                    continue
                differs = True
                points.add(position - 1)  # before the comma; "▁1990" itself is encoded afresh, as the original does
                if not piece.startswith(SPIECE_UNDERLINE):
                    for sub_piece in self.reencode(piece[:-1]):
                        start += len(sub_piece)
                        points.add(start)
        # Boundaries at the ends of the word are split by the pre-tokenizer already.
        return {point for point in points if 0 < point < len(word)} if differs else set()

    def _has_unmatchable(self, text: str) -> bool:
        return any(piece in text for piece in self.unmatchable)

    def reencode(self, text: str) -> list[str]:
        """The original's re-encoding of a piece without "▁": encode "▁" + text, then drop the leading "▁"."""
        pieces = [token.value for token in self.model.tokenize(SPIECE_UNDERLINE + text)]
        return pieces[1:] if pieces[0] == SPIECE_UNDERLINE else [pieces[0][1:], *pieces[1:]]

    def _units(self, text: str) -> Iterator[tuple[int, str]]:
        """The parts of `text` the pre-tokenizer hands to the model separately: split around user-defined symbols."""
        if self.user_defined is None:
            yield 0, text
            return
        start = 0
        for match in self.user_defined.finditer(text):
            if match.start() > start:
                yield start, text[start : match.start()]
            start = match.end()
        if start < len(text):
            yield start, text[start:]


class _JoinAfterAddedTokens:
    """Custom pre-tokenizer (the first step): no "▁" in front of text that directly follows an added token.

    SentencePiece puts "▁" in front of a word, i.e. after a space or at the start of the text. Text that follows a
    token such as [MASK] with no space between continues the word the token stands for: in pretraining, the original
    masks pieces of already-tokenized text, so "吾輩は猫である。" ("▁吾輩は" "猫" "である" "。") becomes
    "▁吾輩は" [MASK] "である" "。", never "▁" "である". Without this step every segment between added tokens would get a
    dummy "▁" prefix, a stray "▁" piece wherever no piece starts with "▁" and the rest. Text after a space keeps its
    "▁" ("the [MASK] is" gives "▁is"), so English fill-mask input is unchanged.

    A segment that starts right after an added token (the split before it holds a token) and not with whitespace
    gets `_SPLIT_MARKER` in front: the Metaspace step then adds no "▁" of its own, and the last step removes the
    marker together with any "▁" before it.
    """

    def pre_tokenize(self, pretokenized) -> None:
        seen: set[int] = set()

        def split(index: int, normalized: NormalizedString) -> list[NormalizedString]:
            follows_token = index > 0 and index - 1 not in seen
            seen.add(index)
            if follows_token and normalized.normalized and not normalized.normalized[0].isspace():
                normalized.prepend(_SPLIT_MARKER)
            return [normalized]

        pretokenized.split(split)


# ----------------------------------------------------------------------------------------------------------------------
# Word boundaries: vocabularies of scripts written without spaces
# ----------------------------------------------------------------------------------------------------------------------
#
# A vocabulary trained on Japanese or Chinese text as SentencePiece reads it (no spaces) learns pieces that run across
# words ("吾輩は": 吾輩 + は): an answer or an entity that starts or ends inside such a piece can never be predicted.
# `albert_hf.vocabulary.train_tokenizer` can instead learn pieces inside the words of a segmenter (MeCab through
# fugashi with unidic-lite for Japanese, jieba for Chinese, the segmenters whole-word masking uses), and the tokenizer
# then carries that segmenter (`word_segmenter` in tokenizer_config.json): it splits the text into those words before
# its Unigram model, with no "▁" in front of a word that follows another without a space. The segmenter reads the
# text as SentencePiece does (this tokenizer's normalization, the model's charsmap, spaces collapsed), in training,
# in every encoding and in whole-word masking alike. Nothing of the original tokenization changes for a tokenizer
# without a segmenter.


@functools.cache
def _japanese_tagger():
    """MeCab with the unidic-lite dictionary, set up as transformers' `MecabTokenizer` does (the dictionary named
    explicitly, so that a full UniDic or a system MeCab installed beside it changes nothing)."""
    import fugashi
    import unidic_lite

    mecabrc = os.path.join(unidic_lite.DICDIR, "mecabrc")
    return fugashi.Tagger(f'-r "{mecabrc}" -d "{unidic_lite.DICDIR}"')


def segment_japanese(text: str) -> list[str]:
    """Japanese words (UniDic's short units) by MeCab through fugashi, with unidic-lite: `pip install albert_hf[ja]`."""
    return [word.surface for word in _japanese_tagger()(text)]


@functools.cache
def _chinese_segmenter():
    import logging as python_logging

    import jieba

    jieba.setLogLevel(python_logging.WARNING)  # jieba logs its dictionary loading at INFO
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    return segmenter


def segment_chinese(text: str) -> list[str]:
    """Chinese words by jieba's default (precise mode, `jieba.lcut`): `pip install albert_hf[zh]`."""
    return _chinese_segmenter().lcut(text)


class WordSegmenterSpec:
    """A word segmenter a tokenizer can carry: its name in tokenizer_config.json, its function, the modules it
    imports, the distributions that install them (the last one holds the dictionary), and albert_hf's extra."""

    def __init__(self, name: str, label: str, segment, modules: tuple[str, ...], distributions: tuple[str, ...], extra):
        self.name, self.label, self.segment = name, label, segment
        self.modules, self.distributions, self.extra = modules, distributions, extra

    def install_command(self) -> str:
        return f'pip install "albert_hf[{self.extra}]" (or pip install {" ".join(self.distributions)})'

    def missing(self) -> str | None:
        """The first module of the segmenter that cannot be imported (with the reason), or None."""
        import importlib

        for module in self.modules:
            try:
                importlib.import_module(module)
            except ImportError as error:
                return f"{module} ({error})"
        return None

    def dictionary(self) -> str:
        """The installed dictionary, as tokenizer_config.json records it ("unidic-lite 1.0.8")."""
        from importlib import metadata

        distribution = self.distributions[-1]
        try:
            return f"{distribution} {metadata.version(distribution)}"
        except metadata.PackageNotFoundError:
            return f"{distribution} (version unknown)"


WORD_SEGMENTERS = {
    "fugashi": WordSegmenterSpec(
        "fugashi", "fugashi/unidic-lite", segment_japanese, ("fugashi", "unidic_lite"), ("fugashi", "unidic-lite"), "ja"
    ),
    "jieba": WordSegmenterSpec("jieba", "jieba", segment_chinese, ("jieba",), ("jieba",), "zh"),
}


def word_segmenter_spec(name: str, needed_for: str) -> WordSegmenterSpec:
    """The segmenter called `name`, checked to be installed; `needed_for` says what needs it, in the error.

    Raises ValueError for a name that is not one of `WORD_SEGMENTERS`, and ImportError, one line with the install
    command, when its package is missing: ids computed without the segmenter would quietly differ.
    """
    if name not in WORD_SEGMENTERS:
        raise ValueError(
            f"{needed_for}: unknown word segmenter {name!r}; a tokenizer can carry {' or '.join(WORD_SEGMENTERS)}"
        )
    spec = WORD_SEGMENTERS[name]
    missing = spec.missing()
    if missing is not None:
        raise ImportError(
            f"{needed_for} needs the word segmenter {spec.label}, which is not installed ({missing}): "
            f"{spec.install_command()}"
        )
    return spec


def segment_word_ends(segment, text: str, name: str) -> list[int]:
    """The end offset of each word of `text` by `segment` (a function from a text to its words in order), spaces
    before a word counted in it; words that are only whitespace are skipped. Raises ValueError, naming the segmenter
    `name`, when its words are not the text."""
    ends, position = [], 0
    for word in segment(text):
        if not word.strip():
            continue
        found = text.find(word, position)
        if found < 0 or text[position:found].strip():
            raise ValueError(
                f"word segmenter {name}: its words are not the text in order ({word!r} does not follow "
                f"{text[:position]!r} in {text!r})."
            )
        position = found + len(word)
        ends.append(position)
    if text[position:].strip():
        raise ValueError(f"word segmenter {name}: {text[position:]!r} of {text!r} is in none of its words.")
    return ends


def word_cuts(segment, text: str, name: str) -> list[int]:
    """The positions of `text` between two words that no space separates: where a word-bounded tokenizer splits
    besides the spaces. The segmenter reads the text without its leading and trailing spaces."""
    start = len(text) - len(text.lstrip())
    ends = segment_word_ends(segment, text[start:].rstrip(), name) if text.strip() else []
    cuts = [start + end for end in ends[:-1]]
    return [cut for cut in cuts if not text[cut].isspace()]


def word_chunks(text: str, cuts: Sequence[int]) -> list[tuple[int, int]]:
    """(start, end) of the parts of `text` a word-bounded tokenizer encodes one by one: cut at `cuts` and before each
    space (a part that starts with a space is one word after a space, "▁" and the word)."""
    spaces = [match.start() for match in re.finditer(" ", text) if match.start()] if " " in text else []
    bounds = sorted({0, len(text), *cuts, *spaces})
    return list(zip(bounds, bounds[1:]))


def _checked_dictionary(name: str, recorded: str | None, source: str | os.PathLike | None) -> str:
    """The installed dictionary of segmenter `name`; a warning when it is not the one the vocabulary recorded."""
    installed = word_segmenter_spec(name, f"the tokenizer {source or ''}".rstrip()).dictionary()
    if recorded is not None and recorded != installed:
        logger.warning(
            "The tokenizer %s was trained with the words of %s and %s is installed: where the two dictionaries "
            "segment a text differently, its ids differ from those the model was trained on.",
            source or "",
            recorded,
            installed,
        )
    return recorded or installed


class _WordBoundaries:
    """Custom pre-tokenizer (the last step) of a tokenizer that carries a word segmenter: splits at its words.

    The splits it receives are the words between spaces ("▁" in front) and between added tokens; it joins each run of
    them between added tokens back into the text they are ("▁" read as a space, one character for one), asks the
    segmenter for the words of that text (`word_cuts`) and splits at every word boundary inside a split. The words
    after the first of a run get no "▁": they follow the word before without a space. A word can then hold what
    `_OriginalPieceMarks` looks for (a "<digit>," or a control-piece string; neither fugashi nor jieba ever leaves a
    comma or a bracket in a word with anything else, so this is for completeness): it is split at the original's
    pieces of that word alone, as SentencePiece encodes a word of such a vocabulary (`encode_plain_texts`).
    """

    def __init__(self, spec: WordSegmenterSpec, marks: _OriginalPieceMarks):
        self.spec, self.marks = spec, marks
        self._lock = threading.Lock()  # one MeCab tagger for every thread that encodes
        self._cuts_cache: dict[str, list[int]] = {}

    def cuts(self, text: str) -> list[int]:
        """`word_cuts` of `text`; remembered for the last few thousand texts (SQuAD pairs each context with all the
        questions on it, and a context is segmented once)."""
        with self._lock:
            if text not in self._cuts_cache:
                if len(self._cuts_cache) > 4096:
                    self._cuts_cache.clear()
                self._cuts_cache[text] = word_cuts(self.spec.segment, text, self.spec.label)
            return self._cuts_cache[text]

    def pre_tokenize(self, pretokenized) -> None:
        splits = pretokenized.get_splits(offset_referential="normalized")
        cuts: dict[int, list[int]] = {}
        run: list[int] = []
        for index, (_, _, tokens) in enumerate([*splits, ("", None, True)]):
            if tokens is None:
                run.append(index)
                continue
            if run:
                self._cut_run(run, [splits[i][0] for i in run], cuts)
                run = []

        def split(index: int, normalized: NormalizedString) -> list[NormalizedString]:
            text = normalized.normalized
            bounds = [0, *cuts.get(index, ()), len(text)]
            if self.marks.changes(text):  # rare: a word may hold a "<digit>," or a control-piece string
                bounds = self._with_marks(text, bounds)
            if len(bounds) == 2:
                return [normalized]
            pieces = [normalized.slice((start, end)) for start, end in zip(bounds, bounds[1:])]
            return [piece for piece in pieces if piece is not None and piece.normalized]

        pretokenized.split(split)

    def _with_marks(self, text: str, bounds: list[int]) -> list[int]:
        """`bounds` (of the words of a split) with the boundaries of the original's pieces inside each word."""
        points = [0]
        for start, end in zip(bounds, bounds[1:]):
            word = text[start:end]
            prefix = SPIECE_UNDERLINE if word.startswith(SPIECE_UNDERLINE) else ""
            if self.marks.changes(word[len(prefix) :]):
                points += sorted(
                    start + len(prefix) + point for point in self.marks.boundaries(word[len(prefix) :], prefix)
                )
            points.append(end)
        return points

    def _cut_run(self, run: list[int], texts: list[str], cuts: dict[int, list[int]]) -> None:
        """Adds to `cuts` the word boundaries inside the splits `run` (whose texts are `texts`), per split."""
        joined = "".join(texts).replace(SPIECE_UNDERLINE, " ")
        starts = list(itertools.accumulate((len(text) for text in texts), initial=0))
        for cut in self.cuts(joined):
            which = bisect.bisect_right(starts, cut) - 1
            if cut > starts[which]:  # a cut at the start of a split is one already
                cuts.setdefault(run[which], []).append(cut - starts[which])


def _write_nothing(path: str, pretty: bool = True) -> None:
    """`_Backend.save` inside `_Backend.tokenizer_json_left_out`."""


class _Backend:
    """transformers' backend tokenizer for `AlbertHFTokenizer`: four `tokenizers.Tokenizer` routes, and each text
    encoded by the cheapest one that gives the original's tokens.

    The routes are complete public `tokenizers.Tokenizer` objects on one Unigram model, with the same added tokens,
    post-processor, truncation and padding; only their normalizer and pre-tokenizer differ:

    - "exact": the whole pipeline, the Python steps included: `_OriginalPieceMarks` (a "<digit>," or a control-piece
      string after normalization: 0.02% of SST-2's sentences, 6% of MRPC's) and `_JoinAfterAddedTokens` (an added
      token directly followed by text). Every text gets the original's tokens here. It is what every read of the
      backend sees (`normalizer`, `pre_tokenizer`, `model`, `decode`, vocabulary and settings).
    - "marks": the exact route without `_JoinAfterAddedTokens`, for the texts that need only `_OriginalPieceMarks`
      (most of those with a "<digit>,"): one Python call per text instead of two.
    - "rust": the full normalizer and pre-tokenizer without the Python steps: any text they cannot change.
    - "ascii": text of printable ASCII characters only, which most English text is, with only the normalizer steps
      that can change such text ([`build_printable_ascii_normalizer`]): about half the cost of the full one.

    A tokenizer that carries a word segmenter has the exact route alone (with `_WordBoundaries` as its last step,
    and no `_OriginalPieceMarks` in its normalizer: that step does its work word by word): its segmenter reads every
    text.

    A Python step inside the Rust pipeline is called for every text, from every worker thread, through the GIL: on
    20,000 SST-2 sentences, one thread, the exact route alone took 1.5x the CPU time of the routed backend (the
    "exact route only" column of `benchmarks/bench_tokenizer.py --profile`), so the Python steps run only on the texts
    they can change. `encode_batch` screens a whole batch at once (`_Screens.flag`) and looks at a text alone only
    where that flagged it; a batch that needs several routes is encoded per route, merged back in order and padded as
    one.

    Why a stand-in and not a `tokenizers.Tokenizer`: transformers' `TokenizersBackend` encodes every input through
    `self._tokenizer.encode_batch` (`__call__`, `encode`, `tokenize` and `pad`'s inputs all end there), so a route
    can only be chosen per text in that call, and `tokenizers.Tokenizer` cannot be subclassed (a Rust class, "not an
    acceptable base type"). tests/test_tokenization.py drives generated text through every one of those ways, built,
    pickled and loaded as remote code. So this class answers exactly the attributes transformers uses:
    reads from the exact route (`_READS`), settings applied to every route (`_BROADCAST`, `_SETTABLE`), and the
    routed `encode` / `encode_batch`. Any other attribute raises AttributeError naming it, so a call made through an
    attribute that a later transformers release starts to use fails loudly instead of reaching a pipeline without the
    original's steps. Nothing swaps a pipeline during a call.

    A lock serialises encoding and the changes of settings, so one tokenizer can be shared by threads (datasets'
    streaming reads several files from a thread pool and tokenizes in each): a thread changing truncation or padding
    waits for another's call to end instead of changing the settings under it. Rust still encodes each batch on all
    cores.
    """

    _READS = frozenset(
        {
            "normalizer", "pre_tokenizer", "model", "decoder", "post_processor", "truncation", "padding",
            "encode_special_tokens", "get_vocab", "get_vocab_size", "get_added_tokens_decoder", "token_to_id",
            "id_to_token", "num_special_tokens_to_add", "decode", "decode_batch", "post_process",
        }
    )  # fmt: skip
    _BROADCAST = frozenset(
        {"enable_truncation", "no_truncation", "enable_padding", "no_padding", "add_tokens", "add_special_tokens"}
    )
    _SETTABLE = frozenset({"post_processor", "encode_special_tokens", "decoder"})

    def __init__(
        self,
        rust: Tokenizer,
        marks: _OriginalPieceMarks,
        ascii_normalizer: list[normalizers.Normalizer],
        words: _WordBoundaries | None = None,
    ):
        """`rust`: the serializable "rust" route, with its added tokens and settings; the other routes copy them.
        `words`: the word segmenter of a word-bounded vocabulary; every text then takes the exact route, with
        `_WordBoundaries` as its last step (which also does `_OriginalPieceMarks`' work, word by word)."""
        own = object.__setattr__
        own(self, "_marks", marks)
        own(self, "_words", words)
        own(self, "_rust_normalizer", rust.normalizer)
        # The exact route keeps a leading space (the pre-tokenizer drops it), so that `_JoinAfterAddedTokens` can tell
        # text after "[MASK] " from text right after "[MASK]"; the "marks" route needs no such thing.
        steps = [rust.normalizer[index] for index in range(len(rust.normalizer))]
        marks_normalizer = normalizers.Sequence([*steps, normalizers.Normalizer.custom(marks)])
        if steps and isinstance(steps[-1], normalizers.Strip):
            steps[-1] = normalizers.Strip(left=False, right=True)
        # The marks are only ever inserted by the Python step, so only its routes split (and drop) them, together
        # with a "▁" the Metaspace step put in front of one.
        drop_marks = pre_tokenizers.Split(Regex(f"{SPIECE_UNDERLINE}?{_SPLIT_MARKER}"), behavior="removed")
        pipelines = {
            "exact": (
                normalizers.Sequence([*steps, normalizers.Normalizer.custom(marks)]),
                pre_tokenizers.Sequence(
                    [pre_tokenizers.PreTokenizer.custom(_JoinAfterAddedTokens()), rust.pre_tokenizer, drop_marks]
                ),
            ),
            "marks": (marks_normalizer, pre_tokenizers.Sequence([rust.pre_tokenizer, drop_marks])),
            "ascii": (normalizers.Sequence(ascii_normalizer), rust.pre_tokenizer),
        }
        if words is not None:  # one route: the segmenter reads every text
            join_after_tokens = pre_tokenizers.PreTokenizer.custom(_JoinAfterAddedTokens())
            split_words = pre_tokenizers.PreTokenizer.custom(words)
            pipelines = {
                "exact": (
                    normalizers.Sequence(steps),
                    pre_tokenizers.Sequence([join_after_tokens, rust.pre_tokenizer, drop_marks, split_words]),
                )
            }
        routes = {name: _route_like(rust, *pipeline) for name, pipeline in pipelines.items()}
        own(self, "routes", {**routes, "rust": rust})
        own(self, "_ascii_screens", self._build_ascii_screens())
        own(self, "_screens_cache", (None, None))
        own(self, "_lock", threading.RLock())
        own(self, "_saving", threading.local())  # inside `tokenizer_json_left_out`, per thread

    # -- which pipeline each text takes ------------------------------------------------------------------------------

    def _build_ascii_screens(self) -> tuple[re.Pattern, re.Pattern]:
        """Regexes that together match every ASCII text whose normalization can hold a "<digit>," (the first) or a
        control piece's first character (the second).

        Probes this model's normalizer one ASCII character at a time (the precompiled charsmap differs per model):
        which characters become digits, become commas, vanish, or become a control piece's first character.
        """
        kinds = self._ascii_kinds()
        digits, commas, vanishing, starts = (
            [char for char, kind in kinds.items() if name in kind] for name in ("digit", "comma", "vanishing", "start")
        )

        def any_of(chars: list[str]) -> str:
            return "[" + "".join(re.escape(char) for char in chars) + "]" if chars else "(?!)"  # (?!) never matches

        between = f"{any_of(vanishing)}*" if vanishing else ""
        return re.compile(f"{any_of(digits)}{between}{any_of(commas)}"), re.compile(any_of(starts))

    def _ascii_kinds(self) -> dict[str, set[str]]:
        """What this model's full normalizer makes of each ASCII character, as far as the Python steps care."""
        control_starts = {piece[0] for piece in self._marks.unmatchable if piece}
        kinds = {}
        for char in map(chr, range(128)):
            normalized = self._rust_normalizer.normalize_str(f"a{char}a")[1:-1]
            kinds[char] = {
                name
                for name, present in (
                    ("digit", any(c.isdigit() for c in normalized)),
                    ("comma", "," in normalized),
                    ("vanishing", normalized == ""),
                    ("start", bool(control_starts & set(normalized))),
                )
                if present
            }
        return kinds

    def _screens(self) -> _Screens:
        """The screens for the current added tokens, rebuilt when they (or `encode_special_tokens`) change."""
        exact = self.routes["exact"]
        tokens = tuple(exact.get_added_tokens_decoder().values())
        key = (tuple(map(repr, tokens)), exact.encode_special_tokens)
        cached_key, screens = self._screens_cache
        if key != cached_key:
            screens = _Screens(tokens, exact.encode_special_tokens, self._ascii_kinds())
            object.__setattr__(self, "_screens_cache", (key, screens))
        return screens

    def needs_python_step(self, item: str | Sequence, screens: _Screens | None = None) -> bool:
        """Whether a text, a pair or pre-tokenized words may be changed by the Python steps.

        That is `_OriginalPieceMarks` (a "<digit>," or a control-piece string after normalization, in a part of the
        text between the added tokens that Rust takes out before normalizing) or `_JoinAfterAddedTokens` (an added
        token directly followed by text, as in fill-mask input without spaces). WikiText's "<unk>" is such a token:
        it never reaches the normalizer, so a paragraph holding it needs no Python step.
        """
        screens = screens or self._screens()
        if not isinstance(item, str):
            return any(self.needs_python_step(part, screens) for part in item)
        if screens.joins.search(item):
            return True
        if item.isascii():
            # The regexes first, and normalize only where a control piece could appear. ASCII is normalized one
            # character at a time, so the parts joined by spaces hold whatever each part would hold.
            text = screens.between_tokens(item)
            digit_comma, control_start = self._ascii_screens
            if digit_comma.search(text):
                return True
            return bool(control_start.search(text)) and self._marks.changes(self._rust_normalizer.normalize_str(text))
        # Other text is normalized here, which costs a good part of encoding it: once per text (SQuAD pairs each
        # question with a context that many questions share).
        decisions = screens.non_ascii_decisions
        if item not in decisions:
            if len(decisions) > 4096:
                decisions.clear()
            normalize = self._rust_normalizer.normalize_str
            decisions[item] = any(self._marks.changes(normalize(part)) for part in screens.segments(item))
        return decisions[item]

    def pipeline_of(self, item: str | Sequence, screens: _Screens | None = None) -> str:
        """ "exact", "marks", "ascii" or "rust": the route a text, a pair or pre-tokenized words take."""
        if self._words is not None:
            return "exact"
        screens = screens or self._screens()
        if self.needs_python_step(item, screens):
            return "exact" if any(screens.joins.search(text) for text in _texts_of(item)) else "marks"
        return "ascii" if _printable_ascii(item) else "rust"

    def pipelines_of(self, inputs: Sequence) -> list[str]:
        """The pipeline of every item of a batch: one screen over all its texts, then each item it flagged alone."""
        if self._words is not None:
            return ["exact"] * len(inputs)
        screens = self._screens()
        pipelines = ["ascii"] * len(inputs)
        for index in screens.flag([_joined_text(item) for item in inputs]):
            pipelines[index] = self.pipeline_of(inputs[index], screens)
        return pipelines

    # -- encoding ----------------------------------------------------------------------------------------------------

    def encode(self, sequence, pair=None, is_pretokenized: bool = False, add_special_tokens: bool = True):
        route = self.routes[self.pipeline_of(sequence if pair is None else (sequence, pair))]
        with self._lock:
            return route.encode(sequence, pair, is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens)

    def encode_batch(self, inputs, is_pretokenized: bool = False, add_special_tokens: bool = True):
        with self._lock:
            return self._encode_batch(inputs, is_pretokenized, add_special_tokens)

    def _encode_batch(self, inputs, is_pretokenized: bool, add_special_tokens: bool):
        options = dict(is_pretokenized=is_pretokenized, add_special_tokens=add_special_tokens)
        pipelines = self.pipelines_of(inputs)
        names = sorted(set(pipelines))
        if len(names) <= 1:
            return self.routes[names[0] if names else "exact"].encode_batch(inputs, **options)
        # Several routes: one encode_batch call each; padding to the batch's longest is done once, over all.
        padding = self.routes["exact"].padding
        pad_to_longest = padding is not None and padding["length"] is None
        if pad_to_longest:
            for name in names:
                self.routes[name].no_padding()
        try:
            encoded = {}
            for name in names:
                items = [item for item, pipeline in zip(inputs, pipelines) if pipeline == name]
                encoded[name] = iter(self.routes[name].encode_batch(items, **options))
        finally:
            if pad_to_longest:
                for name in names:
                    self.routes[name].enable_padding(**padding)
        encodings = [next(encoded[pipeline]) for pipeline in pipelines]
        if pad_to_longest:
            _pad_to_longest(encodings, padding)
        return encodings

    @contextlib.contextmanager
    def tokenizer_json_left_out(self) -> Iterator[None]:
        """For the duration, in this thread, `save` (transformers' `save_pretrained` asking for a `tokenizer.json`)
        writes nothing: no `tokenizer.json` can hold the Python steps, and one of the Rust steps alone would load
        (with `tokenizers` or `PreTrainedTokenizerFast`) as a tokenizer that differs from the original on some texts.
        `AlbertHFTokenizer.save_pretrained` writes `spiece.model` instead, from which the whole pipeline is rebuilt.
        Anywhere else `save` is not routed, and raises."""
        self._saving.active = True
        try:
            yield
        finally:
            self._saving.active = False

    # -- everything else: read from the exact route, or set on every route ------------------------------------------

    def __getattr__(self, name: str) -> Any:
        routes = self.__dict__.get("routes")
        if routes is None or name.startswith("__"):  # not built yet (e.g. during copying), or a protocol probe
            raise AttributeError(name)
        if name in self._READS:
            return getattr(routes["exact"], name)
        if name in self._BROADCAST:
            return functools.partial(self._broadcast, name)
        if name == "save" and getattr(self.__dict__["_saving"], "active", False):
            return _write_nothing
        raise AttributeError(
            f"AlbertHFTokenizer's backend does not route `{name}`: it answers only the attributes it keeps exact "
            f"({', '.join(sorted(self._READS | self._BROADCAST | {'encode', 'encode_batch'}))}); encode through the "
            "tokenizer, or add the attribute to `_Backend` with a test through every entry point"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("normalizer", "pre_tokenizer"):
            raise AttributeError(f"AlbertHFTokenizer's {name} reproduces the original tokenization; it cannot be set")
        if name not in self._SETTABLE:
            raise AttributeError(f"AlbertHFTokenizer's backend does not route setting `{name}`")
        with self._lock:
            for route in self.routes.values():
                setattr(route, name, value)

    def _broadcast(self, name: str, *args, **kwargs) -> Any:
        """A method that changes settings or added tokens, called on every route; returns the exact route's result."""
        with self._lock:
            results = [getattr(route, name)(*args, **kwargs) for route in self.routes.values()]
            _check_same_added_tokens(self.routes)
        return results[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(routes={sorted(self.routes)}, model={self.routes['rust'].model!r})"


def _route_like(rust: Tokenizer, normalizer, pre_tokenizer) -> Tokenizer:
    """A Tokenizer with `rust`'s model, decoder, added tokens and settings, and the given normalizer and pre-tokenizer."""
    route = Tokenizer(rust.model)
    route.normalizer, route.pre_tokenizer, route.decoder = normalizer, pre_tokenizer, rust.decoder
    # In id order, so that tokens missing from the model's vocabulary get the same new ids.
    for _, token in sorted(rust.get_added_tokens_decoder().items()):
        (route.add_special_tokens if token.special else route.add_tokens)([token])
    if rust.post_processor is not None:
        route.post_processor = rust.post_processor
    if rust.truncation is not None:
        route.enable_truncation(**rust.truncation)
    if rust.padding is not None:
        route.enable_padding(**rust.padding)
    route.encode_special_tokens = rust.encode_special_tokens
    _check_same_added_tokens({"rust": rust, "route": route})
    return route


def _check_same_added_tokens(routes: dict[str, Tokenizer]) -> None:
    decoders_ = [
        {index: str(token) for index, token in route.get_added_tokens_decoder().items()} for route in routes.values()
    ]
    if any(decoder != decoders_[0] for decoder in decoders_[1:]):
        raise RuntimeError("AlbertHFTokenizer's routes gave added tokens different ids; please report this")


def _printable_ascii(item: str | Sequence) -> bool:
    """Whether a text (or every part of a pair or of pre-tokenized words) is printable ASCII only (" " to "~")."""
    if isinstance(item, str):
        return item.isascii() and item.isprintable()
    return all(_printable_ascii(part) for part in item)


def _joined_text(item: str | Sequence) -> str:
    """The texts of a batch item joined by spaces, as `_Screens.flag` screens them: no needle it looks for spans a
    space, so the joined text is flagged exactly when one of its texts would be. One string per item, not one per
    pre-tokenized word, and joined in C: a batch of CoNLL sentences is screened as sentences."""
    if isinstance(item, str):
        return item
    try:
        return " ".join(item)  # pre-tokenized words, or a pair of texts
    except TypeError:  # a pair of pre-tokenized word lists
        return " ".join(map(_joined_text, item))


def _texts_of(item: str | Sequence) -> Iterator[str]:
    """The texts of a batch item: itself, both parts of a pair, every pre-tokenized word."""
    if isinstance(item, str):
        yield item
    else:
        for part in item:
            yield from _texts_of(part)


class _Screens:
    """Which texts of a batch may need more than the "ascii" pipeline, for one set of added tokens.

    `flag` screens a whole batch at C speed: every text that is not printable ASCII, and, over the joined texts
    encoded as bytes and translated so that each character becomes what matters of it ("0" a digit, "," a comma,
    NUL an added token's first character, a control piece's first character or a vanishing one, "a" anything else),
    every text holding "0," or NUL. A printable ASCII text that holds neither can have no "<digit>," and no
    control piece after normalization (each of its characters is normalized on its own) and no added token, so the
    Python steps cannot change it. The flagged texts are then looked at one by one (`_Backend.needs_python_step`).
    Regexes over the joined texts cost ten times more: a few percent of the whole tokenizer on long paragraphs.

    `segments` cuts a text where Rust takes out added tokens before normalizing, so that the per-text check sees what
    the Python step would see. That is exact only where no two occurrences of those tokens can overlap (then Rust
    takes out every occurrence) and none strips spaces or wants a whole word; otherwise the text is not cut, which
    only sends more texts down the exact path.
    """

    def __init__(self, tokens: Sequence, encode_special_tokens: bool, ascii_kinds: dict[str, set[str]]):
        plain = _alternation(token.content for token in tokens if not token.rstrip)
        absorbing = _alternation(token.content for token in tokens if token.rstrip)
        parts = ([f"(?:{plain})(?=\\S)"] if plain else []) + ([f"(?:{absorbing})"] if absorbing else [])
        # An added token directly followed by text (see `_JoinAfterAddedTokens`), any case; a token with rstrip=True
        # absorbs the whitespace after it, so it matches whatever follows.
        self.joins = re.compile("|".join(parts) or "(?!)", re.IGNORECASE)
        first_chars = [token.content[0] for token in tokens if token.content]
        token_start = re.compile(_alternation(first_chars), re.IGNORECASE) if first_chars else None
        table = bytearray(b"a" * 256)
        for char, kinds in ascii_kinds.items():
            if (
                kinds & {"start", "vanishing"}
                or {"digit", "comma"} <= kinds
                or (token_start and token_start.match(char))
            ):
                table[ord(char)] = 0
            elif kinds:
                table[ord(char)] = ord("0" if "digit" in kinds else ",")
        self.table = bytes(table)
        self.non_ascii_decisions: dict[str, bool] = {}  # `_Backend.needs_python_step`'s, per text
        taken_out = [
            token for token in tokens if not token.normalized and not (token.special and encode_special_tokens)
        ]
        contents = [token.content for token in taken_out]
        plain_tokens = not any(token.lstrip or token.rstrip or token.single_word for token in taken_out)
        self.taken_out = (
            re.compile(_alternation(contents)) if contents and plain_tokens and _never_overlap(contents) else None
        )

    def flag(self, texts: list[str]) -> set[int]:
        """Indices of the texts to look at one by one."""
        flagged = {index for index, text in enumerate(texts) if not (text.isascii() and text.isprintable())}
        screened = " ".join(texts).encode("ascii", "replace").translate(self.table)  # one byte per character
        starts = list(itertools.accumulate((len(text) + 1 for text in texts), initial=0))
        for needle in (b"0,", b"\0"):
            at = screened.find(needle)
            while at >= 0:  # the text it is in, then on from the next text
                index = bisect.bisect_right(starts, at) - 1
                flagged.add(index)
                at = screened.find(needle, starts[index + 1])
        return flagged

    def segments(self, text: str) -> list[str]:
        """The parts of `text` that Rust normalizes, between the added tokens it takes out first."""
        return self.taken_out.split(text) if self.taken_out else [text]

    def between_tokens(self, text: str) -> str:
        """`segments` joined by spaces."""
        return self.taken_out.sub(" ", text) if self.taken_out else text


def _never_overlap(contents: list[str]) -> bool:
    """Whether no two occurrences of these strings can overlap: none holds another, none ends as one begins."""
    for first in contents:
        for second in contents:
            if first != second and first in second:
                return False
            if any(second.startswith(first[cut:]) for cut in range(1, len(first))):
                return False
    return True


def _pad_to_longest(encodings: list, padding: dict) -> None:
    """Pad in place to the longest encoding, as `tokenizers` pads a batch (`padding` is `Tokenizer.padding`)."""
    length = max((len(encoding.ids) for encoding in encodings), default=0)
    multiple = padding["pad_to_multiple_of"]
    if multiple and length % multiple:
        length += multiple - length % multiple
    for encoding in encodings:
        encoding.pad(
            length,
            direction=padding["direction"],
            pad_id=padding["pad_id"],
            pad_type_id=padding["pad_type_id"],
            pad_token=padding["pad_token"],
        )


# ----------------------------------------------------------------------------------------------------------------------
# transformers' own tokenizer format: what a folder holds for users without albert_hf
# ----------------------------------------------------------------------------------------------------------------------

# The score the stock `tokenizer.json` gives the pieces that end in "<digit>,": far below any other way of covering
# their text, so that Viterbi keeps away from them, as the original's re-split of such pieces does.
_AVOIDED_PIECE_SCORE = -1e4


def stock_pipeline(rust: Tokenizer) -> Tokenizer:
    """The original tokenization as far as transformers' tokenizer format (`tokenizer.json`, read by
    `TokenizersBackend` without albert_hf's code) can hold it: the serializable "rust" route of `_Backend` (the whole
    normalizer and pre-tokenizer, the Unigram model, the post-processor), with the pieces that end in "<digit>," out
    of Viterbi's reach. Returns a new `Tokenizer`; `rust` is left as it is.

    transformers' own `AlbertTokenizer` builds its pipeline in code and ignores a folder's: it turns `` and '' into ",
    strips accents by Unicode category (not the original's combining classes), lower-cases without Python's final
    sigma, and keeps pieces such as "▁1990," that the original re-splits into "▁1990" ","; on SQuAD that changes the
    ids of 3.5% of the texts (`benchmarks/stock_tokenizer.py`). Here every rule the format can state is the original's,
    and three the exact pipeline runs in Python stay out of reach:

    - the re-split of "<digit>," pieces depends on which pieces Viterbi picked. With those pieces avoided, Viterbi
      segments as if they were absent, which is the original wherever its choice, re-split, is also the best without
      them: all but 2 of the 262,000 texts of the shared data (CoNLL's "11,424": the original's "▁11," "4" "24"
      re-split gives "▁11" "," "4" "24", the best without gives "▁1" "1,4" "24"). `tokenizers` penalizes an unknown
      character relative to the lowest score of the vocabulary, which therefore moves too: no text of the shared
      data, the Japanese novel with its thousands of characters unknown to the English vocabulary included, is
      segmented otherwise for it;
    - a control piece written in the text and read as text ("<unk>" with `split_special_tokens=True`, "<UNK>" lower-
      cased): SentencePiece never matches one, a Unigram model matches every piece it holds;
    - text written right after an added token, with no space ("the [MASK]."): each stretch of text between added
      tokens gets its own "▁", where the exact pipeline continues the token's word (`_JoinAfterAddedTokens`), as
      every SentencePiece tokenizer of transformers does.
    """
    data = json.loads(rust.to_str())
    for entry in data["model"]["vocab"]:
        if _is_digit_comma_piece(entry[0]):
            entry[1] = _AVOIDED_PIECE_SCORE
    return Tokenizer.from_str(json.dumps(data))


def _model_type_beside(save_directory: str | os.PathLike) -> str | None:
    """The model_type of the config.json in `save_directory` (a model saved there before its tokenizer, as Trainer and
    albert_hf save), or None: "albert_hf" for a model saved with albert_hf's code, "albert" for transformers' own."""
    try:
        with open(os.path.join(save_directory, "config.json"), encoding="utf-8") as file:
            return json.load(file).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None


# ----------------------------------------------------------------------------------------------------------------------
# The tokenizer class
# ----------------------------------------------------------------------------------------------------------------------


# Not named "AlbertTokenizer": transformers resolves `tokenizer_class` in tokenizer_config.json by class name, globally,
# so registering a class of that name with AutoTokenizer would silently replace transformers' own tokenizer for every
# official ALBERT checkpoint (and other models that use it) in the process. Folders we save say "AlbertHFTokenizer"
# (and their `auto_map` names tokenization.AlbertHFTokenizer), which loads this class and only it.
class AlbertHFTokenizer(TokenizersBackend):
    """
    ALBERT's tokenizer, built on a SentencePiece model file (`spiece.model`), with exactly the original tokenization.

    A regular transformers tokenizer: `__call__` on texts or pairs, batching, padding and truncation strategies,
    `return_offsets_mapping` (offsets into the raw input), `word_ids()`, `save_pretrained` / `from_pretrained` and
    `AutoTokenizer`. Sequences are `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, with `token_type_ids` (0 for A, 1 for B)
    returned by default.

    Fill-mask input: text written directly after [MASK] (or any added token), with no space between, continues the
    masked word and gets no "▁" of its own, so text without spaces has no stray "▁" piece around [MASK]:
    "吾輩は[MASK]である。" -> "▁吾輩は" [MASK] "である" "。"; "the [MASK]." -> "▁the" [MASK] ".". Text after a space
    starts a new word as usual: "the [MASK] is" -> "▁the" [MASK] "▁is".

    Args:
        vocab_file: the SentencePiece model (`spiece.model`).
        tokenizer_file: a `tokenizer.json` saved by transformers' `AlbertTokenizer`, used when there is no
            `spiece.model` (transformers 5 saves only that file).
        do_lower_case: lowercase the input (the released models are uncased).
        remove_space: collapse runs of whitespace into one space and strip the ends.
        keep_accents: keep accents; by default the input is NFKD-normalized and combining characters are dropped.
        replace_quotes: turn `` and '' into " before anything else, as XLNet's tokenizer and transformers v4's
            AlbertTokenizer do. Off by default: google-research's ALBERT code (and so its pretraining data) keeps
            them, and SentencePiece then gives "``" as <unk> with the released vocabulary.
        bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token: the special tokens.
        word_segmenter: for a word-bounded vocabulary (Japanese, Chinese; see `albert_hf.vocabulary.train_tokenizer`),
            the segmenter whose words its pieces never cross: "fugashi" (MeCab with unidic-lite) or "jieba". The text
            is split into those words before the Unigram model, and a word that follows another without a space gets
            no "▁". Saved in tokenizer_config.json; loading it where the segmenter is not installed is an ImportError
            that says what to install. None: the original tokenization.
        word_segmenter_dictionary: the dictionary the vocabulary was trained with ("unidic-lite 1.0.8"), recorded on
            saving; a different one installed is a warning (its words, and so some ids, may differ).
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    model = Unigram

    def __init__(
        self,
        vocab_file: str | os.PathLike | None = None,
        tokenizer_file: str | os.PathLike | None = None,
        do_lower_case: bool = True,
        remove_space: bool = True,
        keep_accents: bool = False,
        replace_quotes: bool = False,
        bos_token: str = "[CLS]",
        eos_token: str = "[SEP]",
        unk_token: str = "<unk>",
        sep_token: str = "[SEP]",
        pad_token: str = "<pad>",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
        word_segmenter: str | None = None,
        word_segmenter_dictionary: str | None = None,
        **kwargs,
    ):
        special_tokens = [bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token]
        if vocab_file is not None:
            proto = read_sentencepiece_model(vocab_file)
        elif tokenizer_file is not None:
            proto = sentencepiece_model_from_tokenizer_json(tokenizer_file, map(str, special_tokens))
        else:
            raise ValueError(
                "AlbertHFTokenizer needs a SentencePiece model: pass vocab_file='.../spiece.model', or load a folder "
                "holding spiece.model (or the tokenizer.json of transformers' AlbertTokenizer) with from_pretrained."
            )
        self.sp_model_proto = proto.SerializeToString()
        self.vocab_file = str(vocab_file) if vocab_file is not None else None
        self.do_lower_case, self.remove_space, self.keep_accents = do_lower_case, remove_space, keep_accents
        self.replace_quotes = replace_quotes
        self.word_segmenter = word_segmenter
        if word_segmenter is not None:
            word_segmenter_dictionary = _checked_dictionary(word_segmenter, word_segmenter_dictionary, vocab_file)
            kwargs.update(word_segmenter=word_segmenter, word_segmenter_dictionary=word_segmenter_dictionary)
        self.word_segmenter_dictionary = word_segmenter_dictionary
        self._tokenizer = self._build_backend(proto)
        # Drop kwargs that only describe other backends (written by transformers' AlbertTokenizer).
        for key in ("add_prefix_space", "trim_offsets", "unk_id", "vocab", "_spm_precompiled_charsmap", "backend"):
            kwargs.pop(key, None)
        # transformers' AlbertTokenizer lists the user-defined symbols ( ) " - . as special tokens; they are pieces.
        user_defined = {piece.piece for piece in proto.pieces if piece.type == _USER_DEFINED}
        for key in ("extra_special_tokens", "additional_special_tokens"):
            if isinstance(kwargs.get(key), list):
                named = set(map(str, special_tokens))
                kwargs[key] = [token for token in kwargs[key] if str(token) not in user_defined | named]
        if isinstance(kwargs.get("added_tokens_decoder"), dict):
            kwargs["added_tokens_decoder"] = {
                index: token
                for index, token in kwargs["added_tokens_decoder"].items()
                if str(token) not in user_defined
            }
        super().__init__(
            do_lower_case=do_lower_case,
            remove_space=remove_space,
            keep_accents=keep_accents,
            replace_quotes=replace_quotes,
            bos_token=bos_token,
            eos_token=eos_token,
            unk_token=unk_token,
            sep_token=sep_token,
            pad_token=pad_token,
            cls_token=cls_token,
            mask_token=mask_token,
            **kwargs,
        )
        # Special tokens missing from the vocabulary got new ids in super().__init__: build the template now.
        self._tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{self.cls_token}:0 $A:0 {self.sep_token}:0",
            pair=f"{self.cls_token}:0 $A:0 {self.sep_token}:0 $B:1 {self.sep_token}:1",
            special_tokens=[(self.cls_token, self.cls_token_id), (self.sep_token, self.sep_token_id)],
        )

    @classmethod
    def convert_to_native_format(cls, trust_remote_code: bool = False, **kwargs) -> dict[str, Any]:
        # `from_pretrained` hook: the base class would convert spiece.model itself; we read it in __init__.
        return kwargs

    def _build_backend(self, proto) -> _Backend:
        vocab = [(piece.piece, piece.score) for piece in proto.pieces]
        user_defined = [piece.piece for piece in proto.pieces if piece.type == _USER_DEFINED]
        rust = Tokenizer(Unigram(vocab, unk_id=proto.trainer_spec.unk_id, byte_fallback=False))
        rust.normalizer = normalizers.Sequence(
            build_normalizer(
                proto.normalizer_spec.precompiled_charsmap,
                self.do_lower_case,
                self.remove_space,
                self.keep_accents,
                self.replace_quotes,
            )
        )
        rust.pre_tokenizer = build_pre_tokenizer(user_defined, (piece.piece for piece in proto.pieces))
        rust.decoder = decoders.Metaspace(replacement=SPIECE_UNDERLINE, prepend_scheme="always", split=True)
        return self._backend_of(rust, proto)

    def _backend_of(self, rust: Tokenizer, proto) -> _Backend:
        marks = _OriginalPieceMarks(proto)
        words = None
        if self.word_segmenter is not None:
            words = _WordBoundaries(word_segmenter_spec(self.word_segmenter, "this tokenizer"), marks)
        return _Backend(rust, marks, self._printable_ascii_normalizer(proto), words)

    def _printable_ascii_normalizer(self, proto) -> list[normalizers.Normalizer]:
        return build_printable_ascii_normalizer(
            proto.normalizer_spec.precompiled_charsmap, self.do_lower_case, self.replace_quotes
        )

    # -- plain texts to ids, the original's way ------------------------------------------------------------------------

    def encode_plain_texts(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of plain texts, no special tokens, computed as google-research's code computes them.

        The original's own steps: `preprocess_text` (whitespace, NFKD and accents, lower case; as this tokenizer's
        options say), SentencePiece's C++ encoder, and the re-split of pieces that end in "<digit>,". Where offsets,
        pairs and truncation are not needed, as in pretraining data, this is several times faster than `__call__`
        (`benchmarks/pretraining_data.py`), and it is the original exactly, ties between equal-score segmentations
        included. As in the original's data script, strings such as "[MASK]" or "<unk>" are plain text here, and
        tokens added with `add_tokens` are not looked for.
        """
        processor, digit_comma_ids = self._sentencepiece()
        prepared = [self._preprocess(text) for text in texts]
        if self.word_segmenter is not None:
            return [ids for _, ids, _ in self._encode_words(prepared, with_starts=False)]
        ids = processor.encode(prepared, num_threads=1)
        for index, text_ids in enumerate(ids):
            if not digit_comma_ids.isdisjoint(text_ids):  # the original re-splits these pieces
                ids[index] = [processor.piece_to_id(piece) for piece in self._resplit(processor, text_ids)]
        return ids

    def encode_plain_texts_with_starts(self, texts: Sequence[str]) -> list[tuple[str, list[int], list[int]]]:
        """[`encode_plain_texts`] with where each piece starts: (prepared text, ids, start of each piece).

        The prepared text is what SentencePiece encoded (`preprocess_text` applied: lower case, spaces collapsed);
        each start is a character offset into it, from SentencePiece's own alignment (so its NFKC normalization
        cannot shift it). The ids are those of `encode_plain_texts`: a re-split "1990," keeps the start of its piece
        for the digits and takes the comma's offset for ",". Whole-word masking uses the starts to find which piece
        begins each word of a word segmenter.

        With a word segmenter (a word-bounded vocabulary), the text is the one its segmenter read: the prepared text
        after the model's own normalization (SentencePiece's charsmap, spaces collapsed), and the starts point into
        it; segmenting that text again gives exactly the words the pieces stop at.
        """
        processor, digit_comma_ids = self._sentencepiece()
        prepared = [self._preprocess(text) for text in texts]
        if self.word_segmenter is not None:
            return self._encode_words(prepared)
        results = []
        for text, proto in zip(prepared, processor.encode(prepared, num_threads=1, return_type="proto")):
            # SentencePiece's offsets count bytes of UTF-8: turn them into character offsets.
            char_ends = list(itertools.accumulate(len(char.encode("utf-8")) for char in text))
            ids, starts = [], []
            for piece in proto.pieces:
                start = bisect.bisect_right(char_ends, piece.begin)
                if piece.id not in digit_comma_ids:
                    ids.append(piece.id)
                    starts.append(start)
                    continue
                sub_pieces = self._resplit(processor, [piece.id])
                ids += [processor.piece_to_id(sub_piece) for sub_piece in sub_pieces]
                comma = bisect.bisect_right(char_ends, piece.end - 1)
                starts += [start] * (len(sub_pieces) - 1) + [comma]
            results.append((text, ids, starts))
        return results

    def _encode_words(
        self, prepared: Sequence[str], with_starts: bool = True
    ) -> list[tuple[str, list[int], list[int]]]:
        """(the text the segmenter read, ids, start of each piece in that text) of prepared texts, for a tokenizer
        that carries a word segmenter: SentencePiece encodes the text's parts (`word_chunks`) one by one, a "▁" in
        front of the first and of each after a space only, and re-splits "<digit>," pieces as the original does.
        Without `with_starts`, the starts are left empty (and the parts encoded to ids alone, several times faster)."""
        processor, digit_comma_ids = self._sentencepiece()
        normalizer, part_processor, cuts = self._word_sentencepiece()
        texts = [normalizer.normalize(text).replace(SPIECE_UNDERLINE, " ") for text in prepared]
        parts = [
            (index, start, end) for index, text in enumerate(texts) for start, end in word_chunks(text, cuts(text))
        ]
        # The first part gets SentencePiece's dummy prefix; the processor of the parts adds none of its own.
        part_texts = [(" " if start == 0 else "") + texts[index][start:end] for index, start, end in parts]
        results: list[tuple[str, list[int], list[int]]] = [(text, [], []) for text in texts]
        if not with_starts:  # each distinct part once: a text's words repeat across texts
            distinct = list(dict.fromkeys(part_texts))
            ids_of = dict(zip(distinct, part_processor.encode(distinct, num_threads=1)))
            for (index, _, _), part_text in zip(parts, part_texts):
                part_ids = ids_of[part_text]
                if not digit_comma_ids.isdisjoint(part_ids):  # the original re-splits these pieces
                    part_ids = [processor.piece_to_id(piece) for piece in self._resplit(processor, part_ids)]
                results[index][1].extend(part_ids)
            return results
        encoded = part_processor.encode(part_texts, num_threads=1, return_type="proto")
        for (index, start, _), part_text, proto in zip(parts, part_texts, encoded):
            _, ids, starts = results[index]
            shift = start - (1 if start == 0 else 0)  # offsets in the part -> offsets in the text
            char_ends = list(itertools.accumulate(len(char.encode("utf-8")) for char in part_text))
            for piece in proto.pieces:
                piece_start = max(0, shift + bisect.bisect_right(char_ends, piece.begin))
                if piece.id not in digit_comma_ids:
                    ids.append(piece.id)
                    starts.append(piece_start)
                    continue
                sub_pieces = self._resplit(processor, [piece.id])
                ids += [processor.piece_to_id(sub_piece) for sub_piece in sub_pieces]
                comma = shift + bisect.bisect_right(char_ends, piece.end - 1)
                starts += [piece_start] * (len(sub_pieces) - 1) + [comma]
        return results

    def _word_sentencepiece(self):
        """For a word-bounded vocabulary: SentencePiece's normalizer of this model (no dummy prefix, spaces kept as
        spaces), a processor of the model that adds no dummy prefix and keeps a leading space (it encodes the parts
        of a text), and the function giving the word cuts of a text (the backend's own)."""
        cached = self.__dict__.get("_word_sentencepiece_processor")
        if cached is None:
            import sentencepiece as spm

            normalizer = spm.SentencePieceNormalizer(
                model_proto=self.sp_model_proto,
                add_dummy_prefix=False,
                escape_whitespaces=False,
                remove_extra_whitespaces=True,
            )
            proto = _model_proto_class().FromString(self.sp_model_proto)
            proto.normalizer_spec.add_dummy_prefix = False
            proto.normalizer_spec.remove_extra_whitespaces = False
            part_processor = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
            cuts = self._tokenizer._words.cuts
            cached = self.__dict__["_word_sentencepiece_processor"] = (normalizer, part_processor, cuts)
        return cached

    def _preprocess(self, text: str) -> str:
        """The original `preprocess_text`, with this tokenizer's options."""
        if self.replace_quotes:
            text = text.replace("``", '"').replace("''", '"')
        if self.remove_space:
            text = " ".join(text.strip().split())
        if not self.keep_accents and not text.isascii():  # ASCII text has no accent and is its own NFKD
            text = "".join(char for char in unicodedata.normalize("NFKD", text) if not unicodedata.combining(char))
        return text.lower() if self.do_lower_case else text

    def _sentencepiece(self):
        """SentencePiece's processor for this model, and the ids of its pieces that end in "<digit>,"."""
        cached = self.__dict__.get("_sentencepiece_processor")
        if cached is None:
            import sentencepiece as spm

            processor = spm.SentencePieceProcessor(model_proto=self.sp_model_proto)
            pieces = (processor.id_to_piece(index) for index in range(processor.get_piece_size()))
            digit_comma_ids = frozenset(index for index, piece in enumerate(pieces) if _is_digit_comma_piece(piece))
            cached = self.__dict__["_sentencepiece_processor"] = (processor, digit_comma_ids)
        return cached

    @staticmethod
    def _resplit(processor, ids: list[int]) -> list[str]:
        """The original's `encode_pieces` after SentencePiece: "▁1990," -> "▁1990" ","; "0," -> "0" ","."""
        pieces = []
        for piece in map(processor.id_to_piece, ids):
            if not _is_digit_comma_piece(piece):
                pieces.append(piece)
                continue
            sub_pieces = processor.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
            if piece[0] != SPIECE_UNDERLINE and sub_pieces[0][0] == SPIECE_UNDERLINE:
                sub_pieces = sub_pieces[1:] if len(sub_pieces[0]) == 1 else [sub_pieces[0][1:], *sub_pieces[1:]]
            pieces += [*sub_pieces, piece[-1]]
        return pieces

    # -- saving and pickling: the Python normalizer step cannot be serialized by `tokenizers` ------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_sentencepiece_processor", None)  # a C++ object; rebuilt on first use
        state.pop("_word_sentencepiece_processor", None)
        # The Rust pipeline as JSON (added tokens, padding and truncation included); the Python step is rebuilt.
        state["_tokenizer"] = self._tokenizer.routes["rust"].to_str()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        rust = Tokenizer.from_str(state["_tokenizer"])
        self.__dict__.update(state)
        self.__dict__.setdefault("word_segmenter", None)  # pickled before tokenizers carried segmenters
        proto = _model_proto_class().FromString(self.sp_model_proto)
        self._tokenizer = self._backend_of(rust, proto)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        """Write the SentencePiece model as `spiece.model`."""
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "spiece.model")
        with open(path, "wb") as file:
            file.write(self.sp_model_proto)
        return (path,)

    def save_pretrained(
        self,
        save_directory: str | os.PathLike,
        legacy_format: bool | None = None,
        filename_prefix: str | None = None,
        push_to_hub: bool = False,
        **kwargs: Any,
    ) -> tuple[str, ...]:
        """Save the tokenizer; with `push_to_hub`, the upload starts once every file is written.

        Stock by default: where transformers' tokenizer format can stand for this tokenizer (`stock_format_problem`
        is None) and the folder holds no model saved with albert_hf's code, the folder is one that transformers
        reads without any code of albert_hf ([`stock_tokenizer`]: `tokenizer.json`, `tokenizer_config.json`),
        with `spiece.model` and this tokenizer's settings beside, from which albert_hf loads the exact tokenizer
        ([`_save_stock_files`]). Beside a model saved with albert_hf's code (`config.json` of model_type
        "albert_hf", written first, as Trainer and albert_hf write it), the tokenizer keeps its code too, so that
        `trust_remote_code=True` gives the exact tokenizer with the model: transformers' save with albert_hf's code
        (`tokenization.py` and an `auto_map` when registered), `spiece.model` instead of a `tokenizer.json` (see
        `_Backend.tokenizer_json_left_out`), and the tokens added with `add_tokens` kept in `tokenizer_config.json`:
        transformers leaves them out of it for a tokenizer whose `tokenizer.json` holds them."""
        model_type = _model_type_beside(save_directory)
        if self.stock_format_problem() is None and model_type != "albert_hf":
            saved = self._save_stock_files(str(save_directory), filename_prefix)
            if push_to_hub:
                self._push_saved(save_directory, kwargs)
            return saved
        with self.backend_tokenizer.tokenizer_json_left_out():
            saved = super().save_pretrained(
                save_directory,
                legacy_format=legacy_format,
                filename_prefix=filename_prefix,
                push_to_hub=False,
                **kwargs,
            )
        prefix = filename_prefix + "-" if filename_prefix else ""
        config_file = os.path.join(save_directory, prefix + "tokenizer_config.json")
        with open(config_file, encoding="utf-8") as file:
            config = json.load(file)
        config["added_tokens_decoder"] = {
            str(index): token.__getstate__() for index, token in sorted(self.added_tokens_decoder.items())
        }
        with open(config_file, "w", encoding="utf-8") as file:
            file.write(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        not_written = os.path.join(save_directory, prefix + VOCAB_FILES_NAMES["tokenizer_file"])
        saved = tuple(name for name in saved if name != not_written)
        saved += self.save_vocabulary(str(save_directory), filename_prefix)
        if push_to_hub:
            self._push_saved(save_directory, kwargs)
        return saved

    def _push_saved(self, save_directory: str | os.PathLike, kwargs: dict[str, Any]) -> None:
        repo_id = kwargs.get("repo_id", str(save_directory).split(os.path.sep)[-1])
        hub_options = {name: kwargs[name] for name in ("commit_message", "private", "token") if name in kwargs}
        self.push_to_hub(repo_id, **hub_options)

    # -- transformers' own tokenizer format ------------------------------------------------------------------------

    def stock_format_problem(self) -> str | None:
        """Why transformers' tokenizer format (`tokenizer.json`, read without albert_hf's code) cannot stand for this
        tokenizer, or None when it can: its rules, but for the few [`stock_pipeline`] lists, are statements of that
        format. A tokenizer with a step the format has no place for (a word segmenter run before SentencePiece)
        answers with the reason, and is then saved with its code. `albert_hf.formats.stock_tokenizer_problem` asks
        every tokenizer this."""
        if self.word_segmenter is not None:
            return (
                f"its pieces stop at the words of the {self.word_segmenter} word segmenter, a step transformers' "
                "tokenizer format has no place for"
            )
        return None

    def stock_tokenizer(self) -> TokenizersBackend:
        """The tokenizer that transformers loads, without albert_hf, from the folder `save_pretrained` writes: a
        `TokenizersBackend` on [`stock_pipeline`], with this tokenizer's special and added tokens, sequence templates
        (token type ids included) and length and side settings."""
        rust = Tokenizer.from_str(self._tokenizer.routes["rust"].to_str())
        rust.no_truncation()
        rust.no_padding()
        return TokenizersBackend(
            tokenizer_object=stock_pipeline(rust),  # its added tokens, with their flags, come with it
            **self.special_tokens_map,
            model_input_names=list(self.model_input_names),
            model_max_length=self.model_max_length,
            padding_side=self.padding_side,
            truncation_side=self.truncation_side,
            clean_up_tokenization_spaces=self.clean_up_tokenization_spaces,
        )

    def _save_stock_files(self, save_directory: str, filename_prefix: str | None) -> tuple[str, ...]:
        """[`stock_tokenizer`]'s files, with this tokenizer's settings and added tokens in `tokenizer_config.json`
        (what albert_hf reads back, with `spiece.model`, into the exact tokenizer), and `spiece.model`.

        The config names this class. transformers resolves a tokenizer class it does not know to `TokenizersBackend`
        on the folder's `tokenizer.json` (beside transformers' ALBERT, or alone); where albert_hf is imported the name
        resolves to this class, so `AutoTokenizer` gives the exact tokenizer."""
        os.makedirs(save_directory, exist_ok=True)
        saved = tuple(self.stock_tokenizer().save_pretrained(save_directory, filename_prefix=filename_prefix))
        prefix = filename_prefix + "-" if filename_prefix else ""
        config_file = os.path.join(save_directory, prefix + "tokenizer_config.json")
        with open(config_file, encoding="utf-8") as file:
            config = json.load(file)
        config["tokenizer_class"] = type(self).__name__
        config.update(
            do_lower_case=self.do_lower_case,
            remove_space=self.remove_space,
            keep_accents=self.keep_accents,
            replace_quotes=self.replace_quotes,
        )
        config["added_tokens_decoder"] = {
            str(index): token.__getstate__() for index, token in sorted(self.added_tokens_decoder.items())
        }
        with open(config_file, "w", encoding="utf-8") as file:
            file.write(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return saved + self.save_vocabulary(save_directory, filename_prefix)


__all__ = [
    "AlbertHFTokenizer",
    "read_sentencepiece_model",
    "stock_pipeline",
]
