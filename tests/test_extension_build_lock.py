"""A build lock of torch's C++ extensions left by a killed build (DeepSpeed's CPU communication op is built at first
use, and torch waits on such a lock forever): a DeepSpeed job names the file in one line and stops with exit status 3
(the machine's state) within seconds, while a lock a running build holds, or one that has just gone, lets the job wait
as torch would (albert_hf.distributed.check_extension_build_locks)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import processes
from helpers.command_line import error_lines, run_cli
from helpers.data import FIXTURES, REPO_ROOT
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.distributed import StaleBuildLockError, check_extension_build_locks
from albert_hf.error_boundary import MACHINE_STATE_STATUS

OP = "deepspeed_shm_comm"  # the op DeepSpeed's CPU backend builds when its communication starts


def plant_lock(root: Path, age: float, folder: str = OP) -> Path:
    """`<root>/<folder>/lock`, the folder and the lock last changed `age` seconds ago, as a killed build leaves it."""
    lock = root / folder / "lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    then = time.time() - age
    for path in (lock, lock.parent):
        os.utime(path, (then, then))
    return lock


@pytest.fixture
def extensions_root(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "torch_extensions"
    root.mkdir()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(root))
    return root


def test_a_lock_no_process_holds_is_named(extensions_root):
    lock = plant_lock(extensions_root, age=120)
    with pytest.raises(StaleBuildLockError) as raised:
        check_extension_build_locks()
    message = str(raised.value)
    assert message.startswith(f"{lock}: the build lock of torch extension '{OP}' is held by no running process")
    assert "\n" not in message and "Delete the file" in message


def test_a_lock_below_the_default_root_is_found_too(tmp_path, monkeypatch):
    """Without $TORCH_EXTENSIONS_DIR torch builds under <cache>/torch_extensions/<python>_<accelerator>/<op>/."""
    import torch.utils.cpp_extension

    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setattr(torch.utils.cpp_extension, "get_default_build_root", lambda: str(tmp_path))
    lock = plant_lock(tmp_path / "py311_cpu", age=120)
    with pytest.raises(StaleBuildLockError, match=f"^{lock}: "):
        check_extension_build_locks()


def test_a_lock_a_running_build_holds_is_waited_on_as_torch_does(extensions_root):
    """A process holds the lock open (as torch's FileBaton does for the whole build) in a folder unchanged for two
    minutes: no error; nothing to report once no lock is left."""
    lock = plant_lock(extensions_root, age=120)
    holder = processes.start(
        [
            sys.executable,
            "-c",
            f"import os, sys; fd = os.open({str(lock)!r}, os.O_RDONLY); print('open'); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "open\n"
        check_extension_build_locks()
    finally:
        processes.end(holder)
    lock.unlink()
    check_extension_build_locks()


def test_a_lock_whose_folder_just_changed_gets_its_minute(extensions_root):
    """A lock nobody holds in a folder changed a moment ago (a build may have just ended) is reported only once the
    folder has been quiet for the whole patience; one that goes meanwhile is no error."""
    lock = plant_lock(extensions_root, age=0.5)
    started = time.monotonic()
    with pytest.raises(StaleBuildLockError):
        check_extension_build_locks(patience=2)
    assert time.monotonic() - started >= 1.4

    os.utime(lock)  # changed just now again, and removed half a second later, as a build that ends
    remover = threading.Timer(0.5, lock.unlink)
    remover.start()
    check_extension_build_locks(patience=30)
    remover.join()


@pytest.mark.needs("deepspeed")
def test_a_deepspeed_job_stops_on_a_planted_stale_lock_within_seconds(tmp_path):
    """`albert-hf glue --deepspeed` on CPU, with a lock a killed build left in the op's folder: one line naming the
    file, exit status 3, no traceback, well inside the time limit (without the check it waits forever)."""
    root = tmp_path / "torch_extensions"
    lock = plant_lock(root, age=120)
    argv = [
        *("glue", "--task_name", "rte", "--data_dir", str(FIXTURES / "glue" / "RTE")),
        *("--tokenizer_name_or_path", str(FIXTURES / "spiece" / "albert-30k-clean.model")),
        *("--config_overrides", TINY_ONE_LAYER_OVERRIDES, "--do_train", "--max_steps", "2", "--max_seq_length", "32"),
        *("--deepspeed", str(REPO_ROOT / "examples" / "accelerate_configs" / "ds_zero2.json"), "--use_cpu"),
        *("--report_to", "none", "--output_dir", str(tmp_path / "out")),
    ]
    # A launch of one process (the variables a launcher sets): DeepSpeed's communication starts on gloo and builds its
    # op there, where torch would wait on the lock.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    launch = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    result = run_cli(argv, timeout=180, TORCH_EXTENSIONS_DIR=str(root), **launch)
    assert result.returncode == MACHINE_STATE_STATUS, result.stderr[-3000:]
    errors = error_lines(result, "glue")
    assert len(errors) == 1 and errors[0].startswith(f"albert-hf glue: error: {lock}: "), result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert lock.exists()  # the user's cache is the user's to clean: reported, never deleted
