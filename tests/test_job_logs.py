"""Logs a person reads: tiny jobs print no warning of the libraries below (datasets' unhashable functions, DeepSpeed's
accelerator, torch's pin_memory), library noise is demoted to debug, the loss and held-out figures are logged as
they happen, and a busy machine gets its advice."""

from __future__ import annotations

import json
import logging
import os
import sys

import pytest
from helpers import processes
from helpers.data import FIXTURES, REPO_ROOT, SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from transformers import TrainerControl, TrainerState, TrainingArguments

from albert_hf.training.job_logs import (
    DemoteToDebug,
    TrainingProgressLog,
    busy_machine_advice,
    quiet_library_noise,
)

# What the libraries' warnings look like in a job's output: `datasets`' logger, DeepSpeed's "[WARNING]" records,
# Python warnings raised in torch.utils.data (printed with their file's path), and the messages the issue named.
LIBRARY_WARNINGS = (
    "WARNING datasets",
    "couldn't be hashed properly",
    "[WARNING]",
    "Setting accelerator to CPU",
    "torch/utils/data",
    "pin_memory",
    "Do not forget to share your model",
)


def job_output(*argv: str) -> str:
    """stdout and stderr of `albert-hf <argv>` in a fresh process, as a user sees them (no tqdm bars)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1", HF_DATASETS_OFFLINE="1")
    env.pop("PYTHONWARNINGS", None)
    result = processes.run(
        [sys.executable, "-m", "albert_hf.cli", *argv, "--disable_tqdm", "true"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    return output


def tiny_job_args(output_dir) -> list[str]:
    return [
        *["--tokenizer_name_or_path", str(SPIECE_MODEL), "--config_overrides", TINY_ONE_LAYER_OVERRIDES],
        *["--output_dir", str(output_dir), "--report_to", "none", "--do_train", "--do_eval", "--max_steps", "2"],
        *["--per_device_train_batch_size", "4", "--max_seq_length", "64", "--save_strategy", "no"],
    ]  # no --use_cpu: a CPU machine without it is where torch warned about pin_memory


@pytest.mark.parametrize(
    "job",
    [
        ["glue", "--task_name", "mrpc", "--data_dir", str(FIXTURES / "glue" / "MRPC"), "--max_train_samples", "8"],
        ["ner", "--data_dir", str(FIXTURES / "conll2003")],
    ],
    ids=["glue", "ner"],
)
def test_tiny_jobs_print_no_library_warning(job, tmp_path):
    output = job_output(*job, "--max_eval_samples", "8", *tiny_job_args(tmp_path / "out"))
    assert "eval_loss" in output  # the job ran to its evaluation
    found = [line for line in output.splitlines() if any(noise in line for noise in LIBRARY_WARNINGS)]
    assert not found, "\n".join(found)


class RecordList(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_library_noise_is_demoted_to_debug_at_its_logger():
    quiet_library_noise()
    source = logging.getLogger("transformers.trainer")
    level, propagate = source.level, source.propagate
    # A handler of the test's own, at the source logger: what reaches it does not depend on whether another test left
    # transformers' loggers propagating to the root.
    seen = RecordList()
    source.addHandler(seen)
    source.propagate = False
    try:
        source.setLevel(logging.INFO)
        source.info("Training completed. Do not forget to share your model on huggingface.co/models =)")
        source.info("***** Running training *****")
        assert [record.getMessage() for record in seen.records] == ["***** Running training *****"]
        seen.records.clear()
        source.setLevel(logging.DEBUG)
        source.info("Training completed. Do not forget to share your model on huggingface.co/models =)")
        assert [record.levelname for record in seen.records] == ["DEBUG"]  # still there when debugging
    finally:
        source.removeHandler(seen)
        source.setLevel(level)
        source.propagate = propagate
    assert sum(isinstance(f, DemoteToDebug) for f in source.filters) == 1
    quiet_library_noise()  # installed once, however often jobs start
    assert sum(isinstance(f, DemoteToDebug) for f in source.filters) == 1


@pytest.mark.parametrize(
    "load, cores, omp, advised",
    [(2.5, 2, None, True), (2.0, 2, None, False), (0.3, 2, None, False), (9.0, 2, "1", False), (17.0, 16, None, True)],
)
def test_busy_machine_advice_only_above_the_core_count_without_omp_num_threads(load, cores, omp, advised):
    advice = busy_machine_advice(load, cores, omp)
    assert (advice is not None) == advised
    if advised:
        assert "OMP_NUM_THREADS=1" in advice and f"load average {load:.1f} on {cores} cores" in advice


def test_progress_log_gives_the_loss_and_the_held_out_figures_as_they_happen(caplog, tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[])
    state = TrainerState(global_step=40, max_steps=2000)
    callback = TrainingProgressLog()
    with caplog.at_level(logging.INFO, logger="albert_hf.training.job_logs"):
        callback.on_log(args, state, TrainerControl(), logs={"loss": 6.2125, "learning_rate": 0.00125, "epoch": 0.5})
        state.global_step = 400
        held_out = {"eval_loss": 5.5, "eval_mlm_accuracy": 0.125, "eval_runtime": 3.0, "eval_samples_per_second": 9.0}
        callback.on_log(args, state, TrainerControl(), logs=held_out)
    assert [record.getMessage() for record in caplog.records if record.name == "albert_hf.training.job_logs"] == [
        "step 40/2000: loss 6.213, learning_rate 0.00125",
        "step 400/2000 held-out: eval_loss 5.5, eval_mlm_accuracy 0.125",
    ]


def test_the_quickstart_logs_its_loss_and_held_out_figures_while_it_trains(caplog, tmp_path):
    from albert_hf.scripts.quickstart import main

    with caplog.at_level(logging.INFO, logger="albert_hf.training.job_logs"):
        assert main(["--fast", "--output_dir", str(tmp_path), "--disable_tqdm", "true"]) == 0
    lines = [record.getMessage() for record in caplog.records if record.name == "albert_hf.training.job_logs"]
    state = json.loads((tmp_path / "trainer_state.json").read_text())  # the Trainer's state as the run saved it
    history = state["log_history"]
    steps = state["max_steps"]
    expected = [f"step {entry['step']}/{steps}: loss {entry['loss']:.4g}" for entry in history if "loss" in entry]
    expected_eval = [
        f"step {entry['step']}/{steps} held-out: eval_loss {entry['eval_loss']:.4g}"
        for entry in history
        if "eval_loss" in entry
    ]
    assert len(expected) >= 2 and len(expected_eval) >= 2
    assert [line for line in lines if ": loss " in line] == [line for line in lines if line.startswith(tuple(expected))]
    assert sum(line.startswith(tuple(expected)) for line in lines) == len(expected)
    assert sum(line.startswith(tuple(expected_eval)) for line in lines) == len(expected_eval)
    # The recipe's sequence length truncates sentences (counted at info level); only a --max_seq_length the user gave
    # is named as an option in a warning.
    truncation = [record for record in caplog.records if "are truncated" in record.getMessage()]
    assert truncation and all(record.levelno == logging.INFO for record in truncation)
    assert not any("--max_seq_length" in record.getMessage() for record in caplog.records)
