"""What every job shares: model/tokenizer arguments, building or loading the model, parsing argv."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from transformers import HfArgumentParser

from ..configuration import AlbertConfig


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


def parse_config_overrides(text: str | None) -> dict[str, Any]:
    """'a=1,b=0.5,c=gelu' -> {'a': 1, 'b': 0.5, 'c': 'gelu'}; values typed like JSON where they parse."""
    import json

    overrides: dict[str, Any] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(f"--config_overrides: expected key=value, got {item!r}")
        key, value = (part.strip() for part in item.split("=", 1))
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def build_config(model_args: ModelArguments, **task_fields: Any) -> AlbertConfig:
    """The config for a job: from the checkpoint if given, else the preset; overrides and task fields on top."""
    overrides = {**parse_config_overrides(model_args.config_overrides), **task_fields}
    if model_args.attn_implementation:
        overrides["attn_implementation"] = model_args.attn_implementation
    if model_args.model_name_or_path:
        return AlbertConfig.from_pretrained(model_args.model_name_or_path, **overrides)
    return AlbertConfig.preset(model_args.config_preset, **overrides)


def build_model(model_class, model_args: ModelArguments, config: AlbertConfig):
    """Load the checkpoint into `model_class`, or build it from `config` with fresh weights."""
    if model_args.model_name_or_path:
        return model_class.from_pretrained(model_args.model_name_or_path, config=config)
    # _from_config (not the constructor) so that under DeepSpeed ZeRO-3 the model is built already partitioned.
    return model_class._from_config(config)


def load_tokenizer(model_args: ModelArguments):
    """The ALBERT tokenizer from a folder (spiece.model + tokenizer_config.json) or a bare spiece.model file."""
    from ..tokenization import AlbertHFTokenizer

    source = model_args.tokenizer_name_or_path or model_args.model_name_or_path
    if source is None:
        raise ValueError("No tokenizer: pass --tokenizer_name_or_path (a folder or a spiece.model file).")
    if os.path.isfile(source):
        return AlbertHFTokenizer(vocab_file=source)
    return AlbertHFTokenizer.from_pretrained(source)


# Name of the attribute where `parse_args` records the flags the user gave (so presets only fill the others).
GIVEN_FLAGS_ATTRIBUTE = "_albert_hf_given_flags"


def given_flags(argv: list[str]) -> frozenset[str]:
    """Field names given on a command line: '--learning_rate 1e-5', '--do_train', '--max-steps=10'."""
    return frozenset(item[2:].split("=", 1)[0].replace("-", "_") for item in argv if item.startswith("--"))


def parse_args(dataclass_types: tuple, argv: list[str] | None = None):
    """HfArgumentParser over the given dataclasses; also accepts a single .json file of arguments.

    Then joins the launcher's process group (see `albert_hf.distributed.init_distributed`): it refuses a launch where
    every process would silently train alone on all the data, and starts DeepSpeed on gloo under --use_cpu.
    """
    import json
    import sys

    from transformers import TrainingArguments

    from ..distributed import init_distributed

    parser = HfArgumentParser(dataclass_types)
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 1 and argv[0].endswith(".json"):
        parsed = parser.parse_json_file(json_file=os.path.abspath(argv[0]))
        given = frozenset(json.loads(open(argv[0], encoding="utf-8").read()))
    else:
        parsed = parser.parse_args_into_dataclasses(args=argv)
        given = given_flags(argv)
    for arguments in parsed:
        object.__setattr__(arguments, GIVEN_FLAGS_ATTRIBUTE, given)
    for arguments in parsed:
        if isinstance(arguments, TrainingArguments):
            init_distributed(arguments)
    return parsed
