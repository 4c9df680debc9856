"""A plain `transformers.Trainer` on the tiny classifier with albert_hf's reliability plugin attached in one line
(`attach_reliability`): the job the callback tests kill (through tests/distributed/killed_job.py, `main(argv)`) and
resume (`resume_training`).

    python tests/distributed/killed_job.py plain_trainer_job --output_dir DIR [--resume latest] [--learning_rate LR]

With `--batches N` it reads N batches of 4 in order (`train_sampling_strategy="sequential"`), the labels of the
`--unlabeled_batches` (1-based, comma-separated) all -100, so that their loss is NaN (a mean over no target), and the
`--without_batches` left out; `--divergence_guard_every K` adds albert_hf's divergence guard (a snapshot every K
steps) through the plugin's `divergence_guard`.

KILL_BEFORE_MARK=N (read here, not by killed_job.py) SIGKILLs the process in `on_save` of checkpoint-N, after Trainer
wrote every file of it (trainer_state.json included) and rotated, before the callback marks it: a callback placed
before `CompleteCheckpoints` in the list, so Trainer calls it first.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the helpers package

from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402
from transformers import Trainer, TrainerCallback  # noqa: E402

from albert_hf.training.callbacks import attach_reliability, resume_training, save_final_model  # noqa: E402
from albert_hf.training.divergence import DivergenceGuardConfig, RollbackDivergedSteps  # noqa: E402

BATCH = 4


class EditedBatches(Dataset):
    """`batches` batches of `RandomSequences`, the labels of the `unlabeled` ones (1-based) set to -100, the `without`
    ones left out."""

    def __init__(self, batches: int, unlabeled: set[int], without: set[int]):
        self.sequences = RandomSequences(size=BATCH * batches)
        self.unlabeled = unlabeled
        self.kept = [index for index in range(BATCH * batches) if index // BATCH + 1 not in without]

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, index: int) -> dict:
        original = self.kept[index]
        item = self.sequences[original]
        if original // BATCH + 1 in self.unlabeled:
            item = {**item, "labels": item["labels"].new_tensor(-100)}
        return item


def batch_numbers(text: str) -> set[int]:
    return {int(number) for number in text.split(",") if number}


class KillBeforeMark(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def build(argv: list[str]) -> tuple[Trainer, str | None]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--resume", default=None)
    parser.add_argument("--learning_rate", type=float, default=1e-2)
    parser.add_argument("--per_device_train_batch_size", type=int, default=4)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--save_total_limit", type=int, default=None)
    parser.add_argument("--data_version", default="1")
    parser.add_argument("--batches", type=int, default=0)
    parser.add_argument("--unlabeled_batches", type=batch_numbers, default=set())
    parser.add_argument("--without_batches", type=batch_numbers, default=set())
    parser.add_argument("--divergence_guard_every", type=int, default=0)
    options = parser.parse_args(argv)
    in_order = {"train_sampling_strategy": "sequential"} if options.batches else {}
    callbacks = []
    if os.environ.get("KILL_BEFORE_MARK"):
        callbacks.append(KillBeforeMark(int(os.environ["KILL_BEFORE_MARK"])))
    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(
            Path(options.output_dir),
            learning_rate=options.learning_rate,
            per_device_train_batch_size=options.per_device_train_batch_size,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
            save_total_limit=options.save_total_limit,
            **in_order,
        ),
        train_dataset=(
            EditedBatches(options.batches, options.unlabeled_batches, options.without_batches)
            if options.batches
            else RandomSequences()
        ),
        callbacks=callbacks,
    )
    every = options.divergence_guard_every
    guard = DivergenceGuardConfig(snapshot_steps=every) if every else None
    pieces = [RollbackDivergedSteps(trainer, guard)] if guard else []
    attach_reliability(trainer, fingerprint_extra={"data": options.data_version}, callbacks=pieces)
    return trainer, options.resume


def main(argv: list[str]) -> int:
    trainer, resume = build(argv)
    resume_training(trainer, resume)
    save_final_model(trainer)
    return 0
