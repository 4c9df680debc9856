"""Options checked before any work, from one declaration.

Every numeric option declares its range once, where the option is declared: in the dataclass field's metadata
(`field(default=1, metadata={RANGE: COUNT, "help": ...})`) for the jobs' own arguments, in
[`TRAINING_ARGUMENT_RANGES`] (keyed by field name) for the fields of transformers' `TrainingArguments`, which albert_hf
does not declare, and as the argparse `type` (`COUNT.argument_type(int)`) for the commands that parse with argparse.
One function, [`check_ranges`], asks every declared range of every dataclass a job parses, on the values given and
again on those a preset or recipe fills: a value out of range is an [`OptionError`] naming the option, its range and
the value, before any data or model work. An unknown option names the closest known one ([`unknown_options`]).

This module imports nothing of the package but `errors`, so every command can ask it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import OptionError

# The key of a dataclass field's metadata that holds its `Range`.
RANGE = "range"

# Every job's file of options (YAML or JSON, names without --), read as the parser's defaults: the command line wins.
CONFIG_OPTION = "--config"
CONFIG_HELP = "A YAML or JSON file of options (names without --), e.g. a recipe of your own; the command line wins."


@dataclass(frozen=True)
class Range:
    """The values a numeric option accepts: finite numbers within the bounds, or one of `also` (special values such
    as `--max_steps -1`, "no limit"). None (an optional option left unset) is always accepted."""

    min: float | None = None  # value >= min
    above: float | None = None  # value > above
    max: float | None = None  # value <= max
    below: float | None = None  # value < below
    also: tuple[tuple[float, str], ...] = ()  # (value, meaning) accepted besides the bounds

    def describe(self) -> str:
        low = (
            f"at least {self.min:g}"
            if self.min is not None
            else f"above {self.above:g}"
            if self.above is not None
            else ""
        )
        high = (
            f"at most {self.max:g}"
            if self.max is not None
            else f"below {self.below:g}"
            if self.below is not None
            else ""
        )
        bounds = " and ".join(part for part in (low, high) if part) or "a finite number"
        special = "".join(f"{value:g} ({meaning}) or " for value, meaning in self.also)
        return special + bounds

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused (a phrase: "must be at least 1, got 0"), or None."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {value!r}"
        if any(value == special for special, _ in self.also):
            return None
        inside = (
            math.isfinite(value)
            and (self.min is None or value >= self.min)
            and (self.above is None or value > self.above)
            and (self.max is None or value <= self.max)
            and (self.below is None or value < self.below)
        )
        return None if inside else f"must be {self.describe()}, got {value!r}"

    def argument_type(self, kind: type):
        """An argparse `type` reading `kind` (int or float) and refusing values outside the range."""

        def parse(text: str):
            try:
                value = kind(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected {kind.__name__}, got {text!r}") from None
            problem = self.problem(value)
            if problem:
                raise argparse.ArgumentTypeError(problem)
            return value

        parse.__name__ = kind.__name__
        return parse


# The range vocabulary of the package's options.
COUNT = Range(min=1)  # sizes, steps, lengths, passes
NON_NEGATIVE = Range(min=0)
POSITIVE = Range(above=0)  # rates, epochs, scales
PROBABILITY = Range(min=0, max=1)
FRACTION = Range(min=0, below=1)  # a share that cannot be the whole: dropout, warm-up share, smoothing
SHARE = Range(above=0, below=1)  # a part of the data that leaves some on both sides
STEPS = Range(min=1, also=((-1, "no limit"),))
SEED = Range(min=0, max=2**32 - 1)  # NumPy's seeds

# The fields of transformers' `TrainingArguments` the jobs read, by name (albert_hf declares none of them itself; a
# subclass that redeclares one without a range of its own keeps this one).
TRAINING_ARGUMENT_RANGES: dict[str, Range] = {
    "max_steps": STEPS,
    "num_train_epochs": POSITIVE,
    "per_device_train_batch_size": COUNT,
    "per_device_eval_batch_size": COUNT,
    "gradient_accumulation_steps": COUNT,
    "eval_accumulation_steps": COUNT,
    "learning_rate": NON_NEGATIVE,  # 0: steps that change nothing (an evaluation through the training loop)
    "warmup_steps": NON_NEGATIVE,  # below 1: a share of the steps
    "weight_decay": NON_NEGATIVE,
    "adam_beta1": FRACTION,
    "adam_beta2": FRACTION,
    "adam_epsilon": POSITIVE,
    "max_grad_norm": NON_NEGATIVE,  # 0: no clipping
    "label_smoothing_factor": FRACTION,
    "logging_steps": POSITIVE,  # below 1: a share of the steps
    "eval_steps": POSITIVE,
    "save_steps": POSITIVE,
    "eval_delay": NON_NEGATIVE,
    "save_total_limit": COUNT,
    "seed": SEED,
    "data_seed": SEED,
    "dataloader_num_workers": NON_NEGATIVE,
    "dataloader_prefetch_factor": COUNT,
    "ddp_timeout": COUNT,
}


def declared_range(dataclass_type: type, field: dataclasses.Field) -> Range | None:
    """The range `field` of `dataclass_type` declares: its metadata's, else the table's for TrainingArguments."""
    if RANGE in field.metadata:
        return field.metadata[RANGE]
    if any(base.__name__ == "TrainingArguments" for base in dataclass_type.__mro__):
        return TRAINING_ARGUMENT_RANGES.get(field.name)
    return None


def range_problems(dataclass_type: type, values: Mapping[str, Any]) -> list[str]:
    """'--name <problem>' for each value of `values` (field name -> value) out of its field's declared range."""
    problems = []
    for field in dataclasses.fields(dataclass_type):
        declared = declared_range(dataclass_type, field)
        if declared is None or field.name not in values:
            continue
        items = values[field.name]
        for value in items if isinstance(items, (list, tuple)) else [items]:
            if problem := declared.problem(value):
                problems.append(f"--{field.name} {problem}")
    return problems


def check_ranges(arguments: Iterable[tuple[type, Mapping[str, Any]]]) -> None:
    """Refuse, in one message, every value out of its declared range; `arguments` are (dataclass type, field name
    -> value) pairs: the values of a command line before the dataclasses are built, or of built ones
    ([`check_arguments`])."""
    problems = [problem for dataclass_type, values in arguments for problem in range_problems(dataclass_type, values)]
    if problems:
        raise OptionError("; ".join(problems) + ".")


def check_arguments(*arguments: Any) -> None:
    """[`check_ranges`] of built argument dataclasses."""
    check_ranges((type(a), {f.name: getattr(a, f.name) for f in dataclasses.fields(a)}) for a in arguments)


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name `name` most likely misspells, or None."""
    matches = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_options(items: list[str], known: Iterable[str]) -> str:
    """The message for command-line items no option reads: each unknown option with the closest known one."""
    known = sorted(known)
    parts = []
    for item in items:
        if not item.startswith("-"):
            continue
        name = item.split("=", 1)[0]
        guess = closest(name.replace("-", "_").lstrip("_"), [k.lstrip("-") for k in known])
        parts.append(f"{name}" + (f" (did you mean --{guess}?)" if guess else ""))
    if not parts:
        return f"unexpected values {items}"
    return "unknown option" + ("s " if len(parts) > 1 else " ") + ", ".join(parts)


class RefusingParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are `OptionError`s: `albert-hf` prints them as one line, with exit status 2,
    instead of argparse's usage text (hundreds of lines for the TrainingArguments of a job)."""

    def error(self, message: str):
        raise OptionError(message)


# --------------------------------------------------------------------------------------------------------------------
# The two commands that parse with argparse: their options here, where `albert-hf <command> --help` reads them without
# loading the libraries the commands work with.
# --------------------------------------------------------------------------------------------------------------------

# The character coverage of the ALBERT vocabulary recipe (google-research/albert README, `spm_train` command line).
ALBERT_CHARACTER_COVERAGE = 0.99995
TRAIN_TOKENIZER_DESCRIPTION = "Train a SentencePiece vocabulary with the ALBERT recipe and write a tokenizer folder."
# `albert-hf train-tokenizer --word_segmenter`: the segmenters a tokenizer can carry (albert_hf.tokenization's
# WORD_SEGMENTERS), "auto" and "none".
WORD_BOUNDED_CHOICES = ("auto", "none", "fugashi", "jieba")
# What `albert-hf export --quantize` writes besides the float model.
QUANTIZE_CHOICES = ("int8",)
# What `albert-hf export --format` writes: ONNX files, or sentence-transformers' layout on a stock folder.
EXPORT_FORMATS = ("onnx", "sentence-transformers")
# How `--format sentence-transformers` pools token embeddings into one vector (`albert_hf.convert.POOLING_MODES`).
POOLING_CHOICES = ("mean", "cls", "max")


def train_tokenizer_parser() -> argparse.ArgumentParser:
    """The options of `albert-hf train-tokenizer` (the command, with its output-folder guard, is
    `albert_hf.tasks.folder_commands.train_tokenizer_main`; `albert_hf.vocabulary.run_train_tokenizer` does the
    work)."""
    parser = RefusingParser(prog="albert-hf train-tokenizer", description=TRAIN_TOKENIZER_DESCRIPTION)
    parser.add_argument(
        "inputs",
        nargs="*",
        help="data files, folders or globs: text (one sentence or paragraph per line), json/jsonl, csv/tsv or "
        "parquet (one text per row, in --text_column); or none, with --dataset_name",
    )
    parser.add_argument(
        "--dataset_name", help="a datasets Hub name, a local dataset folder, or a folder written by save_to_disk"
    )
    parser.add_argument("--dataset_config_name", help="the configuration of --dataset_name (e.g. 20231101.ja)")
    parser.add_argument("--dataset_split", default="train", help="the split of --dataset_name to read (default train)")
    parser.add_argument("--text_column", default="text", help="the column of the text in rows (default text)")
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="read the rows while training instead of preparing the whole dataset first (large Hub corpora)",
    )
    parser.add_argument("--output_dir", required=True, help="folder to write spiece.model and tokenizer_config.json")
    parser.add_argument("--vocab_size", type=COUNT.argument_type(int), default=30000)
    parser.add_argument("--no_lowercase", action="store_true", help="keep case (e.g. for Japanese or cased models)")
    accents = parser.add_mutually_exclusive_group()
    accents.add_argument(
        "--keep_accents",
        action="store_const",
        const=False,
        dest="strip_accents",
        help="no NFKD accent stripping (default: chosen from the text, kept for e.g. Japanese)",
    )
    accents.add_argument(
        "--strip_accents",
        action="store_const",
        const=True,
        dest="strip_accents",
        help="strip accents as ALBERT does; an error on text whose script it would damage",
    )
    parser.add_argument(
        "--character_coverage", type=Range(above=0, max=1).argument_type(float), default=ALBERT_CHARACTER_COVERAGE
    )
    parser.add_argument(
        "--input_sentence_size",
        type=NON_NEGATIVE.argument_type(int),
        default=10_000_000,
        help="sentences SentencePiece samples (0: all)",
    )
    parser.add_argument(
        "--num_threads", type=COUNT.argument_type(int), help="SentencePiece's training threads (default: every core)"
    )
    parser.add_argument(
        "--word_segmenter",
        choices=WORD_BOUNDED_CHOICES,
        default="auto",
        help="pieces stop at the words of this segmenter, and the tokenizer carries it: fugashi (MeCab, unidic-lite) "
        "or jieba; auto (default): the one of the text's script (Japanese, Chinese) where it is installed, none for "
        "spaced scripts; none: pieces may run across words",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    return parser


def export_parser() -> argparse.ArgumentParser:
    """The options of `albert-hf export` (the command, with its output-folder guard, is
    `albert_hf.tasks.folder_commands.export_main`; `albert_hf.onnx_export.run_export` does the work)."""
    parser = RefusingParser(
        prog="albert-hf export",
        description="Export a saved albert_hf model to ONNX (shared layer stored once), optionally quantized to int8 "
        "(onnxruntime dynamic quantization, and torch dynamic quantization of the Linear layers); or, with --format "
        "sentence-transformers, as a sentence-transformers model (its backbone in transformers' own format, and a "
        "pooling module) that SentenceTransformer(folder) loads without albert_hf.",
    )
    parser.add_argument("--model_name_or_path", required=True, help="folder saved with save_pretrained")
    parser.add_argument("--output_dir", required=True, help="folder for model.onnx (+ int8 files)")
    parser.add_argument("--format", choices=EXPORT_FORMATS, default="onnx", help="what to write (default onnx)")
    parser.add_argument("--quantize", choices=QUANTIZE_CHOICES, default=None, help="also write int8 models")
    parser.add_argument("--no_pytorch_int8", action="store_true", help="with --quantize: skip the PyTorch int8 file")
    parser.add_argument(
        "--pooling",
        choices=POOLING_CHOICES,
        default="mean",
        help="sentence-transformers: how token embeddings become one vector (default mean, under the attention mask)",
    )
    parser.add_argument("--normalize", action="store_true", help="sentence-transformers: unit-length embeddings")
    parser.add_argument(
        "--max_seq_length",
        type=COUNT.argument_type(int),
        default=None,
        help="sentence-transformers: where inputs are truncated (default: the model's max_position_embeddings)",
    )
    return parser
