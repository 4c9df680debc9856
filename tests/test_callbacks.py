"""albert_hf's reliability plugin on a plain `transformers.Trainer`: real processes killed with SIGKILL in the middle
of a step, inside a save and between a save and its completion marker resume exactly; a resume that
changes the run, or starts from an unmarked folder, is refused before a step is trained.

The job (tests/distributed/plain_trainer_job.py) runs under tests/distributed/killed_job.py, which kills it as in
tests/test_reliability.py. The reference is the same job uninterrupted; "exactly" is bit-identical final weights and
optimizer moments (same threads, same batches, same RNG states), as `assert_same_run` checks for albert_hf's Trainers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import processes
from helpers.trainer import (
    KILLED_JOB,
    REPO_ROOT,
    RandomSequences,
    assert_same_run,
    tiny_arguments,
    tiny_classifier,
    wait_killed,
)
from transformers import Trainer
from transformers.trainer_utils import get_last_checkpoint

from albert_hf.training.callbacks import resume_checkpoint, resume_training
from albert_hf.training.divergence import RollbackDivergedSteps
from albert_hf.training.reliability import CheckpointError, latest_checkpoint

sys.path.insert(0, str(REPO_ROOT / "tests" / "distributed"))
import plain_trainer_job  # noqa: E402


def start_killed_job(output_dir: Path, step: int, mode: str, *extra: str) -> processes.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "TORCH_THREADS": str(torch.get_num_threads()),
        "HF_HUB_OFFLINE": "1",
        "KILL_STEP": str(step),
    }
    for name in ("KILL_IN_SAVE", "KILL_MID_STEP", "KILL_BEFORE_MARK"):
        env.pop(name, None)
    if mode == "before_mark":
        env["KILL_BEFORE_MARK"] = str(step)
        env["KILL_STEP"] = "0"  # killed_job.py injects nothing
    elif mode == "in_save":
        env["KILL_IN_SAVE"] = "1"
    elif mode == "mid_step":
        env["KILL_MID_STEP"] = "1"
    return processes.start(
        [sys.executable, str(KILLED_JOB), "plain_trainer_job", "--output_dir", str(output_dir), *extra],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory):
    """The uninterrupted job's output folder for given job options (each run once per module)."""
    runs: dict[tuple[str, ...], Path] = {}

    def run(*options: str) -> Path:
        if options not in runs:
            output_dir = tmp_path_factory.mktemp("reference")
            assert plain_trainer_job.main(["--output_dir", str(output_dir), *options]) == 0
            runs[options] = output_dir
        return runs[options]

    return run


@pytest.fixture
def reference_run(reference_runs) -> Path:
    return reference_runs()


@pytest.mark.slow  # each a job killed in a subprocess, then resumed
@pytest.mark.parametrize(
    "mode, step, latest",
    [
        ("mid_step", 5, 4),  # between the 2 micro-batches of step 5, before its optimizer step
        ("in_save", 4, 2),  # inside the save of checkpoint-4: weights and optimizer written, no RNG state
        ("before_mark", 4, 2),  # checkpoint-4 fully written by Trainer, killed before the marker
    ],
)
def test_plain_trainer_killed_resumes_exactly(reference_runs, tmp_path, mode, step, latest):
    context = f"plain Trainer killed {mode} at step {step}"
    killed_dir = tmp_path / "killed"
    # A step of several micro-batches only where the kill falls between them.
    options = ("--gradient_accumulation_steps", "2") if mode == "mid_step" else ()
    reference_run = reference_runs(*options)
    # save_total_limit=1: Trainer's own rotation (before on_save) would delete checkpoint-2 for an unmarked one.
    wait_killed(start_killed_job(killed_dir, step, mode, "--save_total_limit", "1", *options), context)

    assert latest_checkpoint(killed_dir, marked=True) == str(killed_dir / f"checkpoint-{latest}"), context
    if mode == "before_mark":
        # What transformers alone would resume from: the unmarked folder, whose files all look complete.
        assert get_last_checkpoint(str(killed_dir)) == str(killed_dir / "checkpoint-4"), context
        assert (killed_dir / "checkpoint-4" / "trainer_state.json").is_file(), context
        assert not (killed_dir / "checkpoint-4" / "run_fingerprint.json").exists(), context
        with pytest.raises(CheckpointError, match=re.escape("run_fingerprint.json is missing")):
            trainer, _ = plain_trainer_job.build(["--output_dir", str(killed_dir)])
            resume_checkpoint(trainer, killed_dir / "checkpoint-4")

    argv = ["--output_dir", str(killed_dir), "--save_total_limit", "1", "--resume", "latest", *options]
    assert plain_trainer_job.main(argv) == 0
    assert_same_run(reference_run, killed_dir, final_step=6, context=context)
    assert sorted(p.name for p in killed_dir.glob("checkpoint-*")) == ["checkpoint-6"], context
    assert logged_losses(killed_dir, latest) == logged_losses(reference_run, latest) != [], context


def logged_losses(run: Path, after_step: int) -> list[tuple[int, float]]:
    history = json.loads((run / "checkpoint-6" / "trainer_state.json").read_text())["log_history"]
    return [(entry["step"], entry["loss"]) for entry in history if "loss" in entry and entry["step"] > after_step]


@pytest.mark.parametrize(
    "options, differences",
    [
        (["--learning_rate", "2e-2"], ["--learning_rate: 0.01 in the checkpoint, 0.02 now"]),
        (
            ["--per_device_train_batch_size", "8"],
            [
                "the global batch (--per_device_train_batch_size x --gradient_accumulation_steps x processes): 4 in the checkpoint, 8 now"
            ],
        ),
        (
            ["--learning_rate", "2e-2", "--data_version", "2"],
            ["--data: '1' in the checkpoint, '2' now", "--learning_rate: 0.01 in the checkpoint, 0.02 now"],
        ),
    ],
)
def test_a_resume_that_changes_the_run_is_refused_naming_each_difference(reference_run, tmp_path, options, differences):
    trainer, _ = plain_trainer_job.build(["--output_dir", str(reference_run), *options])
    with pytest.raises(CheckpointError) as caught:
        resume_checkpoint(trainer, "latest")
    message = str(caught.value)
    assert f"would change {len(differences)} of the options" in message
    for difference in differences:
        assert difference in message


def test_a_changed_run_given_a_path_straight_to_train_stops_before_a_step(reference_run, tmp_path):
    output_dir = tmp_path / "run"
    assert plain_trainer_job.main(["--output_dir", str(output_dir)]) == 0
    before = (output_dir / "checkpoint-6" / "model.safetensors").read_bytes()
    trainer, _ = plain_trainer_job.build(["--output_dir", str(output_dir), "--learning_rate", "2e-2"])
    with pytest.raises(CheckpointError, match=re.escape("--learning_rate: 0.01 in the checkpoint, 0.02 now")):
        trainer.train(resume_from_checkpoint=str(output_dir / "checkpoint-4"))
    assert trainer.state.global_step == 4  # resumed state loaded, no step trained
    assert (output_dir / "checkpoint-6" / "model.safetensors").read_bytes() == before


def test_latest_with_nothing_marked_starts_fresh_and_a_missing_path_is_named(tmp_path):
    trainer, _ = plain_trainer_job.build(["--output_dir", str(tmp_path)])
    assert resume_checkpoint(trainer, "latest") is None
    assert resume_checkpoint(trainer, None) is None
    with pytest.raises(CheckpointError, match=re.escape(f"no checkpoint folder at {tmp_path / 'checkpoint-9'}")):
        resume_checkpoint(trainer, tmp_path / "checkpoint-9")


def test_a_fresh_start_over_another_run_is_refused_and_its_resume_is_not(reference_run):
    """The folder guard of the plugin on a plain Trainer: `resume_training` checks the output folder the job did not
    check itself; a fresh start would write over the finished run's checkpoints."""
    from albert_hf.training.run_folder import OutputFolderError

    trainer, _ = plain_trainer_job.build(["--output_dir", str(reference_run)])
    with pytest.raises(OutputFolderError, match=r"holds another run's files \(checkpoint-2, checkpoint-4"):
        resume_training(trainer, None)
    assert resume_training(trainer, "latest").global_step == 6  # the finished run, relaunched: nothing to train


def run_job_alone(output_dir: Path, *options: str) -> None:
    """The plain Trainer job to its end in a fresh process, on one thread (no state shared with this process or
    another run)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TORCH_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    for name in ("KILL_STEP", "KILL_IN_SAVE", "KILL_MID_STEP", "KILL_BEFORE_MARK"):
        env.pop(name, None)
    command = [sys.executable, str(KILLED_JOB), "plain_trainer_job", "--output_dir", str(output_dir), *options]
    job = processes.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    assert job.returncode == 0, job.stdout + job.stderr


@pytest.mark.slow  # two whole runs, each in a fresh process
def test_plain_trainer_with_the_divergence_guard_rolls_a_nan_step_back(tmp_path):
    """A plain `transformers.Trainer` given albert_hf's reliability plugin (`attach_reliability`, with the divergence
    guard: snapshots every 2 steps): the batch of step 4 has no label, so its loss is NaN. The
    guard undoes steps 3 and 4 (back to the snapshot of step 2), skips their two batches, and the run ends exactly as
    one that never had them: the reference, trained on the batches minus those two, with neither the guard nor the
    NaN. Each run in a fresh process on one thread."""
    guarded_dir, reference_dir = tmp_path / "guarded", tmp_path / "reference"
    options = ("--batches", "8", "--save_total_limit", "1")
    run_job_alone(guarded_dir, *options, "--unlabeled_batches", "4", "--divergence_guard_every", "2")
    run_job_alone(reference_dir, *options, "--without_batches", "3,4")

    trainer, _ = plain_trainer_job.build(
        ["--output_dir", str(tmp_path / "built"), *options, "--divergence_guard_every", "2"]
    )
    assert type(trainer) is Trainer and RollbackDivergedSteps.of(trainer) is not None
    history = json.loads((guarded_dir / "checkpoint-6" / "trainer_state.json").read_text())["log_history"]
    events = [entry for entry in history if "divergence_rollback_from_step" in entry]
    assert [(e["divergence_rollback_from_step"], e["divergence_rollback_to_step"]) for e in events] == [(4, 2)]
    assert events[0]["divergence_skipped_batches"] == 2
    assert_same_run(reference_dir, guarded_dir, final_step=6, context="plain Trainer rolled back at step 4")
    assert latest_checkpoint(guarded_dir, marked=True) == str(guarded_dir / "checkpoint-6")


def test_the_guard_refuses_a_trainer_that_trains_on_a_loss_of_its_own(tmp_path):
    """The guard judges the loss the model returns: a Trainer that trains on another one (here label smoothing) is
    refused before any step, naming the option, instead of judging a number it does not train on."""
    from albert_hf.errors import UserError
    from albert_hf.training.divergence import guard_divergence

    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, label_smoothing_factor=0.1),
        train_dataset=RandomSequences(),
    )
    guard_divergence(trainer)
    with pytest.raises(UserError, match=r"^--divergence_guard reads the loss of the model's output; .*label_smoothing"):
        trainer.train()
    assert trainer.state.global_step == 0


def test_the_plugin_attaches_what_every_job_needs_and_the_pieces_a_job_passes_in_where_they_belong(tmp_path):
    """`attach_reliability` alone adds the callbacks every job needs, in their order, and neither the stream resume
    nor the divergence guard (a fine-tuning job imports neither); the pieces passed in go where they must: the stream
    resume before the marking (its position is part of the checkpoint marked), the guard right after Trainer's flow
    callback, in place of the stop on a non-finite loss. Attaching again adds nothing."""
    from transformers import DefaultFlowCallback

    from albert_hf.training.callbacks import CompleteCheckpoints, UploadCompleteCheckpoints, attach_reliability
    from albert_hf.training.divergence import DivergenceGuardConfig
    from albert_hf.training.non_finite import RefuseNonFiniteCheckpoints, StopOnNonFiniteLoss
    from albert_hf.training.preemption import CheckpointOnSignal
    from albert_hf.training.stream_resume import ResumableStream

    def plugin_callbacks(trainer) -> list[str]:
        own = [type(callback) for callback in trainer.callback_handler.callbacks]
        return [kind.__name__ for kind in own if kind.__module__.startswith(("albert_hf.", "transformers.trainer_c"))]

    core = ["CompleteCheckpoints", "UploadCompleteCheckpoints", "StopOnNonFiniteLoss", "CheckpointOnSignal"]
    core += ["RefuseUnknownSelectionMetric", "RefuseNonFiniteCheckpoints"]
    trainer = Trainer(model=tiny_classifier(), args=tiny_arguments(tmp_path), train_dataset=RandomSequences())
    assert plugin_callbacks(trainer)[0] == "DefaultFlowCallback"
    attach_reliability(trainer)
    assert plugin_callbacks(trainer)[-len(core) :] == core
    assert not any(isinstance(c, (ResumableStream, RollbackDivergedSteps)) for c in trainer.callback_handler.callbacks)
    for kind in (CompleteCheckpoints, UploadCompleteCheckpoints, StopOnNonFiniteLoss, CheckpointOnSignal):
        assert sum(isinstance(c, kind) for c in trainer.callback_handler.callbacks) == 1
    assert isinstance(trainer.callback_handler.callbacks[-1], RefuseNonFiniteCheckpoints)

    guard = RollbackDivergedSteps(trainer, DivergenceGuardConfig(snapshot_steps=3))
    attach_reliability(trainer, callbacks=[ResumableStream(trainer), guard])
    attach_reliability(trainer, callbacks=[ResumableStream(trainer)])  # again: nothing more
    callbacks = trainer.callback_handler.callbacks
    names = plugin_callbacks(trainer)
    assert names.count("ResumableStream") == names.count("RollbackDivergedSteps") == 1
    assert names.index("ResumableStream") == names.index("CompleteCheckpoints") - 1
    assert isinstance(callbacks[callbacks.index(guard) - 1], DefaultFlowCallback)
    assert "StopOnNonFiniteLoss" not in names  # the guard rolls a non-finite step back instead
