"""`albert-hf <job> --help`: what the job does and its own options, at once; `--help-all` adds Trainer's.

A job parses its argument dataclasses together with transformers' `TrainingArguments` (`HfArgumentParser`), and its
help used to be that parser's: torch and transformers loaded first, then some 700 lines, Trainer's options first.
Here the job's own dataclasses (`albert_hf.tasks.arguments`, `albert_hf.pretraining.recipes`, which import neither
library) become a plain argparse parser used only to print: one group per dataclass that declares the fields, each
option as `HfArgumentParser` spells it (`--foo`, and `--no_foo` for a switch that is on by default), with the job's
own default (the recipe's value where the job applies a recipe of its own). `--help-all` then loads transformers and
prints `TrainingArguments`' options with the defaults this job gives them. The commands that parse with argparse
(train-tokenizer, export, import) print their own parser's help.

The options listed are exactly those the job's real parser accepts besides `TrainingArguments`'
(tests/test_cli_help.py compares them).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import textwrap
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .options import CONFIG_HELP, CONFIG_OPTION, RANGE
from .pretraining.recipes import (
    QUICKSTART_ALIASES,
    RECIPES,
    TRAINER_DEFAULTS,
    PretrainingDataArguments,
    PretrainingOptions,
    QuickstartArguments,
    RecipeArguments,
)
from .tasks.arguments import (
    ClassifyArguments,
    EarlyExitArguments,
    FineTuningArguments,
    GlueArguments,
    ModelArguments,
    MultipleChoiceArguments,
    NerArguments,
    ProtocolArguments,
    SquadArguments,
)
from .tasks.folder_commands import export_command_parser, train_tokenizer_command_parser
from .tasks.import_command import import_command_parser

HELP_ALL = "--help-all"

# The group of each dataclass that declares options, by the class that declares the field.
GROUP_TITLES = {
    ModelArguments: "model and tokenizer",
    ProtocolArguments: "fine-tuning protocol (seeds, starting model)",
    FineTuningArguments: "data",
    EarlyExitArguments: "adaptive depth (early exit)",
    GlueArguments: "GLUE",
    ClassifyArguments: "table",
    NerArguments: "NER",
    SquadArguments: "SQuAD",
    MultipleChoiceArguments: "multiple choice",
    PretrainingDataArguments: "pretraining data",
    RecipeArguments: "recipe",
    PretrainingOptions: "optimizer, schedule, checks and divergence guard",
    QuickstartArguments: "quickstart",
}


@dataclass(frozen=True)
class JobHelp:
    """What `albert-hf <job> --help` says of a job that parses dataclasses with Trainer's arguments."""

    description: str
    argument_types: tuple[type, ...]  # the job's dataclasses, as its parser reads them (TrainingArguments after them)
    recipe: str | None = None  # the recipe the job applies when no --recipe is given
    trainer_defaults: Mapping[str, Any] = field(default_factory=dict)  # Trainer options the job gives other defaults
    notes: tuple[str, ...] = ()


FINE_TUNING_NOTE = (
    "--preset <row> fills, from the ALBERT paper's Table 14, the learning rate, batch size, steps, warm-up, dropout "
    "and --max_seq_length that are not given."
)
PRETRAINING = (ModelArguments, PretrainingDataArguments, RecipeArguments, PretrainingOptions)

JOBS: dict[str, JobHelp] = {
    "pretrain": JobHelp(
        "Pretrain ALBERT from scratch, or continue a checkpoint (--model_name_or_path), on text files or a dataset: "
        "sentence pairs cut from the documents, n-gram masked-LM and sentence-order prediction, LAMB with ALBERT's "
        "schedule, on Trainer. A --recipe (paper, laptop, tiny, quickstart, smoke) fills every option not given; "
        "saves the model and tokenizer to --output_dir.",
        PRETRAINING,
        trainer_defaults=TRAINER_DEFAULTS,
    ),
    "quickstart": JobHelp(
        "Train a SentencePiece tokenizer and a small ALBERT from scratch on an offline corpus (the prose shipped "
        "with Python, or --corpus) in minutes on a CPU, then report the held-out MLM and SOP figures beside "
        "baselines and plot the learning curves. The pretraining job with the quickstart recipe (--fast: smoke); "
        "warm-up, logging and evaluation steps follow --max_steps.",
        (*PRETRAINING, QuickstartArguments),
        recipe="quickstart",
        trainer_defaults={**TRAINER_DEFAULTS, "output_dir": "quickstart-output"},
        notes=("Also: " + ", ".join(f"{old} is {new}" for old, new in QUICKSTART_ALIASES.items()) + ".",),
    ),
    "glue": JobHelp(
        "Fine-tune ALBERT on a GLUE task (--task_name) from --data_dir (the original tsv layout), from "
        "--train_file/--validation_file/--test_file, or from the Hub; evaluate with the task's metrics, and with "
        "--do_predict write the leaderboard file.",
        (ModelArguments, FineTuningArguments, GlueArguments),
        notes=(FINE_TUNING_NOTE,),
    ),
    "classify": JobHelp(
        "Fine-tune ALBERT to classify or score the texts of any labelled table (csv, tsv, json/jsonl, parquet, or "
        "--dataset_name): the training split's labels decide between a classification (accuracy, macro-F1) and a "
        "regression (Pearson, Spearman); --do_predict writes predictions_test.tsv.",
        (ModelArguments, FineTuningArguments, ClassifyArguments),
        notes=(FINE_TUNING_NOTE,),
    ),
    "ner": JobHelp(
        "Fine-tune ALBERT for named-entity recognition on CoNLL column files (--data_dir or --train_file ...), json "
        "lines in the Hub layout, a Hub dataset or tables read by column; entity-level evaluation (seqeval), and "
        "with --do_predict predictions_test.txt.",
        (ModelArguments, FineTuningArguments, NerArguments),
        notes=(FINE_TUNING_NOTE,),
    ),
    "squad": JobHelp(
        "Fine-tune ALBERT on SQuAD v1.1 or v2.0 (--version_2_with_negative) from the official json or the Hub's "
        "layout; evaluation answers every question from all its windows, writes predictions.json and reports the "
        "official exact match and F1.",
        (ModelArguments, SquadArguments),
        notes=("--preset squad1.1 or squad2.0 fills the paper's Table 14 row for the options not given.",),
    ),
    "multiple-choice": JobHelp(
        "Fine-tune ALBERT on multiple choice (SWAG or RACE json, a RACE folder, or tables read by column with "
        "--context_column and --choice_columns); the metric is accuracy, and --do_predict writes "
        "predictions_test.jsonl.",
        (ModelArguments, FineTuningArguments, MultipleChoiceArguments),
        notes=(FINE_TUNING_NOTE,),
    ),
}
# The commands that parse with argparse alone: their parser is their help.
ARGPARSE_COMMANDS: dict[str, Callable[[], argparse.ArgumentParser]] = {
    "train-tokenizer": train_tokenizer_command_parser,
    "export": export_command_parser,
    "import": import_command_parser,
}


def wants_help(argv: list[str]) -> bool:
    return any(item in ("-h", "--help", HELP_ALL) for item in argv)


def job_help(command: str, everything: bool = False) -> str:
    """The help text of `albert-hf <command>`; with `everything`, Trainer's options too (loads transformers)."""
    if command in ARGPARSE_COMMANDS:
        return ARGPARSE_COMMANDS[command]().format_help()
    job = JOBS[command]
    text = help_parser(command, job).format_help()
    return text + trainer_help(command, job) if everything else text


def help_parser(command: str, job: JobHelp) -> argparse.ArgumentParser:
    """A parser that prints the job's own options (it parses nothing: the job's `HfArgumentParser` does)."""
    recipe = RECIPES[job.recipe] if job.recipe else {}
    set_by_recipe = {**recipe, **({"recipe": job.recipe} if job.recipe else {})}
    parser = argparse.ArgumentParser(
        prog=f"albert-hf {command}",
        usage=f"albert-hf {command} [options]",
        description=_paragraphs(job.description),
        epilog=_paragraphs(*job.notes, *_trainer_lines(command, job, recipe)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    parser.add_argument("-h", "--help", action="help", help="this help, then exit")
    parser.add_argument(HELP_ALL, action="help", help="this help and Trainer's options (TrainingArguments), then exit")
    parser.add_argument(CONFIG_OPTION, metavar="FILE", help=CONFIG_HELP)
    groups: dict[type, Any] = {}
    for dataclass_type in job.argument_types:
        hints = typing.get_type_hints(dataclass_type)
        for item in dataclasses.fields(dataclass_type):
            if not item.init:
                continue
            owner = _declaring_class(dataclass_type, item.name)
            if owner not in groups:
                groups[owner] = parser.add_argument_group(f"{GROUP_TITLES.get(owner, owner.__name__)} options")
            _add_option(groups[owner], item, hints[item.name], set_by_recipe, job.recipe)
    return parser


def _declaring_class(dataclass_type: type, name: str) -> type:
    """The class of `dataclass_type`'s hierarchy whose own annotations declare field `name` (the last to do so)."""
    return next(cls for cls in dataclass_type.__mro__ if name in vars(cls).get("__annotations__", {}))


def _add_option(group, item: dataclasses.Field, kind: Any, recipe: Mapping[str, Any], recipe_name: str | None):
    """`item` as `HfArgumentParser` declares it: its option strings (aliases and `--no_<name>` included), its value
    and its help, ending with its range and its default."""
    kind = _without_none(kind)
    aliases = item.metadata.get("aliases", [])
    names = [f"--{item.name}", *([aliases] if isinstance(aliases, str) else aliases)]
    options: dict[str, Any] = {"help": _option_help(item, kind, recipe, recipe_name), "dest": item.name}
    if kind is bool:
        options.update(nargs="?", metavar="true|false")
    elif typing.get_origin(kind) is list:
        options.update(nargs="+", metavar=item.name.upper())
    choices = item.metadata.get("choices") or (
        typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None
    )
    if choices:
        listed = ",".join(map(str, choices))
        if len(listed) < 40:
            options["metavar"] = "{" + listed + "}"
        else:  # too long to repeat for each value of a list
            options["help"] += _escaped(f" Choices: {', '.join(map(str, choices))}.")
    group.add_argument(*names, **options)
    if kind is bool and item.default is True:
        group.add_argument(f"--no_{item.name}", action="store_true", help=f"turn off --{item.name}")


def _option_help(item: dataclasses.Field, kind: Any, recipe: Mapping[str, Any], recipe_name: str | None) -> str:
    """The field's help, then its range and its default for this job (the recipe's value where the recipe sets it).
    The field's help is written for argparse (a `%` doubled), as the job's parser reads it; what is added is
    escaped."""
    text = (item.metadata.get("help") or "").rstrip()
    if RANGE in item.metadata:
        text += _escaped(f" ({item.metadata[RANGE].describe()})")
    default = recipe[item.name] if item.name in recipe else _default(item)
    if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
        text += " (required)"
    elif default is not None and not (kind is bool and default is False):
        source = f", from the {recipe_name} recipe" if item.name in recipe and item.name != "recipe" else ""
        text += _escaped(f" (default: {_shown(default)}{source})")
    return text.strip()


def _escaped(text: str) -> str:
    """`text` as argparse prints it verbatim (it formats help strings with `%`)."""
    return text.replace("%", "%%")


def _without_none(kind: Any) -> Any:
    """`X` for `X | None` (what `HfArgumentParser` reads such a field as)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return kind


def _default(item: dataclasses.Field) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return None


def _shown(value: Any) -> str:
    """A value as it is typed on the command line."""
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value)) if value else "none"
    return str(value)


def _trainer_lines(command: str, job: JobHelp, recipe: Mapping[str, Any]) -> list[str]:
    """The lines on Trainer's options: the values the job gives some of them, and where the others are listed."""
    own = {item.name for dataclass_type in job.argument_types for item in dataclasses.fields(dataclass_type)}
    values = {**job.trainer_defaults, **{name: value for name, value in recipe.items() if name not in own}}
    lines = []
    if values:
        source = f" (with the {job.recipe} recipe)" if job.recipe else ""
        listed = ", ".join(f"--{name} {_shown(value)}" for name, value in values.items())
        lines.append(f"Trainer options this job sets{source}, unless given: {listed}.")
    lines.append(
        "Each option may also be written with hyphens (--output-dir). Trainer's options (transformers' "
        f"TrainingArguments: --output_dir, --do_train, --max_steps, --learning_rate, ...) are listed by "
        f"`albert-hf {command} {HELP_ALL}`."
    )
    return lines


def trainer_help(command: str, job: JobHelp) -> str:
    """Trainer's options (`TrainingArguments`), with the defaults this job gives them, as the job's parser prints
    them; imports transformers."""
    from transformers import HfArgumentParser, TrainingArguments

    recipe = RECIPES[job.recipe] if job.recipe else {}
    parser = HfArgumentParser(TrainingArguments, prog=f"albert-hf {command}", usage=argparse.SUPPRESS, add_help=False)
    trainer_fields = {item.name for item in dataclasses.fields(TrainingArguments)}
    parser.set_defaults(**{k: v for k, v in {**job.trainer_defaults, **recipe}.items() if k in trainer_fields})
    text = parser.format_help().strip("\n")
    _heading, _, options = text.partition("\n")  # argparse's "options:" heading
    return f"\nTrainer options (transformers.TrainingArguments, with this job's defaults):\n{options}\n"


def _paragraphs(*texts: str) -> str:
    width = shutil.get_terminal_size().columns - 2  # argparse's width for the options
    return "\n\n".join(textwrap.fill(text, width, break_on_hyphens=False) for text in texts)
