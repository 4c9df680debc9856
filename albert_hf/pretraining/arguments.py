"""The arguments of a pretraining run and its recipes.

A run is described by one [`PretrainingJob`]: the model arguments every job shares (`argument_parsing.ModelArguments`),
[`PretrainingDataArguments`], [`RecipeArguments`], [`QuickstartArguments`] (the tokenizer step and the embedded corpus
of `albert-hf quickstart`) and [`PretrainingArguments`] (Trainer's). `albert-hf pretrain` and `albert-hf quickstart`
parse the same dataclasses the same way (`argument_parsing.parse_args`): a recipe is a YAML file of options
(albert_hf/recipes/pretrain/, or the user's own) that the parser reads as its defaults, so the command line wins.

The dataclasses are in `albert_hf.pretraining.recipes`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from ..argument_parsing import fill_unset, is_given, option_names, parse_args, read_options_file, recipe_file
from ..arguments import ModelArguments
from ..errors import OptionError
from .recipes import (
    ARCHITECTURE_FIELDS,
    QUICKSTART_ALIASES,
    RECIPES,  # noqa: F401  (the shipped recipes as read, for the callers of this module)
    TRAINER_DEFAULTS,
    PretrainingDataArguments,
    QuickstartArguments,
    RecipeArguments,
)
from .trainer import PretrainingArguments

ARGUMENT_CLASSES = (ModelArguments, PretrainingDataArguments, RecipeArguments, PretrainingArguments)
QUICKSTART_ARGUMENT_CLASSES = (*ARGUMENT_CLASSES, QuickstartArguments)


@dataclass
class PretrainingJob:
    """Everything a pretraining run is built from. Fields of the parts read as fields of the job too (`job.max_steps`
    is `job.training.max_steps`): their names are unique across the parts, as one command line holds them all."""

    model: ModelArguments
    data: PretrainingDataArguments
    recipe: RecipeArguments
    training: PretrainingArguments
    quickstart: QuickstartArguments | None = None

    def parts(self) -> tuple:
        parts = (self.model, self.data, self.recipe, self.training, self.quickstart)
        return tuple(part for part in parts if part is not None)

    # A job reads as the tuple of its parts too: `model, data, recipe, training = job`, `job[-1]`.
    def __iter__(self):
        return iter(self.parts())

    def __getitem__(self, index: int):
        return self.parts()[index]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in {f.name for f in dataclasses.fields(PretrainingJob)}:
            raise AttributeError(name)
        for part in self.parts():
            if any(f.name == name for f in dataclasses.fields(part)):
                return getattr(part, name)
        raise AttributeError(f"No pretraining argument is called {name!r}.")


def parse_pretraining_args(argv: list[str] | None = None) -> PretrainingJob:
    """The arguments of `albert-hf pretrain`, parsed as every job parses them, with --recipe as the defaults
    ([`pretraining_recipe`]); --global_batch_size sets the accumulation steps (`argument_parsing.split_global_batch`)."""
    model, data, recipe, training = parse_args(
        ARGUMENT_CLASSES, argv, recipe=pretraining_recipe, trainer_defaults=TRAINER_DEFAULTS
    )
    return PretrainingJob(model=model, data=data, recipe=recipe, training=training)


def pretraining_recipe(options, given: frozenset[str] = frozenset()) -> tuple[str, dict[str, Any]]:
    """The options of --recipe (a shipped name or a .yaml file), each an option of `albert-hf pretrain` or of the
    quickstart (a job without the quickstart's skips those); a model from --model_name_or_path keeps its own
    architecture, so the recipe's is left out."""
    if not options.recipe:
        return "", {}
    source = f"--recipe {options.recipe}"
    path = recipe_file("pretrain", options.recipe, "--recipe")
    values = read_options_file(path, option_names(QUICKSTART_ARGUMENT_CLASSES), source)
    if options.model_name_or_path:  # continued pretraining: the checkpoint's architecture, not the recipe's
        values = {name: value for name, value in values.items() if name not in ARCHITECTURE_FIELDS}
    return source, values


def parse_quickstart_args(argv: list[str] | None = None) -> PretrainingJob:
    """The arguments of `albert-hf quickstart`: those of `albert-hf pretrain` with --recipe quickstart as default
    (--fast: the smoke recipe), the quickstart's own ([`QuickstartArguments`]) and a schedule in proportion to
    --max_steps. Values out of their declared ranges are `OptionError`s (`argument_parsing.parse_args`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    recipes = [item for item in argv if item == "--fast" or item == "--recipe" or item.startswith("--recipe=")]
    if "--fast" in recipes and len(recipes) > 1:
        raise OptionError("--fast is --recipe smoke: give --fast or --recipe, not both.")
    argv = [_unalias(item) for item in argv]
    if not any(item == "--recipe" or item.startswith("--recipe=") for item in argv):
        argv = ["--recipe", "quickstart", *argv]
    if not any(item == "--output_dir" or item.startswith("--output_dir=") for item in argv):
        argv += ["--output_dir", "quickstart-output"]
    # argparse lists the options under their pretraining names only: the help ends with the quickstart's spellings.
    aliases = "Also: " + ", ".join(f"{old} is {new}" for old, new in QUICKSTART_ALIASES.items()) + "."
    model, data, recipe, training, quickstart = parse_args(
        QUICKSTART_ARGUMENT_CLASSES,
        argv,
        epilog=aliases,
        recipe=pretraining_recipe,
        derive=quickstart_schedule,
        trainer_defaults=TRAINER_DEFAULTS,
    )
    return PretrainingJob(model=model, data=data, recipe=recipe, training=training, quickstart=quickstart)


def quickstart_schedule(values: dict[str, Any], given: frozenset[str], kept: list[str]) -> None:
    """The quickstart's schedule in proportion to --max_steps, for the options not given: a warm-up of
    --warmup_fraction, 30 logs and --evaluations points on the held-out curve."""
    steps = values["max_steps"]
    if steps < 1:  # -1, "no limit", is Trainer's; the quickstart's schedule needs a number of steps
        raise OptionError(f"--max_steps must be at least 1 for the quickstart (its schedule), got {steps}.")
    schedule = dict(
        warmup_steps=max(1, round(steps * values["warmup_fraction"])),
        logging_steps=max(1, steps // 30),
        eval_strategy="steps",
        eval_steps=max(1, steps // values["evaluations"]),
    )
    fill_unset(values, given, schedule, "the schedule derived from --max_steps", kept)


def _unalias(item: str) -> str:
    name, equals, value = item.partition("=")
    if name not in QUICKSTART_ALIASES:
        return item
    return QUICKSTART_ALIASES[name] + (equals + value if equals else "")


def vocab_size_given(job: PretrainingJob) -> bool:
    """Whether the user chose the quickstart's vocabulary size (a Chinese/Japanese corpus otherwise gets more)."""
    return is_given(job.quickstart, "vocab_size")
