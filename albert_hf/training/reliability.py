"""Crash safety for long runs: atomic checkpoints, a non-finite loss guard, and checked resumption.

Pretraining runs last days, so a crash must cost minutes, not the run. transformers' `Trainer` gets most of the way
(it saves model, optimizer, scheduler, scaler, RNG states and the data position, and resumes from them), but:

  * it writes a checkpoint straight into `checkpoint-N`, file by file. A crash in the middle leaves a folder that
    `get_last_checkpoint` (and `resume_from_checkpoint=True`) takes as the latest, and resuming from it fails or,
    worse, resumes from a model without its optimizer. It also rotates old checkpoints in the same call.
  * a NaN or inf loss does not stop training: `logging_nan_inf_filter` hides it from the logs, the optimizer step
    turns every weight into NaN, and the next save writes those weights over the last good checkpoint's slot.
  * resuming loads weights with `strict=False`, so a checkpoint of another model mostly fails late and without the
    file's name.

[`ReliableTrainerMixin`] fixes the three, for any Trainer subclass (`class MyTrainer(ReliableTrainerMixin, Trainer)`):

  * Checkpoints are written into `<output_dir>/.checkpoint-staging/checkpoint-N` (a name that neither
    `get_last_checkpoint`'s regex nor checkpoint rotation ever matches), every file and folder is fsynced, and only
    then the main process renames the folder to `<output_dir>/checkpoint-N` (`os.replace`, atomic on POSIX). Old
    checkpoints are rotated only after that. With several processes, all write into the staging folder, meet at a
    barrier, the main process renames, and they meet again, so no process reads a checkpoint before it has its name.
  * Every training micro-batch's loss is checked: a non-finite one raises [`NonFiniteLossError`] naming the global
    step (and the fp16 loss scale), before the optimizer step. Parameters are checked again before every save, so a
    checkpoint never holds NaN/inf weights (e.g. from overflowing gradients without a loss scaler).
  * Resuming first checks the checkpoint (in `train()`, before anything is loaded): it must be complete (every
    file the resume reads is there and readable, see [`checkpoint_problem`]), fit the model (model type, tensor
    shapes) and have been written by the same run: each checkpoint carries `run_fingerprint.json` (model config,
    optimizer and schedule, global batch, and what the job declares in `run_fingerprint_extra`), and a resume that
    would change any of it is refused naming each option with both values. Each failure is an error naming the
    file. A run that already reached `--max_steps` in its checkpoint is not trained further.
  * The final model (`save_model`) is written into a staging folder and moved in file by file, weights first and
    `config.json` last, so a folder with a config.json always holds the whole model it describes.

Everything is built on Trainer's public hooks where one serves (`train`, `training_step`, `save_model`, a
`TrainerCallback` for the divergence rollback); what has none goes through training/transformers_internals.py, the
one module that touches private transformers names (each listed there with its reason, each checked by a test).

A training stream that can tell its position (`albert_hf.data.instance_stream.ResumableInstanceStream`) has it saved
in every checkpoint (`stream_position.json`), and a resume starts the stream there instead of letting Trainer read the
trained batches again.

[`latest_checkpoint`] finds the newest *complete* checkpoint of an output folder (also among those written by a plain
Trainer, which a crash may have left half-written: each one skipped is named in a warning with the missing or damaged
file), and [`resolve_resume_checkpoint`] turns `--resume_from_checkpoint
latest` into it, so the same command starts a job and restarts it after a crash.
"""

from __future__ import annotations

import contextlib
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
from transformers import Trainer, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, SaveStrategy, TrainOutput, has_length

from ..errors import UserError
from .checkpoints import (
    ADAPTER_FILE_NAMES,
    CHECKPOINT_NAME,
    TORCH_FILE_SUFFIXES,
    WEIGHTS_FILE_NAMES,
    WEIGHTS_FILE_SUFFIXES,
    torch_file_problem,
    weights_file_problem,
)
from .divergence import DivergenceGuard, add_rollback_callback
from .model_files import load_checkpoint_weights, save_full_model
from .transformers_internals import TrainerInternalHooks, upload_jobs, warn_about_missing_internal_names

logger = logging.getLogger(__name__)

# Where checkpoints are written before they get their final name. Starts with "." so that neither Trainer's
# `checkpoint-*` glob (rotation) nor its `^checkpoint-(\d+)$` regex (get_last_checkpoint) ever sees it.
STAGING_DIR_NAME = ".checkpoint-staging"
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
# Values of --resume_from_checkpoint that mean "the newest complete checkpoint of --output_dir, if any".
RESUME_LATEST_VALUES = ("latest", "last", "true", "auto")


class NonFiniteLossError(RuntimeError):
    """Training produced a NaN or inf loss; raised before the optimizer step that would spread it to the weights."""


class CheckpointError(UserError):
    """A checkpoint folder is incomplete, damaged, does not fit the model or was written by a run with other
    options; the message names the file (and the options)."""


# --------------------------------------------------------------------------------------------------------------------
# Files: fsync and publication
# --------------------------------------------------------------------------------------------------------------------


def fsync_path(path: str | os.PathLike) -> None:
    """fsync one file or folder (a folder's fsync makes the names of its entries durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(folder: str | os.PathLike) -> None:
    """fsync every file under `folder`, then every folder bottom-up, so the whole tree is on disk before a rename."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            fsync_path(os.path.join(root, name))
        fsync_path(root)


def publish_checkpoint(staging_dir: str, final_dir: str) -> None:
    """Give a completely written checkpoint folder its final name, atomically and durably.

    The folder is fsynced, then renamed with `os.replace` (atomic within a filesystem), then the parent folder is
    fsynced so the new name survives a power loss. If `final_dir` already exists (a run saving the same step again),
    the old folder is first moved aside into the staging area and deleted after the new one is in place: at every
    instant `final_dir` is either absent (the previous checkpoint is then the latest) or complete.
    """
    fsync_tree(staging_dir)
    retired = None
    if os.path.exists(final_dir):
        retired = staging_dir + ".replaced"
        shutil.rmtree(retired, ignore_errors=True)
        os.replace(final_dir, retired)
    os.replace(staging_dir, final_dir)
    fsync_path(os.path.dirname(os.path.abspath(final_dir)))
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


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
    marked complete once written (its `run_fingerprint.json`, written last by [`ReliableTrainerMixin`] and by
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
    state_file = os.path.join(folder, TRAINER_STATE_NAME)
    if not os.path.isfile(state_file):
        return f"{state_file} is missing (the save did not finish)"
    try:
        with open(state_file, encoding="utf-8") as handle:
            json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"{state_file} is unreadable: {error}"
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
    if not os.path.isfile(path):
        return f"{path} is missing (the save did not finish: a checkpoint is marked complete last)"
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


def latest_checkpoint(output_dir: str | os.PathLike, marked: bool = False) -> str | None:
    """The newest complete `checkpoint-N` folder of `output_dir`, or None if there is none.

    Unlike transformers' `get_last_checkpoint`, folders a crash left incomplete (no `trainer_state.json`, unreadable
    weights; with `marked`, no completion marker) are skipped with a warning naming the problem, and the staging area
    of [`ReliableTrainerMixin`] is never considered.
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
        logger.warning("Skipping incomplete checkpoint %s: %s.", folder, problem)
    return None


def resolve_resume_checkpoint(resume_from_checkpoint: str | bool | None, output_dir: str) -> str | None:
    """What to pass to `Trainer.train(resume_from_checkpoint=...)` for a `--resume_from_checkpoint` value.

    None/False: start fresh. True or "latest" (also "last", "true", "auto"): the newest complete checkpoint of
    `output_dir`, or a fresh start when there is none yet, so one command both starts a job and restarts it after a
    crash. A path: that checkpoint, which must be complete ([`CheckpointError`] names the problem otherwise).
    """
    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    if resume_from_checkpoint is True or str(resume_from_checkpoint).lower() in RESUME_LATEST_VALUES:
        checkpoint = latest_checkpoint(output_dir)
        if checkpoint is None:
            logger.info("No complete checkpoint in %s yet: training starts from the beginning.", output_dir)
        return checkpoint
    path = os.fspath(resume_from_checkpoint)
    if not os.path.isdir(path):
        raise CheckpointError(f"--resume_from_checkpoint: no checkpoint folder at {path}.")
    problem = checkpoint_problem(path)
    if problem is not None:
        raise CheckpointError(f"--resume_from_checkpoint {path}: {problem}.")
    return path


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
        if saved_type is not None and saved_type != model_config.model_type:
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


@contextlib.contextmanager
def own_class(model: torch.nn.Module):
    """The model with its own class for the duration (FSDP2's `FSDP<name>` subclass set aside)."""
    wrapped = type(model)
    own = next((c for c in wrapped.__mro__[1:] if c.__name__ == wrapped.__name__.removeprefix("FSDP")), wrapped)
    model.__class__ = own
    try:
        yield model
    finally:
        model.__class__ = wrapped


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
# The Trainer mixin
# --------------------------------------------------------------------------------------------------------------------


def rotate_checkpoints(
    run_dir: str, save_total_limit: int | None, best_model_checkpoint: str | None, marked: bool = False
) -> None:
    """Delete the checkpoints of `run_dir` older than its `save_total_limit` newest complete ones, never the best.

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
    best = os.path.abspath(best_model_checkpoint) if best_model_checkpoint else None
    for step, folder in folders:
        if step < oldest_kept and os.path.abspath(folder) != best:
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


def _plain(value: Any) -> Any:
    """`value` as JSON would give it back (enums and other objects as strings, tuples as lists)."""
    return json.loads(json.dumps(value, default=str))


def run_fingerprint(trainer: Trainer) -> dict[str, Any]:
    """The options a resume must keep, flat ("model.hidden_size", "optimizer.learning_rate", "global_batch_size",
    "job.<key>"): the model's config, the optimizer and its schedule, the global batch (per device x accumulation x
    processes) and what the job declared in `trainer.run_fingerprint_extra` (data files, tokenizer, objective)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    return fingerprint_of(trainer.args, model, trainer.run_fingerprint_extra)


def fingerprint_of(args, model: torch.nn.Module | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """[`run_fingerprint`] from its parts: training arguments, the (unwrapped) model, the job's own options."""
    config = getattr(model, "config", None)
    config_dict = config.to_dict() if config is not None else {}
    fingerprint: dict[str, Any] = {
        f"model.{key}": value for key, value in config_dict.items() if key not in CONFIG_FIELDS_NOT_FINGERPRINTED
    }
    fingerprint.update({f"optimizer.{name}": getattr(args, name) for name in OPTIMIZER_OPTIONS if hasattr(args, name)})
    fingerprint["global_batch_size"] = (
        args.per_device_train_batch_size * args.gradient_accumulation_steps * max(args.world_size, 1)
    )
    fingerprint.update({f"job.{key}": value for key, value in (extra or {}).items()})
    return _plain(fingerprint)


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


def fingerprint_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """One line per key whose value differs ("key: <saved> in the checkpoint, <current> now")."""
    missing = object()
    return [
        f"{key}: {saved.get(key, missing)!r} in the checkpoint, {current.get(key, missing)!r} now".replace(
            repr(missing), "absent"
        )
        for key in sorted(set(saved) | set(current))
        if saved.get(key, missing) != current.get(key, missing)
    ]


def check_fingerprint(checkpoint: str, current: dict[str, Any]) -> None:
    """Raise [`CheckpointError`] naming each option (both values) that `current` (a [`run_fingerprint`]) changes from
    the one saved in `checkpoint`; a checkpoint without a fingerprint (an older albert_hf's, a plain Trainer's) is
    let through with a warning."""
    path = os.path.join(checkpoint, FINGERPRINT_NAME)
    if not os.path.isfile(path):
        logger.warning(
            "%s has no %s (written by an older albert_hf or a plain Trainer): the options of the run it "
            "continues (model, optimizer, batch size, data) cannot be checked.",
            checkpoint,
            FINGERPRINT_NAME,
        )
        return
    try:
        with open(path, encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is unreadable: {error}") from None
    if not any(key.startswith(f"job.{DATA_FILE_KEY}") for key in saved):  # written before data was fingerprinted
        current = {key: value for key, value in current.items() if not key.startswith(f"job.{DATA_FILE_KEY}")}
        logger.warning("%s identifies no data file by content: a change of the data cannot be checked.", path)
    differences = fingerprint_differences(saved, current)
    if differences:
        raise CheckpointError(
            f"Cannot resume from {checkpoint}: the run would change {len(differences)} of the options it was "
            f"trained with ({path}): " + "; ".join(differences) + ". Resume with the same options, or start a new "
            "run in another --output_dir."
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
    """Move every entry of a completely written (and fsynced) `staging_dir` into `final_dir` with `os.replace`:
    weights first, `config.json` last, so that a folder with a config.json always holds the whole model it describes
    (`from_pretrained` reads config.json first). Entries already in `final_dir` are replaced one by one."""
    names = os.listdir(staging_dir)
    weights = [name for name in names if name.endswith(WEIGHTS_FILE_SUFFIXES)]
    last = [name for name in names if name == CONFIG_NAME]
    others = [name for name in names if name not in weights and name not in last]
    for name in [*sorted(weights), *sorted(others), *last]:
        target = os.path.join(final_dir, name)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        os.replace(os.path.join(staging_dir, name), target)
    fsync_path(final_dir)
    os.rmdir(staging_dir)


# --------------------------------------------------------------------------------------------------------------------
# The Trainer mixin
# --------------------------------------------------------------------------------------------------------------------


class ReliableTrainerMixin(TrainerInternalHooks):
    """Atomic checkpoints, a non-finite loss guard and checked resumption for a `transformers.Trainer` subclass.

    Put it before `Trainer` among the bases: `class MyTrainer(ReliableTrainerMixin, Trainer)`. Nothing else changes:
    same arguments, same checkpoint layout, same resumption. See the module docstring for what each part guarantees.
    With `push_to_hub`, a checkpoint is uploaded only once it is complete under its final name (Trainer would start
    the upload from the folder being written), and a failed upload is logged and never stops training: the next save
    uploads again, and so brings the Hub up to date. Limitation: DeepSpeed's own loss scale is not reported (only
    `GradScaler`'s).

    A job declares what else a resume must not change (data files, tokenizer, objective) in
    `trainer.run_fingerprint_extra`; it is saved in each checkpoint's `run_fingerprint.json` with the model config,
    optimizer and global batch, and a resume that would change any of them is refused ([`CheckpointError`]).
    """

    # Set by a subclass (e.g. from its arguments) to roll back diverging steps instead of stopping on a non-finite loss.
    divergence_guard: DivergenceGuard | None = None
    # Job options a resume must keep (JSON-serializable values), e.g. {"train_files": [...], "tokenizer": "..."}.
    run_fingerprint_extra: dict[str, Any] = {}

    # The pass whose already-trained batches the training stream skips itself (see `_position_stream`), or None.
    _positioned_stream_epoch: int | None = None
    # While a checkpoint is being written: the staging folder its upload waits for; else None.
    _staging_root: str | None = None
    _push_requested: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        hand_hub_token_to_environment(kwargs["args"] if "args" in kwargs else (args[1] if len(args) > 1 else None))
        super().__init__(*args, **kwargs)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any):
        """Trainer's `train`, after checking the checkpoint to resume from against the model and the run's options.

        `resume_from_checkpoint=True` means the newest *complete* checkpoint (see [`latest_checkpoint`]). A run that
        already reached `--max_steps` in that checkpoint is not trained further: its weights are loaded (so that a
        following `save_model` writes the trained model) and the call returns.
        """
        warn_about_missing_internal_names()
        self._positioned_stream_epoch = None
        if self.divergence_guard is not None:  # a fresh history and snapshot for every run
            self.divergence_guard = DivergenceGuard(self.divergence_guard.config)
            add_rollback_callback(self)
        if resume_from_checkpoint is True:
            resume_from_checkpoint = latest_checkpoint(self.args.output_dir)
            if resume_from_checkpoint is None:
                raise CheckpointError(f"No complete checkpoint in {self.args.output_dir} to resume from.")
        if resume_from_checkpoint:
            resume_from_checkpoint = os.fspath(resume_from_checkpoint)
            step = self._check_resume(resume_from_checkpoint)
            if 0 < self.args.max_steps <= step:
                return self._nothing_left_to_train(resume_from_checkpoint, step)
            logger.info("Resuming from %s (step %d).", resume_from_checkpoint, step)
        return super().train(resume_from_checkpoint or None, *args, **kwargs)

    def _check_resume(self, checkpoint: str) -> int:
        """Raise [`CheckpointError`] naming the file if `checkpoint` cannot be resumed here; its global step."""
        problem = checkpoint_problem(checkpoint, world_size=self.args.world_size)
        if problem is not None:
            raise CheckpointError(f"Cannot resume from {checkpoint}: {problem}.")
        if not (self.is_fsdp_enabled or self.is_deepspeed_enabled):  # those load (and check) their own shards
            check_checkpoint_matches_model(checkpoint, self.accelerator.unwrap_model(self.model))
        self._check_fingerprint(checkpoint)
        return TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step

    def _check_fingerprint(self, checkpoint: str) -> None:
        check_fingerprint(checkpoint, run_fingerprint(self))

    def _nothing_left_to_train(self, checkpoint: str, step: int) -> TrainOutput:
        """A finished run relaunched: its state and weights from `checkpoint`, no training step."""
        logger.info(
            "%s: already trained for %d steps (--max_steps %d): nothing to train.",
            checkpoint,
            step,
            self.args.max_steps,
        )
        if not (self.is_fsdp_enabled or self.is_deepspeed_enabled):
            load_checkpoint_weights(self, checkpoint)
        else:
            logger.warning("Under DeepSpeed/FSDP the model keeps its initial weights: load them from %s.", checkpoint)
        self.state = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME))
        return TrainOutput(self.state.global_step, 0.0, {"train_runtime": 0.0, "train_steps": 0})

    def discard_training_log_sums(self) -> None:
        """Forget what was summed for the next training log (after a rollback); subclasses add their own sums."""

    # ---- atomic checkpoints -----------------------------------------------------------------------------------------

    def save_checkpoint_atomically(self, model: torch.nn.Module, trial, write) -> None:
        """Trainer's checkpoint (`write`), written under a staging name and renamed to `checkpoint-N` once complete."""
        self._check_parameters_before_save()
        run_dir = self.run_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staging_root = os.path.join(run_dir, STAGING_DIR_NAME)
        staging_dir = os.path.join(staging_root, name)
        if self.args.should_save:
            # Anything there is left over from a crash during an earlier save: never complete, never needed.
            shutil.rmtree(staging_root, ignore_errors=True)
        self.accelerator.wait_for_everyone()  # nobody writes into it before it is cleared

        self._staging_root = staging_root
        self._push_requested = False
        try:
            write(staging_root)
        finally:
            self._staging_root = None
        self._point_best_checkpoint_at_final_name(run_dir, staging_dir)
        if self.args.should_save:
            self._save_stream_position(staging_dir)
            with open(os.path.join(staging_dir, FINGERPRINT_NAME), "w", encoding="utf-8") as handle:
                json.dump(run_fingerprint(self), handle, indent=1)

        self.accelerator.wait_for_everyone()  # every process has written its part (model shards, RNG states)
        final_dir = os.path.join(run_dir, name)
        if self.args.should_save:
            publish_checkpoint(staging_dir, final_dir)
        if self._push_requested:  # only now is there a complete checkpoint to upload
            self._push_requested = False
            self._push_complete_checkpoint(final_dir)
        if self.args.should_save and self._uploading_other_than(final_dir):
            # Rotation could delete the older checkpoint being uploaded: it waits for a save without such an upload.
            logger.info("A Hub upload of an older checkpoint is running: old checkpoints are rotated at a later save.")
        elif self.args.should_save:
            # Only now may older checkpoints go: the new one is complete.
            rotate_checkpoints(run_dir, self.args.save_total_limit, self.state.best_model_checkpoint)
        self.accelerator.wait_for_everyone()  # nobody reads the checkpoint before it has its final name

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Trainer's save, atomic: written into a staging folder, fsynced, then moved in, `config.json` last.

        A run killed while saving its final model leaves the folder as it was, or with new weights files but the old
        (or no) config.json: never a config.json beside a half-written model. The files of a checkpoint are already
        written in its own staging folder, so they are not staged again. Under FSDP: see `_save_fsdp_model`.
        """
        if self._staging_root is not None:
            return self._save_model_files(output_dir, _internal_call)
        output_dir = output_dir or self.args.output_dir
        staging_dir = os.path.join(output_dir, MODEL_STAGING_DIR_NAME)
        if self.args.should_save:
            shutil.rmtree(staging_dir, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        self._save_model_files(staging_dir, _internal_call=True)
        self.accelerator.wait_for_everyone()  # every process has written its part
        if self.args.should_save and os.path.isdir(staging_dir):
            fsync_tree(staging_dir)
            move_files_in(staging_dir, output_dir)
        self.accelerator.wait_for_everyone()
        if self.args.push_to_hub and not _internal_call:  # as Trainer's save_model: a user's save is pushed
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)
        return None

    def _save_model_files(self, output_dir: str | None, _internal_call: bool) -> None:
        """Trainer's save; under FSDP, the gathered full weights saved under the model's own class.

        Under FSDP with a sharded state dict Trainer's `save_model` writes nothing (a checkpoint's shards are written
        apart from it), so a run's final model would not exist for `from_pretrained`; checkpoints keep only their
        shards (gathering at every save would hold the whole model in one process's memory each time). And FSDP2
        swaps the model's class for a subclass `FSDP<name>` defined in torch, so `save_pretrained` would copy torch's
        FSDP source files as the folder's remote code instead of albert_hf's modeling.py.
        """
        if not self.is_fsdp_enabled:
            return super().save_model(output_dir, _internal_call=True)
        full = "FULL_STATE_DICT" in str(self.accelerator.state.fsdp_plugin.state_dict_type)
        if self._staging_root is not None and not full:
            return None
        state_dict = self.accelerator.get_state_dict(self.model)  # a collective: every process takes part
        with own_class(self.accelerator.unwrap_model(self.model)):
            save_full_model(self, output_dir or self.args.output_dir, state_dict)
        return None

    def _point_best_checkpoint_at_final_name(self, run_dir: str, staging_dir: str) -> None:
        """Trainer's best-checkpoint bookkeeping, with the final folder names instead of the staging one.

        Trainer sets `best_model_checkpoint` to the best step's folder when that folder exists, which inside
        its save it only did for the folder just written, i.e. the staging one. Same rule here, judged in
        `run_dir`; the saved `trainer_state.json` is rewritten when the value changes.
        """
        best_step = self.state.best_global_step
        if not best_step or self.args.save_strategy not in (SaveStrategy.STEPS, SaveStrategy.EPOCH, SaveStrategy.BEST):
            return
        best_dir = os.path.join(run_dir, f"{PREFIX_CHECKPOINT_DIR}-{best_step}")
        if best_step == self.state.global_step or os.path.isdir(best_dir):
            if self.state.best_model_checkpoint != best_dir:
                self.state.best_model_checkpoint = best_dir
                if self.args.should_save:
                    self.state.save_to_json(os.path.join(staging_dir, TRAINER_STATE_NAME))

    # ---- uploads of complete checkpoints ------------------------------------------------------------------------------

    def checkpoint_upload_requested(self, checkpoint_folder: str) -> None:
        # Trainer asks from inside its save, i.e. while the checkpoint is still in the staging area: the upload is
        # deferred until the folder is complete under its final name.
        if self._staging_root is not None:
            self._push_requested = True
            return
        self._push_complete_checkpoint(checkpoint_folder)

    def _push_complete_checkpoint(self, checkpoint_folder: str) -> None:
        """Trainer's background upload of `checkpoint_folder`; a failure to start or to finish one is logged (with
        the checkpoint's name) and counted in `failed_pushes`, never raised: losing an upload must not lose the run."""
        jobs_before = upload_jobs(self)
        try:
            self.start_checkpoint_upload(checkpoint_folder)
        except Exception as error:  # noqa: BLE001 - network, auth, quota: whatever it is, training goes on
            self._report_failed_push(checkpoint_folder, error)
            return
        for job in upload_jobs(self):
            if not any(job is old for old in jobs_before):
                self._uploads = [*getattr(self, "_uploads", []), (checkpoint_folder, job)]
                job.add_done_callback(lambda done, folder=checkpoint_folder: self._check_push(folder, done))

    def _uploading_other_than(self, folder: str) -> bool:
        """Whether an upload from a checkpoint folder other than `folder` is still running."""
        self._uploads = [(source, job) for source, job in getattr(self, "_uploads", []) if not job.done()]
        return any(source != folder for source, _ in self._uploads)

    def _check_push(self, checkpoint_folder: str, job) -> None:
        error = None if job.cancelled() else job.exception()
        if error is not None:
            self._report_failed_push(checkpoint_folder, error)

    def _report_failed_push(self, checkpoint_folder: str, error: BaseException) -> None:
        self.failed_pushes = [*getattr(self, "failed_pushes", []), (checkpoint_folder, repr(error))]
        logger.error(
            "Uploading %s to the Hub failed (%r). Training continues; the next checkpoint's upload sends the "
            "latest files again, and `trainer.push_to_hub()` retries at the end.",
            checkpoint_folder,
            error,
        )

    # ---- numerical health -------------------------------------------------------------------------------------------

    def training_step(self, model: torch.nn.Module, inputs: dict[str, Any], num_items_in_batch=None) -> torch.Tensor:
        """Trainer's forward + backward, then a check of the loss before the optimizer can use the gradients.

        With a [`DivergenceGuard`] the guard judges each optimizer step's loss instead (non-finite or a spike) and
        rolls a bad step back after the loop has taken it; without one, a non-finite loss stops the run here.
        """
        guard = self.divergence_guard
        loss = super().training_step(model, inputs, num_items_in_batch)
        if guard is not None:
            guard.add_micro_batch(loss)
            if self.accelerator.sync_gradients:  # the step's last micro-batch: the optimizer step comes next
                guard.check_step(self)
            return loss
        # One device sync per micro-batch, as Trainer's own `logging_nan_inf_filter` check already costs.
        non_finite = (~torch.isfinite(loss.detach())).any().float()
        if self.accelerator.num_processes > 1:
            # Every process stops together (one waiting in the next all-reduce would hang until a timeout).
            non_finite = self.accelerator.reduce(non_finite, reduction="sum")
        if non_finite.item() > 0:
            raise NonFiniteLossError(self._non_finite_message(f"training loss is {loss.item()}"))
        return loss

    def _check_parameters_before_save(self) -> None:
        bad = non_finite_parameters(self.model)
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise NonFiniteLossError(self._non_finite_message(f"parameters {shown} hold NaN/inf", saving=True))

    def _non_finite_message(self, what: str, saving: bool = False) -> str:
        step = self.state.global_step if saving else self.state.global_step + 1  # the step being computed
        scale = loss_scale(self)
        parts = [f"Stopping: {what} at global step {step}"]
        if scale is not None:
            parts.append(f"fp16 loss scale {scale:g}")
        if self.state.epoch is not None and not math.isnan(self.state.epoch):
            parts.append(f"epoch {self.state.epoch:.2f}")
        message = ", ".join(parts) + (
            ". Nothing was saved from this step." if saving else ". The optimizer step was not taken."
        )
        last = latest_checkpoint(self.args.output_dir)
        if last is None:
            return message + " No checkpoint was written yet."
        return message + (
            f" The last complete checkpoint is {last}: resume from it, e.g. with a lower learning rate, "
            "bf16 instead of fp16, or gradient clipping."
        )

    # ---- position in a stream ---------------------------------------------------------------------------------------

    def restored_training_position(self, resume_from_checkpoint, max_steps, epochs_trained, steps_trained):
        """Trainer's resumed position; for a training set without a length (a stream), the data position read from
        the saved epoch instead of from the step count.

        A stream has no length, so Trainer counts `max_steps` updates per epoch and resumes by skipping `global_step`
        x accumulation batches of the *first* pass. Once the run has read the stream more than once, that skip runs
        off the end of the first pass and training restarts at the second pass: data seen again, the rest never.
        Trainer's saved `epoch` is `pass + batches read in this pass / (max_steps x accumulation)`, which gives the
        pass (also the shuffle's epoch) and the batches to skip within it. A stream that can be positioned skips them
        itself, from the position saved in the checkpoint (`_position_stream`).
        """
        self._positioned_stream_epoch = None
        if resume_from_checkpoint is None or self.args.ignore_data_skip or has_length(self.train_dataset):
            return epochs_trained, steps_trained
        epochs_trained, steps_trained = self._stream_batches_read(self.state.epoch or 0.0, max_steps)
        if steps_trained > 0 and self._position_stream(resume_from_checkpoint, epochs_trained, steps_trained):
            self._positioned_stream_epoch = epochs_trained
        return epochs_trained, steps_trained

    def _stream_batches_read(self, epoch: float, max_steps: int | None = None) -> tuple[int, int]:
        """(pass, batches read in it) from Trainer's `epoch` (see `_init_training_state`)."""
        batches_per_epoch = (max_steps or self.state.max_steps) * self.args.gradient_accumulation_steps
        passes = int(epoch)
        return passes, round((epoch - passes) * batches_per_epoch)

    def _positionable_stream(self) -> Any | None:
        """The training set if it is a stream whose position can be saved and restored here, else None.

        Such a stream (e.g. `ResumableInstanceStream`) has `position_state(pass, instances consumed)` and
        `resume_from_state(state, pass, instances consumed)`, and must be read as `stream_position_obstacle` says.
        Otherwise Trainer's own skip, which reads the trained batches again, stays the way to resume: exact, not fast.
        """
        from ..data.instance_stream import stream_position_obstacle

        dataset = self.train_dataset
        if not (hasattr(dataset, "position_state") and hasattr(dataset, "resume_from_state")):
            return None
        if stream_position_obstacle(self.args.world_size, self.args.dataloader_num_workers) is not None:
            return None
        return dataset

    def _save_stream_position(self, checkpoint_dir: str) -> None:
        """Write the position of a positionable training stream into the checkpoint being saved."""
        stream = self._positionable_stream()
        if stream is None or self.state.epoch is None:
            return
        passes, batches = self._stream_batches_read(self.state.epoch)
        state = stream.position_state(passes, batches * self._batch_size())
        if state is None:
            logger.warning(
                "The training stream cannot tell its position after %d batches of pass %d: resuming from this "
                "checkpoint reads them again.",
                batches,
                passes,
            )
            return
        with open(os.path.join(checkpoint_dir, STREAM_POSITION_NAME), "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1)

    def _position_stream(self, checkpoint: str, passes: int, batches: int) -> bool:
        """Start the training stream after `batches` batches of pass `passes`, from the checkpoint's saved position,
        so that Trainer need not read those batches again (`stream_starts_after_skipped_batches`); False (Trainer
        skips) when it cannot."""
        stream = self._positionable_stream()
        if stream is None:
            return False
        path = os.path.join(checkpoint, STREAM_POSITION_NAME)
        if not os.path.isfile(path):
            logger.info("%s holds no stream position: the %d batches trained on are read again.", checkpoint, batches)
            return False
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            state, problem = None, f"it is unreadable ({error})"
        if state is not None:
            problem = stream.resume_from_state(state, passes, batches * self._batch_size())
        if problem is not None:
            logger.warning(
                "Not resuming the stream from %s: %s. The %d batches are read again.", path, problem, batches
            )
            return False
        logger.info(
            "The training stream resumes at the position saved in %s (pass %d, batch %d).", path, passes, batches
        )
        return True

    def _batch_size(self) -> int:
        """Instances per training batch in this process (Trainer's, as recorded in its state once training runs)."""
        return self.state.train_batch_size or self.args.train_batch_size

    def stream_starts_after_skipped_batches(self, epoch: int | None) -> bool:
        """Whether `epoch` is the pass a positioned stream resumes in, where Trainer's skip of the trained batches is
        left out: the stream already starts after them. Trainer skips by reading them again, then carries on with its
        counters past them and restores the RNG states after the first new batch: all of that stays."""
        if self._positioned_stream_epoch is None or epoch != self._positioned_stream_epoch:
            return False
        self._positioned_stream_epoch = None
        return True
