"""A resumed stream continues in the right pass through public Trainer hooks only (`ignore_data_skip`, a callback).

The reliability plugin (`ResumableStream`) resumes a positionable stream (no length) by starting it after the trained
batches itself and telling Trainer to skip nothing; `ResumedStreamCounters` writes back Trainer's epoch, restores the RNG states after the first
new batch and keeps training going when the resumed pass has nothing left. Here the stream is an in-memory one whose
position is the index in its pass, and the tiny classifier has dropout, so the RNG states matter. Pass lengths put
checkpoints at the end of a pass (16 instances: 4 batches, 2 steps of 2 micro-batches) and inside one, with a
micro-batch carried over into the next pass's first step (20 instances). Each resumed run must end bit for bit as the
uninterrupted one: weights, the `epoch` of every log and checkpoint, the losses.
"""

from __future__ import annotations

import json
import shutil

import accelerate
import pytest
import torch
import transformers.trainer
from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier
from safetensors.torch import load_file
from test_instance_stream import OPTIONS, read_pass, rows_key, stream_files  # noqa: F401 (stream_files: the fixture)
from torch.utils.data import IterableDataset
from transformers import TrainerCallback

from albert_hf.data.instance_stream import ResumableInstanceStream
from albert_hf.training.callbacks import attach_reliability, resume_training
from albert_hf.training.reliability import STREAM_POSITION_NAME
from albert_hf.training.stream_resume import ResumableStream
from albert_hf.training.trainer import AlbertTrainer

ACCUMULATION = 2


class PositionedSequences(IterableDataset):
    """`RandomSequences` in an order drawn per pass, as a stream whose position is the instance index in its pass."""

    def __init__(self, size: int):
        self.data, self.size = RandomSequences(size=size), size
        self.epoch, self.first_pass, self.resume = 0, 0, None
        self.reads: list[tuple[int, int]] = []  # (pass, first instance) of every iteration

    def set_epoch(self, epoch: int) -> None:
        self.epoch = self.first_pass + epoch

    def count_passes_from(self, first_pass: int) -> None:
        self.first_pass = first_pass

    def __iter__(self):
        skip = 0
        if self.resume is not None and self.resume[0] == self.epoch:
            (_, skip), self.resume = self.resume, None
        self.reads.append((self.epoch, skip))
        order = torch.randperm(self.size, generator=torch.Generator().manual_seed(self.epoch)).tolist()
        for index in order[skip:]:
            yield self.data[index]

    def position_state(self, epoch: int, consumed: int) -> dict:
        return {"epoch": epoch, "consumed": consumed}

    def resume_from_state(self, state: dict, epoch: int, consumed: int) -> str | None:
        if state != {"epoch": epoch, "consumed": consumed}:
            return f"saved {state}, not pass {epoch} after {consumed}"
        self.resume = (epoch, consumed)
        return None

    def read_again_until(self, epoch: int, consumed: int) -> None:
        self.resume = (epoch, consumed)

    def finished_resumed_pass(self) -> bool:
        if self.resume is None or self.resume[1] < self.size:
            return False
        self.resume = None
        return True


class TrainerCallsAccelerate(TrainerCallback):
    """Records whether Trainer's module still calls accelerate's own `skip_first_batches` (no process-wide patch)."""

    def __init__(self):
        self.unpatched: list[bool] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.unpatched.append(transformers.trainer.skip_first_batches is accelerate.skip_first_batches)


def train(output_dir, size: int, checkpoint=None) -> tuple[AlbertTrainer, PositionedSequences, TrainerCallsAccelerate]:
    stream, probe = PositionedSequences(size), TrainerCallsAccelerate()
    args = tiny_arguments(output_dir, gradient_accumulation_steps=ACCUMULATION)
    trainer = AlbertTrainer(model=tiny_classifier(), args=args, train_dataset=stream, callbacks=[probe])
    resume_training(attach_reliability(trainer, callbacks=[ResumableStream(trainer)]), checkpoint)
    return trainer, stream, probe


@pytest.fixture(scope="module", params=[16, 20], ids=["checkpoints at pass ends", "checkpoints inside passes"])
def uninterrupted(request, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp(f"stream-{request.param}")
    trainer, stream, _ = train(output_dir, request.param)
    assert trainer.state.epoch > 2.0, trainer.state.epoch  # read more than twice: resumes land in later passes
    return request.param, output_dir, stream.reads


def history(trainer_state_path) -> list[tuple[int, float, float | None]]:
    log = json.loads(trainer_state_path.read_text())["log_history"]
    return [(entry["step"], entry["epoch"], entry.get("loss")) for entry in log]


@pytest.mark.slow  # each a resumed run beside its uninterrupted one
@pytest.mark.parametrize("step", [2, 4])
@pytest.mark.parametrize("position", ["saved", "missing"])
def test_a_resumed_stream_continues_exactly_in_its_pass(uninterrupted, tmp_path, step, position):
    size, reference, reference_reads = uninterrupted
    checkpoint = tmp_path / f"checkpoint-{step}"
    shutil.copytree(reference / f"checkpoint-{step}", checkpoint)
    saved = json.loads((checkpoint / STREAM_POSITION_NAME).read_text())
    if position == "missing":  # a checkpoint of an older version: the stream reads its pass again up to there
        (checkpoint / STREAM_POSITION_NAME).unlink()

    trainer, stream, probe = train(tmp_path / "resumed", size, checkpoint=str(checkpoint))

    context = f"{size} instances a pass, resumed from step {step}, position {position}"
    # In its pass after what was trained, or at the next pass's start when the checkpoint was at the end of its pass.
    at_end = saved["consumed"] == size
    assert stream.reads[0] == ((saved["epoch"] + 1, 0) if at_end else (saved["epoch"], saved["consumed"])), context
    later = [read for read in reference_reads if read[0] > stream.reads[0][0]]
    assert stream.reads[1:] == later, context  # then the same passes as the uninterrupted run
    final = tmp_path / "resumed" / "checkpoint-6"
    expected = load_file(reference / "checkpoint-6" / "model.safetensors")
    for name, tensor in load_file(final / "model.safetensors").items():
        assert torch.equal(tensor, expected[name]), (context, name)
    after = [entry for entry in history(reference / "checkpoint-6" / "trainer_state.json") if entry[0] > step]
    assert after and history(final / "trainer_state.json")[-len(after) :] == after, context
    for later in (4, 6):
        if later > step:
            assert json.loads((tmp_path / "resumed" / f"checkpoint-{later}" / STREAM_POSITION_NAME).read_text()) == (
                json.loads((reference / f"checkpoint-{later}" / STREAM_POSITION_NAME).read_text())
            ), context
    assert trainer.args.ignore_data_skip is False and stream.first_pass == 0, context  # left as they were
    assert probe.unpatched and all(probe.unpatched), context


def test_the_instance_stream_reads_again_to_any_position_and_knows_the_end_of_a_pass(stream_files, tokenizer):  # noqa: F811
    """`ResumableInstanceStream`'s side of the resume: `read_again_until` (no saved position) continues exactly where
    a saved position does, `finished_resumed_pass` is true only at (or past) the end of the pass, and
    `count_passes_from` makes Trainer's pass 0 the pass resumed in."""
    stream = ResumableInstanceStream(stream_files, tokenizer, **OPTIONS)
    rows = read_pass(stream, 1)
    starts = [window.start.instance for window in stream._windows]
    # At a window's start, inside a window, in the last one, at the end of the pass and past it.
    for consumed in (starts[1], starts[2] + 5, len(rows) - 1, len(rows), len(rows) + 3):
        replayed = ResumableInstanceStream(stream_files, tokenizer, **OPTIONS)
        replayed.read_again_until(1, consumed)
        positioned = ResumableInstanceStream(stream_files, tokenizer, **OPTIONS)
        assert positioned.resume_from_state(stream.position_state(1, consumed), 1, consumed) is None
        for resumed in (replayed, positioned):
            assert resumed.finished_resumed_pass() == (consumed >= len(rows)), consumed
            resumed.count_passes_from(1)
            expected = rows if consumed >= len(rows) else rows[consumed:]  # a finished pass's resume is dropped
            assert rows_key(read_pass(resumed, 0)) == rows_key(expected), consumed
