"""`--push_to_hub` during training: only complete checkpoints are uploaded, and a failing upload never stops training.

No network: the fake Hub of tests/helpers/hub.py replaces transformers' `hf_api()`, through which Trainer uploads
(and the plugin asks Trainer for each checkpoint's upload); it records every `upload_folder` call (which folder, under
which name in the repository, what the folder held when the upload ran) and can be told to fail.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier

from albert_hf.training.callbacks import attach_reliability, failed_pushes
from albert_hf.training.reliability import checkpoint_problem, latest_checkpoint
from albert_hf.training.trainer import AlbertTrainer


def push_arguments(output_dir: Path, **overrides):
    return tiny_arguments(
        output_dir, push_to_hub=True, hub_model_id="run", hub_strategy="checkpoint", hub_always_push=True, **overrides
    )


def test_only_complete_checkpoints_under_their_final_name_are_uploaded(fake_hub, tmp_path):
    api = fake_hub()
    trainer = attach_reliability(
        AlbertTrainer(model=tiny_classifier(), args=push_arguments(tmp_path), train_dataset=RandomSequences())
    )
    trainer.train()
    checkpoint_uploads = [u for u in api.uploads if u["path_in_repo"] == "last-checkpoint"]
    # One upload of the run folder and one of the checkpoint per save (steps 2, 4, 6).
    assert [u["folder"] for u in checkpoint_uploads] == [tmp_path / f"checkpoint-{step}" for step in (2, 4, 6)]
    assert all(u["problem_at_call"] is None for u in checkpoint_uploads), checkpoint_uploads
    # Trainer's own in-save upload is off while training (it would start before the marker), and back after.
    assert trainer.args.hub_strategy == "checkpoint"
    assert [u["folder"] for u in api.uploads if u["path_in_repo"] is None] == [tmp_path] * 3
    for upload in checkpoint_uploads:
        assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= set(upload["files"])
    assert failed_pushes(trainer) == []


def test_an_older_checkpoint_being_uploaded_is_not_rotated_away(fake_hub, tmp_path):
    api = fake_hub()
    api.release.clear()  # uploads hang until released
    trainer = attach_reliability(
        AlbertTrainer(
            model=tiny_classifier(), args=push_arguments(tmp_path, save_total_limit=1), train_dataset=RandomSequences()
        )
    )
    releaser = threading.Timer(2.0, api.release.set)  # the end of training waits for the uploads: let them finish
    releaser.start()
    try:
        trainer.train()
    finally:
        releaser.cancel()
        api.release.set()
    checkpoint_uploads = [u for u in api.uploads if u["path_in_repo"] == "last-checkpoint"]
    # Every upload found its folder complete when it ran, although save_total_limit=1 would have deleted it.
    assert len(checkpoint_uploads) == 3
    for upload in checkpoint_uploads:
        assert {"model.safetensors", "optimizer.pt", "trainer_state.json"} <= set(upload["files"]), upload


@pytest.mark.parametrize("fail", ["at_call", "in_background"])
def test_a_failing_upload_is_reported_and_training_goes_on(fake_hub, tmp_path, fail, caplog):
    api = fake_hub(fail=fail)
    trainer = attach_reliability(
        AlbertTrainer(model=tiny_classifier(), args=push_arguments(tmp_path), train_dataset=RandomSequences())
    )
    with caplog.at_level(logging.ERROR, logger="albert_hf.training.callbacks"):
        trainer.train()
    assert trainer.state.global_step == 6
    assert latest_checkpoint(tmp_path, marked=True) == str(tmp_path / "checkpoint-6")
    assert all(checkpoint_problem(tmp_path / f"checkpoint-{step}", marked=True) is None for step in (2, 4, 6))
    # Every save tried again (a failure is retried by the next save) and every failure was reported with its folder.
    assert sorted({folder for folder, _ in failed_pushes(trainer)}) == [
        str(tmp_path / f"checkpoint-{step}") for step in (2, 4, 6)
    ]
    assert "Uploading" in caplog.text and "checkpoint-6" in caplog.text and "Training continues" in caplog.text
    assert len(api.uploads) >= 3
