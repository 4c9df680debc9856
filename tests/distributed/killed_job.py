"""Run a real albert_hf job (`<module>.main(argv)`) that SIGKILLs itself at a chosen point: the fault the
reliability tests inject. One process or several:

    KILL_STEP=3 python tests/distributed/killed_job.py albert_hf.scripts.pretrain --output_dir ... --use_cpu
    KILL_STEP=4 KILL_IN_SAVE=1 torchrun --nproc_per_node 2 tests/distributed/killed_job.py albert_hf.scripts.pretrain ...

The job runs unchanged: a callback appended to Trainer's default callbacks kills the process
  * at the end of step KILL_STEP (after its update, before that step's save);
  * with KILL_MID_STEP, in the middle of step KILL_STEP (after its first gradient-accumulation micro-batch, before
    the optimizer step);
  * with KILL_IN_SAVE, inside the save of checkpoint-KILL_STEP: Trainer's RNG save is patched to die, so the model
    and optimizer (every DeepSpeed shard too) are written, the RNG states and trainer_state.json are not.
Under torchrun only the rank KILL_RANK (default 0) dies, as one failing machine would; torchrun then stops the others.
Without KILL_STEP the job runs to its end.

FSDP_ON_CPU=1 lets the job's `--fsdp` flags take effect on a CPU-only machine: accelerate enables FSDP only for
GPU-like device types (on CPU it silently runs plain DDP), so the process state is created first on the CPU with gloo
and labelled multi-GPU; the job must then pass `--accelerator_config '{"use_configured_state": true}'`, and
accelerate's FSDP2 preparation, checkpointing and resume run as they would on GPUs. TORCH_THREADS sets torch's threads (the same as the test's own process, so
that float reductions, and with them the weights, are the same).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys

import torch
import transformers.trainer as trainer_module
from transformers import TrainerCallback

KILL_STEP = int(os.environ.get("KILL_STEP", "0"))
KILL_MID_STEP = bool(os.environ.get("KILL_MID_STEP"))
KILL_IN_SAVE = bool(os.environ.get("KILL_IN_SAVE"))
DIES = KILL_STEP > 0 and os.environ.get("RANK", "0") == os.environ.get("KILL_RANK", "0")


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class KillAtStep(TrainerCallback):
    def on_substep_end(self, args, state, control, **kwargs):
        if KILL_MID_STEP and state.global_step == KILL_STEP - 1:
            die()

    def on_step_end(self, args, state, control, **kwargs):
        if not (KILL_MID_STEP or KILL_IN_SAVE) and state.global_step == KILL_STEP:
            die()


def install_fault() -> None:
    if not DIES:
        return
    if KILL_IN_SAVE:
        save_rng_state = trainer_module.Trainer._save_rng_state

        def _save_rng_state(self, output_dir):
            if self.state.global_step == KILL_STEP:
                die()
            save_rng_state(self, output_dir)

        trainer_module.Trainer._save_rng_state = _save_rng_state
    else:
        trainer_module.DEFAULT_CALLBACKS.append(KillAtStep)


def label_cpu_state_multi_gpu() -> None:
    from accelerate import PartialState
    from accelerate.utils import DistributedType

    state = PartialState(cpu=True, backend="gloo")
    state.distributed_type = DistributedType.MULTI_GPU


if __name__ == "__main__":
    if "TORCH_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
    if os.environ.get("FSDP_ON_CPU"):
        label_cpu_state_multi_gpu()
    install_fault()
    exit_code = importlib.import_module(sys.argv[1]).main(sys.argv[2:])
    # A clean exit under torchrun: without it a rank sometimes aborts at interpreter exit and fails the job.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code or 0)
