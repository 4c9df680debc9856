"""Multi-process training helpers: start-up checks for the launchers, and the memory a training run needs per GPU.

Every job calls `init_distributed(training_args)` (through `job_setup.start_job`) once its arguments are final
(parsed, presets applied) and before building the model:

  * It refuses the silent "independent jobs" trap: a launcher started N processes (WORLD_SIZE=N) but Trainer sees a
    world of 1 (on a machine without GPUs, `--use_cpu` / ACCELERATE_USE_CPU=true was not given), so every process
    would train alone on the full data and exit 0.
  * Under DeepSpeed with `--use_cpu` it starts DeepSpeed's communication on gloo; otherwise `zero.Init` (used by
    `from_pretrained` under ZeRO-3) initialises its own group and takes a world size of 1.

Under DeepSpeed it first looks for a build lock of torch's C++ extensions that a killed build left behind
(`check_extension_build_locks`): DeepSpeed compiles its CPU communication op at first use, and torch waits on such a
lock forever, without a word.

`check_lamb_engine(training_args)` refuses, before any work, an engine under which `--optimizer lamb` would not run
ALBERT's LAMB (a DeepSpeed config that brings its own optimizer, offload without a client optimizer, a ZeRO stage 0
wrapper or FSDP1 that flattens the tensors).

`estimate_memory_per_gpu` computes the memory of parameters, gradients, optimizer states and activations for an
`AlbertConfig` under DDP and the ZeRO stages; docs/distributed.md tabulates it for the released sizes.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import MachineStateError, UserError

logger = logging.getLogger(__name__)

GIB = 1024**3


# --------------------------------------------------------------------------------------------------------------------
# Start-up checks
# --------------------------------------------------------------------------------------------------------------------


class LaunchError(UserError, RuntimeError):
    """The launcher and the job's arguments do not fit together (process counts, devices). A `RuntimeError` too, as
    it was before `UserError` existed."""


def accelerator_available() -> bool:
    """Whether torch has an accelerator to train on (a GPU, ...): without one, no pinned memory for the loaders and the
    advice for a busy machine in the log."""
    import torch

    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6; before it, CUDA was the one torch pinned for
    return accelerator.is_available() if accelerator is not None else torch.cuda.is_available()


def launched_world_size() -> int:
    """How many processes the launcher (torchrun, accelerate launch, deepspeed) started: $WORLD_SIZE, else 1."""
    value = os.environ.get("WORLD_SIZE", "1")
    try:
        return int(value)
    except ValueError:
        raise UserError(f"WORLD_SIZE={value!r} is not an integer.") from None


def uses_deepspeed(training_args) -> bool:
    """Whether Trainer will run under DeepSpeed: `--deepspeed <json>` or `accelerate launch --use_deepspeed`."""
    return bool(training_args.deepspeed) or getattr(training_args, "deepspeed_plugin", None) is not None


def check_world_size(training_args) -> None:
    """Raise when the launcher's world size and Trainer's disagree (each process would train on its own)."""
    launched = launched_world_size()
    if launched != training_args.world_size:
        raise LaunchError(
            f"The launcher started {launched} processes (WORLD_SIZE={launched}) but Trainer runs with a world size of "
            f"{training_args.world_size}: every process would train alone on the whole data set. On a machine without "
            "GPUs pass --use_cpu (or set ACCELERATE_USE_CPU=true) so that the processes join one gloo group; with GPUs "
            "check that each process sees one (CUDA_VISIBLE_DEVICES)."
        )


def init_distributed(training_args) -> None:
    """Join the launcher's process group (through Trainer's own set-up), start DeepSpeed's communication on gloo when
    training on CPU, and check that every launched process takes part. Call it before building the model."""
    if uses_deepspeed(training_args):
        check_extension_build_locks()  # before DeepSpeed's communication starts, which builds its CPU op
    # Reading `world_size` runs TrainingArguments' device set-up, which creates accelerate's PartialState and, under a
    # launcher, the torch.distributed process group (gloo with --use_cpu, nccl on GPUs).
    world_size = training_args.world_size
    if uses_deepspeed(training_args) and world_size > 1 and training_args.device.type == "cpu":
        import deepspeed

        # DeepSpeed keeps its own communication handle; without this, zero.Init (in from_pretrained under ZeRO-3)
        # initialises it with the default backend and a world size of 1, and a batch-size assertion fails.
        deepspeed.init_distributed(dist_backend="gloo")
    check_world_size(training_args)
    if world_size > 1:
        logger.info(
            "Distributed training: process %d of %d (%s, DeepSpeed: %s).",
            training_args.process_index,
            world_size,
            training_args.device,
            uses_deepspeed(training_args),
        )


# --------------------------------------------------------------------------------------------------------------------
# Build locks of torch's C++ extensions
# --------------------------------------------------------------------------------------------------------------------
#
# DeepSpeed builds its ops at first use through torch.utils.cpp_extension (on CPU: the shared-memory communication op,
# when its communication starts), one folder per op under the extensions root ($TORCH_EXTENSIONS_DIR, else
# ~/.cache/torch_extensions/<python>_<accelerator>/). The build holds `<folder>/lock` open (`FileBaton`) and removes it
# when done; a build that was killed (a timeout, Ctrl-C, a preempted job) leaves it, and every later build of that op
# polls for it to go, forever. A lock no process holds cannot go away; one whose folder changed in the last minute may
# be a build that has just ended, so it is given that minute first.

STALE_LOCK_SECONDS = 60.0


class StaleBuildLockError(MachineStateError):
    """A killed build of a C++ extension left its lock (`lock`); the next build would wait on it forever."""

    def __init__(self, message: str, lock: Path):
        super().__init__(message)
        self.lock = lock


def extension_build_roots() -> list[Path]:
    """Where torch builds C++ extensions: $TORCH_EXTENSIONS_DIR, else torch's default root."""
    chosen = os.environ.get("TORCH_EXTENSIONS_DIR")
    if chosen:
        return [Path(chosen)]
    from torch.utils.cpp_extension import get_default_build_root

    return [Path(get_default_build_root())]


def check_extension_build_locks(patience: float = STALE_LOCK_SECONDS) -> None:
    """Raise [`StaleBuildLockError`] (exit status 3) naming the first build lock under the extension roots that no
    running process holds and whose folder has not changed for `patience` seconds; a lock whose folder changed more
    recently is waited on until it goes, a process takes it, or it is that old. Costs a directory listing when no lock
    exists."""
    locks = [lock for root in extension_build_roots() for lock in (*root.glob("*/lock"), *root.glob("*/*/lock"))]
    for lock in locks:
        while True:
            age = _quiet_seconds(lock.parent)
            if age is None or _held(lock):
                break
            if age >= patience:
                raise StaleBuildLockError(
                    f"{lock}: the build lock of torch extension {lock.parent.name!r} is held by no running process and "
                    f"its folder has not changed for {age:.0f} s: a build was killed and left it, and DeepSpeed would "
                    f"wait on it forever. Delete the file and run again (if a machine sharing this folder is building "
                    f"the op right now, wait for it first).",
                    lock,
                )
            time.sleep(min(1.0, patience - age))


def _quiet_seconds(folder: Path) -> float | None:
    """Seconds since anything in `folder` (the lock included) last changed; None once the lock is gone."""
    if not (folder / "lock").exists():
        return None
    try:
        newest = max(entry.stat().st_mtime for entry in (folder, *folder.iterdir()))
    except FileNotFoundError:  # an entry went while being read: the folder is changing
        return 0.0
    return time.time() - newest


def _held(lock: Path) -> bool:
    """Whether a running process of this machine has `lock` open (a build in progress holds it from creation to
    removal); processes this user may not inspect are not seen."""
    import psutil

    target = os.path.realpath(lock)
    for process in psutil.process_iter():
        try:
            if any(os.path.realpath(opened.path) == target for opened in process.open_files()):
                return True
        except psutil.Error:  # gone, or another user's
            continue
    return False


# --------------------------------------------------------------------------------------------------------------------
# LAMB under the engines
# --------------------------------------------------------------------------------------------------------------------

LAMB_ENGINES = (
    'DDP, DeepSpeed ZeRO stages 1-3 without an "optimizer" section (optimizer offload to the CPU with '
    '"zero_force_ds_cpu_optimizer": false; examples/accelerate_configs/ds_zero2.json, ds_zero3.json, '
    "ds_zero3_offload.json) and FSDP2 (fsdp2.yaml)"
)


def deepspeed_config_dict(training_args) -> dict | None:
    """The DeepSpeed config the job will run with (`--deepspeed` file or dict, or accelerate's plugin), else None."""
    hf_config = getattr(training_args, "hf_deepspeed_config", None)
    if hf_config is not None:
        return hf_config.config
    plugin = getattr(training_args, "deepspeed_plugin", None)
    if plugin is not None:
        return plugin.deepspeed_config
    if isinstance(training_args.deepspeed, dict):
        return training_args.deepspeed
    if training_args.deepspeed:
        import json

        with open(training_args.deepspeed, encoding="utf-8") as handle:
            return json.load(handle)
    return None


def lamb_engine_problem(training_args) -> str | None:
    """Why the engine of `training_args` would not run ALBERT's LAMB exactly, or None when it does.

    LAMB's trust ratio is per tensor: `Lamb` sums each tensor's squares over the processes under DDP, FSDP2 and
    ZeRO 1-3, whose partitions it reads from DeepSpeed. Refused: a config whose own optimizer DeepSpeed would run
    instead; optimizer offload where accelerate swaps the client optimizer for DeepSpeedCPUAdam (unless
    `zero_force_ds_cpu_optimizer` is false) or where states go to NVMe (not tested); ZeRO stage 0 with 16-bit
    weights and FSDP1, whose flat buffers LAMB cannot read; MiCS, whose partitions are replicated over groups.
    """
    config = deepspeed_config_dict(training_args)
    if config is not None:
        zero = config.get("zero_optimization", {})
        offload = zero.get("offload_optimizer", {}).get("device", "none")
        sixteen_bit = any(config.get(key, {}).get("enabled") is True for key in ("bf16", "fp16"))
        if "optimizer" in config:
            kind = config["optimizer"].get("type", "?")
            return f"the DeepSpeed config defines its own optimizer ({kind}), which DeepSpeed would run instead of LAMB"
        if offload == "nvme":
            return "optimizer states offloaded to NVMe are untested with LAMB"
        if offload not in ("none", None) and config.get("zero_force_ds_cpu_optimizer", True) is not False:
            return (
                "with optimizer offload accelerate replaces LAMB by DeepSpeedCPUAdam unless the DeepSpeed config sets "
                '"zero_force_ds_cpu_optimizer": false'
            )
        if zero.get("stage", 0) == 0 and sixteen_bit:
            return "ZeRO stage 0 with bf16/fp16 hands the optimizer flat buffers whose layout LAMB does not read"
        if zero.get("mics_shard_size", -1) > 0:
            return "MiCS replicates ZeRO's partitions over groups, which LAMB's norms do not account for"
    fsdp_version = None
    if getattr(training_args, "fsdp", None):
        fsdp_version = int((training_args.fsdp_config or {}).get("version", 2))
    elif os.environ.get("ACCELERATE_USE_FSDP", "false").lower() in ("1", "true"):
        fsdp_version = int(os.environ.get("FSDP_VERSION", "1"))
    if fsdp_version is not None and fsdp_version != 2:
        return f"FSDP version {fsdp_version} hands the optimizer flattened parameters; LAMB needs FSDP2's DTensors"
    return None


def check_lamb_engine(training_args) -> None:
    """Raise, naming the engines that work, when `--optimizer lamb` would not run ALBERT's LAMB under this engine."""
    if getattr(training_args, "optimizer", None) != "lamb":
        return
    problem = lamb_engine_problem(training_args)
    if problem is not None:
        raise UserError(
            f"--optimizer lamb: {problem}. LAMB runs exactly (per-tensor trust ratios) under {LAMB_ENGINES}; "
            "or choose --optimizer adamw."
        )


# --------------------------------------------------------------------------------------------------------------------
# Memory per GPU
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU for one training set-up; `total` is their sum (framework overhead, ~1 GiB, not included)."""

    parameters: int
    gradients: int
    optimizer_states: int
    activations: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_states + self.activations


def pretraining_parameter_count(config) -> int:
    """Number of distinct trainable parameters of `AlbertForPreTraining(config)` (tied decoder counted once), from the
    closed form: no model is built.

    E embedding size, H hidden, I intermediate, V vocabulary, P positions, S segment types.
    """
    E, H, I, V = config.embedding_size, config.hidden_size, config.intermediate_size, config.vocab_size
    embeddings = (V + config.max_position_embeddings + config.type_vocab_size) * E + 2 * E  # + LayerNorm
    projection = E * H + H
    attention = 4 * (H * H + H) + 2 * H  # Q, K, V, output dense + LayerNorm
    ffn = (H * I + I) + (I * H + H) + 2 * H  # two linears + LayerNorm
    encoder = config.num_copies("attention") * attention + config.num_copies("ffn") * ffn
    pooler = H * H + H
    mlm_head = (H * E + E) + 2 * E + V  # dense, LayerNorm, output bias (the decoder weight is the embedding)
    sop_head = H * config.num_labels + config.num_labels
    return embeddings + projection + encoder + pooler + mlm_head + sop_head


def activation_bytes_per_sequence(
    config,
    seq_len: int,
    mixed_precision: bool = True,
    gradient_checkpointing: bool = False,
    mlm_positions: int | None = None,
) -> int:
    """Bytes kept for the backward pass per sequence of `seq_len` tokens, with a fused attention kernel (SDPA /
    flash: the (T, T) score matrix is never stored) and no dropout (ALBERT v2). Counted from what autograd saves.

    Per layer application: its input, Q, K, V, the attention output and its (B, T, H) copy, the two LayerNorm inputs
    and the first one's output (9 x T*H), and the FFN activation's input and output (2 x T*I, fused kernel). With
    gradient checkpointing only each application's input is kept, plus the one application being recomputed. Around
    the encoder: the embeddings (2 x T*E), the last hidden state (T*H), and the MLM head on `mlm_positions` rows (all
    T by default; the number of masked tokens with `masked_positions_only=True`): its transform (3 x E per row) and
    the fp32 log-probabilities over the vocabulary (V per row, 4 bytes), the largest single tensor.
    """
    T, E, H, I, V = seq_len, config.embedding_size, config.hidden_size, config.intermediate_size, config.vocab_size
    rows = T if mlm_positions is None else mlm_positions
    per_application = T * (9 * H + 2 * I)
    applications = config.num_layer_applications
    if gradient_checkpointing:
        encoder = applications * T * H + per_application
    else:
        encoder = applications * per_application
    around_encoder = 2 * T * E + T * H + 3 * rows * E + (0 if mlm_positions is None else rows * H)
    compute_bytes = 2 if mixed_precision else 4
    return (around_encoder + encoder) * compute_bytes + rows * V * 4


def estimate_memory_per_gpu(
    config,
    num_gpus: int,
    zero_stage: int,
    micro_batch_size: int,
    seq_len: int = 512,
    mixed_precision: bool = True,
    offload_optimizer: bool = False,
    offload_parameters: bool = False,
    gradient_checkpointing: bool = False,
    mlm_positions: int | None = None,
) -> MemoryEstimate:
    """Memory per GPU to pretrain `AlbertForPreTraining(config)` with Adam or LAMB (two fp32 moments per parameter).

    zero_stage 0 is plain DDP; 1 partitions the optimizer states over the GPUs, 2 also the gradients, 3 also the
    parameters (the ZeRO paper's accounting, Rajbhandari et al. 2020). With mixed precision each parameter costs
    2 bytes (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master weights and two moments); in fp32, 4 + 4 + 8.
    Offloading moves the partitioned optimizer states (and gradients) or parameters to CPU RAM. Activations are
    per GPU and not partitioned: `micro_batch_size` sequences of `seq_len`, 16-bit with mixed precision;
    `mlm_positions` is the MLM head's rows per sequence (see `activation_bytes_per_sequence`).
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0 (DDP), 1, 2 or 3, got {zero_stage}.")
    if num_gpus < 1 or micro_batch_size < 1:
        raise ValueError(f"num_gpus and micro_batch_size must be positive, got {num_gpus} and {micro_batch_size}.")
    if offload_parameters and zero_stage != 3:
        raise ValueError("Offloading parameters needs ZeRO stage 3.")
    num_parameters = pretraining_parameter_count(config)
    weight_bytes, gradient_bytes, optimizer_bytes = (2, 2, 12) if mixed_precision else (4, 4, 8)

    def share(stage_partitions: bool) -> float:
        return 1 / num_gpus if stage_partitions else 1.0

    parameters = num_parameters * weight_bytes * share(zero_stage >= 3)
    gradients = num_parameters * gradient_bytes * share(zero_stage >= 2)
    optimizer_states = num_parameters * optimizer_bytes * share(zero_stage >= 1)
    if offload_optimizer:
        optimizer_states = 0.0
        gradients = 0.0 if zero_stage >= 2 else gradients  # ZeRO-Offload keeps the partitioned gradients on CPU
    if offload_parameters:
        parameters = 0.0
    activations = micro_batch_size * activation_bytes_per_sequence(
        config, seq_len, mixed_precision, gradient_checkpointing, mlm_positions
    )
    return MemoryEstimate(
        parameters=int(parameters),
        gradients=int(gradients),
        optimizer_states=int(optimizer_states),
        activations=int(activations),
    )
