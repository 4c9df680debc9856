"""The one parsing path of every job: its dataclasses from four layers of options (the defaults, the recipe or preset,
the --config file, the command line), the values derived before any dataclass is built, every value checked before any
work; and the model options read as AlbertConfig's fields (`--config_overrides`). Starting the job, and building its
config, tokenizer and model from these arguments, is `albert_hf.job_setup`."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from .arguments import ModelArguments
from .configuration import WEIGHT_SHAPE_FIELDS, AlbertConfig, check_attention_heads
from .errors import OptionError, UserError
from .options import (
    COMMAND_LINE,
    CONFIG_OPTION,
    DEFAULT,
    DERIVED,
    NOT_TYPED,
    SOURCES_ATTRIBUTE,
    OptionValues,
    check_combinations,
    check_ranges,
    closest,
    declared_splits,
    job_parser,
    own_fields,
    unknown_options,
)

logger = logging.getLogger(__name__)


def config_override_items(text: str | None) -> dict[str, str]:
    """'a=1,b=0.5,c=gelu' -> {'a': '1', 'b': '0.5', 'c': 'gelu'}, as written."""
    items: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise OptionError(f"--config_overrides: expected key=value, got {item!r}")
        key, value = (part.strip() for part in item.split("=", 1))
        items[key] = value
    return items


def parse_config_overrides(text: str | None) -> dict[str, Any]:
    """'a=1,b=0.5,c=gelu' -> {'a': 1, 'b': 0.5, 'c': 'gelu'}: each value read as its field of AlbertConfig
    ([`apply_config_overrides`] on a default config), an unknown key an error naming the closest field."""
    config = AlbertConfig()
    items = config_override_items(text)
    apply_config_overrides(config, text)
    return {key: getattr(config, key) for key in items}


def apply_config_overrides(config: AlbertConfig, text: str | None) -> None:
    """`--config_overrides 'a=1,b=0.5,c=gelu'` onto `config`, through transformers' `update_from_string`, which reads
    each value as the type of the field's current value (`true`/`false` for a switch). Around it: an unknown key is an
    `OptionError` naming the closest field; `none`/`null` sets a field that may be None to None; a field that is None
    now (which gives `update_from_string` no type to read by) takes the value as JSON reads it, else as text; a value
    the field's type refuses names the field. The values are not validated here: build the config from them."""
    fields = {item.name: item for item in dataclasses.fields(type(config))}
    for key, value in config_override_items(text).items():
        if key.startswith("_") or not hasattr(config, key):
            known = [name for name in {*fields, *dir(type(config))} if not name.startswith("_")]
            guess = closest(key, known)
            hint = f"did you mean {guess!r}?" if guess else "it is not a field of AlbertConfig"
            raise OptionError(f"--config_overrides {key}={value}: AlbertConfig has no field {key!r} ({hint})")
        annotation = str(fields[key].type) if key in fields else ""
        try:
            if value.lower() in ("none", "null") and "None" in annotation:
                setattr(config, key, None)
            elif getattr(config, key) is None:
                setattr(config, key, _json_or_text(value))
            else:
                config.update_from_string(f"{key}={value}")
        except (ValueError, TypeError) as error:
            kind = annotation or type(getattr(config, key)).__name__
            raise OptionError(
                f"--config_overrides {key}={value}: AlbertConfig.{key} is {kind}, not {value!r}"
            ) from error


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def merge_config_overrides(base: str | None, given: str | None) -> tuple[str, list[str]]:
    """(`base` with the keys of `given` on top, as one --config_overrides value; a line for each value of `base`
    that `given` replaces)."""
    base_items, given_items = config_override_items(base), config_override_items(given)
    replaced = [
        f"{key}={given_items[key]} (given) instead of {key}={value}"
        for key, value in base_items.items()
        if key in given_items and given_items[key] != value
    ]
    merged = {**base_items, **given_items}
    return ",".join(f"{key}={value}" for key, value in merged.items()), replaced


# --------------------------------------------------------------------------------------------------------------------
# One argument-parsing path for every job
# --------------------------------------------------------------------------------------------------------------------
#
# `parse_args` reads the job's dataclasses from four layers, each over the one before it: the dataclasses' defaults
# (and the Trainer defaults the job changes), the job's recipe (a YAML file: pretraining's --recipe, fine-tuning's
# --preset), the user's own --config file (YAML or JSON, option names as keys), and the command line. The command line
# is parsed once, by the job's parser (`albert_hf.options.job_parser`, what `--help` prints too), into a namespace where
# every option starts out as `NOT_TYPED`, so what was typed is what argparse set; the other layers fill the rest, so the
# command line wins. --config_overrides alone merges key by key, as its keys are fields of one config. The values a
# job derives from others (the accumulation or per-device batch of --global_batch_size, the quickstart's schedule) are
# computed from those values before any dataclass is built, TrainingArguments (and DeepSpeed's view of it) included:
# nothing is changed after it is built. Parsing starts nothing: `start_job` joins the launcher's process group and
# sets up logging once the arguments are final.

# Where the job's own recipes live: albert_hf/recipes/<kind>/<name>.yaml.
RECIPE_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipes")
# Name of the attribute where `parse_args` records the fields the user gave (command line or --config file).
GIVEN_FIELDS_ATTRIBUTE = "_albert_hf_given_fields"
# Name of the attribute where `parse_args` keeps the lines naming each given value that differs from the recipe's;
# `start_job` logs them once logging is set up.
KEPT_VALUES_ATTRIBUTE = "_albert_hf_kept_values"


def option_names(dataclass_types: tuple) -> set[str]:
    """Every option of the dataclasses, as `--field_name`, aliases included."""
    names = set()
    for dataclass_type in dataclass_types:
        for item in dataclasses.fields(dataclass_type):
            aliases = item.metadata.get("aliases", [])
            names |= {f"--{item.name}", *([aliases] if isinstance(aliases, str) else aliases)}
    return names


def field_names(dataclass_types: tuple) -> set[str]:
    return {item.name for dataclass_type in dataclass_types for item in dataclasses.fields(dataclass_type)}


def option_fields(dataclass_types: tuple) -> dict[str, str]:
    """Option name (without "--", aliases included) -> the field it sets."""
    fields = {}
    for dataclass_type in dataclass_types:
        for item in dataclasses.fields(dataclass_type):
            aliases = item.metadata.get("aliases", [])
            for alias in [aliases] if isinstance(aliases, str) else aliases:
                fields[alias.lstrip("-")] = item.name
            fields[item.name] = item.name
    return fields


def read_config_file(path: str) -> dict[str, Any]:
    """The option values of a YAML or JSON file: one mapping of option names (without "--") to values."""
    import yaml

    try:
        with open(path, encoding="utf-8") as handle:
            values = yaml.safe_load(handle)  # JSON is YAML too
    except OSError as error:
        raise OptionError(f"{path}: cannot read the config file ({error.strerror or error})") from error
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{getattr(error, 'problem', None) or error}" + (f" at line {mark.line + 1}" if mark else "")
        raise OptionError(f"{path}: not a YAML or JSON file of options ({' '.join(where.split())})") from error
    if not isinstance(values, dict):
        raise OptionError(f"{path}: expected a mapping of option names to values, got {type(values).__name__}")
    return values


def read_options_file(path: str, known: set[str], option: str) -> dict[str, Any]:
    """The values of a file of options (`read_config_file`), each key one of the `known` options (as `--name`): an
    unknown one is an `OptionError` naming `option` (how the file was given), the file and the closest option."""
    values = read_config_file(path)
    unknown = [f"--{name}" for name in values if f"--{name}" not in known]
    if unknown:
        raise OptionError(f"{option}: {path}: {unknown_options(unknown, known)}")
    return values


def recipe_file(kind: str, name: str, option: str, spelling: Callable[[str], str] = str) -> str:
    """The YAML file of recipe `name` of `kind` (albert_hf/recipes/<kind>/<spelling(name)>.yaml), or `name` itself
    when it is a path to a file; an unknown name is an `OptionError` listing the recipes there are."""
    if name.endswith((".yaml", ".yml", ".json")) or os.sep in name:
        return name
    folder = os.path.join(RECIPE_FOLDER, kind)
    path = os.path.join(folder, f"{spelling(name)}.yaml")
    if not os.path.isfile(path):
        known = sorted(entry.removesuffix(".yaml") for entry in os.listdir(folder))
        guess = closest(name, known)
        hint = f"did you mean {guess!r}? " if guess else ""
        raise OptionError(f"{option} {name!r}: {hint}choose one of {known} or give a .yaml file of options.")
    return path


def parse_args(
    dataclass_types: tuple,
    argv: list[str] | None = None,
    epilog: str | None = None,
    recipe: Callable[[argparse.Namespace, frozenset[str]], tuple[str, dict[str, Any]]] | None = None,
    derive: Callable[[dict[str, Any], frozenset[str], list[str]], None] | None = None,
    trainer_defaults: dict[str, Any] | None = None,
) -> tuple:
    """The job's dataclasses from its layers of options (see above), one of them `TrainingArguments` (or a subclass).
    `recipe(options, given)` returns the name and the values of the job's recipe for the options as read without it
    (which --recipe or --preset was chosen, whether a checkpoint is given, ...) and the names of the fields the user
    gave, or ("", {}) for none. `derive(values, given, kept)`
    sets, in `values` (field name -> value), what the job derives from the others before anything is built, never a
    field in `given`; it appends to `kept` a line for each derived value the user's replaces. `trainer_defaults`: the
    Trainer options the job gives other defaults. `epilog` closes the --help text. A single .json/.yaml argument is a
    --config file.

    Every value is checked before any dataclass is built (and so before any work): an unknown option or config key
    names the closest one, a value outside its declared range (`albert_hf.options`) names the range, and what the
    dataclasses refuse themselves (TrainingArguments' combinations) becomes an `OptionError` too; then the model
    options (`check_model_arguments`). Each returned dataclass records the fields the user gave (`is_given`).
    """
    import sys

    from transformers import TrainingArguments

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        argv = [CONFIG_OPTION, argv[0]]
    trainer_type = next((kind for kind in dataclass_types if issubclass(kind, TrainingArguments)), None)
    # The parser's options: the dataclasses', those of a TrainingArguments subclass's own dataclass in its place.
    option_types = tuple(
        part for kind in dataclass_types for part in (own_fields(kind) if kind is trainer_type else (kind,))
    )
    parser = job_parser(
        option_types, with_trainer=trainer_type is not None, epilog=epilog, trainer_defaults=trainer_defaults
    )
    names = field_names(dataclass_types)
    namespace = argparse.Namespace(**dict.fromkeys([*names, "config"], NOT_TYPED))
    namespace, unknown = parser.parse_known_args(argv, namespace)
    if unknown:
        raise OptionError(unknown_options(unknown, option_names(dataclass_types)))
    typed = {name: getattr(namespace, name) for name in names if getattr(namespace, name) is not NOT_TYPED}
    defaults = {name: parser.get_default(name) for name in names}
    config = None if namespace.config is NOT_TYPED else namespace.config
    from_file = _options_file(config, dataclass_types, CONFIG_OPTION) if config else {}
    given = frozenset(typed) | frozenset(from_file)
    source, recipe_values = (
        recipe(argparse.Namespace(**{**defaults, **from_file, **typed}), given) if recipe else ("", {})
    )
    recipe_values = {name: value for name, value in recipe_values.items() if name in names}
    values = {**defaults, **recipe_values, **from_file, **typed}
    kept = _kept_values(values, recipe_values, given, source)
    # The layer of each value, for the messages of the checks between options.
    layers = ((recipe_values, f"from {source}"), (from_file, f"from {CONFIG_OPTION} {config}"), (typed, COMMAND_LINE))
    sources = dict.fromkeys(names, DEFAULT)
    for layer, name in layers:
        sources.update(dict.fromkeys(layer, name))
    # --config_overrides of each layer merged key by key, each over the one before it.
    overrides = [
        (layer["config_overrides"], name) for layer, name in layers if layer.get("config_overrides") is not None
    ]
    if overrides:
        values["config_overrides"] = functools.reduce(merge_config_overrides_text, [text for text, _ in overrides])
        sources["config_overrides"] = " and ".join(name for _, name in overrides)
    before = dict(values)
    if trainer_type is not None:
        derive_training_values(values, given, set(recipe_values), kept)
    if derive is not None:
        derive(values, given, kept)
    sources.update({name: DERIVED for name in names if values.get(name) != before.get(name)})
    check_ranges((dataclass_type, values) for dataclass_type in dataclass_types)
    # The combinations every job refuses, and the data splits it declares (`albert_hf.options`), before any work.
    check_combinations(OptionValues(values, sources), declared_splits(dataclass_types))
    parsed = tuple(_build(dataclass_type, values) for dataclass_type in dataclass_types)
    for arguments in parsed:
        setattr(arguments, GIVEN_FIELDS_ATTRIBUTE, given)
        setattr(arguments, KEPT_VALUES_ATTRIBUTE, kept)
        setattr(arguments, SOURCES_ATTRIBUTE, sources)
    model_args = next((arguments for arguments in parsed if isinstance(arguments, ModelArguments)), None)
    if model_args is not None:
        config_fields = {
            name: value
            for arguments in parsed
            if hasattr(arguments, "config_fields")
            for name, value in arguments.config_fields().items()
        }
        check_model_arguments(model_args, values.get("max_seq_length"), config_fields)
    return parsed


def merge_config_overrides_text(base: str | None, top: str | None) -> str:
    """`base` with the keys of `top` on top, as one --config_overrides value (`merge_config_overrides`)."""
    return merge_config_overrides(base, top)[0]


def _options_file(path: str, dataclass_types: tuple, option: str) -> dict[str, Any]:
    """The values of a file of options (`read_options_file`) by field name (an alias read as its field)."""
    fields = option_fields(dataclass_types)
    values = read_options_file(path, option_names(dataclass_types), option)
    return {fields[name.lstrip("-")]: value for name, value in values.items()}


def derive_training_values(values: dict[str, Any], given: frozenset[str], recipe: set[str], kept: list[str]) -> None:
    """What every job derives before `TrainingArguments` is built: the batch of --global_batch_size
    ([`split_global_batch`]), no pinned memory without an accelerator (torch warns at every DataLoader otherwise), and
    `--hub_token` moved into this process's `HF_TOKEN` (Trainer would pickle it into every `training_args.bin`; its
    Hub calls read the variable)."""
    from .distributed import accelerator_available

    split_global_batch(values, given, recipe, kept)
    if "dataloader_pin_memory" not in given and not accelerator_available():
        values["dataloader_pin_memory"] = False
    if values.get("hub_token"):
        os.environ["HF_TOKEN"], values["hub_token"] = values["hub_token"], None


def split_global_batch(values: dict[str, Any], given: frozenset[str], recipe: set[str], kept: list[str]) -> None:
    """The per-device batch or the accumulation steps that make --global_batch_size (sequences per optimizer step
    over all processes and accumulation steps) on the launcher's processes: the one not given is derived from the
    other; a per-device batch the recipe sets keeps it, else the per-device batch is derived. Given all three, they
    must agree; given both factors, a recipe's or preset's global batch is left aside (logged)."""
    from .distributed import launched_world_size

    total = values.get("global_batch_size")
    if not total:
        return
    # The launcher's process count: the job joins the process group later (`start_job`), and refuses a launch where
    # this count and Trainer's world size differ.
    world_size = launched_world_size()
    per_device, steps = values["per_device_train_batch_size"], values["gradient_accumulation_steps"]
    per_device_given, steps_given = "per_device_train_batch_size" in given, "gradient_accumulation_steps" in given
    if per_device_given and steps_given:
        if per_device * steps * world_size == total:
            return
        if "global_batch_size" in given:
            raise OptionError(
                f"--global_batch_size {total} and --per_device_train_batch_size {per_device} x "
                f"--gradient_accumulation_steps {steps} x {world_size} processes disagree; give two of them."
            )
        kept.append(
            f"--per_device_train_batch_size {per_device} x --gradient_accumulation_steps {steps} (given) instead of "
            f"--global_batch_size {total}"
        )
        return
    if steps_given or not (per_device_given or "per_device_train_batch_size" in recipe):
        name, shards = "per_device_train_batch_size", world_size * steps
        how = f"{world_size} processes x {steps} accumulation steps; set --per_device_train_batch_size"
    else:
        name, shards = "gradient_accumulation_steps", world_size * per_device
        how = f"per_device_train_batch_size ({per_device}) x processes ({world_size})"
    if total % shards:
        raise OptionError(f"--global_batch_size {total} does not split over {how}.")
    values[name] = total // shards


def _kept_values(
    values: dict[str, Any], recipe_values: dict[str, Any], given: frozenset[str], source: str
) -> list[str]:
    """A line for each value the user gave that replaces a different one of the recipe (logged at the start)."""
    lines = []
    for name, value in recipe_values.items():
        if name not in given:
            continue
        if name == "config_overrides":
            _, replaced = merge_config_overrides(value, values[name])
            lines += [f"--config_overrides {line} of {source}" for line in replaced]
        elif values[name] != value:
            lines.append(f"--{name} {values[name]!r} (given) instead of {value!r} of {source}")
    return lines


def _build(dataclass_type: type, values: dict[str, Any]):
    """`dataclass_type` from the values of its fields in `values`; what it refuses is an `OptionError`."""
    names = {item.name for item in dataclasses.fields(dataclass_type) if item.init}
    try:
        return dataclass_type(**{name: value for name, value in values.items() if name in names})
    except UserError:
        raise
    except (ValueError, TypeError) as error:  # TrainingArguments' checks of combinations, a JSON value of a wrong type
        raise OptionError(f"{error}") from error


def check_model_arguments(
    model_args: ModelArguments, max_seq_length: int | None = None, config_fields: dict[str, Any] | None = None
) -> None:
    """Refuse model options the job could not use, before any work: --config_overrides keys and values (read as
    AlbertConfig's fields), an unknown --config_preset, a --config_preset given with --model_name_or_path (whose own
    config the job uses); then the config they make, as soon as it is known (the preset with the overrides, or a
    local checkpoint's config.json with them), with the job's own `config_fields` (its options that set config fields:
    adaptive depth): a shape AlbertConfig refuses (hidden size not divisible by the heads, groups against layers,
    sizes), and a `max_seq_length` beyond its position embeddings. A Hub id's config is read when the model is."""
    overrides = parse_config_overrides(model_args.config_overrides)
    if model_args.model_name_or_path:
        if is_given(model_args, "config_preset"):
            raise OptionError(
                f"--config_preset {model_args.config_preset} has no effect with --model_name_or_path "
                f"{model_args.model_name_or_path}: the job uses the checkpoint's config. Leave one of them out."
            )
        check_checkpoint_shapes(model_args.model_name_or_path, overrides)
    else:
        try:
            AlbertConfig.preset(model_args.config_preset)
        except ValueError as error:
            guess = closest(model_args.config_preset, _preset_names())
            hint = f"did you mean {guess!r}? " if guess else ""
            raise OptionError(f"--config_preset {model_args.config_preset!r}: {hint}{error}") from error
    config = known_config(
        model_args, overrides, _options_named(model_args, {"config_overrides": model_args.config_overrides})
    )
    if config is not None and config_fields:
        config = known_config(model_args, {**overrides, **config_fields}, _options_named(model_args, config_fields))
    if config is not None and max_seq_length is not None:
        from .tokenizer_fit import check_sequence_length

        check_sequence_length(max_seq_length, config, config_source(model_args))


def _options_named(arguments, values: dict[str, Any]) -> str:
    """The options of `values` (name -> value) that are set, each with the layer `parse_args` recorded on
    `arguments` ("--config_overrides 'a=1' (on the command line)"); "" when none is."""
    options = OptionValues(values, getattr(arguments, SOURCES_ATTRIBUTE, {}))
    return ", ".join(options.named(name) for name in values if options.is_set(name))


def known_config(model_args: ModelArguments, fields: dict[str, Any], named: str) -> AlbertConfig | None:
    """The config the job's model will have, when it can be known before any work: the preset with `fields`, or the
    config.json of a local --model_name_or_path with them; None for a Hub id, or a file the model's loader will name
    as unreadable. A config AlbertConfig refuses (its shape against itself) is an `OptionError` naming `named` (the
    options that set `fields`, with their layers) on the preset and its overrides, or on the checkpoint's
    config.json."""
    source = model_args.model_name_or_path
    if not source:
        try:
            config = AlbertConfig.preset(model_args.config_preset, **fields)
            check_attention_heads(config)
            return config
        except ValueError as error:
            overrides = model_args.config_overrides
            on = f"--config_preset {model_args.config_preset}"
            if overrides and not named.startswith("--config_overrides"):
                on += f" with --config_overrides {overrides!r}"
            raise OptionError(f"{named} on {on}: {error}" if named else f"{on}: {error}") from error
    folder = os.path.expanduser(source)
    if not os.path.isfile(os.path.join(folder, "config.json")):
        return None
    try:
        config, unused = AlbertConfig.from_pretrained(folder, return_unused_kwargs=True, **fields)
        check_attention_heads(config)
    except ValueError as error:
        if not str(error).startswith("AlbertConfig."):
            return None  # not the config's own check: the model's loader names what is wrong with the file
        on = f"the config of --model_name_or_path {source} ({os.path.join(source, 'config.json')})"
        raise OptionError(f"{named} on {on}: {error}" if named else f"{on}: {error}") from error
    except OSError:
        return None
    for name, value in unused.items():
        setattr(config, name, value)
    return config


def check_checkpoint_shapes(model_name_or_path: str, overrides: dict[str, Any]) -> None:
    """Refuse --config_overrides that change the shape of a local checkpoint's weights (its config.json read, nothing
    else), naming both values: loading would stop later with transformers' report of mismatched tensors."""
    config_file = os.path.join(os.path.expanduser(model_name_or_path), "config.json")
    if not any(name in overrides for name in WEIGHT_SHAPE_FIELDS) or not os.path.isfile(config_file):
        return
    try:
        with open(config_file, encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, ValueError):
        return  # the loader names what is wrong with the file
    clashes = [
        f"{name}={overrides[name]} (the checkpoint has {saved[name]})"
        for name in WEIGHT_SHAPE_FIELDS
        if name in overrides and name in saved and overrides[name] != saved[name]
    ]
    if clashes:
        raise OptionError(
            f"--config_overrides {', '.join(clashes)}: the weights of --model_name_or_path {model_name_or_path} "
            "have the checkpoint's shapes; leave these fields out of --config_overrides."
        )


def config_source(model_args: ModelArguments) -> str:
    """Where a job's config comes from, as messages name it: the checkpoint, or the preset (and its overrides)."""
    if model_args.model_name_or_path:
        return f"the config of {model_args.model_name_or_path}"
    overrides = f" with --config_overrides {model_args.config_overrides!r}" if model_args.config_overrides else ""
    return f"the {model_args.config_preset} config{overrides}"


def _preset_names() -> list[str]:
    from .configuration import PRESETS

    return list(PRESETS)


def is_given(arguments, name: str) -> bool:
    """Whether the user set field `name` of `arguments`: given on the command line or in the --config file when
    `parse_args` built them; for dataclasses built in Python, set to anything but the declared default."""
    given = getattr(arguments, GIVEN_FIELDS_ATTRIBUTE, None)
    if given is not None:
        return name in given
    declared = {f.name: f.default for f in dataclasses.fields(arguments)}
    return getattr(arguments, name) != declared[name]


def fill_unset(values: dict[str, Any], given: frozenset[str], derived: dict[str, Any], source: str, kept: list[str]):
    """Set each value of `derived` in `values` unless the user gave it (values a job derives from others: the
    quickstart's schedule from --max_steps); a line in `kept` for a given value that differs, logged at the start."""
    for name, value in derived.items():
        if name not in given:
            values[name] = value
        elif values[name] != value:
            kept.append(f"--{name} {values[name]!r} (given) instead of {value!r} of {source}")
