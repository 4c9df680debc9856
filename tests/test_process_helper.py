"""The suite's one way to start processes (tests/helpers/processes.py) ends their whole trees, also the processes that
left the tree's session (torchrun's workers do) or outlived their parent, on success, failure and timeout; and a run
that leaves a process of a test alive fails at its end (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from helpers import processes
from helpers.data import REPO_ROOT

# A launcher as torchrun is one: it starts a worker in a session of its own, prints the worker's pid, and waits.
LAUNCHER = textwrap.dedent(
    """
    import subprocess, sys, time
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    print(worker.pid, flush=True)
    time.sleep(float(sys.argv[1]))
    """
)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def gone(pid: int, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_run_ends_a_worker_in_another_session_when_the_launcher_returns():
    result = processes.run([sys.executable, "-c", LAUNCHER, "0"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert gone(int(result.stdout.split()[0]))


@pytest.mark.slow
def test_run_ends_the_launcher_and_its_worker_on_a_timeout():
    process = processes.start([sys.executable, "-c", LAUNCHER, "300"], stdout=subprocess.PIPE, text=True)
    worker = int(process.stdout.readline())
    processes.end(process)
    assert not alive(process.pid) and gone(worker)

    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        processes.run([sys.executable, "-c", LAUNCHER, "300"], capture_output=True, text=True, timeout=10)
    assert gone(int(timed_out.value.stdout.split()[0]))  # what it printed before the timeout: its worker's pid


def test_what_a_test_started_is_ended_after_it_whatever_its_end(tmp_path):
    """`end_started` (the autouse fixture's teardown, after a test passed or failed) ends a launcher still running
    and the worker it started in another session."""
    process = processes.start([sys.executable, "-c", LAUNCHER, "300"], stdout=subprocess.PIPE, text=True)
    worker = int(process.stdout.readline())
    processes.end_started()
    assert not alive(process.pid) and gone(worker)


def test_an_orphan_started_outside_the_helper_is_found():
    """A process that escaped every helper (its parent gone) still carries the run's mark: `leftovers` finds it."""
    shell = subprocess.Popen(  # noqa: TID251 - the escape this test is about
        ["sh", "-c", f"{sys.executable} -c 'import time; time.sleep(300)' & echo $!"], stdout=subprocess.PIPE, text=True
    )
    orphan = int(shell.stdout.readline())
    shell.wait()
    try:
        assert gone(shell.pid)
        assert orphan in [process.pid for process in processes.leftovers()]
    finally:
        processes.kill([psutil.Process(orphan)])
    assert gone(orphan)


LEAKING_TEST = """
import subprocess, sys

def test_leaks():
    subprocess.Popen(["sh", "-c", sys.executable + " -c 'import time; time.sleep(300)' &"]).wait()
"""


@pytest.mark.slow
def test_a_run_that_leaves_a_process_alive_fails(tmp_path):
    """A pytest run with this suite's conftest.py, whose one test passes but leaves an orphan: the run names it and
    the test that started it, ends it, and exits with status 1."""
    (tmp_path / "test_leak.py").write_text(LEAKING_TEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "tests"), str(REPO_ROOT)])}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "conftest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--rootdir",
        str(tmp_path),
    ]
    result = processes.run(
        [*command, str(tmp_path / "test_leak.py")], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout, result.stdout[-3000:]
    report = result.stdout[result.stdout.index("processes left running") :]
    assert "1 process(es) that tests started were still running at the end of the run" in report
    assert "started by test_leak.py::test_leaks" in report, report
