"""What every job shares: model/tokenizer arguments, building or loading the model, parsing argv and starting."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from transformers import HfArgumentParser

from ..configuration import WEIGHT_SHAPE_FIELDS, AlbertConfig
from ..errors import OptionError, UserError
from ..options import (
    CONFIG_HELP,
    CONFIG_OPTION,
    RANGE,
    RefusingParser,
    check_arguments,
    check_ranges,
    closest,
    unknown_options,
)
from .arguments import ModelArguments

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
    """'a=1,b=0.5,c=gelu' -> {'a': 1, 'b': 0.5, 'c': 'gelu'}: each key a field of AlbertConfig (an unknown one is an
    error naming the closest field), each value read as the field's type."""
    fields = config_fields()
    overrides: dict[str, Any] = {}
    for key, value in config_override_items(text).items():
        if key not in fields:
            guess = closest(key, fields)
            hint = f"did you mean {guess!r}?" if guess else f"its fields: {', '.join(sorted(fields))}"
            raise OptionError(f"--config_overrides {key}={value}: AlbertConfig has no field {key!r} ({hint})")
        overrides[key] = _typed_override(key, value, fields[key])
    return overrides


def config_fields() -> dict[str, str]:
    """The names --config_overrides may set, with their annotations: AlbertConfig's fields and its public settable
    properties (`num_labels`, `output_attentions`, ...)."""
    import inspect

    fields = {f.name: str(f.type) for f in dataclasses.fields(AlbertConfig)}
    for name, member in inspect.getmembers(AlbertConfig):
        if isinstance(member, property) and member.fset is not None and not name.startswith("_"):
            annotation = inspect.signature(member.fget).return_annotation
            unknown = annotation is inspect.Signature.empty
            fields.setdefault(name, "bool | int | float | str | None" if unknown else str(annotation).replace("'", ""))
    return fields


def _typed_override(key: str, text: str, annotation: str) -> Any:
    """`text` read as a value of a field annotated `annotation` ('int', 'int | float', 'str', 'int | None', ...)."""
    kinds = [kind.strip() for kind in annotation.split("|")]
    if "None" in kinds and text.lower() in ("none", "null"):
        return None
    if "bool" in kinds and text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind, read in (("int", int), ("float", float)):
        if kind in kinds:
            try:
                return read(text)
            except ValueError:
                pass
    if any(kind.startswith(("list", "dict")) for kind in kinds):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    if any(kind == "str" or kind.startswith("Literal") for kind in kinds):
        return text
    raise OptionError(f"--config_overrides {key}={text}: AlbertConfig.{key} is {annotation}, not {text!r}")


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


def build_config(model_args: ModelArguments, **task_fields: Any) -> AlbertConfig:
    """The config for a job: from the checkpoint if given, else the preset; overrides and task fields on top.
    (A pretraining recipe leaves the architecture of a checkpoint alone: albert_hf/pretraining/arguments.py.)"""
    given = parse_config_overrides(model_args.config_overrides)
    clashes = [
        f"{key}={given[key]!r} (the job sets {value!r})"
        for key, value in task_fields.items()
        if given.get(key, value) != value
    ]
    if clashes:
        raise OptionError(
            f"--config_overrides {', '.join(clashes)}: the job sets these fields itself (from the task, the data or "
            "the tokenizer); leave them out of --config_overrides."
        )
    overrides = {**given, **task_fields}
    if model_args.attn_implementation:
        overrides["attn_implementation"] = model_args.attn_implementation
    if model_args.model_name_or_path:
        return AlbertConfig.from_pretrained(model_args.model_name_or_path, **overrides)
    return AlbertConfig.preset(model_args.config_preset, **overrides)


def config_source(model_args: ModelArguments) -> str:
    """Where a job's config comes from, as messages name it: the checkpoint, or the preset (and its overrides)."""
    if model_args.model_name_or_path:
        return f"the config of {model_args.model_name_or_path}"
    overrides = f" with --config_overrides {model_args.config_overrides!r}" if model_args.config_overrides else ""
    return f"the {model_args.config_preset} config{overrides}"


def build_model(model_class, model_args: ModelArguments, config: AlbertConfig):
    """Load the checkpoint into `model_class`, or build it from `config` with fresh weights."""
    if model_args.model_name_or_path:
        return model_class.from_pretrained(model_args.model_name_or_path, config=config)
    return model_from_config(model_class, config)


def model_from_config(model_class, config: AlbertConfig):
    """A fresh `model_class` of `config`.

    A class albert_hf registers with transformers' Auto classes (every task's is) is built by that Auto class's
    `from_config`, not the constructor: `from_config` builds the model already partitioned under DeepSpeed ZeRO-3
    (inside `deepspeed.zero.Init`) and applies the config's attention implementation and dtype. `trust_remote_code=
    False`: albert_hf's own class, never code copied beside a saved config (`auto_map`). A class of the user's own (a
    forked script's head) has no Auto class: its constructor builds it, inside `deepspeed.zero.Init` under ZeRO-3 and
    then cast to the config's dtype, as `from_config` would (the constructor applies the attention implementation).
    """
    import torch
    import transformers
    from transformers.integrations.deepspeed import deepspeed_config, is_deepspeed_zero3_enabled

    from ..modeling import ALBERT_AUTO_CLASSES

    auto_name = next((name for name, registered in ALBERT_AUTO_CLASSES.items() if registered is model_class), None)
    if auto_name is not None:
        return getattr(transformers, auto_name).from_config(config, trust_remote_code=False)
    if is_deepspeed_zero3_enabled():
        import deepspeed

        with deepspeed.zero.Init(config_dict_or_path=deepspeed_config()):
            return model_class(config)
    model = model_class(config)
    return model.to(config.dtype) if isinstance(config.dtype, torch.dtype) else model


def load_tokenizer(model_args: ModelArguments):
    """The ALBERT tokenizer from a folder (spiece.model + tokenizer_config.json) or a bare spiece.model file."""
    from ..tokenization import AlbertHFTokenizer

    source = model_args.tokenizer_name_or_path or model_args.model_name_or_path
    if source is None:
        raise UserError("No tokenizer: pass --tokenizer_name_or_path (a folder or a spiece.model file).")
    if os.path.isfile(source):
        return AlbertHFTokenizer(vocab_file=source)
    return AlbertHFTokenizer.from_pretrained(source)


# --------------------------------------------------------------------------------------------------------------------
# One argument-parsing path for every job
# --------------------------------------------------------------------------------------------------------------------
#
# `parse_args` reads the job's dataclasses from four layers, each over the one before it: the dataclasses' defaults,
# the job's recipe (a YAML file: pretraining's --recipe, fine-tuning's --preset), the user's own --config file (YAML or
# JSON, option names as keys), and the command line. The recipe and the config file become the parser's defaults
# (`set_defaults`), so the command line wins by argparse's own rule; --config_overrides alone merges key by key, as
# its keys are fields of one config. Parsing starts nothing: `start_job` joins the launcher's process group and sets
# up logging once the arguments are final.

# Where the job's own recipes live: albert_hf/recipes/<kind>/<name>.yaml.
RECIPE_FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "recipes")
# Name of the attribute where `parse_args` records the fields the user gave (command line or --config file).
GIVEN_FIELDS_ATTRIBUTE = "_albert_hf_given_fields"
# Name of the attribute where `parse_args` keeps the lines naming each given value that differs from the recipe's;
# `start_job` logs them once logging is set up.
KEPT_VALUES_ATTRIBUTE = "_albert_hf_kept_values"
UNSET = object()  # the default of every option while `given_options` reads a command line


class JobArgumentParser(HfArgumentParser, RefusingParser):
    """HfArgumentParser whose errors are `OptionError`s (one line, exit status 2) and which reads the `RANGE` of a
    field's metadata (`albert_hf.options`) as part of its help instead of passing it to argparse."""

    def add_argument(self, *args, **kwargs):
        declared = kwargs.pop(RANGE, None)
        if declared is not None:
            kwargs["help"] = f"{kwargs.get('help') or ''} ({declared.describe()})".strip()
        return super().add_argument(*args, **kwargs)


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


def given_options(dataclass_types: tuple, argv: list[str]) -> frozenset[str]:
    """The fields a command line sets, as the job's parser reads it: abbreviated flags and `--no_<field>` included, a
    value equal to the default too. Read by a parser of its own whose every default is a marker no value can equal."""
    parser = JobArgumentParser(dataclass_types)
    parser.add_argument(CONFIG_OPTION)
    names = field_names(dataclass_types)
    parser.set_defaults(**dict.fromkeys(names, UNSET))
    namespace, _ = parser.parse_known_args(argv)
    return frozenset(name for name, value in vars(namespace).items() if name in names and value is not UNSET)


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
    recipe: Callable[[argparse.Namespace], tuple[str, dict[str, Any]]] | None = None,
) -> tuple:
    """The job's dataclasses from its layers of options (see above). `recipe` returns the name and the values of the
    job's recipe for the options as read without it (which --recipe or --preset was chosen, whether a checkpoint is
    given, ...), or ("", {}) for none; `epilog` closes the --help text. A single .json/.yaml argument is a --config
    file.

    Every value is checked before any dataclass is built (and so before any work): an unknown option or config key
    names the closest one, a value outside its declared range (`albert_hf.options`) names the range, and what the
    dataclasses refuse themselves (TrainingArguments' combinations) becomes an `OptionError` too; then the model
    options (`check_model_arguments`). Each returned dataclass records the fields the user gave (`is_given`): a value
    the job derives from others (e.g. the steps of accumulation a global batch size needs) never replaces one of them.
    """
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        argv = [CONFIG_OPTION, argv[0]]
    names = field_names(dataclass_types)
    parser = JobArgumentParser(dataclass_types, epilog=epilog)
    parser.add_argument(CONFIG_OPTION, metavar="FILE", help=CONFIG_HELP)
    config = parser.parse_known_args(argv)[0].config
    from_file = read_options_file(config, option_names(dataclass_types), CONFIG_OPTION) if config else {}
    on_command_line = given_options(dataclass_types, argv)
    given = on_command_line | frozenset(from_file)

    parser.set_defaults(**from_file)
    source, recipe_values = recipe(parser.parse_known_args(argv)[0]) if recipe else ("", {})
    recipe_values = {name: value for name, value in recipe_values.items() if name in names}
    parser.set_defaults(**{**recipe_values, **from_file})
    namespace, unknown = parser.parse_known_args(argv)
    if unknown:
        raise OptionError(unknown_options(unknown, option_names(dataclass_types)))
    values = vars(namespace)
    kept = _kept_values(values, recipe_values, given, source)
    # --config_overrides of each layer merged key by key, each over the one before it.
    layers = (recipe_values, from_file, {name: values[name] for name in on_command_line})
    overrides = [layer["config_overrides"] for layer in layers if layer.get("config_overrides") is not None]
    if overrides:
        values["config_overrides"] = functools.reduce(lambda base, top: merge_config_overrides(base, top)[0], overrides)
    check_ranges((dataclass_type, values) for dataclass_type in dataclass_types)
    parsed = tuple(_build(dataclass_type, values) for dataclass_type in dataclass_types)
    for arguments in parsed:
        setattr(arguments, GIVEN_FIELDS_ATTRIBUTE, given)
        setattr(arguments, KEPT_VALUES_ATTRIBUTE, kept)
        if isinstance(arguments, ModelArguments):
            check_model_arguments(arguments)
    return parsed


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


def check_model_arguments(model_args: ModelArguments) -> None:
    """Refuse model options the job could not use, before any work: --config_overrides keys and values (read as
    AlbertConfig's fields), an unknown --config_preset, a config they would build that AlbertConfig refuses, and a
    --config_preset given with --model_name_or_path (whose own config the job uses)."""
    overrides = parse_config_overrides(model_args.config_overrides)
    if model_args.model_name_or_path:
        if is_given(model_args, "config_preset"):
            raise OptionError(
                f"--config_preset {model_args.config_preset} has no effect with --model_name_or_path "
                f"{model_args.model_name_or_path}: the job uses the checkpoint's config. Leave one of them out."
            )
        check_checkpoint_shapes(model_args.model_name_or_path, overrides)
        return
    try:
        AlbertConfig.preset(model_args.config_preset)
    except ValueError as error:
        guess = closest(model_args.config_preset, _preset_names())
        hint = f"did you mean {guess!r}? " if guess else ""
        raise OptionError(f"--config_preset {model_args.config_preset!r}: {hint}{error}") from error
    try:
        AlbertConfig.preset(model_args.config_preset, **overrides)
    except ValueError as error:
        raise OptionError(f"--config_overrides {model_args.config_overrides!r}: {error}") from error


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


def _preset_names() -> list[str]:
    from ..configuration import PRESETS

    return list(PRESETS)


def is_given(arguments, name: str) -> bool:
    """Whether the user set field `name` of `arguments`: given on the command line or in the --config file when
    `parse_args` built them; for dataclasses built in Python, set to anything but the declared default."""
    given = getattr(arguments, GIVEN_FIELDS_ATTRIBUTE, None)
    if given is not None:
        return name in given
    declared = {f.name: f.default for f in dataclasses.fields(arguments)}
    return getattr(arguments, name) != declared[name]


def fill_unset(arguments: tuple, values: dict[str, Any], source: str) -> None:
    """Set each field of `values` on the dataclass of `arguments` that declares it, unless the user gave it (in place):
    values a job derives from others (the quickstart's schedule from --max_steps). A given value that differs from the
    derived one is logged, naming both, when the job starts. The values set are checked as the given ones were."""
    kept = getattr(arguments[0], KEPT_VALUES_ATTRIBUTE, [])
    for name, value in values.items():
        owner = next(a for a in arguments if name in {f.name for f in dataclasses.fields(a)})
        if not is_given(owner, name):
            setattr(owner, name, value)
        elif getattr(owner, name) != value:
            kept.append(f"--{name} {getattr(owner, name)!r} (given) instead of {value!r} of {source}")
    for owner in arguments:
        setattr(owner, KEPT_VALUES_ATTRIBUTE, kept)
    check_arguments(*arguments)


def start_job(
    training_args,
    transformers_level: int | None = None,
    model_args: ModelArguments | None = None,
    dataset_name: str | None = None,
) -> None:
    """Start a job whose arguments are final: give DeepSpeed the final values, join the launcher's process group
    (`albert_hf.distributed.init_distributed`: it refuses a launch where every process would silently train alone on
    all the data, and starts DeepSpeed on gloo under --use_cpu), set up logging (without an accelerator: no pinned
    memory, and the advice for a busy machine), then check the model and tokenizer sources and lock and check
    --output_dir (`albert_hf.training.run_folder.open_run_folder`)."""
    import torch

    from ..distributed import init_distributed
    from ..training.job_logs import warn_if_busy
    from ..training.run_folder import open_run_folder

    sync_deepspeed_config(training_args)
    init_distributed(training_args)
    setup_logging(training_args, transformers_level)
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6; before it, CUDA was the one torch pinned for
    if not (accelerator.is_available() if accelerator is not None else torch.cuda.is_available()):
        # Pinned memory speeds copies to an accelerator; without one torch warns at every DataLoader instead.
        training_args.dataloader_pin_memory = False
        if training_args.should_log:
            warn_if_busy()
    for line in getattr(training_args, KEPT_VALUES_ATTRIBUTE, []):
        logger.info(line)
    if model_args is not None:  # before the output folder is made: a run that cannot start leaves none behind
        check_hub_reachable(model_args, dataset_name)
    open_run_folder(training_args, model_args)


def check_hub_reachable(model_args: ModelArguments, dataset_name: str | None = None, timeout: float = 5.0) -> None:
    """Stop at once, with a `MachineStateError` (exit status 3), when the model, the tokenizer or the dataset is a
        Hub name and the Hub cannot be reached: the downloads would otherwise retry for minutes and then blame the name.
        One connection to the Hub (or to the proxy of HTTPS_PROXY), nothing when every source is local or HF_HUB_OFFLINE
        is set. A dataset name counts as a Hub name when it reads "org/name" and is no local path (a bare name may be one of
    `datasets`' own builders, `csv`, `json`, ..., which need no network)."""
    import socket
    from urllib.parse import urlparse

    import huggingface_hub

    from ..errors import MachineStateError
    from ..training.checkpoints import check_pretrained_source

    sources = {
        "--model_name_or_path": (model_args.model_name_or_path, True),
        "--tokenizer_name_or_path": (model_args.tokenizer_name_or_path, False),
    }
    remote = []
    for option, (name, needs_weights) in sources.items():
        if name:
            # A missing folder is named as one, not as a Hub name.
            check_pretrained_source(name, option=option, needs_weights=needs_weights)
            if not os.path.exists(os.path.expanduser(name)):
                remote.append((option, name))
    if dataset_name and not os.path.exists(os.path.expanduser(dataset_name)) and "/" in dataset_name:
        remote.append(("--dataset_name", dataset_name))
    if not remote or huggingface_hub.constants.HF_HUB_OFFLINE:
        return
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    target = urlparse(os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or endpoint)
    port = target.port or (443 if target.scheme == "https" else 80)
    try:
        socket.create_connection((target.hostname, port), timeout=timeout).close()
    except OSError as error:
        option, name = remote[0]
        raise MachineStateError(
            f"no network: {option} {name} is a Hub name, and {target.hostname}:{port} cannot be reached ({error}). "
            "Pass a local folder, or set HF_HUB_OFFLINE=1 to load it from the local cache."
        ) from error


def sync_deepspeed_config(training_args) -> None:
    """Fill the "auto" values of a `--deepspeed` config again from the arguments as they are now.

    TrainingArguments fills them (batch sizes, accumulation, learning rate, clipping) when it is built, and Trainer
    keeps that copy: a preset, recipe or --global_batch_size applied after parsing would otherwise not reach DeepSpeed.
    The same three steps as TrainingArguments' own (and Trainer's, when a hyperparameter search changes the values).
    """
    if not training_args.deepspeed:
        return
    from accelerate.utils import DeepSpeedPlugin
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    training_args.hf_deepspeed_config = HfTrainerDeepSpeedConfig(training_args.deepspeed)
    training_args.hf_deepspeed_config.trainer_config_process(training_args)
    training_args.deepspeed_plugin = DeepSpeedPlugin(hf_ds_config=training_args.hf_deepspeed_config)


def setup_logging(training_args, transformers_level: int | None = None) -> None:
    """INFO logs from albert_hf on the main process, warnings only on the others; transformers at the same level
    unless `transformers_level` says otherwise."""
    import logging

    import transformers

    from ..training.job_logs import quiet_library_noise

    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level)
    logging.getLogger("albert_hf").setLevel(level)
    transformers.utils.logging.set_verbosity(level if transformers_level is None else transformers_level)
    quiet_library_noise()
