"""What every job shares: model/tokenizer arguments, building or loading the model, parsing argv and starting."""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from transformers import HfArgumentParser

from ..configuration import AlbertConfig
from ..errors import UserError


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Checkpoint folder or Hub id to start from (official ALBERT or albert_hf). "
            "Leave unset to train from scratch with --config_preset / --config_overrides."
        },
    )
    tokenizer_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Tokenizer folder or spiece.model file. Defaults to --model_name_or_path."},
    )
    config_preset: str = field(
        default="base-v2",
        metadata={"help": "Preset used when training from scratch: base/large/xlarge/xxlarge(-v1|-v2)."},
    )
    config_overrides: str | None = field(
        default=None,
        metadata={"help": "Comma-separated config fields, e.g. 'hidden_size=128,num_hidden_layers=2,sharing=none'."},
    )
    attn_implementation: str | None = field(
        default=None, metadata={"help": "eager, sdpa, flash_attention_2, flex_attention (default: sdpa)."}
    )
    # transformers 5 dropped TrainingArguments.overwrite_output_dir; albert_hf's jobs keep the option, with the
    # meaning of `albert_hf.run_folder`.
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Use an --output_dir holding another run's model or checkpoints: remove those run files first "
            "(logged; logs under runs/ and other files stay). Never the folder of --model_name_or_path."
        },
    )


def parse_config_overrides(text: str | None) -> dict[str, Any]:
    """'a=1,b=0.5,c=gelu' -> {'a': 1, 'b': 0.5, 'c': 'gelu'}; values typed like JSON where they parse."""
    import json

    overrides: dict[str, Any] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise UserError(f"--config_overrides: expected key=value, got {item!r}")
        key, value = (part.strip() for part in item.split("=", 1))
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def build_config(model_args: ModelArguments, **task_fields: Any) -> AlbertConfig:
    """The config for a job: from the checkpoint if given, else the preset; overrides and task fields on top.
    (A pretraining recipe leaves the architecture of a checkpoint alone: albert_hf/pretraining/arguments.py.)"""
    overrides = {**parse_config_overrides(model_args.config_overrides), **task_fields}
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
    from ..training.transformers_internals import model_from_config

    # Not the constructor: under DeepSpeed ZeRO-3 the model is built already partitioned.
    return model_from_config(model_class, config)


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
# 1. `parse_args` reads the command line (or one .json file) into the job's dataclasses and records on each which
#    fields the user gave. It adds nothing to what building TrainingArguments does (which sets up the device): it
#    checks no launch, starts no DeepSpeed communication, sets up no logging.
# 2. A preset (fine-tuning: a row of the paper's Table 14) or recipe (pretraining) then fills the fields the user did
#    not give, with `fill_unset`: what the user typed always wins, even a value equal to the default.
# 3. `start_job` joins the launcher's process group and sets up logging, before anything builds the model.

# Name of the attribute where `parse_args` records the fields the user gave (so presets only fill the others).
GIVEN_FIELDS_ATTRIBUTE = "_albert_hf_given_fields"


class _GivenOptionsNamespace(argparse.Namespace):
    """A namespace that argparse believes already holds every option, and that records the ones argparse sets.

    argparse sets an option's default only where the namespace passed to `parse_known_args` lacks the attribute; this
    one lacks none, so argparse sets exactly the options of the command line, whatever their value. Names starting
    with "_" are argparse's own bookkeeping and behave as on any namespace.
    """

    def __init__(self):
        super().__init__()
        self.__dict__["given"] = set()

    def __getattr__(self, name: str):  # only asked for attributes not set
        if name.startswith("_"):
            raise AttributeError(name)
        return None

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_"):
            self.given.add(name)
        super().__setattr__(name, value)


def given_options(parser: argparse.ArgumentParser, argv: list[str]) -> frozenset[str]:
    """Destinations (field names) a command line sets, as `parser` reads it: abbreviated flags and `--no_<field>`
    included, a value equal to the default too."""
    namespace = _GivenOptionsNamespace()
    parser.parse_known_args(argv, namespace=namespace)
    return frozenset(namespace.given)


def parse_args(dataclass_types: tuple, argv: list[str] | None = None, epilog: str | None = None) -> tuple:
    """HfArgumentParser over the given dataclasses; also accepts a single .json file of arguments. `epilog` closes
    the --help text.

    Each returned dataclass records the fields the user gave (`is_given`), so that a preset or recipe applied next
    fills only the others. Parsing starts nothing of the job: it calls `start_job` once its arguments are final.
    """
    import json
    import sys

    parser = HfArgumentParser(dataclass_types, epilog=epilog)
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith(".json"):
        path = os.path.abspath(argv[0])
        parsed = parser.parse_json_file(json_file=path)
        with open(path, encoding="utf-8") as handle:
            given = frozenset(json.load(handle))
    else:
        parsed = parser.parse_args_into_dataclasses(args=argv)
        given = given_options(parser, argv)
    for arguments in parsed:
        setattr(arguments, GIVEN_FIELDS_ATTRIBUTE, given)
    return tuple(parsed)


def is_given(arguments, name: str) -> bool:
    """Whether the user set field `name` of `arguments`: given on the command line or in the JSON file when
    `parse_args` built them; for dataclasses built in Python, set to anything but the declared default."""
    given = getattr(arguments, GIVEN_FIELDS_ATTRIBUTE, None)
    if given is not None:
        return name in given
    declared = {f.name: f.default for f in dataclasses.fields(arguments)}
    return getattr(arguments, name) != declared[name]


def fill_unset(arguments: tuple, values: dict[str, Any]) -> None:
    """Set each field of `values` on the dataclass of `arguments` that declares it, unless the user gave it (in place);
    how presets and recipes apply."""
    for name, value in values.items():
        owner = next((a for a in arguments if name in {f.name for f in dataclasses.fields(a)}), None)
        if owner is None:
            raise ValueError(f"No argument declares {name!r} (known: {[type(a).__name__ for a in arguments]}).")
        if not is_given(owner, name):
            setattr(owner, name, value)


def start_job(training_args, transformers_level: int | None = None, model_args: ModelArguments | None = None) -> None:
    """Start a job whose arguments are final: give DeepSpeed the final values, join the launcher's process group
    (`albert_hf.distributed.init_distributed`: it refuses a launch where every process would silently train alone on
    all the data, and starts DeepSpeed on gloo under --use_cpu), set up logging (without an accelerator: no pinned
    memory, and the advice for a busy machine), then check the model and tokenizer sources and lock and check
    --output_dir (`albert_hf.run_folder.open_run_folder`)."""
    import torch

    from ..distributed import init_distributed
    from ..run_folder import open_run_folder
    from ..training.job_logs import warn_if_busy

    sync_deepspeed_config(training_args)
    init_distributed(training_args)
    setup_logging(training_args, transformers_level)
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6; before it, CUDA was the one torch pinned for
    if not (accelerator.is_available() if accelerator is not None else torch.cuda.is_available()):
        # Pinned memory speeds copies to an accelerator; without one torch warns at every DataLoader instead.
        training_args.dataloader_pin_memory = False
        if training_args.should_log:
            warn_if_busy()
    open_run_folder(training_args, model_args)


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
