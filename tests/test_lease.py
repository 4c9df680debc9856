"""The output folder's lock as a lease (`albert_hf.training.run_folder`): renewed by its holder, taken over on any host once
not renewed for the duration it states, refused while renewed; one winner when jobs race for it.

The holders are real processes (a Python snippet calling `acquire_lock`), some claiming another host's name, killed
with SIGKILL or stopped with SIGSTOP; leases of a second or two keep the waits short. Times and outcomes are checked
against values set or measured here (the mtime written by hand, the moment of a kill), not computed by the module.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import processes
from helpers.command_line import CLI_ENV

from albert_hf.errors import UserError
from albert_hf.training import run_folder
from albert_hf.training.run_folder import LOCK_NAME, FolderInUseError, acquire_lock, read_lock, release_held_locks

# Takes the lock of each folder of argv in turn and prints "locked" or "refused <message>"; after each, waits for a
# line on stdin before releasing it. FAKE_HOST makes it claim another machine's name; with RACE set it first waits
# for `<folder>.go` to appear, the barrier that starts racers at the same instant.
HOLDER = """
import os, socket, sys, time
if os.environ.get("FAKE_HOST"):
    socket.gethostname = lambda: os.environ["FAKE_HOST"]
from albert_hf.errors import UserError
from albert_hf.training.run_folder import acquire_lock, release_held_locks
print("ready", flush=True)
for folder in sys.argv[1:]:
    while os.environ.get("RACE") and not os.path.exists(folder + ".go"):
        time.sleep(0.0005)
    try:
        acquire_lock(folder)
        print("locked", flush=True)
    except UserError as error:
        print("refused", error, flush=True)
    sys.stdin.readline()
    release_held_locks()
"""


def start(*folders: Path, **env: str) -> processes.Popen:
    process = processes.start(
        [sys.executable, "-c", HOLDER, *map(str, folders)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**CLI_ENV, **env},
    )
    assert process.stdout.readline() == "ready\n", process.stderr.read()
    return process


def finish(process: processes.Popen) -> str:
    """Let the process release what it holds and exit; its stderr."""
    _, stderr = process.communicate(input="\n" * 10, timeout=300)
    return stderr


def utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def write_lease(folder: Path, renewed: int, lease: float, host: str = "node-gone", pid: int = 4242) -> dict:
    """A lock file as a job on `host` leaves it, last renewed at `renewed` (its mtime)."""
    holder = {
        "lease_id": f"{host}-{pid}",
        "pid": pid,
        "host": host,
        "command": "albert-hf pretrain --hub_token ***",
        "started": "2026-12-01T00:00:00+00:00",
        "lease_seconds": lease,
    }
    folder.mkdir(exist_ok=True)
    (folder / LOCK_NAME).write_text(json.dumps(holder))
    os.utime(folder / LOCK_NAME, (renewed, renewed))
    return holder


def test_a_stale_lease_of_another_host_is_taken_over_naming_the_old_holder(tmp_path, caplog, monkeypatch):
    """This process is the job arriving (the racers below take stale leases over in processes of their own)."""
    renewed = int(time.time()) - 120
    write_lease(tmp_path, renewed, lease=60)
    monkeypatch.setenv("ALBERT_HF_LEASE_SECONDS", "2")
    with caplog.at_level("WARNING", logger="albert_hf.training.run_folder"):
        lock = acquire_lock(str(tmp_path))
    try:
        found = read_lock(str(tmp_path / LOCK_NAME))
        assert found == lock.holder and (found["pid"], found["host"], found["lease_seconds"]) == (
            os.getpid(),
            socket.gethostname(),
            2.0,
        )
    finally:
        release_held_locks()
    expected = (
        f"Taking over the lock of {tmp_path} from a job whose lease expired (pid 4242 on node-gone, started "
        f"2026-12-01T00:00:00+00:00: 'albert-hf pretrain --hub_token ***'; last renewed {utc(renewed)} (12N s ago), "
        f"lease 60 s expired {utc(renewed + 60)})."
    )
    assert re.search(re.escape(expected).replace("12N", r"12\d"), caplog.text), caplog.text
    assert os.listdir(tmp_path) == []  # released; no probe or moved-aside file left behind


@pytest.mark.slow
def test_a_renewed_lease_is_refused_on_any_host_and_expires_once_its_holder_is_killed(tmp_path, caplog):
    lease = 1.5
    path = tmp_path / LOCK_NAME
    holder = start(tmp_path, FAKE_HOST="node-a", ALBERT_HF_LEASE_SECONDS=str(lease))
    try:
        assert holder.stdout.readline() == "locked\n"
        first_stamp = path.stat().st_mtime
        time.sleep(2 * lease)  # unrenewed, the lease would have expired by now
        assert path.stat().st_mtime > first_stamp + lease, "the holder did not renew its lease"
        with pytest.raises(FolderInUseError) as refused:
            acquire_lock(str(tmp_path))
        message = str(refused.value)
        assert f"is in use by another job (pid {holder.pid} on node-a, started " in message
        assert f"lease {lease:g} s expires " in message and f"free once its lease expires, or at once when {path}" in (
            message
        )

        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=300)
        last_renewal = path.stat().st_mtime  # SIGKILL runs no exit handler: the lock stays, renewed no more
        refusals = 0
        with caplog.at_level("WARNING", logger="albert_hf.training.run_folder"):
            while time.time() < last_renewal + lease + 10:
                try:
                    acquire_lock(str(tmp_path))
                    break
                except FolderInUseError:
                    refusals += 1
                    time.sleep(0.05)
        taken = time.time()
        assert read_lock(str(path))["pid"] == os.getpid()
        assert refusals >= 1  # not taken over at once: it was another host's, and its lease had not expired
        assert last_renewal + lease < taken < last_renewal + lease + 2
        assert f"from a job whose lease expired (pid {holder.pid} on node-a" in caplog.text
    finally:
        holder.kill()
        finish(holder)
        release_held_locks()
    assert not path.exists()


@pytest.mark.slow
def test_a_holder_whose_lease_was_taken_over_stops_renewing_and_leaves_the_new_lock(tmp_path):
    """A holder stopped past its lease (SIGSTOP) is taken over; continued, it notices and leaves the file alone."""
    lease = 1.0
    path = tmp_path / LOCK_NAME
    holder = start(tmp_path, FAKE_HOST="node-b", ALBERT_HF_LEASE_SECONDS=str(lease))
    try:
        assert holder.stdout.readline() == "locked\n"
        holder.send_signal(signal.SIGSTOP)
        deadline = time.time() + lease + 10
        while True:
            try:
                ours = acquire_lock(str(tmp_path))
                break
            except FolderInUseError:
                assert time.time() < deadline
                time.sleep(0.05)
        holder.send_signal(signal.SIGCONT)
        time.sleep(3 * lease / run_folder.RENEWALS_PER_LEASE + 0.5)  # its renewer wakes and looks
        stamp = path.stat().st_mtime_ns
        stderr = finish(holder)  # it releases what it believes it holds
        assert read_lock(str(path)) == ours.holder and path.stat().st_mtime_ns == stamp
        assert (
            f"The lock of {tmp_path} is no longer this job's: {path} now names another job (pid {os.getpid()} on "
            f"{socket.gethostname()}" in stderr
        ), stderr
    finally:
        holder.kill()
        holder.communicate(timeout=300)
        release_held_locks()
    assert not path.exists()


@pytest.mark.slow  # two real processes racing for one folder
def test_of_jobs_started_at_the_same_instant_exactly_one_gets_the_folder(tmp_path):
    """Two racers over four folders, two free and two holding a stale lease, released to each at the same instant."""
    folders = [tmp_path / f"run{index}" for index in range(4)]
    for folder in folders[1::2]:
        write_lease(folder, int(time.time()) - 300, lease=5)
    racers = [start(*folders, RACE="1", ALBERT_HF_LEASE_SECONDS="30") for _ in range(2)]
    try:
        for folder in folders:
            Path(f"{folder}.go").touch()
            outcomes = {racer.pid: racer.stdout.readline() for racer in racers}
            winners = [pid for pid, outcome in outcomes.items() if outcome == "locked\n"]
            assert len(winners) == 1, (folder, outcomes)
            (loser,) = set(outcomes) - set(winners)
            assert outcomes[loser].startswith(
                f"refused --output_dir {folder} is in use by another job (pid {winners[0]}"
            )
            assert read_lock(str(folder / LOCK_NAME))["pid"] == winners[0]
            for racer in racers:
                racer.stdin.write("\n")
                racer.stdin.flush()
    finally:
        stderrs = [finish(racer) for racer in racers]
    takeovers = "".join(stderrs).count("from a job whose lease expired (pid 4242 on node-gone, started ")
    assert takeovers == 2, stderrs  # one per stale folder, by its winner only
    assert all(not (folder / LOCK_NAME).exists() for folder in folders)


def test_a_lock_replaced_between_the_look_and_the_removal_is_put_back(tmp_path, monkeypatch):
    """The takeover removes only the file it judged: another job's lock that arrived in between is put back."""
    path = tmp_path / LOCK_NAME
    stale = write_lease(tmp_path, int(time.time()) - 300, lease=5)
    judged = path.stat().st_mtime_ns
    newer = tmp_path / "newer"
    newer.write_text(json.dumps({**stale, "lease_id": "newer", "pid": 7}))
    rename = os.rename

    def another_job_takes_over_first(source, target):
        os.replace(newer, path)
        rename(source, target)

    monkeypatch.setattr(os, "rename", another_job_takes_over_first)
    assert not run_folder._remove_if_unchanged(str(path), stale, judged)
    monkeypatch.undo()
    assert read_lock(str(path))["lease_id"] == "newer" and os.listdir(tmp_path) == [LOCK_NAME]

    write_lease(tmp_path, int(time.time()) - 300, lease=5)
    judged = path.stat().st_mtime_ns
    os.utime(path)  # the holder renewed after we judged it stale
    assert not run_folder._remove_if_unchanged(str(path), stale, judged)
    assert read_lock(str(path)) == stale and os.listdir(tmp_path) == [LOCK_NAME]
    assert run_folder._remove_if_unchanged(str(path), stale, path.stat().st_mtime_ns)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("value", ["soon", "0", "-5", "inf", "nan"])
def test_a_bad_lease_duration_is_one_clear_error(tmp_path, monkeypatch, value):
    monkeypatch.setenv("ALBERT_HF_LEASE_SECONDS", value)
    with pytest.raises(UserError, match=rf"^ALBERT_HF_LEASE_SECONDS='{value}': expected a number of seconds"):
        acquire_lock(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("trained", [False, True], ids=["while-training", "after-training"])
def test_a_deleted_folder_stops_its_job_while_it_trains_and_never_a_later_job_of_the_process(
    tmp_path, caplog, monkeypatch, trained
):
    """While a job trains, deleting its folder interrupts the main thread (the command then reports the loss). Once
    its training has ended (the plugin's `on_train_end`), the same deletion is logged and the lease stops renewing,
    but nothing is interrupted: a notebook, sweep or benchmark that runs another job next in the same process, and
    deletes the first job's folder meanwhile, is left alone."""
    import shutil
    from types import SimpleNamespace

    from albert_hf.training.callbacks import CompleteCheckpoints
    from albert_hf.training.run_folder import open_output_folder

    monkeypatch.setenv("ALBERT_HF_LEASE_SECONDS", "1")  # a renewal every 0.1 s
    folder = tmp_path / "run"
    lock = open_output_folder(str(folder))
    try:
        if trained:
            CompleteCheckpoints().on_train_end(SimpleNamespace(output_dir=str(folder)), None, None)
        interrupted = False
        with caplog.at_level("ERROR", logger="albert_hf.training.run_folder"):
            shutil.rmtree(folder)
            try:
                deadline = time.monotonic() + 5
                while lock.lost is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(0.3)  # the interrupt, if any, arrives right after the loss is recorded
            except KeyboardInterrupt:
                interrupted = True
    finally:
        release_held_locks()
    assert lock.lost is not None and lock.lost.startswith(run_folder.FOLDER_DELETED), lock.lost
    assert f"The lock of {folder} is no longer this job's" in caplog.text
    assert interrupted is not trained
