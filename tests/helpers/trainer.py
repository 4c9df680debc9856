"""What the reliability tests share (tests/test_reliability.py, tests/test_resume_streaming.py,
tests/test_resume_distributed.py, tests/test_push_checkpoints.py): the tiny classifier, its data and training
arguments, the NaN-injecting callback, the arguments of the tiny pretraining runs, the killed child process and the
comparison of a resumed run with its uninterrupted one.

A module of its own, not part of a test module: the worker scripts that the reliability tests start in subprocesses
(under torchrun, or killed on purpose) import these helpers with the tests folder on `sys.path`, and importing a test
module for them would load its tests and fixtures too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch.utils.data import Dataset as TorchDataset
from transformers import TrainerCallback, TrainingArguments

from albert_hf.configuration import AlbertConfig
from albert_hf.modeling import AlbertForSequenceClassification

from . import processes
from .tiny import TINY_TWO_LAYER_OVERRIDES

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_MODEL = f"{TINY_TWO_LAYER_OVERRIDES},hidden_dropout_prob=0.1,classifier_dropout_prob=0.1"
COMMON_ARGS = [
    "--report_to",
    "none",
    "--use_cpu",
    "--disable_tqdm",
    "true",
    "--logging_steps",
    "1",
    "--dataloader_num_workers",
    "0",
    "--save_strategy",
    "steps",
    "--save_steps",
    "2",
]

# The pretraining runs of the resume tests: LAMB at 5e-3 after 2 warm-up steps, seed 7.
LAMB_RECIPE = ["--learning_rate", "5e-3", "--warmup_steps", "2", "--optimizer", "lamb", "--seed", "7"]

# The child: the task's `main` under tests/distributed/killed_job.py, which SIGKILLs it at the end of step KILL_STEP,
# in its middle (between gradient-accumulation micro-batches) or inside the save of checkpoint-KILL_STEP.
KILLED_JOB = REPO_ROOT / "tests" / "distributed" / "killed_job.py"


def start_killed_run(
    module: str, argv: list[str], step: int, in_save: bool = False, mid_step: bool = False
) -> processes.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "KILL_STEP": str(step),
        "TORCH_THREADS": str(torch.get_num_threads()),  # same threads as this process: same float reductions
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("KILL_IN_SAVE", None)
    env.pop("KILL_MID_STEP", None)
    if in_save:
        env["KILL_IN_SAVE"] = "1"
    if mid_step:
        env["KILL_MID_STEP"] = "1"
    return processes.start(
        [sys.executable, str(KILLED_JOB), module, *argv],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_killed(process: processes.Popen, what: str) -> None:
    try:
        output, _ = process.communicate(timeout=600)
    finally:
        processes.end(process)
    assert process.returncode == -signal.SIGKILL, (
        f"{what}: expected death by SIGKILL, got {process.returncode}:\n{output[-3000:]}"
    )


def max_abs_diff_of_files(a: Path, b: Path) -> float:
    first, second = load_file(a), load_file(b)
    assert first.keys() == second.keys()
    return max((first[name].float() - second[name].float()).abs().max().item() for name in first)


def optimizer_state_diff(a: Path, b: Path) -> float:
    """Largest difference between the per-parameter states (LAMB/AdamW moments, step) of two optimizer.pt files."""
    first, second = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    assert first["state"].keys() == second["state"].keys()
    diffs = [
        (torch.as_tensor(first["state"][index][key]).float() - torch.as_tensor(second["state"][index][key]).float())
        .abs()
        .max()
        .item()
        for index in first["state"]
        for key in first["state"][index]
    ]
    return max(diffs)


def assert_same_run(reference: Path, resumed: Path, final_step: int, context: str) -> None:
    """Bit-identical final weights and optimizer moments (atol 0: same threads, same batches, same masks, same RNG
    states), and the same learning-rate schedule."""
    weights_diff = max_abs_diff_of_files(reference / "model.safetensors", resumed / "model.safetensors")
    assert weights_diff == 0, f"{context}: final weights differ by {weights_diff}"
    final = f"checkpoint-{final_step}"
    optimizer_diff = optimizer_state_diff(reference / final / "optimizer.pt", resumed / final / "optimizer.pt")
    assert optimizer_diff == 0, f"{context}: optimizer state differs by {optimizer_diff}"
    schedulers = [torch.load(run / final / "scheduler.pt", weights_only=True) for run in (reference, resumed)]
    assert schedulers[0]["_last_lr"] == schedulers[1]["_last_lr"], context
    assert schedulers[0]["last_epoch"] == schedulers[1]["last_epoch"] == final_step, context


def logged_losses(run: Path, after_step: int) -> list[tuple[int, float]]:
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    return [(entry["step"], entry["loss"]) for entry in history if "loss" in entry and entry["step"] > after_step]


# The tiny classifier of the AlbertTrainer tests


class RandomSequences(TorchDataset):
    """Fixed random token sequences with binary labels."""

    def __init__(self, size: int = 16, length: int = 8, vocab_size: int = 50):
        generator = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(5, vocab_size, (size, length), generator=generator)
        self.labels = torch.randint(0, 2, (size,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}


def tiny_classifier() -> AlbertForSequenceClassification:
    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=50,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    return AlbertForSequenceClassification(config)


def tiny_arguments(output_dir: Path, **overrides) -> TrainingArguments:
    defaults = dict(
        output_dir=str(output_dir),
        max_steps=6,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        save_strategy="steps",
        save_steps=2,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    return TrainingArguments(**{**defaults, **overrides})


class PoisonAt(TrainerCallback):
    """Set one weight to NaN at the end of `step` (before that step's save)."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.step:
            with torch.no_grad():
                model.classifier.weight[0, 0] = float("nan")
