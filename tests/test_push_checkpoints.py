"""`--push_to_hub` during training: only complete checkpoints are uploaded, and a failing upload never stops training.

No network: transformers' `hf_api()` (in versions before 5.12, the `create_repo` and `upload_folder` it imports) is
replaced by a fake `HfApi` that records every `upload_folder` call (which folder, under which name in the repository,
what the folder held when the upload ran) and can be told to fail.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
import transformers.trainer as trainer_module
from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier

from albert_hf.training import callbacks
from albert_hf.training.reliability import checkpoint_problem, latest_checkpoint
from albert_hf.training.trainer import AlbertTrainer


class FakeHfApi:
    """Records uploads; runs each in a background thread like `run_as_future=True` does, after `delay` events."""

    def __init__(self, fail: str | None = None):
        self.fail = fail  # None, "at_call" (upload_folder raises) or "in_background" (the future fails)
        self.uploads: list[dict] = []
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.release = threading.Event()
        self.release.set()

    def create_repo(self, repo_id, **kwargs):
        return SimpleNamespace(repo_id=f"user/{repo_id}")

    def upload_folder(self, *, repo_id, folder_path, path_in_repo=None, run_as_future=False, **kwargs):
        record = {
            "folder": Path(folder_path),
            "path_in_repo": path_in_repo,
            # What a reader of the folder sees at the moment the upload is asked for: a checkpoint marked complete.
            "problem_at_call": checkpoint_problem(folder_path, marked=True) if path_in_repo else None,
        }
        self.uploads.append(record)
        if self.fail == "at_call":
            raise ConnectionError("fake network down")

        def upload():
            self.release.wait(timeout=30)
            record["files"] = sorted(p.name for p in Path(folder_path).iterdir())
            if self.fail == "in_background":
                raise ConnectionError("fake upload rejected")
            return "commit"

        if run_as_future:
            return self.executor.submit(upload)
        future = Future()
        future.set_result(upload())
        return future


@pytest.fixture
def fake_api(monkeypatch):
    def install(**kwargs) -> FakeHfApi:
        api = FakeHfApi(**kwargs)
        monkeypatch.setattr(callbacks, "hub_api", lambda: api)  # the checkpoint uploads
        if hasattr(trainer_module, "hf_api"):  # transformers >= 5.12: one client for every call
            monkeypatch.setattr(trainer_module, "hf_api", lambda: api)
        else:  # before: huggingface_hub's functions, imported into the module
            monkeypatch.setattr(trainer_module, "create_repo", api.create_repo)
            monkeypatch.setattr(trainer_module, "upload_folder", api.upload_folder)
        return api

    return install


def push_arguments(output_dir: Path, **overrides):
    return tiny_arguments(
        output_dir, push_to_hub=True, hub_model_id="run", hub_strategy="checkpoint", hub_always_push=True, **overrides
    )


def test_only_complete_checkpoints_under_their_final_name_are_uploaded(fake_api, tmp_path):
    api = fake_api()
    trainer = AlbertTrainer(model=tiny_classifier(), args=push_arguments(tmp_path), train_dataset=RandomSequences())
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
    assert getattr(trainer, "failed_pushes", []) == []


def test_an_older_checkpoint_being_uploaded_is_not_rotated_away(fake_api, tmp_path):
    api = fake_api()
    api.release.clear()  # uploads hang until released
    trainer = AlbertTrainer(
        model=tiny_classifier(), args=push_arguments(tmp_path, save_total_limit=1), train_dataset=RandomSequences()
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
def test_a_failing_upload_is_reported_and_training_goes_on(fake_api, tmp_path, fail, caplog):
    api = fake_api(fail=fail)
    trainer = AlbertTrainer(model=tiny_classifier(), args=push_arguments(tmp_path), train_dataset=RandomSequences())
    with caplog.at_level(logging.ERROR, logger="albert_hf.training.callbacks"):
        trainer.train()
    assert trainer.state.global_step == 6
    assert latest_checkpoint(tmp_path, marked=True) == str(tmp_path / "checkpoint-6")
    assert all(checkpoint_problem(tmp_path / f"checkpoint-{step}", marked=True) is None for step in (2, 4, 6))
    # Every save tried again (a failure is retried by the next save) and every failure was reported with its folder.
    assert sorted({folder for folder, _ in trainer.failed_pushes}) == [
        str(tmp_path / f"checkpoint-{step}") for step in (2, 4, 6)
    ]
    assert "Uploading" in caplog.text and "checkpoint-6" in caplog.text and "Training continues" in caplog.text
    assert len(api.uploads) >= 3
