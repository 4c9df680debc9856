"""Exact resume of streamed pretraining (`--streaming`) after SIGKILL, during a step or during a save.

The corpus is split over several files and the shuffle buffer is small, so the stream is read file after file while
training runs and a kill lands with files half-read. Every micro-batch trained on is logged (its step and a digest of
its token ids, MLM labels and sentence-order labels): the killed run's batches up to its checkpoint followed by the
resumed run's must be the uninterrupted run's, in order (no instance seen twice, none skipped, the same masks), and
the final weights and optimizer state must be identical (atol 0). The kill helpers are test_reliability's.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import test_reliability
import torch
from test_reliability import (
    CHILD_DRIVER,
    TINY_MODEL,
    max_abs_diff_of_files,
    optimizer_state_diff,
    start_killed_run,
    wait_killed,
)

from albert_hf.training.reliability import STAGING_DIR_NAME, latest_checkpoint
from albert_hf.training.trainer import AlbertPretrainingTrainer

MAX_STEPS, SAVE_STEPS, ACCUMULATION, BATCH = 8, 2, 2, 4
NUM_FILES = 6
BATCH_LOG = "ALBERT_HF_BATCH_LOG"


def batch_digest(inputs: dict) -> str:
    """Digest of what a micro-batch trains on: tokens, MLM labels (so the masks), sentence-order labels."""
    digest = hashlib.sha256()
    for key in ("input_ids", "labels", "sentence_order_label"):
        digest.update(key.encode())
        digest.update(inputs[key].cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def log_trained_batches(trainer_class: type) -> None:
    """Make `trainer_class.training_step` append "<step> <digest>" to $ALBERT_HF_BATCH_LOG, flushed before training
    on the batch, so a SIGKILL loses nothing that was trained on."""
    training_step = trainer_class.training_step

    def logged_training_step(self, model, inputs, num_items_in_batch=None):
        with open(os.environ[BATCH_LOG], "a", encoding="utf-8") as handle:
            handle.write(f"{self.state.global_step + 1} {batch_digest(inputs)}\n")
        return training_step(self, model, inputs, num_items_in_batch)

    trainer_class.training_step = logged_training_step


# Prepended to test_reliability's child driver: the killed child logs its batches like the in-process runs.
LOGGING_PRELUDE = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    "from test_resume_streaming import log_trained_batches\n"
    "from albert_hf.training.trainer import AlbertPretrainingTrainer\n"
    "log_trained_batches(AlbertPretrainingTrainer)\n"
)


def trained_batches(log: Path) -> list[tuple[int, str]]:
    return [(int(step), digest) for step, digest in (line.split() for line in log.read_text().splitlines())]


@pytest.fixture(scope="module")
def corpus_files(shared_data, tmp_path_factory) -> list[Path]:
    """NUM_FILES text files of real WikiText-2 paragraphs, two documents of three paragraphs each per file."""
    paragraphs = [
        line
        for line in (shared_data / "corpus" / "wikitext2_valid_paragraphs.txt").read_text("utf-8").splitlines()
        if len(line.split()) > 40
    ]
    folder = tmp_path_factory.mktemp("stream")
    files = []
    for index in range(NUM_FILES):
        chunk = paragraphs[index * 6 : index * 6 + 6]
        path = folder / f"part-{index:02d}.txt"
        path.write_text("\n".join(chunk[:3]) + "\n\n" + "\n".join(chunk[3:]) + "\n", encoding="utf-8")
        files.append(path)
    return files


def streaming_argv(files: list[Path], spiece_model: Path, output_dir: Path) -> list[str]:
    return [
        "--train_files",
        *map(str, files),
        "--streaming",
        "--lines_are_paragraphs",
        "--shuffle_buffer_size",
        "8",
        "--documents_per_batch",
        "1",  # a document at a time: the stream advances file by file with training
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_MODEL,
        "--max_seq_length",
        "64",
        "--per_device_train_batch_size",
        str(BATCH),
        "--gradient_accumulation_steps",
        str(ACCUMULATION),
        "--max_steps",
        str(MAX_STEPS),
        "--learning_rate",
        "5e-3",
        "--warmup_steps",
        "2",
        "--optimizer",
        "lamb",
        "--seed",
        "7",
        "--output_dir",
        str(output_dir),
        *test_reliability.COMMON_ARGS,
    ]


def uninterrupted_run(files: list[Path], spiece_model: Path, output_dir: Path) -> Path:
    """The uninterrupted streamed run, with its batch log."""
    from albert_hf.tasks import pretraining

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BATCH_LOG, str(output_dir / "batches.log"))
        patch.setattr(AlbertPretrainingTrainer, "training_step", AlbertPretrainingTrainer.training_step)
        log_trained_batches(AlbertPretrainingTrainer)
        assert pretraining.main(streaming_argv(files, spiece_model, output_dir)) == 0
    return output_dir


@pytest.fixture(scope="module")
def reference_run(corpus_files, spiece_model, tmp_path_factory) -> Path:
    return uninterrupted_run(corpus_files, spiece_model, tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="module")
def short_stream_reference_run(corpus_files, spiece_model, tmp_path_factory) -> Path:
    """The same run on the first file only: the stream ends and is read again (reshuffled) during training."""
    return uninterrupted_run(corpus_files[:1], spiece_model, tmp_path_factory.mktemp("short-reference"))


def test_the_stream_is_read_across_several_files(corpus_files, spiece_model, reference_run):
    """The setting the resume tests need: training consumes more instances than the first files hold."""
    from albert_hf.tasks.common import ModelArguments, load_tokenizer
    from albert_hf.tasks.pretraining import PretrainingDataArguments, load_documents, make_instances

    tokenizer = load_tokenizer(ModelArguments(tokenizer_name_or_path=str(spiece_model)))
    per_file = []
    for path in corpus_files:
        data_args = PretrainingDataArguments(train_files=[str(path)], lines_are_paragraphs=True, max_seq_length=64)
        documents, _ = load_documents(data_args, seed=7)
        per_file.append(len(make_instances(documents, tokenizer, data_args, seed=7)[0]))
    consumed = MAX_STEPS * ACCUMULATION * BATCH
    files_read = next(n for n in range(1, NUM_FILES + 1) if sum(per_file[:n]) >= consumed)
    assert 3 <= files_read < NUM_FILES, per_file
    assert len(trained_batches(reference_run / "batches.log")) == MAX_STEPS * ACCUMULATION


# (kill step, in_save): killed at the end of a step (after that step's optimizer update, before its save, if any) or
# while writing checkpoint-<step> (weights and optimizer written, RNG states and trainer state not).
KILLS = [(3, False), (6, False), (4, True)]


@pytest.mark.slow  # two tiny streamed runs per case (one in a subprocess), plus the shared reference: ~20-60 s each
@pytest.mark.parametrize(("step", "in_save"), KILLS, ids=[f"{'save' if s else 'step'}-{k}" for k, s in KILLS])
def test_streamed_pretraining_killed_resumes_exactly(
    corpus_files, spiece_model, reference_run, tmp_path, monkeypatch, step, in_save
):
    kill_and_resume(corpus_files, spiece_model, reference_run, tmp_path, monkeypatch, step, in_save)


@pytest.mark.slow
def test_streamed_pretraining_killed_in_a_later_pass_resumes_exactly(
    corpus_files, spiece_model, short_stream_reference_run, tmp_path, monkeypatch
):
    """Killed while reading the stream for the second time: the resumed run must continue in the second pass (its
    shuffle order), not skip from the start of the first one past its end."""
    state = json.loads((short_stream_reference_run / f"checkpoint-{MAX_STEPS}" / "trainer_state.json").read_text())
    passes_at = {entry["step"]: entry["epoch"] for entry in state["log_history"] if "loss" in entry}
    assert passes_at[6] > 1.0, passes_at  # checkpoint-6 is already in a later pass
    kill_and_resume(corpus_files[:1], spiece_model, short_stream_reference_run, tmp_path, monkeypatch, 7, False)


def kill_and_resume(files, spiece_model, reference_run, tmp_path, monkeypatch, step: int, in_save: bool) -> None:
    from albert_hf.tasks import pretraining

    corpus_files = files
    context = f"streamed pretraining killed {'while saving' if in_save else 'at the end of'} step {step}"
    killed_dir = tmp_path / "killed"
    log = tmp_path / "batches.log"
    monkeypatch.setenv(BATCH_LOG, str(log))
    monkeypatch.setattr(test_reliability, "CHILD_DRIVER", LOGGING_PRELUDE + CHILD_DRIVER)
    child = start_killed_run(
        "albert_hf.tasks.pretraining", streaming_argv(corpus_files, spiece_model, killed_dir), step, in_save=in_save
    )
    wait_killed(child, context)

    # A kill at the end of a saving step comes before that step's save, like a kill during it.
    checkpoint_step = step - SAVE_STEPS if in_save or step % SAVE_STEPS == 0 else step - step % SAVE_STEPS
    assert latest_checkpoint(killed_dir) == str(killed_dir / f"checkpoint-{checkpoint_step}"), context
    if in_save:
        assert not (killed_dir / f"checkpoint-{step}").exists(), context
        assert (killed_dir / STAGING_DIR_NAME / f"checkpoint-{step}" / "optimizer.pt").is_file(), context
    killed_batches = trained_batches(log)
    assert max(s for s, _ in killed_batches) == step, context  # it did train past its checkpoint before dying

    # The batches trained after the checkpoint are lost with the process: the resumed run trains them again.
    log.write_text("".join(f"{s} {d}\n" for s, d in killed_batches if s <= checkpoint_step))
    monkeypatch.setattr(AlbertPretrainingTrainer, "training_step", AlbertPretrainingTrainer.training_step)
    log_trained_batches(AlbertPretrainingTrainer)
    argv = streaming_argv(corpus_files, spiece_model, killed_dir)
    assert pretraining.main([*argv, "--resume_from_checkpoint", "latest"]) == 0

    reference_batches = trained_batches(reference_run / "batches.log")
    assert trained_batches(log) == reference_batches, context  # no instance twice, none skipped, the same masks
    weights_diff = max_abs_diff_of_files(reference_run / "model.safetensors", killed_dir / "model.safetensors")
    assert weights_diff == 0.0, f"{context}: final weights differ by {weights_diff}"
    final = f"checkpoint-{MAX_STEPS}"
    optimizer_diff = optimizer_state_diff(reference_run / final / "optimizer.pt", killed_dir / final / "optimizer.pt")
    assert optimizer_diff == 0.0, f"{context}: optimizer state differs by {optimizer_diff}"
    schedulers = [torch.load(run / final / "scheduler.pt", weights_only=True) for run in (reference_run, killed_dir)]
    assert schedulers[0] == schedulers[1], context
