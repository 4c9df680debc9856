"""Every process a test starts, and its end.

Tests start processes only through this module: `run` (to the end, as `subprocess.run` does) and `start` (running
beside the test, as `subprocess.Popen`); `ruff check` refuses `subprocess.run`, `Popen` and the rest anywhere else in
tests/ (pyproject.toml, banned-api). Each process starts in a session of its own, so its process group is its own,
and carries two marks in its environment that every process below it inherits, also those that start sessions of
their own (torchrun's workers do) or outlive their parent (a killed launcher's workers):

    ALBERT_HF_TEST_RUN      this pytest run: set once by conftest.py (`mark_run`), inherited by pytest-xdist's workers
    ALBERT_HF_TEST_PROCESS  this one process tree

`end(process)` kills (SIGKILL) the whole tree until nothing of it is left: every process that carries its mark, every
process below it and every member of its process group. `run` ends the tree when the command returns, fails, or runs
past its timeout, and on any exception that reaches it (a test's own timeout included); a process `start` started is
ended by `end`, or at the latest when the test that started it finishes, passed or failed (`end_started`, from the
autouse fixture of conftest.py). At the end of the whole run conftest.py asks `leftovers()` for any process that
still carries the run's mark, and fails the run if there is one: a process that escaped all this is found anyway.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

import psutil

RUN_MARK = "ALBERT_HF_TEST_RUN"
PROCESS_MARK = "ALBERT_HF_TEST_PROCESS"
# The test that started a process, as pytest names it in the environment during each test.
CURRENT_TEST = "PYTEST_CURRENT_TEST"

# What `start` returns and `run` returns, for annotations.
Popen, CompletedProcess = subprocess.Popen, subprocess.CompletedProcess

# Processes from `start` not yet ended, with their marks.
_started: dict[subprocess.Popen, str] = {}


def mark_run() -> str:
    """Give this pytest run its mark (a fresh one: a run started by a test's process is a run of its own); its
    processes, pytest-xdist's workers included, inherit it."""
    os.environ[RUN_MARK] = uuid.uuid4().hex
    return os.environ[RUN_MARK]


def start(args, *, env: dict[str, str] | None = None, **popen_arguments) -> subprocess.Popen:
    """`subprocess.Popen(args, ...)` in a session of its own, with the marks in its environment (`env`, or this
    process's environment when None), remembered until `end`."""
    mark = uuid.uuid4().hex
    environment = dict(os.environ if env is None else env)
    environment[PROCESS_MARK] = mark
    for name in (RUN_MARK, CURRENT_TEST):
        if name in os.environ:
            environment[name] = os.environ[name]
    popen_arguments["start_new_session"] = True
    process = subprocess.Popen(args, env=environment, **popen_arguments)
    _started[process] = mark
    return process


def run(
    args, *, input=None, capture_output: bool = False, timeout: float | None = None, check: bool = False, **arguments
) -> subprocess.CompletedProcess:
    """`subprocess.run(args, ...)` with the same arguments and result (`subprocess.TimeoutExpired` past `timeout`),
    whose whole process tree is ended before it returns or raises."""
    if input is not None:
        arguments["stdin"] = subprocess.PIPE
    if capture_output:
        arguments["stdout"] = arguments["stderr"] = subprocess.PIPE
    with start(args, **arguments) as process:
        # What the command leaves behind is ended as soon as it exits, so that a process still holding its output
        # pipes cannot keep `communicate` waiting.
        watcher = threading.Thread(target=_end_rest_on_exit, args=(process, _started.get(process)), daemon=True)
        watcher.start()
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        finally:
            end(process)
    completed = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        completed.check_returncode()
    return completed


def end(process: subprocess.Popen) -> None:
    """Kill `process` and every process of its tree, until none is left; reap `process`."""
    _kill_tree(process, _started.pop(process, None))
    process.wait()


def _kill_tree(process: subprocess.Popen, mark: str | None) -> None:
    for _ in range(100):
        victims = _tree(process, mark)
        if not victims:
            return
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    raise RuntimeError(f"the processes {sorted(victims)} of {process.args!r} could not be ended")


def _end_rest_on_exit(process: subprocess.Popen, mark: str | None) -> None:
    """Wait for `process` to exit (without reaping it: `communicate` does), then kill the rest of its tree."""
    try:
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # reaped already
        pass
    _kill_tree(process, mark)


def end_started() -> None:
    """End every process that `start` started and nothing ended yet."""
    for process in list(_started):
        end(process)


def _tree(process: subprocess.Popen, mark: str | None) -> set[int]:
    """The live processes of `process`'s tree: itself while it runs, what is below it, the members of its process
    group, and whatever carries its mark. Zombies are dead already and left out."""
    pids = set()
    if process.poll() is None:
        pids.add(process.pid)
        try:
            pids.update(child.pid for child in psutil.Process(process.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    for candidate in _processes():
        if _group(candidate.pid) == process.pid or (mark is not None and _environ(candidate).get(PROCESS_MARK) == mark):
            pids.add(candidate.pid)
    return {pid for pid in pids if _alive(pid)}


def leftovers() -> list[psutil.Process]:
    """The processes of this run still alive: everything that carries the run's mark and either was started by this
    module or is no longer below this process (a test's process whose parent died). Processes below this one that
    libraries started in it (a data loader's workers) are left to end with it."""
    run = os.environ.get(RUN_MARK)
    if run is None:
        return []
    here = os.getpid()
    mine = set()
    try:
        mine = {child.pid for child in psutil.Process(here).children(recursive=True)}
    except psutil.NoSuchProcess:
        pass
    found = []
    for candidate in _processes():
        environment = _environ(candidate)
        if candidate.pid == here or environment.get(RUN_MARK) != run or not _alive(candidate.pid):
            continue
        if PROCESS_MARK in environment or candidate.pid not in mine:
            found.append(candidate)
    return found


def describe(process: psutil.Process) -> str:
    """`pid <n> (<command line>), started by <test>` for the report of what was left running."""
    try:
        command = " ".join(process.cmdline())[:200]
    except psutil.Error:
        command = "?"
    test = _environ(process).get(CURRENT_TEST, "a test").removesuffix(" (call)").removesuffix(" (setup)")
    return f"pid {process.pid} ({command}), started by {test}"


def kill(found: list[psutil.Process]) -> None:
    for process in found:
        try:
            process.kill()
        except psutil.Error:
            pass


def _processes():
    here = os.getpid()
    for candidate in psutil.process_iter():
        if candidate.pid != here:
            yield candidate


def _environ(process: psutil.Process) -> dict[str, str]:
    try:
        return process.environ()
    except psutil.Error:  # gone, a zombie, or another user's
        return {}


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
