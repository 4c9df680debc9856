"""Crash and resume under DDP, DeepSpeed ZeRO-2, ZeRO-3 and FSDP2 (2 processes on CPU, gloo).

One `torchrun` per engine runs tests/distributed/resume_worker.py: an uninterrupted run, the same run crashing on
every rank in the middle of writing checkpoint-4, and its resumption from `latest_checkpoint`. Checked here: the
crash left checkpoint-4 without its final name and checkpoint-2 as the latest, the resumed run's final weights equal
the uninterrupted run's (1e-6), and the consolidated model saved at the end loads with from_pretrained.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_distributed import WORKERS, load_saved_weights, max_difference, torchrun

from albert_hf.configuration import AlbertConfig
from albert_hf.modeling import AlbertForSequenceClassification

pytestmark = pytest.mark.distributed


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=50,
        embedding_size=8,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout_prob=0.0,
    )
    folder = tmp_path_factory.mktemp("tiny")
    AlbertForSequenceClassification(config).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("engine", ["ddp", "zero2", "zero3", "fsdp2"])
def test_crash_in_a_save_and_resume_equals_the_uninterrupted_run(engine, tiny_checkpoint, tmp_path, record_property):
    torchrun(
        WORKERS / "resume_worker.py",
        "--engine",
        engine,
        "--checkpoint",
        str(tiny_checkpoint),
        "--workdir",
        str(tmp_path),
        timeout=600,
    )
    records = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for record in records:
        assert record["world_size"] == record["torch_world_size"] == 2, record
        assert record["deepspeed"] == engine.startswith("zero") and record["fsdp"] == (engine == "fsdp2"), record
        after_crash = record["after_crash"]
        assert after_crash["error"] is not None and "checkpoint-4" in after_crash["error"], record
        # Atomic: the checkpoint being written has no final name; the one before is complete and found.
        assert after_crash["checkpoints"] == ["checkpoint-2"], record
        assert after_crash["latest"] == str(tmp_path / "crashed" / "checkpoint-2"), record
        assert record["global_step"] == 6

    reference = load_saved_weights(AlbertForSequenceClassification, tmp_path / "reference")
    resumed = load_saved_weights(AlbertForSequenceClassification, tmp_path / "crashed")
    initial = AlbertForSequenceClassification.from_pretrained(tiny_checkpoint).state_dict()
    assert max_difference(reference, initial) > 1e-3  # training moved the weights far more than the tolerance
    difference = max_difference(reference, resumed)
    record_property("max_abs_difference", difference)
    assert difference <= 1e-6, f"{engine}: resumed run differs from the uninterrupted one by {difference}"
