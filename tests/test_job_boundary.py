"""What the error boundary of every command (`albert_hf.error_boundary.run_command`) says of the ways a job stops short:
Ctrl-C (one line, exit status 130, the state left named), an output folder deleted or its lock removed while the job
runs (the lease stops the job, exit status 3, never success), an --output_dir that cannot be a folder (one line
before any work), and the messages built from what failed (a read-only cache named as a cache, a damaged checkpoint
as damaged).

The jobs run in this process on tiny models (`albert_hf.cli.main`); the one real SIGINT goes to a subprocess.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import processes
from helpers.command_line import CLI_ENV
from helpers.data import FIXTURES, SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.cli import main
from albert_hf.error_boundary import explain_failure, run_command
from albert_hf.training.run_folder import LOCK_NAME, OutputFolderError, check_resume_target, open_output_folder

INTERRUPTED = 130


def glue_argv(output_dir: Path | str, *extra: str, steps: int = 4) -> list[str]:
    return [
        "glue",
        "--task_name",
        "rte",
        "--data_dir",
        str(FIXTURES / "glue" / "RTE"),
        "--tokenizer_name_or_path",
        str(SPIECE_MODEL),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--do_train",
        "--max_train_samples",
        "16",
        "--max_steps",
        str(steps),
        "--per_device_train_batch_size",
        "4",
        "--max_seq_length",
        "32",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
        *extra,
    ]


def last_line(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


# --------------------------------------------------------------------------------------------------------------------
# Ctrl-C
# --------------------------------------------------------------------------------------------------------------------


def test_ctrl_c_during_training_names_the_checkpoint_to_resume_from(tmp_path, monkeypatch, capsys):
    """Ctrl-C at step 3, after checkpoint-2 was written: one line naming it, status 130; the command it gives then
    finishes the run."""
    from albert_hf.training.trainer import AlbertTrainer

    real_step = AlbertTrainer.training_step

    def interrupted_at_step_3(self, *args, **kwargs):
        if self.state.global_step == 2:
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    folder = tmp_path / "out"
    monkeypatch.setattr(AlbertTrainer, "training_step", interrupted_at_step_3)
    assert main(glue_argv(folder)) == INTERRUPTED
    assert last_line(capsys) == (
        f"albert-hf glue: interrupted (Ctrl-C): the newest complete checkpoint is {folder / 'checkpoint-2'}; the "
        "same command with --resume_from_checkpoint latest continues the run"
    )
    assert LOCK_NAME not in os.listdir(folder) and "config.json" not in os.listdir(folder)  # no final model
    monkeypatch.setattr(AlbertTrainer, "training_step", real_step)
    assert main(glue_argv(folder, "--resume_from_checkpoint", "latest")) == 0
    assert {"checkpoint-4", "config.json"} <= set(os.listdir(folder))


def test_ctrl_c_before_anything_was_written_says_so_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    import albert_hf.scripts.glue as glue_script

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    folder = tmp_path / "out"
    monkeypatch.setattr(glue_script, "load_tokenizer", interrupted)
    assert main(glue_argv(folder)) == INTERRUPTED
    assert last_line(capsys) == f"albert-hf glue: interrupted (Ctrl-C): nothing was written to {folder}"
    assert not folder.exists()  # the job made it for its lock, and goes with it
    assert run_command("glue", interrupted, []) == INTERRUPTED  # no folder held yet: parsing, say
    assert last_line(capsys) == "albert-hf glue: interrupted (Ctrl-C): nothing was written"


@pytest.mark.slow  # a GLUE run in a subprocess, stopped with a real SIGINT: about 20 s
def test_a_real_sigint_gives_one_line_and_status_130(tmp_path):
    folder = tmp_path / "out"
    job = processes.start(
        [sys.executable, "-m", "albert_hf.cli", *glue_argv(folder, steps=100000)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=CLI_ENV,
    )
    try:
        deadline = time.time() + 300
        while not (folder / "checkpoint-2" / "run_fingerprint.json").exists():
            assert time.time() < deadline and job.poll() is None, job.stderr.read()[-3000:]
            time.sleep(0.1)
        job.send_signal(signal.SIGINT)
        _, stderr = job.communicate(timeout=300)
    finally:
        processes.end(job)
    assert job.returncode == INTERRUPTED, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("albert-hf glue: interrupted (Ctrl-C): the newest complete checkpoint is ")
    assert not (folder / LOCK_NAME).exists()


# --------------------------------------------------------------------------------------------------------------------
# The lease watches its folder
# --------------------------------------------------------------------------------------------------------------------


def delete_when_checkpointed(folder: Path, what: str) -> threading.Thread:
    """A thread that, once the job marked checkpoint-2 complete, deletes the folder (or only its lock file)."""

    def delete():
        deadline = time.time() + 300
        while not (folder / "checkpoint-2" / "run_fingerprint.json").exists() and time.time() < deadline:
            time.sleep(0.01)
        if what == "folder":
            while folder.exists():  # as `rm -r` run again: the job may write a file between two removals
                shutil.rmtree(folder, ignore_errors=True)
        elif what == "moved":
            os.rename(folder, folder.with_name("moved"))
        else:
            os.remove(folder / LOCK_NAME)

    thread = threading.Thread(target=delete, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    "what, problem",
    [
        ("folder", "the folder was deleted or moved (with its lock _albert_hf.lock)"),
        ("moved", "the folder was deleted or moved (with its lock _albert_hf.lock)"),
        ("lock", "{folder}/_albert_hf.lock was removed"),
    ],
)
def test_a_job_whose_folder_or_lock_goes_stops_and_never_reports_success(tmp_path, monkeypatch, capsys, what, problem):
    from albert_hf.training import run_folder

    monkeypatch.setenv("ALBERT_HF_LEASE_SECONDS", "0.5")  # renewed every 0.05 s
    interrupts = []
    real_interrupt = run_folder._interrupt_main_thread
    monkeypatch.setattr(run_folder, "_interrupt_main_thread", lambda: interrupts.append(1) or real_interrupt())
    folder = tmp_path / "out"
    deleting = delete_when_checkpointed(folder, what)
    status = main(glue_argv(folder, "--save_total_limit", "2", steps=3000))  # a minute of training, unless stopped
    deleting.join(timeout=300)
    assert status == 3
    if what == "lock":  # the folder stays, so nothing but the lease can stop the job (a write may fail without one)
        assert interrupts == [1]
        assert not (folder / "checkpoint-3000").exists() and not (folder / "checkpoint-100").exists()
    assert last_line(capsys) == (
        f"albert-hf glue: error: --output_dir {folder}: {problem.format(folder=folder)} while the job ran. The job "
        "stopped; what it wrote there is incomplete."
    )
    assert not (folder / "config.json").exists()  # no final model was written into the folder


def test_a_folder_lost_after_the_last_renewal_is_still_no_success(tmp_path, capsys):
    """The job finished between two renewals, its folder deleted: the boundary looks once more before success."""

    def job(argv):
        open_output_folder(str(tmp_path / "out"))
        shutil.rmtree(tmp_path / "out")
        return 0

    assert run_command("glue", job, []) == 3
    assert "the folder was deleted or moved (with its lock _albert_hf.lock) while the job ran" in last_line(capsys)


# --------------------------------------------------------------------------------------------------------------------
# --output_dir that cannot be a folder: one line before any work
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["glue", "train-tokenizer", "export"])
def test_an_output_dir_that_cannot_be_a_folder_is_one_line_before_any_work(tmp_path, capsys, command):
    from albert_hf import AlbertConfig, AlbertForSequenceClassification
    from albert_hf.argument_parsing import parse_config_overrides

    model = tmp_path / "model"
    config = AlbertConfig.preset("base-v2", **parse_config_overrides(TINY_ONE_LAYER_OVERRIDES))
    AlbertForSequenceClassification(config).save_pretrained(model)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    argv_of = {
        "glue": lambda out: glue_argv(out),
        "train-tokenizer": lambda out: [
            "train-tokenizer",
            str(FIXTURES / "corpus" / "botchan.txt"),
            "--output_dir",
            out,
        ],
        "export": lambda out: ["export", "--model_name_or_path", str(model), "--output_dir", out],
    }
    cases = {
        "": "--output_dir '' is empty: pass the folder the job writes into.",
        str(a_file): f"--output_dir {a_file} is a file, not a folder: pass the folder the job writes into.",
        str(dangling): f"--output_dir {dangling} is a symlink to {tmp_path / 'nowhere'}, not a folder",
        str(a_file / "run"): f"--output_dir {a_file / 'run'}: {a_file} is a file, not a folder, so no folder can",
    }
    for value, message in cases.items():
        before = sorted(os.listdir(tmp_path))
        assert main(argv_of[command](value)) == 2
        assert last_line(capsys).startswith(f"albert-hf {command}: error: {message}")
        assert sorted(os.listdir(tmp_path)) == before and a_file.read_text() == "x"


# --------------------------------------------------------------------------------------------------------------------
# Messages built from what failed
# --------------------------------------------------------------------------------------------------------------------


def test_a_read_only_cache_is_named_as_a_cache_not_as_the_output_folder(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub

    cache = tmp_path / "datasets-cache"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    out = tmp_path / "out"

    def read_only(path: Path) -> OSError:
        return OSError(errno.EROFS, "Read-only file system", str(path))

    argv = ["--output_dir", str(out)]
    cases = {
        cache / "generator" / "x.lock": f"it is in the datasets cache folder {cache}; set HF_DATASETS_CACHE to a",
        tmp_path / "hub" / "models--a--b" / "x": f"it is in the Hub cache folder {tmp_path / 'hub'}; set HF_HUB_CACHE",
        out / "checkpoint-1" / "x": "; choose another --output_dir",
        tmp_path / "elsewhere" / "x": ": read-only file system",
    }
    for path, expected in cases.items():
        status, message = explain_failure(read_only(path), argv)
        assert status == 3 and message.startswith(f"{path}: read-only file system") and expected in message
        assert ("--output_dir" in message) == (out in path.parents)
    given = tmp_path / "my-cache"
    status, message = explain_failure(read_only(given / "x.arrow"), [*argv, "--cache_dir", str(given)])
    assert message.endswith(f"it is in the datasets cache folder {given}; pass a writable --cache_dir")
    status, message = explain_failure(OSError(errno.EACCES, "Permission denied", str(cache / "y")), argv)
    assert message.startswith(f"{cache / 'y'}: permission denied: it is in the datasets cache folder")


def test_a_damaged_checkpoint_is_called_damaged_not_a_finished_model(tmp_path):
    folder = tmp_path / "run"
    (folder / "checkpoint-3").mkdir(parents=True)
    (folder / "checkpoint-3" / "trainer_state.json").write_text("{ cut sh")
    (folder / "checkpoint-1").mkdir()
    with pytest.raises(OutputFolderError) as refused:
        check_resume_target(str(folder), "latest")
    message = str(refused.value)
    assert "holds no complete checkpoint to resume from: checkpoint-3 is damaged (" in message
    assert "trainer_state.json" in message and "; checkpoint-1 is damaged (" in message
    assert "finished model" not in message

    # A final save killed halfway (config.json written, the weights truncated) is no finished model either.
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{cut")
    with pytest.raises(OutputFolderError) as refused:
        check_resume_target(str(folder), "latest")
    message = str(refused.value)
    assert f"holds a model whose save did not finish ({folder / 'model.safetensors'} is corrupt or truncated" in message
    assert "no complete checkpoint to resume from (checkpoint-3 is damaged (" in message


def test_a_lock_dated_in_the_future_says_how_far_ahead_its_clock_is(tmp_path):
    import json
    import socket

    from albert_hf.training.run_folder import FolderInUseError, acquire_lock

    holder = {"lease_id": "x", "pid": 4242, "host": "node-ahead", "command": "albert-hf pretrain", "lease_seconds": 60}
    holder["started"] = "2026-12-01T00:00:00+00:00"
    (tmp_path / LOCK_NAME).write_text(json.dumps(holder))
    ahead = time.time() + 10755
    os.utime(tmp_path / LOCK_NAME, (ahead, ahead))
    assert socket.gethostname() != "node-ahead"
    with pytest.raises(FolderInUseError) as refused:
        acquire_lock(str(tmp_path))
    message = str(refused.value)
    assert (
        "s ahead of this machine's clock (the clocks that stamp the lock file and this machine's disagree)" in message
    )
    assert " s ago" not in message and "-1075" not in message
    assert "10755 s ahead" in message or "10754 s ahead" in message
