"""Exact resume of multi-process pretraining (`albert-hf pretrain` under torchrun, 2 processes, gloo) after SIGKILL.

Under DDP and DeepSpeed ZeRO-2/3 every process writes its part of a checkpoint (ZeRO: its optimizer and, for ZeRO-3,
parameter shards) into the staging folder; the main process renames it only after all have written. Each engine's run
is killed twice and resumed twice, and must end equal to its uninterrupted run:

  1. killed inside the save of checkpoint-4 (rank 0 dies after the model and optimizer shards are written, before
     the RNG states): the half-written checkpoint stays in the staging folder and `latest` is checkpoint-2;
  2. resumed from checkpoint-2 and killed in the middle of step 5 (between its two gradient-accumulation
     micro-batches): `latest` is now checkpoint-4, written by the resumed run;
  3. resumed from checkpoint-4 to the end (step 6).

The final weights (the consolidated model the job saves at the end, loaded with from_pretrained) equal the
uninterrupted run's bit for bit (measured: 0.0 under DDP, ZeRO-2 and ZeRO-3, where 1e-6 would have been enough), and
so do the losses logged after each resume: same rows, same masks, same optimizer state on every rank.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
from helpers.distributed import TOLERANCE, engine_arguments, max_difference, run_torchrun
from helpers.optional import engines
from helpers.trainer import COMMON_ARGS, KILLED_JOB, LAMB_RECIPE, TINY_MODEL, logged_losses
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

from albert_hf.modeling import AlbertForPreTraining
from albert_hf.training.reliability import FINGERPRINT_NAME, latest_checkpoint

STEPS, PER_DEVICE_BATCH, GLOBAL_BATCH = 6, 2, 8  # 2 processes x 2 rows x 2 micro-batches


def launch(argv: list[str], engine: str, kill_step: int = 0, in_save: bool = False, mid_step: bool = False) -> str:
    """`albert-hf pretrain <argv>` under torchrun with 2 processes; with `kill_step`, rank 0 SIGKILLs itself there
    (see killed_job.py) and torchrun must report the failure. Returns the launcher's output."""
    fault = {
        "KILL_STEP": str(kill_step),
        "KILL_IN_SAVE": "1" if in_save else "",
        "KILL_MID_STEP": "1" if mid_step else "",
    }
    env = {**fault, "FSDP_ON_CPU": "1" if engine == "fsdp2" else "", "HF_HUB_OFFLINE": "1"}
    result = run_torchrun(KILLED_JOB, "albert_hf.scripts.pretrain", *argv, env=env, timeout=600)
    output = f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    if kill_step:
        assert result.returncode != 0, f"the run was to be killed at step {kill_step}:\n{output}"
        assert f"Signal {int(signal.SIGKILL)} (SIGKILL)" in result.stderr, output  # torchrun names rank 0's death
    else:
        assert result.returncode == 0, output
    return output


def pretraining_argv(corpus: Path, spiece_model: Path, output_dir: Path, engine: str) -> list[str]:
    return [
        "--train_files",
        str(corpus),
        "--lines_are_paragraphs",
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_MODEL,
        "--max_seq_length",
        "64",
        "--per_device_train_batch_size",
        str(PER_DEVICE_BATCH),
        "--global_batch_size",
        str(GLOBAL_BATCH),
        "--max_steps",
        str(STEPS),
        *LAMB_RECIPE,
        "--cache_dir",
        str(output_dir.parent / "datasets_cache"),
        "--output_dir",
        str(output_dir),
        *COMMON_ARGS,
        *engine_arguments(engine, output_dir.parent),
    ]


def final_weights(output_dir: Path) -> dict[str, torch.Tensor]:
    """The consolidated model the job saved at the end, as from_pretrained loads it."""
    return AlbertForPreTraining.from_pretrained(output_dir).state_dict()


def checkpoint_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """A checkpoint's weights: its model file, or under FSDP its sharded state dict (torch.distributed.checkpoint)
    gathered into one."""
    if (checkpoint / "model.safetensors").exists():
        return final_weights(checkpoint)
    gathered = checkpoint / "gathered.pt"
    dcp_to_torch_save(checkpoint / "pytorch_model_fsdp_0", gathered)
    return torch.load(gathered, weights_only=True)["model"]


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("engine", engines("ddp", "zero2", "zero3", "fsdp2"))
def test_two_process_pretraining_killed_twice_resumes_exactly(engine, wikitext_articles, spiece_model, tmp_path):
    corpus = wikitext_articles(2)
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed"
    launch(pretraining_argv(corpus, spiece_model, reference_dir, engine), engine)
    reference = final_weights(reference_dir)

    argv = pretraining_argv(corpus, spiece_model, killed_dir, engine)
    launch(argv, engine, kill_step=4, in_save=True)
    assert latest_checkpoint(killed_dir, marked=True) == str(killed_dir / "checkpoint-2"), engine
    # The half-written checkpoint (model and optimizer state written, the RNG states not) is never marked complete.
    broken = killed_dir / "checkpoint-4"
    written = {"ddp": "optimizer.pt", "zero2": "global_step4", "zero3": "global_step4", "fsdp2": "optimizer_0"}
    assert (broken / written[engine]).exists()
    assert not (broken / "trainer_state.json").exists() and not (broken / FINGERPRINT_NAME).exists()

    launch([*argv, "--resume_from_checkpoint", "latest"], engine, kill_step=5, mid_step=True)
    assert latest_checkpoint(killed_dir, marked=True) == str(killed_dir / "checkpoint-4"), engine
    state = json.loads((killed_dir / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4

    launch([*argv, "--resume_from_checkpoint", "latest"], engine)
    difference = max_difference(final_weights(killed_dir), reference)
    assert difference == 0, f"{engine}: the resumed run's weights differ from the uninterrupted run's by {difference}"
    assert max_difference(reference, checkpoint_weights(reference_dir / "checkpoint-2")) > 1000 * TOLERANCE
    for resumed_at in (2, 4):  # the losses logged after each resume (steps 3-4 by the second run, 5-6 by the third)
        assert logged_losses(killed_dir, resumed_at) == logged_losses(reference_dir, resumed_at), engine
