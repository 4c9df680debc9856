"""Reliability: exact resume after SIGKILL, atomic checkpoints, the non-finite loss guard, and checkpoint errors.

Faults are injected, not waited for: a callback appended to Trainer's default callbacks SIGKILLs the training
process at a chosen step, or a patched save method SIGKILLs it in the middle of writing a checkpoint. The kill steps
are parametrised (each one a test id), so a failure replays exactly. The runs in subprocesses are
marked `slow` / `distributed`: `-m "not slow and not distributed"` leaves the in-process tests (under a minute).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from helpers import processes
from helpers.trainer import (
    COMMON_ARGS,
    LAMB_RECIPE,
    REPO_ROOT,
    TINY_MODEL,
    PoisonAt,
    RandomSequences,
    assert_same_run,
    logged_losses,
    start_killed_run,
    tiny_arguments,
    tiny_classifier,
    wait_killed,
)
from safetensors.torch import load_file
from torch.utils.data import IterableDataset
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

import albert_hf  # noqa: F401 - registers the Auto classes
from albert_hf.modeling import AlbertForSequenceClassification, AlbertModel
from albert_hf.training.callbacks import (
    attach_reliability,
    find_resume_checkpoint,
    resume_training,
    save_final_model,
)
from albert_hf.training.reliability import (
    FINGERPRINT_NAME,
    MODEL_STAGING_DIR_NAME,
    CheckpointError,
    NonFiniteLossError,
    check_checkpoint_matches_model,
    checkpoint_problem,
    latest_checkpoint,
)
from albert_hf.training.trainer import AlbertTrainer

# --------------------------------------------------------------------------------------------------------------------
# Exact resume of the real scripts after SIGKILL
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_file(wikitext_articles) -> Path:
    return wikitext_articles(3)


def pretraining_argv(corpus: Path, spiece_model: Path, output_dir: Path, cache_dir: Path) -> list[str]:
    return [
        "--train_files",
        str(corpus),
        "--lines_are_paragraphs",
        "--cache_dir",
        str(cache_dir),
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_MODEL,
        "--max_seq_length",
        "64",
        "--per_device_train_batch_size",
        "4",
        "--gradient_accumulation_steps",
        "2",
        "--max_steps",
        "6",
        *LAMB_RECIPE,
        "--output_dir",
        str(output_dir),
        *COMMON_ARGS,
    ]


@pytest.mark.slow  # three tiny pretraining runs, one in a subprocess: about 20-40 s
@pytest.mark.parametrize("step", [3, 4, 5])  # after the first checkpoint (step 2), before the end (step 6)
def test_pretraining_killed_at_a_step_resumes_exactly(corpus_file, spiece_model, tmp_path, step):
    from albert_hf.scripts import pretrain as pretraining

    context = f"pretraining killed at the end of step {step}"
    killed_dir, reference_dir = tmp_path / "killed", tmp_path / "reference"
    child = start_killed_run(
        "albert_hf.scripts.pretrain",
        pretraining_argv(corpus_file, spiece_model, killed_dir, tmp_path / "cache-killed"),
        step,
    )
    # The uninterrupted run, in this process while the child runs.
    assert pretraining.main(pretraining_argv(corpus_file, spiece_model, reference_dir, tmp_path / "cache")) == 0
    wait_killed(child, context)

    checkpoint = latest_checkpoint(killed_dir)
    assert checkpoint == str(killed_dir / f"checkpoint-{step - step % 2 if step % 2 else step - 2}"), context
    argv = pretraining_argv(corpus_file, spiece_model, killed_dir, tmp_path / "cache")
    assert pretraining.main([*argv, "--resume_from_checkpoint", checkpoint]) == 0
    assert_same_run(reference_dir, killed_dir, final_step=6, context=context)
    resumed_at = int(checkpoint.rsplit("-", 1)[1])
    reference_losses = logged_losses(reference_dir, resumed_at)
    assert logged_losses(killed_dir, resumed_at) == reference_losses and reference_losses, context


def glue_argv(shared_data: Path, spiece_model: Path, output_dir: Path) -> list[str]:
    return [
        "--task_name",
        "rte",
        "--data_dir",
        str(shared_data / "glue" / "RTE"),
        "--do_train",
        "--max_train_samples",
        "20",
        "--max_seq_length",
        "64",
        "--per_device_train_batch_size",
        "4",
        "--max_steps",
        "8",  # 5 steps per epoch: the resumed run crosses an epoch boundary
        "--learning_rate",
        "1e-3",
        "--warmup_steps",
        "2",
        "--seed",
        "11",
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_MODEL,
        "--output_dir",
        str(output_dir),
        *COMMON_ARGS,
    ]


@pytest.mark.slow  # three tiny GLUE runs, one in a subprocess: about 20-30 s
@pytest.mark.parametrize("step", [4, 6])  # dies writing checkpoint-4 or -6; the one before is complete
def test_glue_killed_while_saving_resumes_exactly_from_the_last_complete_checkpoint(
    shared_data, spiece_model, tmp_path, step
):
    from albert_hf.scripts import glue

    context = f"GLUE killed while saving checkpoint-{step}"
    killed_dir, reference_dir = tmp_path / "killed", tmp_path / "reference"
    child = start_killed_run(
        "albert_hf.scripts.glue", glue_argv(shared_data, spiece_model, killed_dir), step, in_save=True
    )
    assert glue.main(glue_argv(shared_data, spiece_model, reference_dir)) == 0
    wait_killed(child, context)

    checkpoint = latest_checkpoint(killed_dir, marked=True)
    assert checkpoint == str(killed_dir / f"checkpoint-{step - 2}"), context
    # The broken checkpoint was never marked complete: transformers' own lookup would take it, "latest" does not.
    assert (killed_dir / f"checkpoint-{step}" / "model.safetensors").is_file(), context
    assert not (killed_dir / f"checkpoint-{step}" / FINGERPRINT_NAME).exists(), context
    assert get_last_checkpoint(str(killed_dir)) == str(killed_dir / f"checkpoint-{step}"), context

    # The same command restarts the job: "latest" resolves to the newest complete checkpoint.
    assert glue.main([*glue_argv(shared_data, spiece_model, killed_dir), "--resume_from_checkpoint", "latest"]) == 0
    assert_same_run(reference_dir, killed_dir, final_step=8, context=context)
    assert logged_losses(killed_dir, step - 2) == logged_losses(reference_dir, step - 2), context


# --------------------------------------------------------------------------------------------------------------------
# AlbertTrainer on a tiny classifier: atomic saves, best checkpoint, non-finite guard
# --------------------------------------------------------------------------------------------------------------------


class SaveCrash(RuntimeError):
    pass


def crash_in_save_at(trainer_class: type[Trainer], step: int) -> type[Trainer]:
    """A subclass whose RNG save (after model and optimizer are written) raises at `step`: a crash mid-save."""

    class Crashing(trainer_class):
        def _save_rng_state(self, output_dir):
            if self.state.global_step == step:
                raise SaveCrash(f"injected crash while writing {output_dir}")
            super()._save_rng_state(output_dir)

    return Crashing


@pytest.mark.parametrize("save_total_limit", [None, 1])
def test_crash_during_a_save_leaves_no_checkpoint_that_is_taken_as_latest(tmp_path, save_total_limit):
    trainer = crash_in_save_at(AlbertTrainer, step=4)(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, save_total_limit=save_total_limit),
        train_dataset=RandomSequences(),
    )
    attach_reliability(trainer)
    with pytest.raises(SaveCrash):
        trainer.train()
    # Only complete checkpoints are marked; rotation did not delete checkpoint-2 for the broken one.
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert (tmp_path / "checkpoint-2" / FINGERPRINT_NAME).is_file()
    assert (tmp_path / "checkpoint-4" / "model.safetensors").is_file()
    assert not (tmp_path / "checkpoint-4" / FINGERPRINT_NAME).exists()
    assert get_last_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-4")  # what transformers would take
    assert latest_checkpoint(tmp_path, marked=True) == str(tmp_path / "checkpoint-2")

    # Resuming saves step 4 again over the broken folder, and the run completes.
    resumed = AlbertTrainer(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, save_total_limit=save_total_limit),
        train_dataset=RandomSequences(),
    )
    resume_training(attach_reliability(resumed), latest_checkpoint(tmp_path, marked=True))
    expected = ["checkpoint-6"] if save_total_limit == 1 else ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == expected
    for checkpoint in tmp_path.glob("checkpoint-*"):
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        assert state["global_step"] == int(checkpoint.name.split("-")[1])
        assert checkpoint_problem(checkpoint, marked=True) is None


def test_resuming_from_an_older_checkpoint_replaces_the_later_ones_whole(tmp_path):
    attach_reliability(
        AlbertTrainer(
            model=tiny_classifier(), args=tiny_arguments(tmp_path, max_steps=4), train_dataset=RandomSequences()
        )
    ).train()
    first_save = (tmp_path / "checkpoint-4" / "optimizer.pt").stat().st_mtime_ns

    class MarkerGoneAtBegin(TrainerCallback):  # what a kill during the rewrite of checkpoint-4 would find
        def on_train_begin(self, args, state, control, **kwargs):
            self.marked = (tmp_path / "checkpoint-4" / FINGERPRINT_NAME).exists()

    seen = MarkerGoneAtBegin()
    resumed = attach_reliability(
        AlbertTrainer(
            model=tiny_classifier(), args=tiny_arguments(tmp_path, max_steps=4), train_dataset=RandomSequences()
        )
    )
    resumed.add_callback(seen)  # after CompleteCheckpoints: sees what it left
    resume_training(resumed, str(tmp_path / "checkpoint-2"))
    assert seen.marked is False  # unmarked before Trainer wrote over it
    assert (tmp_path / "checkpoint-4" / "optimizer.pt").stat().st_mtime_ns > first_save  # written again
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert latest_checkpoint(tmp_path, marked=True) == str(tmp_path / "checkpoint-4")


def test_same_crash_with_a_plain_trainer_is_taken_as_latest(tmp_path):
    """What the mixin prevents: transformers' own Trainer leaves the broken folder under its final name."""
    trainer = crash_in_save_at(Trainer, step=4)(
        model=tiny_classifier(), args=tiny_arguments(tmp_path), train_dataset=RandomSequences()
    )
    with pytest.raises(SaveCrash):
        trainer.train()
    assert get_last_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-4")
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")  # ours skips it


class CrashInOnSave(TrainerCallback):
    """Raises in `on_save` of `step`: after Trainer wrote the checkpoint and rotated, before it is marked complete."""

    def __init__(self, step: int):
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise SaveCrash(f"injected crash before checkpoint-{self.step} is marked")


@pytest.mark.parametrize("plugin", [False, True], ids=["plain Trainer", "with the plugin"])
def test_trainer_rotates_before_a_checkpoint_is_complete_and_the_plugin_after(tmp_path, plugin):
    """Why `rotate_checkpoints` stays beside Trainer's own rotation: Trainer rotates inside its checkpoint save, before
    `on_save`, where a checkpoint is marked complete. Killed in between, with save_total_limit=1 it has deleted the
    last complete checkpoint for one that is not. The plugin rotates only after marking."""
    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, save_total_limit=1),
        train_dataset=RandomSequences(),
        callbacks=[CrashInOnSave(4)],  # before the plugin's callbacks: called first
    )
    if plugin:
        attach_reliability(trainer)
    with pytest.raises(SaveCrash):
        trainer.train()
    kept = sorted(path.name for path in tmp_path.glob("checkpoint-*"))
    assert kept == (["checkpoint-2", "checkpoint-4"] if plugin else ["checkpoint-4"])
    assert latest_checkpoint(tmp_path, marked=True) == (str(tmp_path / "checkpoint-2") if plugin else None)


def test_best_checkpoint_is_recorded_under_its_final_name(tmp_path):
    arguments = tiny_arguments(
        tmp_path,
        eval_strategy="steps",
        eval_steps=2,
        metric_for_best_model="loss",
        greater_is_better=False,
        load_best_model_at_end=True,
        save_total_limit=1,
    )
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=arguments, train_dataset=RandomSequences(), eval_dataset=RandomSequences(size=8)
    )
    attach_reliability(trainer).train()
    best = trainer.state.best_model_checkpoint
    assert best == str(tmp_path / f"checkpoint-{trainer.state.best_global_step}") and Path(best).is_dir()
    for checkpoint in tmp_path.glob("checkpoint-*"):
        saved = json.loads((checkpoint / "trainer_state.json").read_text())["best_model_checkpoint"]
        assert saved is None or Path(saved).parent == tmp_path and checkpoint_problem(saved, marked=True) is None


def test_nan_loss_stops_training_naming_the_step(tmp_path):
    # Poisoned after step 3 (no save at odd steps): step 4's loss is NaN, and training stops before its update.
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path), train_dataset=RandomSequences(), callbacks=[PoisonAt(3)]
    )
    attach_reliability(trainer)
    with pytest.raises(NonFiniteLossError, match=r"training loss is nan at global step 4\b.*checkpoint-2"):
        trainer.train()
    assert trainer.state.global_step == 3
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-2")


def test_nan_weights_are_never_saved(tmp_path):
    # Poisoned at step 2, whose save comes next: the save is refused, naming the step and the parameter.
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path), train_dataset=RandomSequences(), callbacks=[PoisonAt(2)]
    )
    attach_reliability(trainer)
    with pytest.raises(NonFiniteLossError, match=r"classifier\.weight hold NaN/inf at global step 2\b"):
        trainer.train()
    assert not list(tmp_path.glob("checkpoint-*")) and latest_checkpoint(tmp_path) is None


def test_nan_message_reports_the_fp16_loss_scale(tmp_path):
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path), train_dataset=RandomSequences(), callbacks=[PoisonAt(1)]
    )
    attach_reliability(trainer)
    # CPU training has no scaler; give the accelerator one (scale 1024) to see it reported.
    trainer.accelerator.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    with pytest.raises(NonFiniteLossError, match=r"global step 2, fp16 loss scale 1024\b"):
        trainer.train()


def test_plain_trainer_writes_nan_weights_without_the_guard(tmp_path):
    """What the guard prevents: transformers' Trainer trains on and saves NaN weights."""
    trainer = Trainer(
        model=tiny_classifier(),
        args=tiny_arguments(tmp_path, max_steps=4),
        train_dataset=RandomSequences(),
        callbacks=[PoisonAt(3)],
    )
    trainer.train()
    saved = load_file(tmp_path / "checkpoint-4" / "model.safetensors")
    assert not torch.isfinite(saved["classifier.weight"]).all()


# --------------------------------------------------------------------------------------------------------------------
# Finding checkpoints
# --------------------------------------------------------------------------------------------------------------------


def fake_checkpoint(folder: Path, state: bool = True, weights: bytes | None = None) -> Path:
    folder.mkdir(parents=True)
    if state:
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": int(folder.name.split("-")[1])}))
    if weights is not None:
        (folder / "model.safetensors").write_bytes(weights)
    return folder


@pytest.fixture(scope="module")
def safetensors_bytes(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("weights") / "model.safetensors"
    from safetensors.torch import save_file

    save_file({"weight": torch.ones(64, 64)}, str(path))
    return path.read_bytes()


def test_latest_checkpoint_skips_incomplete_and_staged_folders(tmp_path, safetensors_bytes, caplog):
    assert latest_checkpoint(tmp_path / "absent") is None
    assert latest_checkpoint(tmp_path) is None
    fake_checkpoint(tmp_path / "checkpoint-9", weights=safetensors_bytes)
    fake_checkpoint(tmp_path / "checkpoint-10", weights=safetensors_bytes)  # numerically after 9
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    fake_checkpoint(tmp_path / "checkpoint-12", state=False, weights=safetensors_bytes)  # crashed before the state
    fake_checkpoint(tmp_path / "checkpoint-13", weights=safetensors_bytes[: len(safetensors_bytes) // 2])
    fake_checkpoint(tmp_path / "checkpoint-14")  # no weights at all
    sharded = fake_checkpoint(tmp_path / "checkpoint-11")  # a sharded checkpoint missing one of its shards
    (sharded / "model-00001-of-00002.safetensors").write_bytes(safetensors_bytes)
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    fake_checkpoint(tmp_path / ".checkpoint-staging" / "checkpoint-15", weights=safetensors_bytes)
    (tmp_path / "checkpoint-16.tmp").mkdir()
    assert latest_checkpoint(tmp_path) == str(tmp_path / "checkpoint-10")
    warnings = caplog.text
    assert "checkpoint-12/trainer_state.json is missing" in warnings
    assert "checkpoint-13/model.safetensors is corrupt or truncated" in warnings
    assert "checkpoint-14 holds no weights file" in warnings
    assert (
        "checkpoint-11/model-00002-of-00002.safetensors, listed in model.safetensors.index.json, is missing" in warnings
    )
    (sharded / "model-00002-of-00002.safetensors").write_bytes(safetensors_bytes)  # now complete
    assert latest_checkpoint(tmp_path) == str(sharded)


def test_find_resume_checkpoint(tmp_path, safetensors_bytes):
    assert find_resume_checkpoint(None, tmp_path) is None
    assert find_resume_checkpoint("latest", tmp_path) is None  # first start: nothing to resume yet
    # A folder where no checkpoint is marked: a plain Trainer's run, taken by its path (its options cannot be checked).
    plain = fake_checkpoint(tmp_path / "plain" / "checkpoint-5", weights=safetensors_bytes)
    assert find_resume_checkpoint(str(plain), tmp_path / "plain") == str(plain)
    assert find_resume_checkpoint("latest", tmp_path / "plain") is None  # "latest" takes marked checkpoints only
    good = fake_checkpoint(tmp_path / "checkpoint-2", weights=safetensors_bytes)
    (good / FINGERPRINT_NAME).write_text("{}")  # marked complete
    # Complete files but no marker beside a marked checkpoint: a save killed before its end.
    unmarked = fake_checkpoint(tmp_path / "checkpoint-3", weights=safetensors_bytes)
    assert find_resume_checkpoint(True, tmp_path) == str(good)
    assert find_resume_checkpoint("latest", tmp_path) == str(good)
    assert find_resume_checkpoint(str(good), tmp_path) == str(good)
    with pytest.raises(
        CheckpointError, match=r"checkpoint-3/run_fingerprint.json is missing \(the save did not finish"
    ):
        find_resume_checkpoint(str(unmarked), tmp_path)
    broken = fake_checkpoint(tmp_path / "checkpoint-4", state=False, weights=safetensors_bytes)
    with pytest.raises(CheckpointError, match=r"checkpoint-4/trainer_state.json is missing"):
        find_resume_checkpoint(str(broken), tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint folder at .*nowhere"):
        find_resume_checkpoint(str(tmp_path / "nowhere"), tmp_path)


# --------------------------------------------------------------------------------------------------------------------
# Damaged or foreign checkpoints: errors that name the file
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def trained_checkpoint(tmp_path) -> Path:
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path / "run", max_steps=2), train_dataset=RandomSequences()
    )
    attach_reliability(trainer).train()
    return tmp_path / "run" / "checkpoint-2"


def resume(checkpoint: Path, tmp_path: Path, model: torch.nn.Module | None = None) -> None:
    trainer = AlbertTrainer(
        model=model or tiny_classifier(),
        args=tiny_arguments(tmp_path / "resumed", max_steps=4),
        train_dataset=RandomSequences(),
    )
    resume_training(attach_reliability(trainer), str(checkpoint))


def test_resume_from_truncated_weights_names_the_file(trained_checkpoint, tmp_path):
    weights = trained_checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match=r"checkpoint-2/model.safetensors is corrupt or truncated"):
        resume(trained_checkpoint, tmp_path)


def test_resume_from_corrupt_weights_names_the_file(trained_checkpoint, tmp_path):
    weights = trained_checkpoint / "model.safetensors"
    weights.write_bytes(b"\x00" * 8 + weights.read_bytes()[8:])  # header length zeroed
    with pytest.raises(CheckpointError, match=r"checkpoint-2/model.safetensors is corrupt or truncated"):
        resume(trained_checkpoint, tmp_path)


def test_resume_from_another_model_type_names_the_config(trained_checkpoint, tmp_path):
    config = json.loads((trained_checkpoint / "config.json").read_text())
    (trained_checkpoint / "config.json").write_text(json.dumps({**config, "model_type": "bert"}))
    with pytest.raises(CheckpointError, match=r"checkpoint-2/config.json is a config of model type 'bert'"):
        resume(trained_checkpoint, tmp_path)


def test_resume_with_mismatched_shapes_names_the_file_and_tensor(trained_checkpoint, tmp_path):
    model = tiny_classifier()
    wider = AlbertForSequenceClassification(model.config.__class__(**{**model.config.to_dict(), "hidden_size": 24}))
    message = (
        r"checkpoint-2/model.safetensors: \d+ tensors do not match.*"
        r"attention\.dense\.weight: \(16, 16\) in the file, \(24, 24\) in the model"
    )
    with pytest.raises(CheckpointError, match=message):
        resume(trained_checkpoint, tmp_path, model=wider)


def test_mismatched_shapes_from_pretrained_are_refused(trained_checkpoint):
    with pytest.raises(Exception, match="size|shape"):
        AlbertForSequenceClassification.from_pretrained(trained_checkpoint, hidden_size=24)


class RunsCodeWhenUnpickled:
    """A pickle payload: unpickling calls os.makedirs(marker), i.e. executes code from the file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.makedirs, (str(self.marker),)


@pytest.fixture
def malicious_bin_checkpoint(trained_checkpoint, tmp_path) -> tuple[Path, Path]:
    marker = tmp_path / "code-was-executed"
    state = load_file(trained_checkpoint / "model.safetensors")
    state["albert.pooler.bias"] = RunsCodeWhenUnpickled(marker)
    (trained_checkpoint / "model.safetensors").unlink()
    torch.save(state, trained_checkpoint / "pytorch_model.bin")
    return trained_checkpoint, marker


def test_bin_checkpoints_load_weights_only_in_resume(malicious_bin_checkpoint, tmp_path):
    checkpoint, marker = malicious_bin_checkpoint
    with pytest.raises(CheckpointError, match=r"checkpoint-2/pytorch_model.bin cannot be loaded as plain weights"):
        resume(checkpoint, tmp_path)
    assert not marker.exists()


def test_bin_checkpoints_load_weights_only_in_from_pretrained(malicious_bin_checkpoint):
    checkpoint, marker = malicious_bin_checkpoint
    with pytest.raises(Exception, match="(?i)weights_only|unpickl"):
        AlbertModel.from_pretrained(checkpoint)
    assert not marker.exists()


def test_plain_bin_checkpoint_still_resumes(trained_checkpoint, tmp_path):
    state = load_file(trained_checkpoint / "model.safetensors")
    (trained_checkpoint / "model.safetensors").unlink()
    torch.save(state, trained_checkpoint / "pytorch_model.bin")
    check_checkpoint_matches_model(trained_checkpoint, tiny_classifier())
    resume(trained_checkpoint, tmp_path)
    assert latest_checkpoint(tmp_path / "resumed") == str(tmp_path / "resumed" / "checkpoint-4")


@pytest.mark.parametrize("file_name", ["optimizer.pt", "scheduler.pt", "rng_state.pth"])
def test_resume_never_unpickles_code_from_training_state_files(trained_checkpoint, tmp_path, file_name):
    marker = tmp_path / "code-was-executed"
    torch.save({"state": RunsCodeWhenUnpickled(marker)}, trained_checkpoint / file_name)
    with pytest.raises(Exception, match="(?i)weights_only|unpickl|unsupported global"):
        resume(trained_checkpoint, tmp_path)
    assert not marker.exists()


def test_auto_classes_never_import_the_checkpoints_own_code(trained_checkpoint, tmp_path):
    """A modeling.py in a checkpoint folder (save_pretrained copies one beside a model that needs albert_hf's code,
    for trust_remote_code): loading must not run it, through albert_hf's class or the Auto classes."""
    from transformers import AutoModelForSequenceClassification

    marker = tmp_path / "code-was-executed"
    (trained_checkpoint / "modeling.py").write_text(f"import os\nos.makedirs({str(marker)!r})\n")
    assert isinstance(
        AlbertForSequenceClassification.from_pretrained(trained_checkpoint), AlbertForSequenceClassification
    )
    model = AutoModelForSequenceClassification.from_pretrained(trained_checkpoint)
    assert type(model).__name__ == "AlbertForSequenceClassification" and not marker.exists()


# --------------------------------------------------------------------------------------------------------------------
# Two processes (DDP on CPU): all ranks write, only the main one renames; a NaN on one rank stops every rank
# --------------------------------------------------------------------------------------------------------------------

TWO_RANK_WORKER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import torch
    sys.path.insert(0, sys.argv[1])  # the tests folder, for tests/helpers/trainer.py
    from helpers.trainer import PoisonAt, RandomSequences, tiny_arguments, tiny_classifier
    from albert_hf.training.callbacks import attach_reliability
    from albert_hf.training.reliability import NonFiniteLossError
    from albert_hf.training.trainer import AlbertTrainer

    output = Path(sys.argv[2])
    trainer = AlbertTrainer(model=tiny_classifier(), args=tiny_arguments(output / "run", save_total_limit=1),
                              train_dataset=RandomSequences())
    attach_reliability(trainer).train()

    class PoisonOnRankOne(PoisonAt):
        def on_step_end(self, args, state, control, **kwargs):
            if args.process_index == 1:
                super().on_step_end(args, state, control, **kwargs)

    poisoned = AlbertTrainer(model=tiny_classifier(), args=tiny_arguments(output / "poisoned"),
                               train_dataset=RandomSequences(), callbacks=[PoisonOnRankOne(3)])
    attach_reliability(poisoned)
    try:
        poisoned.train()
        error = None
    except NonFiniteLossError as caught:
        error = str(caught)
    rank = trainer.args.process_index
    (output / f"rank{rank}.json").write_text(json.dumps({"world_size": trainer.args.world_size, "error": error}))
    """
)


@pytest.mark.distributed
def test_two_processes_save_atomically_and_stop_together_on_nan(tmp_path):
    worker = tmp_path / "worker.py"
    worker.write_text(TWO_RANK_WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT), "TOKENIZERS_PARALLELISM": "false"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        env.pop(name, None)
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(worker),
        str(REPO_ROOT / "tests"),
        str(tmp_path),
    ]
    result = processes.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"

    records = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [record["world_size"] for record in records] == [2, 2]
    # Both ranks' RNG states are in the one checkpoint left (save_total_limit=1), under its final name only.
    run = tmp_path / "run"
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-6"]
    assert {"rng_state_0.pth", "rng_state_1.pth", "trainer_state.json", "model.safetensors"} <= {
        p.name for p in (run / "checkpoint-6").iterdir()
    }
    assert checkpoint_problem(run / "checkpoint-6", world_size=2, marked=True) is None
    # The NaN appeared on rank 1 only; both ranks stopped at the same step instead of one hanging in an all-reduce.
    for record in records:
        assert record["error"] is not None and "at global step 4" in record["error"]
    assert latest_checkpoint(tmp_path / "poisoned") == str(tmp_path / "poisoned" / "checkpoint-2")


# --------------------------------------------------------------------------------------------------------------------
# Complete checkpoints: every file a resume reads, each readable
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def two_checkpoints(tmp_path) -> Path:
    """A finished run of 4 steps: checkpoint-2 and checkpoint-4, each written by Trainer in full."""
    run = tmp_path / "run"
    attach_reliability(
        AlbertTrainer(model=tiny_classifier(), args=tiny_arguments(run, max_steps=4), train_dataset=RandomSequences())
    ).train()
    return run


@pytest.mark.parametrize("file_name", ["optimizer.pt", "scheduler.pt", "rng_state.pth"])
def test_latest_skips_a_checkpoint_missing_part_of_its_training_state(two_checkpoints, file_name, caplog):
    assert checkpoint_problem(two_checkpoints / "checkpoint-4") is None
    (two_checkpoints / "checkpoint-4" / file_name).unlink()
    with caplog.at_level(logging.WARNING, logger="albert_hf.training.reliability"):
        assert latest_checkpoint(two_checkpoints) == str(two_checkpoints / "checkpoint-2")
    assert f"Skipping incomplete checkpoint {two_checkpoints / 'checkpoint-4'}" in caplog.text
    assert f"checkpoint-4/{file_name} is missing" in caplog.text


def test_a_model_only_checkpoint_is_complete(two_checkpoints):
    """`save_only_model` writes no training state at all: that is a complete checkpoint of its kind."""
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        (two_checkpoints / "checkpoint-4" / name).unlink()
    assert checkpoint_problem(two_checkpoints / "checkpoint-4") is None


@pytest.mark.parametrize("file_name", ["optimizer.pt", "rng_state.pth", "scheduler.pt"])
def test_resume_from_a_truncated_training_state_file_names_it_before_training(two_checkpoints, tmp_path, file_name):
    damaged = two_checkpoints / "checkpoint-4" / file_name
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path / "resumed", max_steps=6), train_dataset=RandomSequences()
    )
    with pytest.raises(CheckpointError, match=rf"checkpoint-4/{file_name} is truncated"):
        resume_training(attach_reliability(trainer), str(two_checkpoints / "checkpoint-4"))
    assert trainer.state.global_step == 0 and not list((tmp_path / "resumed").glob("checkpoint-*"))  # nothing trained


def test_rng_states_of_several_processes_are_all_required(two_checkpoints):
    folder = two_checkpoints / "checkpoint-4"
    rng = (folder / "rng_state.pth").read_bytes()
    (folder / "rng_state.pth").unlink()
    for rank in (0, 1, 3):  # rank 2's file is missing
        (folder / f"rng_state_{rank}.pth").write_bytes(rng)
    assert (
        checkpoint_problem(folder) == f"{folder / 'rng_state_2.pth'} is missing (the random number generators' state)"
    )
    (folder / "rng_state_2.pth").write_bytes(rng)
    assert checkpoint_problem(folder) is None
    # Resumed by 5 processes, rank 4 would find no RNG state of its own.
    assert checkpoint_problem(folder, world_size=5) == (
        f"{folder / 'rng_state_4.pth'} is missing (the random number generators' state)"
    )


def test_resume_names_the_checkpoint_and_step(two_checkpoints, tmp_path, caplog):
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path / "resumed", max_steps=6), train_dataset=RandomSequences()
    )
    with caplog.at_level(logging.INFO, logger="albert_hf.training"):
        resume_training(attach_reliability(trainer), str(two_checkpoints / "checkpoint-2"))
    assert f"Resuming from {two_checkpoints / 'checkpoint-2'} (step 2)." in caplog.text
    assert trainer.state.global_step == 6


# --------------------------------------------------------------------------------------------------------------------
# Run fingerprint: a resume that would change the run is refused
# --------------------------------------------------------------------------------------------------------------------


def resume_with(checkpoint: Path, output_dir: Path, **overrides) -> AlbertTrainer:
    extra = overrides.pop("fingerprint_extra", None)
    trainer = AlbertTrainer(
        model=tiny_classifier(),
        args=tiny_arguments(output_dir, max_steps=6, **overrides),
        train_dataset=RandomSequences(),
    )
    resume_training(attach_reliability(trainer, fingerprint_extra=extra), str(checkpoint))
    return trainer


def test_checkpoints_carry_the_fingerprint_of_their_run(two_checkpoints):
    saved = json.loads((two_checkpoints / "checkpoint-4" / "run_fingerprint.json").read_text())
    # Hand-written from tiny_arguments and tiny_classifier: batch 4 x accumulation 1 x 1 process.
    assert saved["global_batch_size"] == 4
    assert saved["optimizer.learning_rate"] == 1e-2 and saved["optimizer.optim"].startswith("adamw_torch")
    assert saved["optimizer.lr_scheduler_type"] == "linear" and saved["optimizer.weight_decay"] == 0.0
    assert saved["model.hidden_size"] == 16 and saved["model.embedding_size"] == 8 and saved["model.vocab_size"] == 50
    assert not {"model.transformers_version", "model._name_or_path", "model.architectures"} & set(saved)


@pytest.mark.parametrize(
    "overrides, difference",
    [
        ({"learning_rate": 2e-2}, "--learning_rate: 0.01 in the checkpoint, 0.02 now"),
        ({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 2}, None),  # same global batch: allowed
        (
            {"per_device_train_batch_size": 8},
            "the global batch (--per_device_train_batch_size x --gradient_accumulation_steps x processes): 4 in the checkpoint, 8 now",
        ),
        ({"adam_beta2": 0.98}, "--adam_beta2: 0.999 in the checkpoint, 0.98 now"),
        ({"fingerprint_extra": {"train_files": ["b.txt"]}}, "--train_files: absent in the checkpoint"),
    ],
)
def test_a_resume_that_changes_the_run_is_refused_naming_each_option(two_checkpoints, tmp_path, overrides, difference):
    if difference is None:
        assert resume_with(two_checkpoints / "checkpoint-2", tmp_path / "resumed", **overrides).state.global_step == 6
        return
    with pytest.raises(CheckpointError, match=re.escape(difference)):
        resume_with(two_checkpoints / "checkpoint-2", tmp_path / "resumed", **overrides)


def test_a_changed_job_option_is_refused_with_both_values(tmp_path):
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path / "run", max_steps=2), train_dataset=RandomSequences()
    )
    attach_reliability(trainer, fingerprint_extra={"train_files": ["a.txt"], "tokenizer": "spiece.model"}).train()
    with pytest.raises(CheckpointError) as caught:
        resume_with(
            tmp_path / "run" / "checkpoint-2",
            tmp_path / "resumed",
            fingerprint_extra={"train_files": ["b.txt"], "tokenizer": "other.model"},
        )
    message = str(caught.value)
    assert "would change 2 of the options" in message
    assert "--train_files: ['a.txt'] in the checkpoint, ['b.txt'] now" in message
    assert (
        "the tokenizer (--tokenizer_name_or_path, else --model_name_or_path): 'spiece.model' in the checkpoint, 'other.model' now"
        in message
    )


def test_a_checkpoint_without_fingerprint_resumes_with_a_warning(two_checkpoints, tmp_path, caplog):
    for marker in two_checkpoints.glob(
        "checkpoint-*/run_fingerprint.json"
    ):  # as an older version or Trainer wrote them
        marker.unlink()
    with caplog.at_level(logging.WARNING, logger="albert_hf.training.reliability"):
        trainer = resume_with(two_checkpoints / "checkpoint-2", tmp_path / "resumed", learning_rate=2e-2)
    assert trainer.state.global_step == 6
    assert "checkpoint-2 has no run_fingerprint.json" in caplog.text


# --------------------------------------------------------------------------------------------------------------------
# A finished run relaunched with the same --max_steps trains nothing
# --------------------------------------------------------------------------------------------------------------------


class EndlessSequences(IterableDataset):
    """`RandomSequences` over and over, as a stream without a length (Trainer then counts `max_steps` per pass)."""

    def __iter__(self):
        sequences = RandomSequences()
        while True:
            yield from (sequences[index] for index in range(len(sequences)))


def test_a_plain_trainer_relaunched_on_a_stream_trains_past_max_steps(two_checkpoints):
    """What the check prevents: Trainer resumes a finished run of a stream in its next pass, and takes a step."""
    plain = Trainer(
        model=tiny_classifier(), args=tiny_arguments(two_checkpoints, max_steps=4), train_dataset=EndlessSequences()
    )
    assert plain.train(resume_from_checkpoint=str(two_checkpoints / "checkpoint-4")).global_step == 5


@pytest.mark.parametrize("dataset", [RandomSequences, EndlessSequences])
def test_a_finished_run_relaunched_trains_no_step_past_max_steps(two_checkpoints, caplog, dataset):
    final = load_file(two_checkpoints / "checkpoint-4" / "model.safetensors")
    relaunched = AlbertTrainer(
        model=tiny_classifier(), args=tiny_arguments(two_checkpoints, max_steps=4), train_dataset=dataset()
    )
    with caplog.at_level(logging.INFO, logger="albert_hf.training"):
        result = resume_training(attach_reliability(relaunched), latest_checkpoint(two_checkpoints))
    assert "already trained for 4 steps (--max_steps 4): nothing to train" in caplog.text
    assert result.global_step == relaunched.state.global_step == 4
    assert sorted(p.name for p in two_checkpoints.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    # The trained weights are in the model, so the job's final save writes them and not a fresh model.
    for name, tensor in relaunched.model.state_dict().items():
        if name in final:
            assert torch.equal(tensor, final[name]), name
    assert not torch.equal(tiny_classifier().classifier.weight, final["classifier.weight"])


# --------------------------------------------------------------------------------------------------------------------
# The final save: killed while writing the model, the output folder never holds a config.json beside half a model
# --------------------------------------------------------------------------------------------------------------------

KILLED_FINAL_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])  # the tests folder, for tests/helpers/trainer.py
    import transformers.modeling_utils as modeling_utils
    from transformers import Trainer
    from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier
    from albert_hf.training.callbacks import attach_reliability, save_final_model
    from albert_hf.training.trainer import AlbertTrainer

    reliable = sys.argv[3] == "reliable"
    output = Path(sys.argv[2])
    trainer = (AlbertTrainer if reliable else Trainer)(
        model=tiny_classifier(), args=tiny_arguments(output, max_steps=2, save_strategy="no"),
        train_dataset=RandomSequences())
    if reliable:
        attach_reliability(trainer)
    save = save_final_model if reliable else Trainer.save_model
    trainer.train()
    if sys.argv[4] == "second":  # a complete model is there already; the next save of the same folder dies
        save(trainer)
        trainer.train()
    save_file = modeling_utils.safe_save_file

    def dies_half_way(tensors, filename, *args, **kwargs):
        save_file(tensors, filename, *args, **kwargs)
        with open(filename, "r+b") as handle:  # as far as a write got when the process was killed
            handle.truncate(os.path.getsize(filename) // 2)
        os.kill(os.getpid(), signal.SIGKILL)

    modeling_utils.safe_save_file = dies_half_way
    save(trainer)
    """
)


def run_killed_final_save(tmp_path: Path, trainer_kind: str, save: str) -> Path:
    script = tmp_path / "killed_final_save.py"
    script.write_text(KILLED_FINAL_SAVE)
    output = tmp_path / f"{trainer_kind}-{save}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = processes.start(
        [sys.executable, str(script), str(REPO_ROOT / "tests"), str(output), trainer_kind, save],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_killed(process, f"{trainer_kind} trainer killed in its {save} final save")
    return output


@pytest.mark.slow  # a job killed in its final save, in a subprocess
def test_a_final_save_killed_midway_leaves_no_config_beside_a_broken_model(tmp_path):
    output = run_killed_final_save(tmp_path, "reliable", "first")
    assert not (output / "config.json").exists() and not (output / "model.safetensors").exists()
    # The whole save is in the staging folder, which from_pretrained never reads (no config.json in the folder).
    assert (output / MODEL_STAGING_DIR_NAME / "config.json").is_file()
    with pytest.raises(OSError):
        AlbertForSequenceClassification.from_pretrained(output)


@pytest.mark.slow  # a job killed in its second final save, in a subprocess
def test_a_second_final_save_killed_midway_keeps_the_first_model_whole(tmp_path):
    output = run_killed_final_save(tmp_path, "reliable", "second")
    model = AlbertForSequenceClassification.from_pretrained(output)  # the first save, complete
    assert model.config.hidden_size == 16
    # And a later save into the folder clears the leftover staging folder and completes.
    save_final_model(AlbertTrainer(model=model, args=tiny_arguments(output, max_steps=1, save_strategy="no")))
    assert not (output / MODEL_STAGING_DIR_NAME).exists()
    AlbertForSequenceClassification.from_pretrained(output)


@pytest.mark.slow  # a plain Trainer killed in its final save, in a subprocess
def test_a_plain_trainer_killed_in_its_final_save_leaves_config_beside_half_a_model(tmp_path):
    """What the staging prevents: Trainer writes config.json first, then the weights in place."""
    output = run_killed_final_save(tmp_path, "plain", "first")
    assert (output / "config.json").is_file()
    with pytest.raises(Exception, match="(?i)incomplete|truncat|deserializ|header"):
        AlbertForSequenceClassification.from_pretrained(output)


def test_a_rollback_lr_factor_reaches_the_scheduler_and_the_logged_rate():
    """`scale_learning_rate` (the guard's `lr_factor`) through the scheduler's public state dict: the optimizer's rate,
    the scheduler's base rates, the rate `get_last_lr()` reports (what Trainer logs) and every later step's rate. The
    behaviour test of the scheduler state's `_last_lr` key (training/transformers_internals.py): without it,
    `get_last_lr()` would report the old rate until the next step."""
    from types import SimpleNamespace

    from transformers import get_linear_schedule_with_warmup

    from albert_hf.training.divergence import scale_learning_rate

    def schedule():
        optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-2)
        return optimizer, get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=10)

    optimizer, scheduler = schedule()
    reference_optimizer, reference = schedule()
    for _ in range(3):
        optimizer.step(), scheduler.step(), reference_optimizer.step(), reference.step()
    scale_learning_rate(SimpleNamespace(optimizer=optimizer, lr_scheduler=scheduler), 0.5)
    assert scheduler.base_lrs == [0.5 * 1e-2]
    assert scheduler.get_last_lr() == [optimizer.param_groups[0]["lr"]] == [0.5 * reference.get_last_lr()[0]]
    for _ in range(3):
        optimizer.step(), scheduler.step(), reference_optimizer.step(), reference.step()
        assert scheduler.get_last_lr()[0] == pytest.approx(0.5 * reference.get_last_lr()[0], rel=1e-12)
