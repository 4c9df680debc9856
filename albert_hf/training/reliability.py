"""Crash safety for long runs, as plain functions: checkpoint completeness, the run fingerprint, the numerical checks,
rotation and atomic moves. The reliability plugin (training/callbacks.py) makes them callbacks any Trainer attaches in
one line; docs/reliability.md says what each guarantees.

Pretraining runs last days, so a crash must cost minutes, not the run. transformers' `Trainer` gets most of the way
(it saves model, optimizer, scheduler, scaler, RNG states and the data position, and resumes from them), but:

  * it writes a checkpoint straight into `checkpoint-N`, file by file. A crash in the middle leaves a folder that
    `get_last_checkpoint` (and `resume_from_checkpoint=True`) takes as the latest, and resuming from it fails or,
    worse, resumes from a model without its optimizer. It also rotates old checkpoints in the same call, before the
    new one is complete. [`checkpoint_problem`] says what a folder lacks, [`latest_checkpoint`] finds the newest
    complete one (each one skipped is named in a warning with the missing or damaged file), and
    [`rotate_checkpoints`] rotates counting complete checkpoints only, never the one still being uploaded.
  * a NaN or inf loss does not stop training: `logging_nan_inf_filter` hides it from the logs, the optimizer step
    turns every weight into NaN, and the next save writes those weights over the last good checkpoint's slot
    ([`non_finite_parameters`], [`non_finite_message`]).
  * resuming loads weights with `strict=False`, so a checkpoint of another model mostly fails late and without the
    file's name ([`check_checkpoint_matches_model`]); and nothing checks that a resume continues the same run
    ([`fingerprint_of`], [`check_fingerprint`]: each changed option named with both values).

A training stream that can tell its position has it saved in every checkpoint (`stream_position.json`,
training/stream_resume.py), and a resume starts the stream there instead of letting Trainer read the trained batches
again.
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import logging
import math
import os
import re
import shutil
from collections.abc import Iterable
from typing import Any

import torch
from torch.distributed.tensor import DTensor
from transformers import Trainer

from ..errors import UserError
from ..options import RESUME_LATEST_VALUES  # noqa: F401  (read from here by the callbacks and the run folder)
from ..output_files import publish_folder
from .checkpoints import (
    ADAPTER_FILE_NAMES,
    CHECKPOINT_NAME,
    TORCH_FILE_SUFFIXES,
    WEIGHTS_FILE_NAMES,
    WEIGHTS_FILE_SUFFIXES,
    torch_file_problem,
    weights_file_problem,
)

logger = logging.getLogger(__name__)

TRAINER_STATE_NAME = "trainer_state.json"
# The position of a resumable training stream, saved in each checkpoint beside the trainer state.
STREAM_POSITION_NAME = "stream_position.json"
CONFIG_NAME = "config.json"
# The options a resume must not change, saved in each checkpoint (see `run_fingerprint`).
FINGERPRINT_NAME = "run_fingerprint.json"
FSDP_WEIGHTS_PREFIX = "pytorch_model_fsdp"  # folders (sharded) or files (full) of FSDP model states
FSDP_OPTIMIZER_PREFIX = "optimizer_"  # folders of sharded FSDP optimizer states (a full one is optimizer.bin)
DEEPSPEED_STEP_PREFIX = "global_step"  # DeepSpeed's own checkpoint folder: model and optimizer shards
# Where the final model is written before its files are moved into the output folder (`save_model`).
MODEL_STAGING_DIR_NAME = ".model-staging"


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or inf loss; raised before the optimizer step that would spread it to the weights."""


class CheckpointError(UserError):
    """A checkpoint folder is incomplete, damaged, does not fit the model or was written by a run with other
    options; the message names the file (and the options)."""


# --------------------------------------------------------------------------------------------------------------------
# Finding and checking checkpoints
# --------------------------------------------------------------------------------------------------------------------


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """N for a folder named `checkpoint-N`, else None."""
    match = CHECKPOINT_NAME.match(os.path.basename(os.path.normpath(path)))
    return int(match.group(1)) if match else None


def checkpoint_problem(folder: str | os.PathLike, world_size: int | None = None, marked: bool = False) -> str | None:
    """Why `folder` is not a complete Trainer checkpoint (a message naming the missing or damaged file), or None.

    Complete means that every file a resume reads is there and readable, and with `marked`, that the checkpoint was
    marked complete once written (its `run_fingerprint.json`, written last by
    `albert_hf.training.callbacks.CompleteCheckpoints`: a save killed before it leaves a folder without one):
      * `trainer_state.json` parses (Trainer writes it last, so a crash mid-save leaves none);
      * a weights file (safetensors headers are parsed: that is what truncation breaks), or an engine's shards;
      * the training state, unless the checkpoint holds none of it (`save_only_model`): see
        [`training_state_problem`];
      * every file written by `torch.save` (optimizer, scheduler, RNG states, engine shards) opens as a zip archive.
    """
    folder = os.fspath(folder)
    if marked:
        problem = marker_problem(folder)
        if problem is not None:
            return problem
    problem = json_file_problem(os.path.join(folder, TRAINER_STATE_NAME), "the save did not finish")
    if problem is not None:
        return problem
    weights = find_weights(folder)
    if weights is None:
        return f"{folder} holds no weights file (expected one of {', '.join(WEIGHTS_FILE_NAMES)})"
    if not os.path.isdir(weights):
        problem = weights_file_problem(weights)
        if problem is not None:
            return problem
    return training_state_problem(folder, world_size) or damaged_torch_file(folder)


def marker_problem(folder: str) -> str | None:
    """Why `folder` carries no readable completion marker (`run_fingerprint.json`), or None."""
    path = os.path.join(folder, FINGERPRINT_NAME)
    return json_file_problem(path, "the save did not finish: a checkpoint is marked complete last")


def json_file_problem(path: str, why_missing: str) -> str | None:
    """Why the JSON file at `path` is missing (`why_missing` says what that means) or unreadable, or None."""
    if not os.path.isfile(path):
        return f"{path} is missing ({why_missing})"
    try:
        with open(path, encoding="utf-8") as handle:
            json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"{path} is unreadable: {error}"
    return None


_RNG_FILE = re.compile(r"^rng_state(?:_(\d+))?\.pth$")


def training_state_problem(folder: str, world_size: int | None = None) -> str | None:
    """Which file of the training state is missing from a checkpoint that holds some of it, or None.

    What Trainer writes (and reads back on a resume) beside the weights: the optimizer's state (`optimizer.pt`;
    DeepSpeed's `global_stepN/` folder; FSDP's `optimizer_*` folders or `optimizer.bin`), the schedule's
    `scheduler.pt` (DeepSpeed keeps its own schedulers in its folder, so there it may be absent), and the RNG states:
    `rng_state.pth` from one process, `rng_state_{rank}.pth` from each of several (`world_size` of them when given;
    otherwise ranks 0..k without a gap). A checkpoint with none of these is a model-only one (`save_only_model`).
    """
    names = set(os.listdir(folder))
    deepspeed = any(
        name.startswith(DEEPSPEED_STEP_PREFIX) and os.path.isdir(os.path.join(folder, name)) for name in names
    )
    has_optimizer = (
        deepspeed
        or bool(names & {"optimizer.pt", "optimizer.bin"})
        or any(name.startswith(FSDP_OPTIMIZER_PREFIX) for name in names)
    )
    ranks = sorted(int(match.group(1)) for match in map(_RNG_FILE.match, names) if match and match.group(1))
    single_rng = "rng_state.pth" in names
    if not (has_optimizer or "scheduler.pt" in names or ranks or single_rng):
        return None
    if not has_optimizer:
        return f"{os.path.join(folder, 'optimizer.pt')} is missing (the optimizer state)"
    if "scheduler.pt" not in names and not deepspeed:
        return f"{os.path.join(folder, 'scheduler.pt')} is missing (the learning-rate schedule's state)"
    if world_size is not None and world_size > 1:
        expected = [f"rng_state_{rank}.pth" for rank in range(world_size)]
    elif world_size == 1 or single_rng or not ranks:
        expected = ["rng_state.pth"]
    else:
        expected = [f"rng_state_{rank}.pth" for rank in range(ranks[-1] + 1)]
    missing = [name for name in expected if name not in names]
    if missing:
        return f"{os.path.join(folder, missing[0])} is missing (the random number generators' state)"
    return None


def damaged_torch_file(folder: str) -> str | None:
    """The first file written by `torch.save` under `folder` that cannot be opened (why, naming it), or None."""
    for root, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if name.endswith(TORCH_FILE_SUFFIXES):
                problem = torch_file_problem(os.path.join(root, name))
                if problem is not None:
                    return problem
    return None


def find_weights(folder: str) -> str | None:
    """The weights of a checkpoint folder: a file of `WEIGHTS_FILE_NAMES`, else FSDP's model states (a shard folder
    or a full file), a DeepSpeed folder of model shards, or a subfolder holding a named PEFT adapter, else None."""
    for name in WEIGHTS_FILE_NAMES:
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(FSDP_WEIGHTS_PREFIX):
            return path
        if not os.path.isdir(path):
            continue
        has_adapter = any(os.path.isfile(os.path.join(path, adapter)) for adapter in ADAPTER_FILE_NAMES)
        if name.startswith(DEEPSPEED_STEP_PREFIX) or has_adapter:
            return path
    return None


def latest_checkpoint(output_dir: str | os.PathLike, marked: bool = False, warn: bool = True) -> str | None:
    """The newest complete `checkpoint-N` folder of `output_dir`, or None if there is none.

    Unlike transformers' `get_last_checkpoint`, folders a crash left incomplete (no `trainer_state.json`, unreadable
    weights; with `marked`, no completion marker) are skipped with a warning naming the problem.
    """
    output_dir = os.fspath(output_dir)
    if not os.path.isdir(output_dir):
        return None
    candidates = []
    for name in os.listdir(output_dir):
        step = checkpoint_step(name)
        if step is not None and os.path.isdir(os.path.join(output_dir, name)):
            candidates.append((step, os.path.join(output_dir, name)))
    for _, folder in sorted(candidates, reverse=True):
        problem = checkpoint_problem(folder, marked=marked)
        if problem is None:
            return folder
        if warn:
            logger.warning("Skipping incomplete checkpoint %s: %s.", folder, problem)
    return None


def check_checkpoint_matches_model(folder: str | os.PathLike, model: torch.nn.Module) -> None:
    """Raise [`CheckpointError`] naming the file when the checkpoint in `folder` cannot be loaded into `model`.

    Checks the config's `model_type`, that the weights file is readable, and that every tensor the checkpoint shares
    with the model has the model's shape (read from the safetensors header, or from a `.bin` loaded weights-only).
    Checkpoints of a PEFT model (adapter files) are left to PEFT.
    """
    folder = os.fspath(folder)
    config_file = os.path.join(folder, CONFIG_NAME)
    model_config = getattr(model, "config", None)
    if os.path.isfile(config_file) and model_config is not None:
        try:
            with open(config_file, encoding="utf-8") as handle:
                saved_type = json.load(handle).get("model_type")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CheckpointError(f"{config_file} is unreadable: {error}") from None
        # A config class may read configs of several types (albert_hf's reads transformers' own "albert", the type
        # of every folder saved in transformers' format).
        accepted = getattr(model_config, "compatible_model_types", (model_config.model_type,))
        if saved_type is not None and saved_type not in accepted:
            raise CheckpointError(
                f"{config_file} is a config of model type {saved_type!r}, but the model being trained is "
                f"{model_config.model_type!r}: this checkpoint belongs to another model."
            )
    weights_path = next(
        (
            os.path.join(folder, name)
            for name in ("model.safetensors", "pytorch_model.bin")
            if os.path.isfile(os.path.join(folder, name))
        ),
        None,
    )
    if weights_path is None:
        return  # sharded or adapter checkpoints: Trainer's own loading checks them
    problem = weights_file_problem(weights_path)
    if problem is not None:
        raise CheckpointError(problem)
    # Names and shapes as in state_dict(), read from the modules (no copy, no collective under FSDP).
    tensors = itertools.chain(
        model.named_parameters(remove_duplicate=False), model.named_buffers(remove_duplicate=False)
    )
    expected = {name: tuple(tensor.shape) for name, tensor in tensors}
    mismatched = [
        f"{name}: {shape} in the file, {expected[name]} in the model"
        for name, shape in saved_shapes(weights_path).items()
        if name in expected and shape != expected[name]
    ]
    if mismatched:
        shown = "; ".join(mismatched[:5]) + (f"; and {len(mismatched) - 5} more" if len(mismatched) > 5 else "")
        raise CheckpointError(f"{weights_path}: {len(mismatched)} tensors do not match the model's shapes: {shown}.")


def saved_shapes(weights_path: str) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape of a safetensors file (header only) or a `.bin` file (loaded weights-only, mmapped)."""
    if weights_path.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(weights_path, framework="pt") as handle:
            return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    try:
        # weights_only: a pickle that would run code is refused, never executed.
        state_dict = torch.load(weights_path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # noqa: BLE001 - corrupt zip, refused pickle, ...: all mean "cannot load"
        raise CheckpointError(f"{weights_path} cannot be loaded as plain weights: {error}") from None
    return {name: tuple(tensor.shape) for name, tensor in state_dict.items()}


# --------------------------------------------------------------------------------------------------------------------
# Numerical health
# --------------------------------------------------------------------------------------------------------------------


def loss_scale(trainer: Trainer) -> float | None:
    """The current fp16 loss scale of the trainer's gradient scaler, or None when no scaler is in use."""
    scaler = getattr(trainer.accelerator, "scaler", None)
    if scaler is None or not scaler.is_enabled():
        return None
    return float(scaler.get_scale())


def non_finite_message(trainer: Trainer, what: str, saving: bool = False) -> str:
    """The message that stops a run on `what` (a non-finite loss or weights): the global step, the fp16 loss scale,
    the epoch, and the last complete checkpoint to resume from."""
    state = trainer.state
    step = state.global_step if saving else state.global_step + 1  # the step being computed
    scale = loss_scale(trainer)
    parts = [f"Stopping: {what} at global step {step}"]
    if scale is not None:
        parts.append(f"fp16 loss scale {scale:g}")
    if state.epoch is not None and not math.isnan(state.epoch):
        parts.append(f"epoch {state.epoch:.2f}")
    message = ", ".join(parts) + (
        ". Nothing was saved from this step." if saving else ". The optimizer step was not taken."
    )
    last = latest_checkpoint(trainer.args.output_dir)
    if last is None:
        return message + " No checkpoint was written yet."
    return message + (
        f" The last complete checkpoint is {last}: resume from it, e.g. with a lower learning rate, "
        "bf16 instead of fp16, or gradient clipping."
    )


def non_finite_parameters(model: torch.nn.Module) -> list[str]:
    """Names of the parameters holding a NaN or inf (one device sync for all of them)."""
    named = [(name, parameter) for name, parameter in model.named_parameters() if parameter.numel()]
    if not named:
        return []
    # FSDP2 parameters are DTensors: each process checks its own shard, then all take the verdict of every shard.
    sharded = any(isinstance(parameter, DTensor) for _, parameter in named)
    local = [parameter.to_local() if isinstance(parameter, DTensor) else parameter for _, parameter in named]
    device = local[0].device
    # One flag per parameter, gathered on one device: a single transfer to the CPU instead of one per parameter.
    finite = torch.stack([torch.isfinite(tensor.detach()).all().to(device) for tensor in local]).int()
    if sharded:
        torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN)
    return [name for (name, _), ok in zip(named, finite.cpu().tolist()) if not ok]


# --------------------------------------------------------------------------------------------------------------------
# Rotation
# --------------------------------------------------------------------------------------------------------------------


def rotate_checkpoints(
    run_dir: str,
    save_total_limit: int | None,
    best_model_checkpoint: str | None,
    marked: bool = False,
    keep: Iterable[str] = (),
) -> None:
    """Delete the checkpoints of `run_dir` older than its `save_total_limit` newest complete ones, never the best nor
    those in `keep` (still being read, e.g. uploaded).

    Ordered by step, not by modification time (which a copy or a restore from backup changes). Folders a crash left
    incomplete count for nothing: the newest complete ones are kept, so an incomplete newer folder never costs the
    last good checkpoint, and incomplete folders older than those kept go with the rest.
    """
    if not save_total_limit or save_total_limit <= 0:
        return
    folders = sorted(
        (step, os.path.join(run_dir, name))
        for name in os.listdir(run_dir)
        if (step := checkpoint_step(name)) is not None and os.path.isdir(os.path.join(run_dir, name))
    )
    complete = [(step, folder) for step, folder in folders if checkpoint_problem(folder, marked=marked) is None]
    if len(complete) <= save_total_limit:
        return
    oldest_kept = complete[-save_total_limit][0]
    kept = {os.path.abspath(folder) for folder in keep}
    if best_model_checkpoint:
        kept.add(os.path.abspath(best_model_checkpoint))
    for step, folder in folders:
        if step < oldest_kept and os.path.abspath(folder) not in kept:
            logger.info("Deleting older checkpoint %s (save_total_limit=%d).", folder, save_total_limit)
            shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------------------
# Run fingerprint: what a resume must not change
# --------------------------------------------------------------------------------------------------------------------

# Config fields that describe where and how a model was saved, not the model, so they may differ across a resume;
# `problem_type` too, which a classification model's first forward infers from its labels.
CONFIG_FIELDS_NOT_FINGERPRINTED = (
    "transformers_version",
    "_name_or_path",
    "architectures",
    "auto_map",
    # which tokenizer class a folder names: how the model is saved (`albert_hf.formats.pair_with_tokenizer`)
    "tokenizer_class",
    "dtype",
    "torch_dtype",
    "problem_type",
)
# Training options that change the optimization a checkpoint continues (read with getattr: PretrainingArguments
# adds `optimizer` and `lr_schedule`, plain TrainingArguments has neither).
OPTIMIZER_OPTIONS = (
    "optim",
    "optimizer",
    "learning_rate",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "weight_decay",
    "lr_scheduler_type",
    "lr_schedule",
    "lr_decay_power",
    "warmup_steps",
    "warmup_ratio",
)


# Training options that decide which examples each later step trains on, and in which order: the seed (Trainer's
# sampler draws each epoch's order from it, or from --data_seed; a pretraining collator draws its masks from it), the
# sampling strategy and whether the last partial batch is dropped.
DATA_ORDER_OPTIONS = ("seed", "data_seed", "train_sampling_strategy", "dataloader_drop_last")
# The key of the tokenizer's content (`albert_hf.data.caching.tokenizer_fingerprint`: its vocabulary, SentencePiece
# model and settings): the same path may hold another tokenizer when a run resumes, which trains other ids.
TOKENIZER_KEY = "tokenizer.content"
# Keys of a checkpoint's fingerprint that describe the checkpoint itself, not the run, written when it is marked
# complete (`checkpoint_record`): never compared with a resumed run's options, but with the checkpoint's other files
# (`checkpoint_consistency_problem`). A fingerprint without the version key was written before the data order, the
# tokenizer's content and these were recorded.
CHECKPOINT_KEY_PREFIX = "checkpoint."
FINGERPRINT_VERSION_KEY = "checkpoint.fingerprint_version"
FINGERPRINT_VERSION = 2
STEP_KEY = "checkpoint.global_step"
SCHEDULER_STEPS_KEY = "checkpoint.scheduler_steps"
OPTIMIZER_STEPS_KEY = "checkpoint.optimizer_steps"


def _plain(value: Any) -> Any:
    """`value` as JSON would give it back (enums and other objects as strings, tuples as lists)."""
    return json.loads(json.dumps(value, default=str))


def fingerprint_of(
    args, model: torch.nn.Module | None, extra: dict[str, Any] | None = None, tokenizer: Any = None
) -> dict[str, Any]:
    """The options a resume must keep, flat ("model.hidden_size", "optimizer.learning_rate", "training.seed",
    "global_batch_size", "tokenizer.content", "job.<key>"): the model's config, the optimizer and its schedule, what
    decides the order of the data (`DATA_ORDER_OPTIONS`), the global batch (per device x accumulation x processes),
    the tokenizer's content, and the job's own options `extra` (data files, how text becomes examples and is masked:
    the `fingerprint_extra` of the plugin's `CompleteCheckpoints`). Without a model, tokenizer or `extra`, the keys of
    the training arguments alone (what a resume can check before any data or model work)."""
    config = getattr(model, "config", None)
    config_dict = config.to_dict() if config is not None else {}
    fingerprint: dict[str, Any] = {
        f"model.{key}": value for key, value in config_dict.items() if key not in CONFIG_FIELDS_NOT_FINGERPRINTED
    }
    fingerprint.update({f"optimizer.{name}": getattr(args, name) for name in OPTIMIZER_OPTIONS if hasattr(args, name)})
    fingerprint.update({f"training.{name}": getattr(args, name) for name in DATA_ORDER_OPTIONS if hasattr(args, name)})
    fingerprint["global_batch_size"] = (
        args.per_device_train_batch_size * args.gradient_accumulation_steps * max(args.world_size, 1)
    )
    if tokenizer is not None:
        from ..data.caching import tokenizer_fingerprint

        fingerprint[TOKENIZER_KEY] = tokenizer_fingerprint(tokenizer)
    fingerprint.update({f"job.{key}": value for key, value in (extra or {}).items()})
    return _plain(fingerprint)


def checkpoint_record(state, optimizer=None, lr_scheduler=None) -> dict[str, Any]:
    """What a checkpoint's marker records about the checkpoint itself (`CHECKPOINT_KEY_PREFIX`), beside the run's
    options: the global step, the steps the schedule and the optimizer had taken (where they count them), so that a
    resume can tell when one of its files was edited or copied from another checkpoint."""
    record: dict[str, Any] = {FINGERPRINT_VERSION_KEY: FINGERPRINT_VERSION, STEP_KEY: state.global_step}
    scheduler_steps = getattr(lr_scheduler, "last_epoch", None)
    if isinstance(scheduler_steps, int):
        record[SCHEDULER_STEPS_KEY] = scheduler_steps
    optimizer_steps = _optimizer_steps(getattr(optimizer, "state", None))
    if optimizer_steps is not None:
        record[OPTIMIZER_STEPS_KEY] = optimizer_steps
    return record


def _optimizer_steps(state: Any) -> int | None:
    """The most steps any parameter's optimizer state counts ("step": AdamW, LAMB, ...), or None where the state
    counts none (or is an engine's, partitioned elsewhere). One transfer to the host for all of them."""
    if not isinstance(state, dict):
        return None
    steps = [each["step"] for each in state.values() if isinstance(each, dict) and "step" in each]
    if not steps:
        return None
    try:
        if all(isinstance(step, torch.Tensor) for step in steps):
            return int(torch.stack([step.detach().float().reshape(()).cpu() for step in steps]).max().item())
        return int(max(float(step) for step in steps))
    except (TypeError, ValueError, RuntimeError):
        return None


# How a data file is identified in the fingerprint: by its content, not its path (the same path may hold other data
# when a run resumes). Files up to WHOLE_FILE_HASH_LIMIT bytes: the sha256 of the whole file. Larger ones, too costly
# to read again at every start: their size and the sha256 of DATA_SAMPLE_COUNT blocks of DATA_SAMPLE_BYTES at evenly
# spaced offsets, the first and the last block included (a change anywhere in them, or of the size, is seen; an
# edit of the same length between two blocks is not).
WHOLE_FILE_HASH_LIMIT = 64 * 2**20
DATA_SAMPLE_COUNT = 64
DATA_SAMPLE_BYTES = 64 * 2**10
# Fingerprint keys of data files start with this, followed by the file's absolute path.
DATA_FILE_KEY = "data file "


def data_file_identity(path: str | os.PathLike) -> str:
    """The content identity of one data file (`WHOLE_FILE_HASH_LIMIT` and the lines above it say the rule)."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= WHOLE_FILE_HASH_LIMIT:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
            return f"sha256 {digest.hexdigest()}"
        last = size - DATA_SAMPLE_BYTES
        for index in range(DATA_SAMPLE_COUNT):
            handle.seek(index * last // (DATA_SAMPLE_COUNT - 1))
            digest.update(handle.read(DATA_SAMPLE_BYTES))
    return f"{size} bytes, sha256 of {DATA_SAMPLE_COUNT} samples {digest.hexdigest()}"


def data_files_fingerprint(paths: Iterable[str | os.PathLike | None]) -> dict[str, str]:
    """`{"data file <absolute path>": identity}` for every file that `paths` (files, folders, globs; None and names
    that are not local, e.g. Hub dataset ids, skipped) holds: hidden files and folders left out, as the loaders do.
    A job adds it to its `run_fingerprint_extra`, so a resume after the data changed at the same path is refused
    naming the file."""
    files: list[str] = []
    for path in filter(None, map(lambda p: p and os.fspath(p), paths)):
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            for root, folders, names in os.walk(path):
                folders[:] = sorted(name for name in folders if not name.startswith("."))
                files += [os.path.join(root, name) for name in sorted(names) if not name.startswith(".")]
        elif glob.has_magic(path):
            files += sorted(match for match in glob.glob(path, recursive=True) if os.path.isfile(match))
    return {f"{DATA_FILE_KEY}{os.path.abspath(file)}": data_file_identity(file) for file in files}


def fingerprint_label(key: str) -> str:
    """How a message names a fingerprint key: the option it holds (`--learning_rate`), a field of the model's config,
    the content of a data file or of the tokenizer."""
    if key.startswith(f"job.{DATA_FILE_KEY}"):
        return f"the content of {key.removeprefix(f'job.{DATA_FILE_KEY}')}"
    if key == TOKENIZER_KEY:
        return "the tokenizer's content (vocabulary, pieces and settings)"
    if key == "global_batch_size":
        return "the global batch (--per_device_train_batch_size x --gradient_accumulation_steps x processes)"
    if key.startswith("model."):
        return f"the model config's {key.removeprefix('model.')}"
    if key == "job.tokenizer":
        return "the tokenizer (--tokenizer_name_or_path, else --model_name_or_path)"
    if key in ("job.task", "job.train_data"):  # the fine-tuning jobs' task, and the options naming its data
        return "the task" if key == "job.task" else "the training data"
    for prefix in ("optimizer.", "training.", "job."):
        if key.startswith(prefix):
            return f"--{key.removeprefix(prefix)}"
    return key


def fingerprint_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per key whose value differs ("--seed: 42 in the checkpoint, 7 now"), the checkpoint's own record
    (`CHECKPOINT_KEY_PREFIX`) left out."""
    missing = object()
    keys = {key for key in set(saved) | set(current) if not key.startswith(CHECKPOINT_KEY_PREFIX)}
    return [
        f"{fingerprint_label(key)}: {saved.get(key, missing)!r} in the checkpoint, {current.get(key, missing)!r} now".replace(
            repr(missing), "absent"
        )
        for key in sorted(keys)
        if saved.get(key, missing) != current.get(key, missing)
    ]


def read_fingerprint(checkpoint: str) -> dict[str, Any] | None:
    """The fingerprint saved in `checkpoint` (`run_fingerprint.json`), or None when it has none; an unreadable one is
    a [`CheckpointError`]."""
    path = os.path.join(checkpoint, FINGERPRINT_NAME)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is unreadable: {error}") from None
    if not isinstance(saved, dict):
        raise CheckpointError(f"{path} is not a fingerprint (a JSON object of the run's options).")
    return saved


def check_fingerprint(checkpoint: str, current: dict[str, Any], only_current_keys: bool = False) -> None:
    """Raise [`CheckpointError`] naming each option (both values) that `current` (a [`fingerprint_of`]) changes from
    the one saved in `checkpoint`; a checkpoint without a fingerprint (an older albert_hf's, a plain Trainer's) is
    let through with a warning, and the keys an older fingerprint did not record yet are not compared (a warning
    names them). `only_current_keys`: compare the keys of `current` only (the training arguments' keys, checked
    before the data and model that make the others exist)."""
    path = os.path.join(checkpoint, FINGERPRINT_NAME)
    saved = read_fingerprint(checkpoint)
    if saved is None:
        if not only_current_keys:
            logger.warning(
                "%s has no %s (written by an older albert_hf or a plain Trainer): the options of the run it "
                "continues (model, optimizer, batch size, data) cannot be checked.",
                checkpoint,
                FINGERPRINT_NAME,
            )
        return
    if not any(key.startswith(f"job.{DATA_FILE_KEY}") for key in saved):  # written before data was fingerprinted
        current = {key: value for key, value in current.items() if not key.startswith(f"job.{DATA_FILE_KEY}")}
        if not only_current_keys:
            logger.warning("%s identifies no data file by content: a change of the data cannot be checked.", path)
    if FINGERPRINT_VERSION_KEY not in saved:  # written before the data order and the tokenizer's content were
        unrecorded = sorted(key for key in current if key not in saved and not key.startswith(f"job.{DATA_FILE_KEY}"))
        current = {key: value for key, value in current.items() if key not in unrecorded}
        if unrecorded and not only_current_keys:
            logger.warning(
                "%s was written by an earlier albert_hf, which did not record %s: a change of them cannot be checked.",
                path,
                ", ".join(map(fingerprint_label, unrecorded)),
            )
    if only_current_keys:
        saved = {key: value for key, value in saved.items() if key in current}
    differences = fingerprint_differences(saved, current)
    if differences:
        raise CheckpointError(
            f"Cannot resume from {checkpoint}: the run would change {len(differences)} of the options it was "
            f"trained with ({path}): " + "; ".join(differences) + ". Resume with the same options, or start a new "
            "run in another --output_dir."
        )


def _torch_file(path: str) -> Any:
    """A file written by `torch.save`, loaded weights-only and memory-mapped (a large optimizer state is not read
    whole), or None when it cannot be read so (its completeness is `checkpoint_problem`'s to judge)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - a file of another layout or engine: nothing to compare
        return None


def checkpoint_consistency_problem(folder: str | os.PathLike) -> str | None:
    """Why the files of a checkpoint disagree about the step it was written at, naming them, or None: the folder's
    name (`checkpoint-N`), `trainer_state.json`'s global step, what the completion marker (`run_fingerprint.json`)
    recorded when the checkpoint was written (`checkpoint_record`), and the steps `scheduler.pt` and `optimizer.pt`
    count. Trainer takes `trainer_state.json` as it is: an edited global step, or a state file copied from another
    checkpoint, would resume the schedule and the data at one step and the optimizer at another. The schedule and the
    optimizer may count fewer steps than the global step where fp16 skipped some (then neither steps), never more;
    a marker's record must be met exactly."""
    folder = os.fspath(folder)
    state_file = os.path.join(folder, TRAINER_STATE_NAME)
    try:
        with open(state_file, encoding="utf-8") as handle:
            step = json.load(handle).get("global_step")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None  # `checkpoint_problem` names a missing or unreadable state
    if not isinstance(step, int) or isinstance(step, bool):
        return f"{state_file} holds no global step (global_step: {step!r})"
    said = f"{state_file} says global step {step}"
    problems = []
    named_step = checkpoint_step(folder)
    if named_step is not None and named_step != step:
        problems.append(f"the folder is named for step {named_step}")
    try:
        record = read_fingerprint(folder) or {}
    except CheckpointError:
        record = {}
    recorded = record.get(STEP_KEY)
    if recorded is not None and recorded != step:
        problems.append(f"{os.path.join(folder, FINGERPRINT_NAME)} recorded step {recorded} when it was written")
    counted = (
        ("scheduler.pt", SCHEDULER_STEPS_KEY, "the learning-rate schedule", lambda loaded: loaded.get("last_epoch")),
        ("optimizer.pt", OPTIMIZER_STEPS_KEY, "the optimizer", lambda loaded: _optimizer_steps(loaded.get("state"))),
    )
    for name, key, what, read in counted:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        loaded = _torch_file(path)
        steps = read(loaded) if isinstance(loaded, dict) else None
        if not isinstance(steps, int):
            continue
        if key in record and steps != record[key]:
            problems.append(f"{path} has {what} at step {steps}, where {FINGERPRINT_NAME} recorded {record[key]}")
        elif steps > step:
            problems.append(f"{path} has {what} at step {steps}")
    if not problems:
        return None
    return (
        f"the files of {folder} disagree about its step: {said}, but " + "; ".join(problems) + ". A file was edited "
        "or copied from another checkpoint: put it back, or resume from another checkpoint"
    )


# --------------------------------------------------------------------------------------------------------------------
# Secrets
# --------------------------------------------------------------------------------------------------------------------


def hand_hub_token_to_environment(training_args) -> None:
    """Move `--hub_token` out of the arguments into this process's `HF_TOKEN`, so that no file holds it.

    Trainer pickles its whole `TrainingArguments` into `training_args.bin` of the output folder and of every
    checkpoint (the files `push_to_hub` uploads), token included. Every Hub call of Trainer passes
    `token=args.hub_token`, and huggingface_hub resolves a `None` token from `HF_TOKEN` at each call, so with the token
    there the pushes authenticate as before, and the pickled arguments hold `hub_token=None`. The environment variable
    lives in this process (and the processes it starts) only; nothing albert_hf writes reads it.
    """
    token = getattr(training_args, "hub_token", None)
    if token:
        os.environ["HF_TOKEN"] = token
        training_args.hub_token = None


# --------------------------------------------------------------------------------------------------------------------
# Atomic writes of a folder's files
# --------------------------------------------------------------------------------------------------------------------


def move_files_in(staging_dir: str, final_dir: str) -> None:
    """Move every entry of a completely written (and fsynced) `staging_dir` into `final_dir`: weights first,
    `config.json` last, so that a folder with a config.json always holds the whole model it describes
    (`from_pretrained` reads config.json first). Through albert_hf's writer (`albert_hf.output_files.publish_folder`):
    a file of the same name is replaced only if a job wrote it, and one that no job wrote (a user's, a symlink)
    stops the save, naming it, before anything moves."""
    publish_folder(staging_dir, final_dir, keep_name=True, first=WEIGHTS_FILE_SUFFIXES, last=(CONFIG_NAME,))
