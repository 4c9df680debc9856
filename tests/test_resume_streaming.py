"""Exact resume of streamed pretraining (`albert-hf pretrain --streaming`) after SIGKILL.

A stream has no length: Trainer counts `max_steps` updates per pass, and the pass and the position within it are read
back from the saved epoch (`AlbertTrainer`). The stream (`ResumableInstanceStream`) is shuffled by windows and
saves its position in each checkpoint, so the resumed run starts reading at the saved window instead of reading the
trained batches again. The stream here is short (three files of two small documents each, about 11 instances of 64
tokens in windows of at least 4), so the 6 steps of 2 micro-batches of 4 read it several times: a resume lands in a
later pass, in a window after the first. Kills land at the end of a step, in the middle of one (between its
gradient-accumulation micro-batches) and inside a save. The killed and resumed run must equal the uninterrupted one
bit for bit (weights, LAMB moments, schedule) and log the same losses after the resume: same documents in the same
order (none read twice, none skipped), same masks. Kill steps are parametrised, so a failure replays exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.trainer import (
    COMMON_ARGS,
    LAMB_RECIPE,
    TINY_MODEL,
    assert_same_run,
    logged_losses,
    start_killed_run,
    wait_killed,
)

from albert_hf.training.reliability import STREAM_POSITION_NAME, latest_checkpoint

STEPS, ACCUMULATION, BATCH = 6, 2, 4


@pytest.fixture(scope="module")
def stream_files(shared_data, tmp_path_factory) -> tuple[list[Path], Path]:
    """Three training files of two documents each (the first paragraphs of WikiText-2 articles, cut to six
    sentences), and a validation file."""
    text = (shared_data / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8")
    # Each article: its title, then one paragraph per line; the first paragraph is the lead.
    articles = [article.splitlines()[1] for article in text.split("\n\n") if len(article.splitlines()) > 1]
    documents = []
    for paragraph in articles:
        sentences = [s.strip() + "." for s in paragraph.split(" . ") if len(s.split()) > 3]
        if len(sentences) >= 4:
            documents.append("\n".join(sentences[:6]))
    assert len(documents) >= 7, "the WikiText excerpt has too few paragraphs of four sentences"
    folder = tmp_path_factory.mktemp("stream")
    files = []
    for index in range(3):
        path = folder / f"part-{index}.txt"
        path.write_text("\n\n".join(documents[2 * index : 2 * index + 2]) + "\n", encoding="utf-8")
        files.append(path)
    validation = folder / "validation.txt"
    validation.write_text(documents[6] + "\n", encoding="utf-8")
    return files, validation


def streaming_argv(files: list[Path], validation: Path, spiece_model: Path, output_dir: Path) -> list[str]:
    return [
        "--train_files",
        *map(str, files),
        "--validation_files",
        str(validation),
        "--streaming",
        "--shuffle_buffer_size",
        "4",  # windows of two or three documents: three per pass, so a resume starts in a later window of a pass
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
        str(STEPS),
        *LAMB_RECIPE,
        "--output_dir",
        str(output_dir),
        *COMMON_ARGS,
    ]


@pytest.fixture(scope="module")
def reference_run(stream_files, spiece_model, tmp_path_factory) -> Path:
    """The uninterrupted streamed run, and the proof that it read its stream more than once."""
    from albert_hf.scripts import pretrain as pretraining

    files, validation = stream_files
    output_dir = tmp_path_factory.mktemp("reference")
    assert pretraining.main(streaming_argv(files, validation, spiece_model, output_dir)) == 0
    return output_dir


def test_the_stream_is_read_more_than_once(reference_run):
    """Trainer's epoch counts passes over the stream: past 2 at the end, so a resume can land in a later pass."""
    state = json.loads((reference_run / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    assert state["epoch"] > 2.0, state["epoch"]


@pytest.mark.slow  # two tiny streamed pretraining runs (one killed in a subprocess): about 20-40 s
@pytest.mark.parametrize(
    ("step", "when"),
    [(3, "end of step"), (5, "end of step"), (5, "middle of step"), (4, "save"), (5, "end of step, no position")],
)
def test_streamed_pretraining_killed_resumes_exactly(
    stream_files, spiece_model, reference_run, tmp_path, monkeypatch, step, when
):
    """Killed at the end of a step (after its update, before any save), in the middle of one (after its first
    micro-batch, before the update), or while writing a checkpoint. The resumed stream starts at the window saved in
    the checkpoint: it never reads the pass from its start (unless the position is in its first window). Without a
    saved position (a checkpoint of an older version), Trainer reads the trained batches again: exact too."""
    from albert_hf.data.instance_stream import ResumableInstanceStream
    from albert_hf.scripts import pretrain as pretraining

    files, validation = stream_files
    context = f"streamed pretraining killed at the {when} {step}"
    killed_dir = tmp_path / "killed"
    child = start_killed_run(
        "albert_hf.scripts.pretrain",
        streaming_argv(files, validation, spiece_model, killed_dir),
        step,
        in_save=when == "save",
        mid_step=when == "middle of step",
    )
    wait_killed(child, context)

    # Checkpoints every 2 steps: the last complete one is the last even step finished before the kill (before the
    # one being written, when killed inside a save).
    finished = step - 1 if when == "middle of step" else step
    resumed_at = step - 2 if when == "save" else finished - finished % 2
    checkpoint = killed_dir / f"checkpoint-{resumed_at}"
    assert latest_checkpoint(killed_dir) == str(checkpoint), context
    position_file = checkpoint / STREAM_POSITION_NAME
    saved = json.loads(position_file.read_text())["window"]
    if when.endswith("no position"):
        position_file.unlink()

    starts = []  # where each read of the stream began: (pass, window, first document)
    windows_from = ResumableInstanceStream._windows_from

    def recording(stream, start):
        starts.append((start.epoch, start.window, start.document))
        return windows_from(stream, start)

    monkeypatch.setattr(ResumableInstanceStream, "_windows_from", recording)
    argv = streaming_argv(files, validation, spiece_model, killed_dir)
    assert pretraining.main([*argv, "--resume_from_checkpoint", "latest"]) == 0
    assert_same_run(reference_run, killed_dir, final_step=STEPS, context=context)
    reference_losses = logged_losses(reference_run, resumed_at)
    assert logged_losses(killed_dir, resumed_at) == reference_losses and reference_losses, context

    # starts[0] is the sanity check of the first batch (pass 0 from its start); then training.
    resumed_pass = (saved["epoch"], saved["window"], saved["document"])
    if when.endswith("no position"):
        assert starts[1] == (saved["epoch"], 0, 0), context
    else:
        assert starts[1] == resumed_pass and saved["window"] > 0, (context, starts)
        assert (saved["epoch"], 0, 0) not in starts[1:], (context, starts)
