"""Guarded output folders and one writer per folder (`albert_hf.training.run_folder`), and how the CLI reports user errors.

The rules are checked on folders laid out by hand (the expected verdicts and the files to remove are listed here, not
computed); the lock between real processes (subprocesses holding it, killed with SIGKILL, exiting through an
exception); and both through the real `albert-hf` command line, whose refusal must be one line on stderr, exit 2.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import processes
from helpers.command_line import CLI_ENV, assert_one_line_error, run_cli
from helpers.data import FIXTURES
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.errors import MissingFileError, UserError
from albert_hf.training.checkpoints import check_pretrained_source
from albert_hf.training.run_folder import (
    LOCK_NAME,
    FolderInUseError,
    OutputFolderError,
    acquire_lock,
    check_output_folder,
    read_lock,
    release_held_locks,
    remove_run_files,
)


def make(folder: Path, *names: str) -> Path:
    """Files (or folders, for names ending in /) under `folder`."""
    for name in names:
        path = folder / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x")
    return folder


# --------------------------------------------------------------------------------------------------------------------
# The guard
# --------------------------------------------------------------------------------------------------------------------


def test_absent_empty_log_only_and_unrelated_folders_are_used_as_they_are(tmp_path):
    assert check_output_folder(str(tmp_path / "absent")) == []
    assert check_output_folder(str(make(tmp_path / "empty", "./"))) == []
    kept = make(tmp_path / "logs", "runs/Dec02/events.out.tfevents.1", "notes.txt", "train.tsv", "README.md")
    assert check_output_folder(str(kept)) == []


@pytest.mark.parametrize(
    "name", ["config.json", "model.safetensors", "pytorch_model.bin", "model.safetensors.index.json", "checkpoint-3/"]
)
def test_a_folder_holding_another_run_is_refused_naming_its_files(tmp_path, name):
    folder = make(tmp_path / "out", name, "notes.txt")
    with pytest.raises(
        OutputFolderError, match=rf"--output_dir {folder} holds another run's files \({name.strip('/')}\)"
    ):
        check_output_folder(str(folder))


def test_resume_continues_the_run_in_the_folder(tmp_path):
    folder = make(tmp_path / "out", "config.json", "checkpoint-4/trainer_state.json")
    assert check_output_folder(str(folder), resume=True) == []


def test_overwrite_removes_the_run_files_and_nothing_else(tmp_path, caplog):
    run = [
        "config.json",
        "model.safetensors",
        "training_args.bin",
        "trainer_state.json",
        "all_results.json",
        "eval_results.json",
        "spiece.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "checkpoint-2/model.safetensors",
        "checkpoint-10/optimizer.pt",
        ".checkpoint-staging/checkpoint-12/config.json",
    ]
    others = ["runs/Dec02/events.out.tfevents.1", "notes.txt", "data/train.tsv", "README.md", LOCK_NAME]
    folder = make(tmp_path / "out", *run, *others)
    to_remove = check_output_folder(str(folder), overwrite=True)
    expected = {name.split("/")[0] for name in run}
    assert set(to_remove) == expected
    with caplog.at_level("WARNING", logger="albert_hf.training.run_folder"):
        assert set(remove_run_files(str(folder))) == expected
    assert sorted(os.listdir(folder)) == sorted(["_albert_hf.lock", "README.md", "data", "notes.txt", "runs"])
    assert (folder / "runs/Dec02/events.out.tfevents.1").exists() and (folder / "data/train.tsv").exists()
    assert f"--overwrite_output_dir: removing {folder / 'checkpoint-10'}" in caplog.text


@pytest.mark.parametrize("flags", [{}, {"overwrite": True}, {"resume": True}], ids=["plain", "overwrite", "resume"])
def test_writing_into_the_folder_of_the_starting_model_is_always_refused(tmp_path, flags):
    model = make(tmp_path / "pre", "config.json", "model.safetensors")
    with pytest.raises(OutputFolderError, match=r"is the folder of --model_name_or_path .*replace the model"):
        check_output_folder(str(model), model_source=str(model), **flags)
    # The same folder spelled differently (a trailing slash, a relative path) is the same folder.
    with pytest.raises(OutputFolderError, match="--model_name_or_path"):
        check_output_folder(str(model) + "/", model_source=os.path.relpath(model), **flags)
    assert sorted(os.listdir(model)) == ["config.json", "model.safetensors"]


def test_the_tokenizer_folder_is_refused_unless_the_run_there_is_resumed(tmp_path):
    folder = make(tmp_path / "out", "spiece.model")
    tokenizer_file = str(folder / "spiece.model")
    for source in (tokenizer_file, str(folder)):
        for overwrite in (False, True):
            with pytest.raises(OutputFolderError, match="--tokenizer_name_or_path"):
                check_output_folder(str(folder), tokenizer_source=source, overwrite=overwrite)
        assert check_output_folder(str(folder), tokenizer_source=source, resume=True) == []
    assert check_output_folder(str(tmp_path / "other"), tokenizer_source=tokenizer_file) == []


@pytest.mark.parametrize("value", ["./out/pre", "/no/such/folder", "~/no-such-albert", "a/b/c"])
def test_a_missing_local_model_is_called_missing_not_a_bad_repo_id(value):
    with pytest.raises(MissingFileError, match=rf"^--model_name_or_path {value}: no such folder"):
        check_pretrained_source(value, option="--model_name_or_path")


def test_a_hub_id_while_the_hub_is_offline_is_called_missing(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        MissingFileError, match=r"--tokenizer_name_or_path albert/albert-base-v2: no such folder.*offline"
    ):
        check_pretrained_source("albert/albert-base-v2", option="--tokenizer_name_or_path")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    check_pretrained_source("albert/albert-base-v2")  # online, a valid id is left to the Hub


# --------------------------------------------------------------------------------------------------------------------
# The lock, between real processes
# --------------------------------------------------------------------------------------------------------------------

# Takes the lock of argv[1], says so, then waits for its stdin to close (or, with argv[2] == "raise", fails).
LOCK_HOLDER = """
import sys
from albert_hf.errors import UserError
from albert_hf.training.run_folder import acquire_lock
try:
    acquire_lock(sys.argv[1])
except UserError as error:
    print(error, flush=True)
    sys.exit(2)
print("locked", flush=True)
if sys.argv[2:] == ["raise"]:
    raise RuntimeError("the job failed")
sys.stdin.read()
"""


def start_holder(folder: Path, *extra: str) -> processes.Popen:
    process = processes.start(
        [sys.executable, "-c", LOCK_HOLDER, str(folder), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=CLI_ENV,
    )
    assert process.stdout.readline().strip() == "locked", process.stderr.read()
    return process


def try_lock(folder: Path) -> processes.CompletedProcess:
    return processes.run(
        [sys.executable, "-c", LOCK_HOLDER, str(folder)],
        input="",
        capture_output=True,
        text=True,
        env=CLI_ENV,
        timeout=300,
    )


@pytest.mark.slow  # two real processes on one folder
def test_a_second_writer_stops_at_once_naming_the_holder_and_the_lock_goes_at_exit(tmp_path):
    folder = tmp_path / "out"
    holder = start_holder(folder)
    try:
        lock = read_lock(str(folder / LOCK_NAME))
        assert lock["pid"] == holder.pid and lock["host"] == socket.gethostname()
        second = try_lock(folder)
        assert second.returncode == 2, second
        assert f"is in use by another job (pid {holder.pid} on {socket.gethostname()}, started {lock['started']}" in (
            second.stdout
        )
    finally:
        holder.communicate(input="", timeout=300)
    assert holder.returncode == 0
    assert not (folder / LOCK_NAME).exists()
    assert try_lock(folder).returncode == 0  # free again


def test_the_lock_is_released_when_the_job_fails(tmp_path):
    holder = start_holder(tmp_path, "raise")
    _, stderr = holder.communicate(timeout=300)
    assert holder.returncode == 1 and "RuntimeError: the job failed" in stderr
    assert not (tmp_path / LOCK_NAME).exists()


@pytest.mark.slow  # a lock holder killed in a subprocess, then a taker
def test_the_lock_of_a_killed_job_is_taken_over_with_a_warning(tmp_path):
    holder = start_holder(tmp_path)
    holder.send_signal(signal.SIGKILL)
    holder.communicate(timeout=300)
    assert read_lock(str(tmp_path / LOCK_NAME))["pid"] == holder.pid  # left behind: SIGKILL runs no exit handler
    taker = start_holder(tmp_path)
    try:
        assert read_lock(str(tmp_path / LOCK_NAME))["pid"] == taker.pid
    finally:
        _, stderr = taker.communicate(input="", timeout=300)
    assert f"Taking over the lock of {tmp_path} from a job that is gone (pid {holder.pid}" in stderr


def test_a_lock_from_another_host_or_unreadable_is_refused(tmp_path):
    lock_path = tmp_path / LOCK_NAME
    lock_path.write_text(json.dumps({"pid": 1, "host": "elsewhere", "command": "albert-hf pretrain", "started": "t"}))
    with pytest.raises(FolderInUseError, match=rf"pid 1 on elsewhere, started t.*remove {lock_path}"):
        acquire_lock(str(tmp_path))
    for unreadable in ("", "[]", json.dumps({"pid": "12", "host": socket.gethostname()})):
        lock_path.write_text(unreadable)
        with pytest.raises(FolderInUseError, match=rf"lock file {lock_path} that cannot be read"):
            acquire_lock(str(tmp_path))


def test_the_lock_does_not_repeat_secrets_of_the_command_line(tmp_path, monkeypatch):
    argv = [
        "albert-hf",
        "glue",
        "--hub_token",
        "hf_abc",
        "--output_dir",
        str(tmp_path),
        "--hub_password=pw",
        "--x",
        "1",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    acquire_lock(str(tmp_path))
    command = read_lock(str(tmp_path / LOCK_NAME))["command"]
    assert command == f"albert-hf glue --hub_token *** --output_dir {tmp_path} --hub_password=*** --x 1"
    release_held_locks()


def test_one_process_may_lock_its_folder_again(tmp_path):
    first, again = acquire_lock(str(tmp_path)), acquire_lock(str(tmp_path))
    assert first is again and read_lock(str(tmp_path / LOCK_NAME))["pid"] == os.getpid()
    release_held_locks()
    assert not (tmp_path / LOCK_NAME).exists()


# --------------------------------------------------------------------------------------------------------------------
# Through the command line
# --------------------------------------------------------------------------------------------------------------------


def glue_argv(output_dir: Path, *extra: str) -> list[str]:
    return [
        "glue",
        "--task_name",
        "rte",
        "--data_dir",
        str(FIXTURES / "glue" / "RTE"),
        "--tokenizer_name_or_path",
        str(FIXTURES / "spiece" / "albert-30k-clean.model"),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--do_train",
        "--max_train_samples",
        "16",
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "8",
        "--max_seq_length",
        "64",
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


@pytest.mark.slow  # a holder process beside the real CLI in another
def test_cli_refuses_a_folder_another_job_is_writing(tmp_path):
    folder = tmp_path / "out"
    holder = start_holder(folder)
    try:
        result = run_cli(glue_argv(folder))
    finally:
        holder.communicate(input="", timeout=300)
    assert_one_line_error(result, "glue", f"--output_dir {folder} is in use by another job (pid {holder.pid}")
    # Nothing written by the refused job; the holder made the folder and left it empty, so it went with its lock.
    assert not folder.exists()


def pretrained_model(folder: Path) -> dict[str, bytes]:
    """A tiny pretrained ALBERT saved in `folder`; returns its files' bytes."""
    from albert_hf import AlbertConfig, AlbertForPreTraining
    from albert_hf.argument_parsing import parse_config_overrides

    config = AlbertConfig.preset("base-v2", **parse_config_overrides(TINY_ONE_LAYER_OVERRIDES))
    AlbertForPreTraining(config).save_pretrained(folder)
    return {name: (folder / name).read_bytes() for name in os.listdir(folder)}


def test_cli_never_fine_tunes_into_the_pretrained_model_folder(tmp_path):
    model = tmp_path / "pre"
    saved = pretrained_model(model)
    result = run_cli(glue_argv(model, "--model_name_or_path", str(model), "--overwrite_output_dir"))
    assert_one_line_error(result, "glue", f"--output_dir {model} is the folder of --model_name_or_path {model}")
    assert {name: (model / name).read_bytes() for name in os.listdir(model)} == saved


@pytest.mark.slow  # two tiny GLUE trainings in subprocesses: about 30-60 s
def test_cli_rerun_into_a_finished_run_needs_overwrite_which_removes_only_run_files(tmp_path):
    folder = tmp_path / "out"
    first = run_cli(glue_argv(folder))
    assert first.returncode == 0, first.stderr[-3000:]
    assert {"config.json", "model.safetensors", "checkpoint-2"} <= set(os.listdir(folder))

    again = run_cli(glue_argv(folder))
    assert_one_line_error(again, "glue", f"--output_dir {folder} holds another run's files (checkpoint-2, config.json")

    make(folder, "checkpoint-7/trainer_state.json", "notes.txt")  # a checkpoint the new run would not write itself
    overwritten = run_cli(glue_argv(folder, "--overwrite_output_dir"))
    assert overwritten.returncode == 0, overwritten.stderr[-3000:]
    assert f"--overwrite_output_dir: removing {folder / 'checkpoint-7'}" in overwritten.stderr
    names = set(os.listdir(folder))
    assert "checkpoint-7" not in names and {"checkpoint-2", "config.json", "notes.txt"} <= names
    assert LOCK_NAME not in names  # released at the end of the command


def test_user_errors_show_their_traceback_only_when_asked(tmp_path, capsys, monkeypatch):
    from albert_hf.cli import main

    model = tmp_path / "pre"
    pretrained_model(model)
    argv = glue_argv(model, "--model_name_or_path", str(model))
    monkeypatch.delenv("ALBERT_HF_DEBUG", raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"albert-hf glue: error: --output_dir {model} is the folder of --model_name_or_path")
    with pytest.raises(OutputFolderError):
        main([argv[0], "--debug", *argv[1:]])  # the global flag, anywhere on the command line
    monkeypatch.setenv("ALBERT_HF_DEBUG", "1")
    with pytest.raises(UserError):
        main(argv)
    assert not (model / LOCK_NAME).exists()


@pytest.mark.parametrize(
    "argv, debug, rest",
    [
        (["--debug", "glue", "--x", "1"], True, ["glue", "--x", "1"]),
        (["glue", "--x", "1", "--debug"], True, ["glue", "--x", "1"]),
        (["glue", "--debug", "--x", "1"], True, ["glue", "--x", "1"]),
        # TrainingArguments' own --debug <options> stays the command's
        (
            ["glue", "--debug", "underflow_overflow", "--x", "1"],
            False,
            ["glue", "--debug", "underflow_overflow", "--x", "1"],
        ),
        (["glue", "--debug=underflow_overflow"], False, ["glue", "--debug=underflow_overflow"]),
    ],
)
def test_the_global_debug_flag_is_taken_out_of_the_command_line(argv, debug, rest, monkeypatch):
    from albert_hf.error_boundary import debug_wanted

    monkeypatch.delenv("ALBERT_HF_DEBUG", raising=False)
    assert debug_wanted(argv) == (debug, rest)
    monkeypatch.setenv("ALBERT_HF_DEBUG", "1")
    assert debug_wanted(argv) == (True, rest)


def test_cli_names_a_missing_local_model_folder(tmp_path):
    result = run_cli(glue_argv(tmp_path / "out", "--model_name_or_path", "./no/such/pre"))
    assert_one_line_error(result, "glue", "--model_name_or_path ./no/such/pre: no such folder")


@pytest.mark.distributed  # two processes under torchrun (gloo): about 30-60 s
def test_every_process_of_a_launch_stops_with_the_main_processs_verdict(tmp_path):
    """Only the main process looks at the folder; the other receives its verdict instead of training alone or waiting
    for a process that has stopped."""
    folder = make(tmp_path / "out", "config.json", "checkpoint-3/trainer_state.json")
    before = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))
    env = {**CLI_ENV, "OMP_NUM_THREADS": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m"]
    result = processes.run(
        [*launcher, "albert_hf.cli", *glue_argv(folder, "--use_cpu")],
        capture_output=True,
        text=True,
        env=env,
        timeout=3000,
    )
    assert result.returncode != 0
    refusals = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.startswith(f"albert-hf glue: error: --output_dir {folder} holds another run's files")
    ]
    assert len(refusals) == 2, result.stderr[-4000:]  # one per process
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) == before


def test_a_folder_the_job_made_and_left_empty_goes_with_its_lock(tmp_path):
    made = acquire_lock(str(tmp_path / "made"))
    made.release()
    assert not (tmp_path / "made").exists()  # a refused job leaves nothing to be mistaken for a run

    written = acquire_lock(str(tmp_path / "written"))
    (tmp_path / "written" / "config.json").write_text("{}")
    written.release()
    assert os.listdir(tmp_path / "written") == ["config.json"]

    (tmp_path / "given").mkdir()  # the user's own (empty) folder stays
    acquire_lock(str(tmp_path / "given")).release()
    assert (tmp_path / "given").is_dir()
