"""Training a SentencePiece vocabulary with the ALBERT recipe: `train_tokenizer` and `albert-hf train-tokenizer`.

Kept apart from tokenization.py, which travels with every checkpoint as remote code: loading a tokenizer needs none of
this (nor SentencePiece's trainer), and a change to how vocabularies are trained does not change the code that
checkpoints carry.
"""

from __future__ import annotations

import argparse
import collections
import functools
import itertools
import os
import random
import re
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

import datasets
from tokenizers import normalizers
from transformers.utils import logging

from .data.sources import TextRows, data_format, expand_data_files, load_rows, row_places, source_name
from .data.text_checks import decode_line
from .data.word_segmentation import SEGMENTERS, unspaced_language
from .errors import DataError, UserError
from .options import ALBERT_CHARACTER_COVERAGE, WORD_BOUNDED_CHOICES, train_tokenizer_parser
from .output_files import staged_folder
from .tokenization import (
    WORD_SEGMENTERS,
    AlbertHFTokenizer,
    build_normalizer,
    read_sentencepiece_model,
    word_chunks,
    word_cuts,
    word_segmenter_spec,
)

logger = logging.get_logger(__name__)

# The ALBERT vocabulary recipe (google-research/albert README, `spm_train` command line).
ALBERT_CONTROL_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
ALBERT_USER_DEFINED_SYMBOLS = ("(", ")", '"', "-", ".", "–", "£", "€")


# Accent stripping (NFKD, then every combining character dropped) is meant for the letters of cased scripts: é -> e,
# Ä -> a. Scripts without case have no accents in that sense, and there it deletes parts of letters: every dakuten
# and handakuten of Japanese kana (が -> か, パ -> ハ, ヴ -> ウ), the virama and nukta of Indic scripts (नमस्ते ->
# नमसते), the vowel points of Hebrew and Arabic. Hangul is decomposed into jamo but nothing is dropped, and
# SentencePiece's NFKC composes it back; Chinese characters and most kanji have no decomposition at all.
# Lower-casing never changes a character of a script without case (checked over all of Unicode in the tests).
# `train_tokenizer` therefore counts the characters of caseless scripts (Unicode letters of category Lo/Lm, and
# combining marks written on them) that stripping would change, and keeps accents when they reach this share of the
# text: a Japanese corpus is about 7% such characters (a dozen dakuten kana are among its most frequent), an English
# one with a few names in kana or Devanagari stays far below and keeps the ALBERT recipe.
SCRIPT_DAMAGE_THRESHOLD = 1e-3

# What a vocabulary is trained on: data files (text, or any format of `sources.expand_data_files`: json, csv, parquet,
# folders, globs), a `datasets` Dataset or IterableDataset, or the checked texts of any source (`sources.TextRows`).
TokenizerInput = str | Path | list | datasets.Dataset | datasets.IterableDataset | TextRows


@functools.cache
def _accent_stripping_targets() -> tuple[re.Pattern, dict[str, str]]:
    """(a regex matching every character that accent stripping changes, {such character: its base letter}).

    A standalone combining mark (as in NFD text, or the half-width dakuten ﾞ) has "" as its base: whether it damages
    a script depends on the letter it is written on.
    """
    bases: dict[str, str] = {}
    for code_point in range(sys.maxunicode + 1):
        char = chr(code_point)
        if unicodedata.decomposition(char) or unicodedata.combining(char):  # the others NFKD leaves alone
            decomposed = unicodedata.normalize("NFKD", char)
            kept = _strip_accents(decomposed)
            if kept != decomposed:
                bases[char] = kept[:1]
    return re.compile("[" + "".join(re.escape(char) for char in bases) + "]"), bases


def _has_no_case(char: str) -> bool:
    return unicodedata.category(char) in ("Lo", "Lm")


def count_accent_stripping_damage(texts: Iterable[str]) -> tuple[int, int, dict[str, int]]:
    """What accent stripping would do to characters of scripts without case, over `texts`.

    Returns (damaged characters, non-space characters, {damaged character: count}). A character is damaged when
    stripping changes it and it is, or is a mark written on, a letter without case (Unicode Lo/Lm: kana, kanji,
    Indic, Hebrew, Arabic, Thai, ...). é -> e on a Latin letter is what stripping is for and is not counted.
    """
    pattern, bases = _accent_stripping_targets()
    damaged, total, examples = 0, 0, {}
    for text in texts:
        total += len("".join(text.split()))
        for match in pattern.finditer(text):
            char, base = match.group(), bases[match.group()]
            if not base:  # a standalone mark: find the letter it is written on
                position = match.start() - 1
                while position >= 0 and unicodedata.category(text[position]).startswith("M"):
                    position -= 1
                base = bases.get(text[position]) or text[position] if position >= 0 else ""
            if base and _has_no_case(base):
                damaged += 1
                examples[char] = examples.get(char, 0) + 1
    return damaged, total, examples


def choose_accent_stripping(
    texts: Iterable[str], strip_accents: bool | None, threshold: float = SCRIPT_DAMAGE_THRESHOLD
) -> bool:
    """Whether to strip accents for a vocabulary trained on `texts`: `strip_accents` when given, else decided here.

    Unset (None): strip (the ALBERT recipe) unless stripping would change at least `threshold` of the characters by
    damaging scripts without case, then keep accents and say so in the log. True on such text is an error that names
    --keep_accents: the vocabulary would silently merge words (パン and ハン, だいぶ and たいふ).
    """
    if strip_accents is False:
        return False
    damaged, total, examples = count_accent_stripping_damage(texts)
    if not damaged:
        return True
    share = damaged / max(total, 1)
    common = ", ".join(
        f"{char} -> {_strip_accents(char) or '(deleted)'} ({count}x)"
        for char, count in sorted(examples.items(), key=lambda item: -item[1])[:5]
    )
    message = (
        f"accent stripping (NFKD, combining characters dropped) would change {damaged} of {total} characters "
        f"({share:.2%}) of scripts that have no accents to strip: {common}"
    )
    if share < threshold:
        logger.warning(
            "%s. Below %.2g%% of the text, so accents are stripped as the ALBERT recipe does; pass --keep_accents "
            "(strip_accents=False) to keep them.",
            message,
            100 * threshold,
        )
        return True
    if strip_accents:
        raise UserError(
            f"{message}. The vocabulary would merge different words. Pass --keep_accents "
            "(strip_accents=False), or leave the option unset to have it chosen from the text."
        )
    logger.warning(
        "%s. Accents are kept for this text (as --keep_accents does); the tokenizer records it "
        "(keep_accents=True in tokenizer_config.json).",
        message,
    )
    return False


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


# Lines whose script decides `word_segmenter="auto"` (as the first 200 documents decide whole-word masking's).
SCRIPT_SAMPLE_LINES = 2000


def choose_word_segmenter(lines: Iterable[str], word_segmenter: str | None) -> str | None:
    """The segmenter whose words the pieces of a vocabulary trained on `lines` stop at, or None (pieces may run
    across words).

    "auto" (the default): the segmenter of the text's script when the text is written without spaces (fugashi for
    Japanese, jieba for Chinese: those of whole-word masking, `unspaced_language` on the first lines), where it is
    installed; where it is not, a warning says what the vocabulary then costs and what to install. "none" or None:
    no segmenter. "fugashi" or "jieba": that one, whatever the text; missing, it is an ImportError with the install
    command (`albert-hf` exits with status 4).
    """
    if word_segmenter in (None, "none"):
        return None
    if word_segmenter not in WORD_BOUNDED_CHOICES:
        raise UserError(f"word_segmenter {word_segmenter!r}: expected one of {', '.join(WORD_BOUNDED_CHOICES)}.")
    if word_segmenter != "auto":
        word_segmenter_spec(word_segmenter, f"--word_segmenter {word_segmenter}")
        return word_segmenter
    sample = [line for line in itertools.islice(lines, SCRIPT_SAMPLE_LINES) if line.strip()]
    language = unspaced_language(sample)
    if language is None:
        return None
    spec = WORD_SEGMENTERS[SEGMENTERS[language].option]
    missing = spec.missing()
    if missing is not None:
        logger.warning(
            "The text is %s, written without spaces, and its word segmenter %s is not installed (%s): the pieces "
            "will run across words, and an answer or entity that starts or ends inside a piece cannot be "
            "predicted. For pieces that stop at words: %s.",
            SEGMENTERS[language].language,
            spec.label,
            missing,
            spec.install_command(),
        )
        return None
    logger.info(
        "Word-bounded vocabulary: the text is %s, its pieces stop at the words of %s (--word_segmenter none: "
        "pieces may run across words).",
        SEGMENTERS[language].language,
        spec.label,
    )
    return spec.name


def count_word_parts(texts: Iterable[str], word_segmenter: str) -> collections.Counter:
    """How often each part of `texts` occurs, as a word-bounded tokenizer encodes them (`tokenization.word_chunks`):
    each text (normalized by this tokenizer's steps) read as SentencePiece's nmt_nfkc rule normalizes it, split at
    the words of `word_segmenter` and before each space; a part after a space, or at the start of a text, keeps a
    leading space, which SentencePiece writes "▁". What SentencePiece learns a word-bounded vocabulary from."""
    import sentencepiece as spm

    spec = word_segmenter_spec(word_segmenter, "a word-bounded vocabulary")
    normalizer = spm.SentencePieceNormalizer(
        rule_name="nmt_nfkc", add_dummy_prefix=False, escape_whitespaces=False, remove_extra_whitespaces=True
    )
    counts: collections.Counter = collections.Counter()
    for text in texts:
        text = normalizer.normalize(text).replace("▁", " ")
        for start, end in word_chunks(text, word_cuts(spec.segment, text, spec.label)):
            counts[(" " if start == 0 else "") + text[start:end]] += 1
    return counts


def _sample(texts: Iterable[str], size: int, seed: int = 0) -> Iterable[str]:
    """At most `size` of `texts`, uniformly (reservoir sampling; 0: all), as SentencePiece samples its sentences."""
    if not size:
        return texts
    generator, kept = random.Random(seed), []
    for seen, text in enumerate(texts):
        if seen < size:
            kept.append(text)
        elif (slot := generator.randrange(seen + 1)) < size:
            kept[slot] = text
    return kept


def train_tokenizer(
    input: TokenizerInput,
    output_dir: str | Path,
    vocab_size: int = 30000,
    lowercase: bool = True,
    strip_accents: bool | None = None,
    text_column: str = "text",
    character_coverage: float = ALBERT_CHARACTER_COVERAGE,
    user_defined_symbols: Iterable[str] = ALBERT_USER_DEFINED_SYMBOLS,
    input_sentence_size: int = 10_000_000,
    show_progress: bool = True,
    num_threads: int | None = None,
    word_segmenter: str | None = "auto",
) -> AlbertHFTokenizer:
    """Train a SentencePiece vocabulary with the ALBERT recipe and write a tokenizer folder.

    The recipe of google-research/albert: Unigram, `vocab_size` pieces, `<pad>`=0 `<unk>`=1 `[CLS]`=2 `[SEP]`=3
    `[MASK]`=4, the user-defined symbols ( ) " - . – £ €, character coverage 0.99995, sentences shuffled and at most
    `input_sentence_size` of them. The text is normalized exactly as the tokenizer will normalize it (whitespace
    collapsed, NFKD and accents dropped if `strip_accents`, lowercased unless `lowercase=False`), so the vocabulary
    is learned on what the tokenizer will see.

    `strip_accents=None` (the default) strips accents as ALBERT does unless the text is in a script that stripping
    would damage (kana, Indic scripts, ...: see [`choose_accent_stripping`]); then accents are kept and the log says
    so. `strip_accents=True` on such text is an error. Lower-casing never changes a script without case, so it stays
    the user's choice (`lowercase=False` for a cased model).

    Word-bounded vocabularies (`word_segmenter`, see [`choose_word_segmenter`]): for text written without spaces
    (Japanese, Chinese), by default, the pieces never cross the words of the segmenter whole-word masking uses
    (fugashi with unidic-lite, jieba), and the tokenizer carries that segmenter: it splits every text into those
    words before its pieces, with a "▁" only where the text has a space, and tokenizer_config.json names the
    segmenter and its dictionary. SentencePiece learns the vocabulary from the words themselves: each distinct part
    of the text as the tokenizer encodes it ([`count_word_parts`]), with its count (its TSV input). An answer or an
    entity that starts and ends at word boundaries is then always a whole number of pieces. Measured against
    SentencePiece's own `pretokenization_delimiter` (whose seed pieces stop at the delimiter, but whose training does
    not) in `benchmarks/word_bounded_vocabulary.py`: the TSV of words gives fewer tokens per character.

    Args:
        input: text files (one sentence or paragraph per line); data files of another format (json/jsonl, csv/tsv,
            parquet; folders and globs of them), one text per row; a `datasets.Dataset` or `IterableDataset`; or the
            texts of any source of `sources.load_rows` as `sources.TextRows`. Rows whose text is empty are skipped
            (and counted in the log); a text that is None or not a string is an error naming the row.
        output_dir: where `spiece.model`, `spiece.vocab` and `tokenizer_config.json` are written.
        text_column: the column holding the text of rows (data files other than text, or a Dataset).
        show_progress: a progress bar while reading the input and SentencePiece's log while training.

    Returns:
        The trained tokenizer, already saved in `output_dir` (`AutoTokenizer.from_pretrained(output_dir)` loads it).
    """
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2
    from tqdm.auto import tqdm

    output_dir = Path(output_dir)
    if vocab_size <= len(ALBERT_CONTROL_SYMBOLS) + 2:
        raise UserError(f"vocab_size must leave room for pieces beyond the 5 special ones, got {vocab_size}")
    lines = _training_lines(input, text_column)
    strip_accents = choose_accent_stripping(lines, strip_accents)
    word_segmenter = choose_word_segmenter(lines, word_segmenter)
    # The tokenizer's own normalizer (minus SentencePiece's step, which spm_train applies itself).
    normalizer = normalizers.Sequence(
        build_normalizer(b"", do_lower_case=lowercase, remove_space=True, keep_accents=not strip_accents)
    )

    read = 0

    def sentences() -> Iterator[str]:
        nonlocal read
        for text in tqdm(lines, desc="reading text", unit=" lines", disable=not show_progress):
            if text := normalizer.normalize_str(text):
                read += 1
                yield text

    if word_segmenter is None:
        source = dict(sentence_iterator=sentences(), input_sentence_size=input_sentence_size)
    else:
        source = _word_bounded_source(_sample(sentences(), input_sentence_size), word_segmenter)
    model = _TrainingOutput()
    try:
        spm.SentencePieceTrainer.train(
            model_writer=model,
            model_type="unigram",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            control_symbols=list(ALBERT_CONTROL_SYMBOLS),
            user_defined_symbols=list(user_defined_symbols),
            max_sentence_length=1 << 24,  # spm skips longer lines (default 4192 bytes); keep whole paragraphs
            shuffle_input_sentence=True,
            normalization_rule_name="nmt_nfkc",
            num_threads=num_threads or os.cpu_count() or 1,
            minloglevel=0 if show_progress else 2,
            **source,
        )
    except RuntimeError as error:  # e.g. "Vocabulary size too high (600). Please set it to a value <= 410."
        if not read:
            raise DataError(f"{_input_name(input)}: no text found (every line is empty or blank)") from error
        raise DataError(f"{_input_name(input)}: SentencePiece cannot train on this text: {error}") from error
    proto = sentencepiece_model_pb2.ModelProto.FromString(model.data)
    if word_segmenter is not None:
        # Trained on words, each without a "▁" of its own; the tokenizer puts one at the start of a text and after a
        # space, and collapses spaces, as SentencePiece does for any text.
        proto.normalizer_spec.add_dummy_prefix = proto.normalizer_spec.remove_extra_whitespaces = True
    # Only now, and as a whole (`staged_folder`): a failed training leaves no folder behind, and a write that fails
    # or is interrupted (a full disk, Ctrl-C, a kill) publishes none of the files.
    settings = dict(do_lower_case=lowercase, keep_accents=not strip_accents, word_segmenter=word_segmenter)
    with staged_folder(output_dir) as staging:
        model_file = staging.path / "spiece.model"
        model_file.write_bytes(proto.SerializeToString())
        proto = read_sentencepiece_model(model_file)
        (staging.path / "spiece.vocab").write_text(
            "".join(f"{piece.piece}\t{piece.score:g}\n" for piece in proto.pieces), encoding="utf-8"
        )
        AlbertHFTokenizer(vocab_file=str(model_file), **settings).save_pretrained(staging.path)
    return AlbertHFTokenizer(vocab_file=str(staging.published["spiece.model"]), **settings)


def _word_bounded_source(texts: Iterable[str], word_segmenter: str) -> dict:
    """SentencePiece's input for a word-bounded vocabulary: each distinct part of the texts ([`count_word_parts`])
    with its count, as TSV, normalized alone and with no dummy "▁" (a part after a space has its own)."""
    counts = count_word_parts(texts, word_segmenter)
    logger.info("Word-bounded vocabulary: %d words, %d distinct", sum(counts.values()), len(counts))
    return dict(
        sentence_iterator=iter([f"{part}\t{count}" for part, count in counts.items()]),
        input_format="tsv",
        input_sentence_size=0,  # the texts are sampled already; these are their distinct words
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
    )


def _input_name(source: TokenizerInput) -> str:
    """The input of `train_tokenizer` as messages name it: its files, or the dataset."""
    if isinstance(source, (str, Path)):
        return str(source)
    if isinstance(source, list):
        return ", ".join(map(str, source))
    return getattr(source, "source", None) or "the dataset"


class _TrainingOutput:
    """`model_writer` for SentencePieceTrainer: keeps the serialized model in memory."""

    data: bytes = b""

    def write(self, data: bytes) -> None:
        self.data += data


def _training_lines(source: TokenizerInput, text_column: str) -> Iterable[str]:
    """The lines to learn from, read anew each time they are iterated (once to choose accent stripping, once to train).

    Text files keep their own reader (one sentence or paragraph per line, errors naming file and line); files of the
    other formats of `sources.expand_data_files` (folders and globs too) are read as rows through `load_rows`, checked
    by `TextRows`. A row's text is cut at its line breaks, as if the rows were written to a text file: SentencePiece
    learns from (and samples `input_sentence_size` of) sentences or paragraphs, not whole articles.
    """
    if isinstance(source, (str, Path)):
        source = [source]
    if isinstance(source, list):
        files = expand_data_files(source)
        if data_format(files) == "text":
            return _TextFileLines(files)
        name = source_name(data_files=source)
        source = TextRows(load_rows(data_files=files), text_column, name, places=row_places(files, name))
    elif isinstance(source, (datasets.Dataset, datasets.IterableDataset)):
        source = TextRows(source, text_column, "the dataset")
    elif not isinstance(source, TextRows):
        raise TypeError(f"input must be a path, a list of paths or a datasets.Dataset, got {type(source).__name__}")
    return _RowLines(source)


class _TextFileLines:
    """The lines of text files, each time it is iterated."""

    def __init__(self, files: list[str]):
        self.files = files

    def __iter__(self) -> Iterator[str]:
        for path in map(Path, self.files):
            with path.open("rb") as file:
                for line_number, raw in enumerate(file, 1):
                    yield decode_line(raw, path, line_number)  # UTF-8, no NUL: the reader contract


class _RowLines:
    """The lines of the texts of rows, each time it is iterated."""

    def __init__(self, texts: TextRows):
        self.texts = texts

    def __iter__(self) -> Iterator[str]:
        for text in self.texts:
            yield from text.splitlines()


def run_train_tokenizer(args: argparse.Namespace) -> int:
    """Train and save the tokenizer of parsed `train_tokenizer_parser` options; the exit code."""
    tokenizer = train_tokenizer(
        _command_line_input(args),
        args.output_dir,
        vocab_size=args.vocab_size,
        lowercase=not args.no_lowercase,
        strip_accents=args.strip_accents,
        character_coverage=args.character_coverage,
        input_sentence_size=args.input_sentence_size,
        show_progress=not args.quiet,
        num_threads=args.num_threads,
        text_column=args.text_column,
        word_segmenter=args.word_segmenter,
    )
    words = f", words from {tokenizer.word_segmenter}" if tokenizer.word_segmenter else ""
    print(
        f"wrote {args.output_dir}: {len(tokenizer)} tokens (lowercase={tokenizer.do_lower_case}, "
        f"keep_accents={tokenizer.keep_accents}{words})"
    )
    return 0


def _command_line_input(args: argparse.Namespace) -> TokenizerInput:
    """Data files as `train_tokenizer` reads them (text files line by line); a dataset, or a stream, as checked rows."""
    if args.inputs and not (args.dataset_name or args.dataset_config_name or args.streaming):
        return [Path(path) for path in args.inputs]
    source = {
        "data_files": args.inputs or None,
        "dataset_name": args.dataset_name,
        "dataset_config_name": args.dataset_config_name,
    }
    rows = load_rows(**source, split=args.dataset_split, streaming=args.streaming)
    name = source_name(**source)
    return TextRows(rows, args.text_column, name, places=row_places(args.inputs or None, name))


__all__ = [
    "ALBERT_CHARACTER_COVERAGE",
    "ALBERT_CONTROL_SYMBOLS",
    "ALBERT_USER_DEFINED_SYMBOLS",
    "choose_accent_stripping",
    "choose_word_segmenter",
    "count_accent_stripping_damage",
    "count_word_parts",
    "train_tokenizer",
    "run_train_tokenizer",
    "train_tokenizer_parser",
]
