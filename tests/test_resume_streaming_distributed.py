"""Exact resume of streamed pretraining under torchrun (2 processes, DDP on gloo) after SIGKILL, in a later pass.

Accelerate reads a stream in the main process and sends each process its part of every 2 batches it reads. No
position is saved then (the other process does not read): the resumed run starts every process's stream after the
instances trained on, found by reading the pass again. Trainer's own skip would restart at the second pass instead.
The killed and resumed run must end with the weights of the uninterrupted run, bit for bit, and log the same losses.
"""

from __future__ import annotations

import json

import pytest
from helpers.distributed import max_difference
from helpers.trainer import logged_losses
from test_resume_distributed import final_weights, launch
from test_resume_streaming import stream_files, streaming_argv  # noqa: F401  (stream_files: the same fixture)

from albert_hf.training.reliability import STREAM_POSITION_NAME, latest_checkpoint


def two_process_argv(files, validation, spiece_model, output_dir) -> list[str]:
    """The one-process test's run with 2 rows per process: 4 per batch accelerate reads, about 3 batches a pass."""
    argv = streaming_argv(files, validation, spiece_model, output_dir)
    argv[argv.index("--per_device_train_batch_size") + 1] = "2"
    return argv


@pytest.mark.slow
@pytest.mark.distributed
def test_two_process_streamed_pretraining_killed_in_a_later_pass_resumes_exactly(
    stream_files,  # noqa: F811  (the fixture imported above)
    spiece_model,
    tmp_path,
):
    files, validation = stream_files
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed"
    launch(two_process_argv(files, validation, spiece_model, reference_dir), "ddp")

    argv = two_process_argv(files, validation, spiece_model, killed_dir)
    launch(argv, "ddp", kill_step=5)
    checkpoint = killed_dir / "checkpoint-4"
    assert latest_checkpoint(killed_dir, marked=True) == str(checkpoint)
    epoch = json.loads((checkpoint / "trainer_state.json").read_text())["epoch"]
    assert epoch > 1 and epoch != int(epoch), f"checkpoint-4 is not inside a later pass (epoch {epoch})"
    assert not (checkpoint / STREAM_POSITION_NAME).exists()

    output = launch([*argv, "--resume_from_checkpoint", "latest"], "ddp")
    difference = max_difference(final_weights(killed_dir), final_weights(reference_dir))
    assert difference == 0, f"the resumed run's weights differ from the uninterrupted run's by {difference}"
    assert logged_losses(killed_dir, 4) == logged_losses(reference_dir, 4)
    assert logged_losses(reference_dir, 4)
    assert "does not continue where the run stopped" not in output
