"""Options checked before any work, from one declaration, and the one parser of every job.

Every numeric option declares its range once, where the option is declared: in the dataclass field's metadata
(`field(default=1, metadata={RANGE: COUNT, "help": ...})`) for the jobs' own arguments, in
[`TRAINING_ARGUMENT_RANGES`] (keyed by field name) for the fields of transformers' `TrainingArguments`, which albert_hf
does not declare, and as the argparse `type` (`COUNT.argument_type(int)`) for the commands that parse with argparse.
One function, [`check_ranges`], asks every declared range of every dataclass a job parses, on the values given and
again on those a preset or recipe fills: a value out of range is an [`OptionError`] naming the option, its range and
the value, before any data or model work. An unknown option names the closest known one ([`unknown_options`]).

[`job_parser`] makes a job's parser: its own dataclasses' options (one group per declaring dataclass, each option as
transformers' `HfArgumentParser` spells it: `--foo`, `--foo-bar`, `--no_foo` for a switch that is on by default),
then transformers' `TrainingArguments` through `HfArgumentParser`, imported only then. `albert-hf <job> --help` prints
the same parser without Trainer's options, so it loads neither torch nor transformers (`albert_hf.job_help`), as TRL's
`make_parser` builds its scripts' parsers.

This module imports nothing of the package but `errors`, so every command can ask it.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import math
import shlex
import types
import typing
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
# The parser of every job: its dataclasses' options, then Trainer's
# --------------------------------------------------------------------------------------------------------------------

# A job's own file of options, read as the parser's defaults.
HELP_ALL = "--help-all"
# The value of every option in the namespace a command line is parsed into, until the command line sets it: what
# is left is what was not typed (argparse leaves an attribute already in the namespace alone unless it is given).
NOT_TYPED = object()


def string_to_bool(text: str) -> bool:
    """A switch's value as `HfArgumentParser` reads it (`--fp16 false`, `--streaming yes`)."""
    if isinstance(text, bool):
        return text
    if text.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if text.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true or false), got {text!r}")


def _without_none(kind: Any) -> Any:
    """`X` for `X | None`."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return kind


def _choice(choices: tuple) -> Any:
    """An argparse `type` giving back the choice a typed word names (`HfArgumentParser`'s reading of choices)."""
    by_name = {str(choice): choice for choice in choices}

    def parse(text: str):
        return by_name.get(text, text)

    return parse


def _declaring_class(dataclass_type: type, name: str) -> type:
    """The class of `dataclass_type`'s hierarchy whose own annotations declare field `name` (the last to do so)."""
    return next(cls for cls in dataclass_type.__mro__ if name in vars(cls).get("__annotations__", {}))


def shown(value: Any) -> str:
    """A value as it is typed on the command line."""
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) if value else "none"
    return str(getattr(value, "value", value))


def _field_default(item: dataclasses.Field) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return None


def add_dataclass_options(
    parser: argparse.ArgumentParser,
    dataclass_type: type,
    shown_defaults: Mapping[str, Any] | None = None,
    recipe: str | None = None,
) -> None:
    """The options of `dataclass_type`'s fields on `parser`, as `HfArgumentParser` declares them (option strings,
    types, `--no_<name>` for a switch on by default, lists, choices), in one group per declaring class (its
    `option_group` names it). Each help ends with the field's range and its default for this job: `shown_defaults`
    (the values of the job's own recipe, `recipe`) where they set the field."""
    shown_defaults = shown_defaults or {}
    hints = typing.get_type_hints(dataclass_type)
    groups: dict[type, Any] = {}
    for item in dataclasses.fields(dataclass_type):
        if not item.init:
            continue
        owner = _declaring_class(dataclass_type, item.name)
        if owner not in groups:
            groups[owner] = parser.add_argument_group(f"{vars(owner).get('option_group', owner.__name__)} options")
        _add_field_option(groups[owner], item, hints[item.name], shown_defaults, recipe)


def _add_field_option(group, item: dataclasses.Field, hint: Any, defaults: Mapping[str, Any], recipe: str | None):
    kind = _without_none(hint)
    aliases = item.metadata.get("aliases", [])
    names = [f"--{item.name}", *([aliases] if isinstance(aliases, str) else aliases)]
    default = _field_default(item)
    options: dict[str, Any] = {"dest": item.name, "help": _option_help(item, defaults, recipe), "default": default}
    choices = item.metadata.get("choices")
    if typing.get_origin(kind) is typing.Literal:
        choices = choices or typing.get_args(kind)
    elif isinstance(kind, type) and issubclass(kind, enum.Enum):
        choices = choices or tuple(member.value for member in kind)
    if kind is bool:
        options.update(type=string_to_bool, nargs="?", const=True, metavar="true|false")
    elif typing.get_origin(kind) is list:
        options.update(type=typing.get_args(kind)[0], nargs="+", metavar=item.name.upper())
    elif (
        choices and typing.get_origin(kind) is typing.Literal or isinstance(kind, type) and issubclass(kind, enum.Enum)
    ):
        options.update(type=_choice(tuple(choices)))
    else:
        options.update(type=kind)
    if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
        options["required"] = True
    if choices:
        options["choices"] = list(choices)
        listed = ",".join(map(str, choices))
        if len(listed) < 40:
            options["metavar"] = "{" + listed + "}"
        else:  # too long to repeat for each value of a list
            options["help"] += _escaped(f" Choices: {', '.join(map(str, choices))}.")
    group.add_argument(*names, **options)
    # Written with hyphens too, as `HfArgumentParser` accepts them (listed once in the help, which says so).
    if "_" in item.name:
        hidden = {**options, "help": argparse.SUPPRESS, "required": False}
        group.add_argument(f"--{item.name.replace('_', '-')}", **hidden)
    if kind is bool and item.default is True:
        switch = dict(action="store_false", dest=item.name, default=False)
        group.add_argument(f"--no_{item.name}", help=f"turn off --{item.name}", **switch)
        group.add_argument(f"--no-{item.name.replace('_', '-')}", help=argparse.SUPPRESS, **switch)


def _option_help(item: dataclasses.Field, defaults: Mapping[str, Any], recipe: str | None) -> str:
    """The field's help, then its range and its default for this job (the recipe's value where the recipe sets it).
    The field's help is written for argparse (a `%` doubled); what is added is escaped."""
    text = (item.metadata.get("help") or "").rstrip()
    if RANGE in item.metadata:
        text += _escaped(f" ({item.metadata[RANGE].describe()})")
    default = defaults[item.name] if item.name in defaults else _field_default(item)
    if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
        text += " (required)"
    elif default is not None and default is not False:
        source = f", from the {recipe} recipe" if item.name in defaults and item.name != "recipe" else ""
        text += _escaped(f" (default: {shown(default)}{source})")
    return text.strip()


def _escaped(text: str) -> str:
    """`text` as argparse prints it verbatim (it formats help strings with `%`)."""
    return text.replace("%", "%%")


def own_fields(trainer_type: type) -> tuple[type, ...]:
    """The dataclasses a `TrainingArguments` subclass adds its own fields with (e.g. `PretrainingOptions` of
    `PretrainingArguments`): its dataclass bases that are not `TrainingArguments` or below it."""
    return tuple(
        base
        for base in trainer_type.__mro__[1:]
        if dataclasses.is_dataclass(base) and not any(cls.__name__ == "TrainingArguments" for cls in base.__mro__)
    )


def job_parser(
    option_types: tuple[type, ...],
    with_trainer: bool = True,
    prog: str | None = None,
    description: str | None = None,
    epilog: str | None = None,
    shown_defaults: Mapping[str, Any] | None = None,
    recipe: str | None = None,
    trainer_defaults: Mapping[str, Any] | None = None,
) -> RefusingParser:
    """The parser of a job: the options of `option_types` ([`add_dataclass_options`]) and `--config FILE`, then,
    `with_trainer`, those of transformers' `TrainingArguments` (through `HfArgumentParser`: transformers is imported
    here only), whose defaults `trainer_defaults` changes. Without Trainer's options it is what `albert-hf <job> --help`
    prints, with `--help-all` to ask for them."""
    own = RefusingParser(
        prog=prog,
        usage=f"{prog} [options]" if prog else None,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    if not with_trainer:
        own.add_argument("-h", "--help", action="help", help="this help, then exit")
        own.add_argument(HELP_ALL, action="help", help="this help and Trainer's options (TrainingArguments), then exit")
    own.add_argument(CONFIG_OPTION, metavar="FILE", help=CONFIG_HELP)
    for dataclass_type in option_types:
        add_dataclass_options(own, dataclass_type, shown_defaults, recipe)
    if not with_trainer:
        return own
    from transformers import HfArgumentParser, TrainingArguments

    trainer = HfArgumentParser(TrainingArguments, add_help=False)
    parser = RefusingParser(
        prog=prog,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[own, trainer],
    )
    parser.set_defaults(**(trainer_defaults or {}))
    return parser


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
    `albert_hf.folder_commands.train_tokenizer_main`; `albert_hf.vocabulary.run_train_tokenizer` does the
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
    `albert_hf.folder_commands.export_main`; `albert_hf.onnx_export.run_export` does the work)."""
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


# --------------------------------------------------------------------------------------------------------------------
# Checks between options: asked once the layers of a command line are merged, before any work
# --------------------------------------------------------------------------------------------------------------------
#
# A job's options come from several layers (`albert_hf.argument_parsing.parse_args`): the defaults, a recipe or preset, a
# --config file and the command line. A value that conflicts with another is named with its layer, so that a user
# who typed one of the two and took the other from a recipe sees where each came from:
#
#     --warmup_steps 30 (from --recipe tiny) is more than --max_steps 6 (on the command line): ...
#
# [`check_combinations`] asks every rule of [`COMBINATION_RULES`] (each a function of the merged values, applying
# where the job has the options it reads) and the data splits the job declares ([`DataSplits`]); every problem is
# named in one `OptionError`. The rules read plain values, so a job's own later code can ask them too.

# The layers a value comes from, as messages name them.
COMMAND_LINE = "on the command line"
DEFAULT = "the default"
DERIVED = "derived from the other options"
# Where `parse_args` records, on each parsed dataclass, the layer of every value (field name -> one of the above, or
# "from --recipe tiny", "from --preset rte", "from --config run.yaml").
SOURCES_ATTRIBUTE = "_albert_hf_option_sources"
# Values of --resume_from_checkpoint that mean "the newest complete checkpoint of --output_dir, if any".
RESUME_LATEST_VALUES = ("latest", "last", "true", "auto")


@dataclass(frozen=True)
class OptionValues:
    """A job's option values (field name -> value, every layer merged) and the layer each came from."""

    values: Mapping[str, Any]
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, *arguments: Any) -> OptionValues:
        """The values of built argument dataclasses, with the layers `parse_args` recorded on them (else none)."""
        values, sources = {}, {}
        for each in arguments:
            values.update({item.name: getattr(each, item.name) for item in dataclasses.fields(each)})
            sources.update(getattr(each, SOURCES_ATTRIBUTE, {}))
        return cls(values, sources)

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def is_set(self, name: str) -> bool:
        """Whether option `name` holds a value: not absent, None, False, 0, an empty text or list."""
        value = self.values.get(name)
        return value is not None and value is not False and value != 0 and value != "" and value != []

    def named(self, name: str) -> str:
        """`--name value (layer)`, as a message names a value."""
        source = self.sources.get(name)
        if self.values.get(name) is True:  # a switch is typed without its value
            return f"--{name}" + (f" ({source})" if source else "")
        value = shown(self.values.get(name))
        if not value or any(character.isspace() for character in value):
            value = shlex.quote(value)
        return f"--{name} {value}" + (f" ({source})" if source else "")


def _plain_word(value: Any) -> str:
    """An option's value as the word it is typed as (an enum by its value), lower case."""
    return str(getattr(value, "value", value)).lower()


def _listed(names: Iterable[str], last: str = "or") -> str:
    """'--a', '--a or --b', '--a, --b or --c'."""
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"


@dataclass(frozen=True)
class DataSplits:
    """Which options give a job each data split ("train", "validation", "test"), declared beside the options (the
    `data_splits` of one of the job's argument dataclasses), so that a run that asks for a split it has no data for is
    refused before any data is read, rather than after the training data was loaded and tokenized (or, for the
    evaluation data of pretraining, by Trainer's traceback).

    `given_by[split]`: the options that give the split, any one of them set (a tuple: all of them set, e.g. a dataset
    and the name of its held-out split). `fallback`: options that give every split, read only when no option of
    `given_by` is set (GLUE's Hub dataset, read when no file or folder is given). `exclusive`: pairs of options that
    cannot both be given, one of them being read instead of the other. `unread`: options the job's dataclasses hold
    but the job does not read (a shared dataclass's). `asks_steps`: the job's run is made of --do_train, --do_eval and
    --do_predict (a fine-tuning job, which does nothing without them; pretraining always trains). A job whose
    dataclasses declare several (the quickstart's on top of pretraining's) has their union.
    """

    given_by: Mapping[str, tuple[str | tuple[str, ...], ...]]
    fallback: tuple[str, ...] = ()
    exclusive: tuple[tuple[str, str], ...] = ()
    unread: tuple[str, ...] = ()
    asks_steps: bool = True

    @staticmethod
    def union(declared: Iterable[DataSplits]) -> DataSplits | None:
        declared = list(declared)
        if not declared:
            return None
        given_by: dict[str, tuple] = {}
        for each in declared:
            for split, alternatives in each.given_by.items():
                given_by[split] = given_by.get(split, ()) + tuple(alternatives)
        return DataSplits(
            given_by,
            fallback=tuple(name for each in declared for name in each.fallback),
            exclusive=tuple(pair for each in declared for pair in each.exclusive),
            unread=tuple(name for each in declared for name in each.unread),
            asks_steps=all(each.asks_steps for each in declared),
        )

    def has(self, split: str, options: OptionValues) -> bool:
        """Whether the options give `split` data."""

        def holds(alternative) -> bool:
            names = (alternative,) if isinstance(alternative, str) else alternative
            return all(options.is_set(name) for name in names)

        if any(holds(alternative) for alternative in self.given_by.get(split, ())):
            return True
        all_alternatives = [alternative for each in self.given_by.values() for alternative in each]
        return any(options.is_set(name) for name in self.fallback) and not any(map(holds, all_alternatives))

    def hint(self, split: str) -> str:
        """The options that would give `split`, as a message offers them."""
        offered = [
            f"--{item}" if isinstance(item, str) else " with ".join(f"--{name}" for name in item)
            for item in self.given_by.get(split, ())
        ]
        if self.fallback:
            offered.append(f"no file at all, to read {_listed([f'--{name}' for name in self.fallback])}")
        return _listed(offered)


# Which option asks a run for each split, and what it says it does.
def _asked_splits(options: OptionValues, splits: DataSplits) -> dict[str, list[str]]:
    """split -> the options (named) that ask the run for it."""
    asked: dict[str, list[str]] = {"train": [], "validation": [], "test": []}
    if options.is_set("do_train") and splits.asks_steps:
        asked["train"].append(options.named("do_train"))
    if options.is_set("do_eval"):
        asked["validation"].append(options.named("do_eval"))
    if _plain_word(options.get("eval_strategy", "no")) != "no":
        asked["validation"].append(f"{options.named('eval_strategy')}, which evaluates during training,")
    if options.is_set("load_best_model_at_end"):
        asked["validation"].append(f"{options.named('load_best_model_at_end')}, which selects by evaluation,")
    if options.is_set("do_predict") and "test" in splits.given_by:
        asked["test"].append(options.named("do_predict"))
    return asked


SPLIT_WORDS = {"train": "training data", "validation": "evaluation data", "test": "test data"}


def data_split_problems(options: OptionValues, splits: DataSplits | None) -> list[str]:
    """What the declared splits of a job refuse: a split asked for (--do_train, --do_eval, --eval_strategy,
    --load_best_model_at_end, --do_predict) without data, a run asking for none, both options of an exclusive pair,
    an option the job does not read."""
    if splits is None:
        return []
    problems = []
    asked = _asked_splits(options, splits)
    for split, askers in asked.items():
        if askers and not splits.has(split, options):
            what = SPLIT_WORDS[split]
            problems.append(f"{_listed(askers, 'and')} asks for {what}, but none is given: pass {splits.hint(split)}")
    if splits.asks_steps and not any(asked.values()):
        steps = ["do_train", "do_eval", *(["do_predict"] if "test" in splits.given_by else [])]
        problems.append(f"nothing to do: pass {_listed([f'--{name}' for name in steps], 'and/or')}")
    for first, second in splits.exclusive:
        if options.is_set(first) and options.is_set(second):
            problems.append(
                f"{options.named(first)} and {options.named(second)} both give data, and the job would read one "
                "of them only: pass one"
            )
    for name in splits.unread:
        if options.is_set(name):
            problems.append(f"{options.named(name)} is not read by this job: leave it out")
    return problems


def warmup_problem(options: OptionValues, steps: int | None = None, steps_named: str | None = None) -> str | None:
    """A warm-up longer than the run: the learning rate would never reach --learning_rate (transformers' schedules
    then end inside their warm-up, ALBERT's refuses). `steps`: the optimizer steps of the run, when known only once
    the data is (--num_train_epochs), named by `steps_named`; else --max_steps. A warm-up of exactly the run's steps
    is accepted (its rate reaches the peak at the last step), as the schedules accept it; below 1, --warmup_steps is a
    share of the steps, which always fits."""
    warmup = options.get("warmup_steps")
    if warmup is None or warmup < 1:
        return None
    if steps is None:
        steps, steps_named = options.get("max_steps"), options.named("max_steps")
        if steps is None or steps <= 0:  # counted from --num_train_epochs once the data is known
            return None
    if int(warmup) <= steps:
        return None
    return (
        f"{options.named('warmup_steps')} is more than {steps_named}: the run would end during its warm-up, before "
        "the learning rate reaches --learning_rate. Pass a --warmup_steps of at most the run's steps (below 1: a "
        "share of them), or more steps"
    )


def check_warmup(options: OptionValues, steps: int, steps_named: str) -> None:
    """[`warmup_problem`] once the run's optimizer steps are known (the Trainer's schedule is made), as an
    `OptionError`."""
    problem = warmup_problem(options, steps, steps_named)
    if problem:
        raise OptionError(problem + ".")


def _warmup_rule(options: OptionValues) -> str | None:
    return warmup_problem(options) if "warmup_steps" in options else None


def _resume_rules(options: OptionValues) -> str | None:
    """--resume_from_checkpoint naming a folder that is not there (refused after all the data work otherwise), or
    given with --overwrite_output_dir (which removes the run it would continue)."""
    value = options.get("resume_from_checkpoint")
    if value in (None, False, ""):
        return None
    latest = value is True or str(value).lower() in RESUME_LATEST_VALUES
    if options.is_set("overwrite_output_dir"):
        return (
            f"{options.named('overwrite_output_dir')} removes the run that {options.named('resume_from_checkpoint')} "
            "would continue: pass one of them"
        )
    if not latest:
        import os

        path = os.path.expanduser(str(value))
        if not os.path.isdir(path):
            kind = "a file, not a checkpoint folder" if os.path.exists(path) else "no such folder"
            return (
                f"{options.named('resume_from_checkpoint')}: {kind}; pass a checkpoint-N folder, or latest for the "
                "newest complete checkpoint of --output_dir"
            )
    return None


def hub_id_problem(value: str) -> str | None:
    """Why `value` is no Hub repository id ('name' or 'namespace/name'), or None."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(value)
    except HFValidationError as error:
        return " ".join(str(error).split())
    return None


def _hub_rules(options: OptionValues) -> str | None:
    """--hub_model_id, or with --push_to_hub and none the name of --output_dir Trainer takes in its place, must be a
    Hub repository id: Trainer finds out when it creates the repository, after all the data work, with a traceback."""
    import os

    if options.is_set("hub_model_id"):
        problem = hub_id_problem(str(options.get("hub_model_id")))
        if problem:
            return f"{options.named('hub_model_id')} is no Hub repository id ('name' or 'namespace/name'): {problem}"
    elif options.is_set("push_to_hub") and options.is_set("output_dir"):
        name = os.path.basename(os.path.abspath(os.path.expanduser(str(options.get("output_dir")))))
        problem = hub_id_problem(name)
        if problem:
            return (
                f"{options.named('push_to_hub')} without --hub_model_id names the repository after --output_dir, "
                f"and {name!r} is no Hub repository name ({problem}): pass --hub_model_id"
            )
    return None


def _jit_checkpoint_rule(options: OptionValues) -> str | None:
    if options.is_set("enable_jit_checkpoint"):
        return (
            f"{options.named('enable_jit_checkpoint')} handles SIGTERM too, then saves the final model and exits 0: "
            "drop it; the job writes the checkpoint itself on SIGTERM and stops with exit status 143"
        )
    return None


def _streaming_rules(options: OptionValues) -> str | None:
    """A pretraining stream has no length (it needs --max_steps) and holds no documents out (it needs
    --validation_files)."""
    if not options.is_set("streaming"):
        return None
    if (options.get("max_steps") or -1) <= 0:
        return f"{options.named('streaming')} needs --max_steps (a stream has no length to count epochs in)"
    if options.is_set("validation_documents"):
        return (
            f"{options.named('streaming')} cannot hold out documents of a stream "
            f"({options.named('validation_documents')}): pass --validation_files"
        )
    return None


def _validation_split_rule(options: OptionValues) -> str | None:
    if options.is_set("validation_split_name") and not options.is_set("dataset_name") and "dataset_name" in options:
        return (
            f"{options.named('validation_split_name')} names a split of --dataset_name, and none is given: pass "
            "--validation_files instead"
        )
    return None


# The rules every job asks (`check_combinations`), each a function of the merged values giving a problem (a phrase
# without its final period) or None, and applying only where the job has the options it reads.
COMBINATION_RULES = (
    _warmup_rule,
    _resume_rules,
    _hub_rules,
    _jit_checkpoint_rule,
    _streaming_rules,
    _validation_split_rule,
)


def combination_problems(options: OptionValues, splits: DataSplits | None = None) -> list[str]:
    """Every problem of [`COMBINATION_RULES`] and of the job's declared data splits."""
    problems = [problem for rule in COMBINATION_RULES if (problem := rule(options))]
    return problems + data_split_problems(options, splits)


def check_combinations(options: OptionValues, splits: DataSplits | None = None) -> None:
    """Refuse, in one `OptionError`, every combination of options [`combination_problems`] finds."""
    problems = combination_problems(options, splits)
    if problems:
        raise OptionError("; ".join(problem.rstrip(".") for problem in problems) + ".")


def declared_splits(dataclass_types: Iterable[type]) -> DataSplits | None:
    """The union of the `data_splits` the job's dataclasses declare, or None."""
    return DataSplits.union(
        declared for kind in dataclass_types if (declared := getattr(kind, "data_splits", None)) is not None
    )
