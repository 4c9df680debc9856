"""The start of every job, once its arguments are final, and what it is built from: [`start_job`] joins the launcher's
process group, sets up the logs, checks the model, tokenizer and dataset sources and locks and checks `--output_dir`;
[`load_tokenizer`], [`build_config`] and [`build_model`] give the job's tokenizer, config and model from its
`ModelArguments` (a checkpoint, or a preset with `--config_overrides`; a fine-tuned model's encoder with a fresh head
for `--init_from_task_model`). The arguments themselves come from `albert_hf.argument_parsing.parse_args`.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from .argument_parsing import KEPT_VALUES_ATTRIBUTE, parse_config_overrides
from .arguments import ModelArguments
from .configuration import AlbertConfig
from .errors import OptionError, UserError

logger = logging.getLogger(__name__)


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
        # from_pretrained sets only the fields its saved config holds and hands the others back: a checkpoint saved
        # before fine-tuning has no `finetuning_task`, which the job's results are then read by (the task's metric).
        config, unused = AlbertConfig.from_pretrained(
            model_args.model_name_or_path, return_unused_kwargs=True, **overrides
        )
        for name, value in unused.items():
            setattr(config, name, value)
        return config
    return AlbertConfig.preset(model_args.config_preset, **overrides)


def build_model(model_class, model_args: ModelArguments, config: AlbertConfig):
    """Load the checkpoint into `model_class`, or build it from `config` with fresh weights. A fine-tuned model given
    as the start of another task (`--init_from_task_model`, which `start_from_task_model` made the job's
    `--model_name_or_path`) gives its encoder alone: the head is fresh (`encoder_with_fresh_head`)."""
    if model_args.model_name_or_path and getattr(model_args, TASK_MODEL_ATTRIBUTE, None):
        return encoder_with_fresh_head(model_class, model_args.model_name_or_path, config)
    if model_args.model_name_or_path:
        return model_class.from_pretrained(model_args.model_name_or_path, config=config)
    return model_from_config(model_class, config)


# Set on ModelArguments by `finetuning.start_from_task_model`: the model folder (or Hub id) whose encoder the
# job starts from, with a head of its own.
TASK_MODEL_ATTRIBUTE = "_albert_hf_task_model"


def encoder_with_fresh_head(model_class, source: str, config: AlbertConfig):
    """A `model_class` of `config` whose encoder (`albert.*`: embeddings, shared layers and the pooler) holds the
    weights of the model saved at `source`, and whose head is freshly initialized, as a task started from another
    task's fine-tuned model (the paper's RTE, MRPC and STS-B from MNLI) needs: the head of `source` answered
    another question, also where its size would fit (MNLI's three classes for a three-class task).

    The encoder is read by `AlbertModel.from_pretrained` (any head class's checkpoint, whole or sharded, leaves its
    head out), and the model is then built by `from_pretrained` with those weights as its state dict, so transformers
    initializes what they lack (the head) as it initializes any missing weights, and says so.
    """
    import transformers

    from .modeling import AlbertModel

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # its load report would list the head it leaves out, as is meant
    try:
        encoder = AlbertModel.from_pretrained(source)
    finally:
        transformers.logging.set_verbosity(verbosity)
    prefix = model_class.base_model_prefix
    weights = {f"{prefix}.{name}": tensor for name, tensor in encoder.state_dict().items()}
    del encoder
    model = model_class.from_pretrained(None, config=config, state_dict=weights)
    fresh = sorted({name.split(".")[0] for name, _ in model.named_parameters() if not name.startswith(f"{prefix}.")})
    logger.info("Started from the encoder of %s; the head (%s) is fresh.", source, ", ".join(fresh))
    return model


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

    from .modeling import ALBERT_AUTO_CLASSES

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
    """The job's tokenizer: --tokenizer_name_or_path, else the folder of --model_name_or_path, through the one loader
    (`albert_hf.formats.load_tokenizer`): albert_hf's exact SentencePiece tokenizer, or BERT's WordPiece tokenizer for
    a folder or vocab.txt that holds one (the Chinese ALBERTs)."""
    from .formats import load_tokenizer as load

    source = model_args.tokenizer_name_or_path or model_args.model_name_or_path
    if source is None:
        raise UserError(
            "No tokenizer: pass --tokenizer_name_or_path (a folder, or a spiece.model or WordPiece vocab.txt file)."
        )
    return load(source)


def start_job(
    training_args,
    transformers_level: int | None = None,
    model_args: ModelArguments | None = None,
    dataset_name: str | None = None,
) -> None:
    """Start a job whose arguments are final: join the launcher's process group
    (`albert_hf.distributed.init_distributed`: it refuses a launch where every process would silently train alone on
    all the data, and starts DeepSpeed on gloo under --use_cpu), set up logging (without an accelerator: the advice for
    a busy machine), then check the model and tokenizer sources and lock and check --output_dir
    (`albert_hf.training.run_folder.open_run_folder`), and what can be checked of a resume before any data or model
    work (`albert_hf.training.callbacks.check_resume_before_work`)."""
    from .distributed import accelerator_available, init_distributed
    from .training.callbacks import check_resume_before_work
    from .training.job_logs import warn_if_busy
    from .training.run_folder import open_run_folder

    init_distributed(training_args)
    setup_logging(training_args, transformers_level)
    if training_args.should_log and not accelerator_available():
        warn_if_busy()
    for line in getattr(training_args, KEPT_VALUES_ATTRIBUTE, []):
        logger.info(line)
    if model_args is not None:  # before the output folder is made: a run that cannot start leaves none behind
        check_hub_reachable(model_args, dataset_name)
    open_run_folder(training_args, model_args)
    check_resume_before_work(training_args)  # the checkpoint to resume from, and the options it was trained with


def check_hub_reachable(model_args: ModelArguments, dataset_name: str | None = None, timeout: float = 5.0) -> None:
    """Stop at once, with a `MachineStateError` (exit status 3), when the model, the tokenizer or the dataset is a
        Hub name and the Hub cannot be reached: the downloads would otherwise retry for minutes and then blame the name.
        One connection to the Hub (or to the proxy of HTTPS_PROXY), nothing when every source is local or HF_HUB_OFFLINE
        is set. A dataset name counts as a Hub name when it reads "org/name" and is no local path (a bare name may be one of
    `datasets`' own builders, `csv`, `json`, ..., which need no network)."""
    import socket
    from urllib.parse import urlparse

    import huggingface_hub

    from .errors import MachineStateError
    from .training.checkpoints import check_pretrained_source

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


def setup_logging(training_args, transformers_level: int | None = None) -> None:
    """INFO logs from albert_hf on the main process, warnings only on the others; transformers at the same level
    unless `transformers_level` says otherwise."""
    import logging

    import transformers

    from .training.job_logs import quiet_library_noise

    level = logging.INFO if training_args.should_log else logging.WARNING
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=level)
    logging.getLogger("albert_hf").setLevel(level)
    transformers.utils.logging.set_verbosity(level if transformers_level is None else transformers_level)
    quiet_library_noise()
