"""The output folder of a job: one run's files in it, one writer at a time.

Trainer writes into `--output_dir` without looking at what is there: a GLUE job given the folder of a pretrained model
replaces that model, its checkpoints land beside another run's (and `--save_total_limit` then deletes those), and two
jobs on one folder mix their checkpoints. `open_run_folder`, called by `job_setup.start_job` before any data or
model work, refuses such a folder with a [`UserError`] that says what to do:

* The folder holds another run's files (a model: `config.json` or weights; checkpoints `checkpoint-N`): refused,
  unless `--resume_from_checkpoint` (the job continues that run) or `--overwrite_output_dir` (the job first removes
  the run files, logging each, and nothing else: logs under `runs/` and files no job writes stay).
* The folder is the one `--model_name_or_path` loads from: always refused (overwriting it would destroy the model
  the job starts from). The folder `--tokenizer_name_or_path` loads from: refused unless resuming, since removing its
  files would remove the tokenizer.
* `--resume_from_checkpoint latest` over a folder holding a finished model and no complete checkpoint (runs that save
  none, e.g. the quickstart's): refused, since the run would start from step 0 and replace that model
  (`check_resume_target`).
* The commands that write a folder without training go through the same guard (`open_output_folder`):
  `train-tokenizer` and `export` (albert_hf/folder_commands.py). The files such a command writes count as
  finished work too: a tokenizer trained into a model's folder would replace the `spiece.model` its embeddings were
  trained with.
* An empty or absent folder, or one holding only logs or files no job writes, is used as it is. transformers' old
  run_glue refused any non-empty folder; that also refused the folder a user keeps the data in, and no file of a run
  could be lost there. What a job writes there later goes through one writer (`albert_hf.output_files`), which never
  replaces a file no job wrote: a user's README.md stays and the job's card goes beside it. A file no job wrote with
  the name of one of the model's files, which could not go beside it, is refused before any work
  (`check_job_files`), as is an --output_dir that cannot be a folder (`check_output_dir_kind`).

One writer per folder: the main process creates `_albert_hf.lock` (JSON: lease id, pid, host, command, start time,
lease duration) with an atomic create-if-absent, and removes it when the process exits (explicitly from
`albert_hf.cli.main`, and from `atexit` for every other way out). The lock is a lease: a daemon thread of the holder
renews it (touches the file: its mtime is the renewal time) ten times per lease, `ALBERT_HF_LEASE_SECONDS` (default
600). A job arriving at a lock:

* a dead pid on this host (killed with SIGKILL, the machine rebooted): taken over at once, with a warning;
* a lease not renewed for longer than it states, on any host: taken over with a warning naming the old holder and
  when it last renewed, so a SLURM job requeued onto another node or a spot instance restarted elsewhere starts
  without a person deleting the file;
* a lease renewed within its duration (any host), or a live pid on this host: refused at once, naming the holder,
  when it last renewed and when the lease would expire.

A holder that stalled past its lease and was taken over notices at its next renewal, logs an error and stops
renewing; its release leaves the new holder's file alone. A job's lease also watches its folder: once the folder is
deleted (or made again), or its lock removed or taken over, the renewal stops the job (`FolderLock.stops_job`), and
the command reports the loss (`lost_folder`), never success. Staleness is judged from the file's mtime against a probe
file's (`_age_seconds`), and a stale lock is removed only if still unchanged (`_remove_if_unchanged`): of jobs racing
for one folder, exactly one gets it. A lock of an older albert_hf (no lease in it) from another host is never taken
over: it is not renewed, so its age says nothing.

Under a launcher (torchrun, accelerate) only the main process checks, removes and locks; the others receive its
verdict, so every process stops with the same error instead of waiting for a process that has stopped.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import json
import logging
import math
import os
import re
import shutil
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

from ..errors import OptionError, UserError
from ..output_files import (
    adopt_files,
    foreign_files,
    pending_files,
    read_manifest,
    remove_stale_staging,
    unwatch_folder,
    watch_folder,
    what_is_there,
    written_files,
)
from .checkpoints import CHECKPOINT_NAME, WEIGHTS_FILE_SUFFIXES

logger = logging.getLogger(__name__)

# "_" first: Trainer's upload of the output folder to the Hub (push_to_hub) leaves out names starting with "_", so the
# lock of a running job never lands in a model repository.
LOCK_NAME = "_albert_hf.lock"
# The lease a holder states in its lock file (seconds): a lock not renewed for longer is taken over, on any host.
# Long enough that a stalled file server or a slow checkpoint write does not lose a live job its folder, short enough
# that a requeued job does not wait long for the one that was preempted.
LEASE_ENV = "ALBERT_HF_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 600.0
# Renewals per lease: a lease expires only after this many renewals in a row were missed, not after one slow write.
RENEWALS_PER_LEASE = 10
# Options whose values the lock file does not repeat (it records the command line of the job holding the folder):
# any spelling (`--hub_token`, `--hub-token`, `--HUB_TOKEN`), and the abbreviations argparse accepts for
# `--hub_token` (`--hub_tok`, `--hub-t`).
_SECRET_OPTION = re.compile(r"^--[\w-]*(token|password|secret)[\w-]*$", re.IGNORECASE)
_SECRET_OPTION_NAMES = ("--hub_token",)
# The files of a model, which its final save writes and loaders read by name: one of them in the folder that no job
# wrote is refused before any work (`check_job_files`), since the job's own could not go beside it. (Weights of
# other names, shards, are recognized by their suffix.)
MODEL_FILE_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "training_args.bin",
        "spiece.model",
        "spiece.vocab",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        # The remote code save_pretrained copies beside a model and its tokenizer (`trust_remote_code=True`).
        "modeling.py",
        "configuration.py",
        "tokenization.py",
    }
)
# Files and folders a job writes beside its model besides those that mark a run (`_marks_a_run`, config.json among
# them): removed with the run by --overwrite_output_dir, so that no file of the old run is left to be read as the new
# one's.
_OTHER_RUN_FILES = (MODEL_FILE_NAMES - {"config.json"}) | {
    ".checkpoint-staging",
    "trainer_state.json",
    "vocab.txt",  # a WordPiece vocabulary (the Chinese ALBERTs'), as `albert-hf import` writes it
}
_RESULTS_FILE = re.compile(r"^(all|train|eval|predict|test)(_\w+)?_results\.json$")


class OutputFolderError(UserError):
    """The output folder holds another run's files, or is the folder the job loads its model or tokenizer from."""


class FolderInUseError(UserError):
    """Another job holds the output folder's lock."""


# --------------------------------------------------------------------------------------------------------------------
# What a run leaves in a folder
# --------------------------------------------------------------------------------------------------------------------


def _marks_a_run(name: str) -> bool:
    """Whether a file or folder named `name` is a model or a checkpoint: what makes a folder another run's."""
    return name == "config.json" or name.endswith(WEIGHTS_FILE_SUFFIXES) or bool(CHECKPOINT_NAME.match(name))


def run_files(folder: str) -> list[str]:
    """Names in `folder` that mark another run (model, weights, checkpoints), sorted; [] for an absent folder."""
    if not os.path.isdir(folder):
        return []
    return sorted(name for name in os.listdir(folder) if _marks_a_run(name))


def removable_run_files(folder: str, writes: tuple[str, ...] = ()) -> list[str]:
    """Names in `folder` that --overwrite_output_dir removes: the run's model, checkpoints and the files a job
    writes beside them (training state, results, tokenizer), and the files `writes` names. Logs (`runs/`), the lock
    and other files stay."""
    if not os.path.isdir(folder):
        return []
    return sorted(
        name
        for name in os.listdir(folder)
        if _marks_a_run(name) or name in _OTHER_RUN_FILES or name in writes or _RESULTS_FILE.match(name)
    )


def remove_run_files(folder: str, writes: tuple[str, ...] = ()) -> list[str]:
    """Remove the run files of `folder` (`removable_run_files`), logging each; returns the names removed."""
    removed = removable_run_files(folder, writes)
    for name in removed:
        path = os.path.join(folder, name)
        logger.warning("--overwrite_output_dir: removing %s", path)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    return removed


# --------------------------------------------------------------------------------------------------------------------
# The guard
# --------------------------------------------------------------------------------------------------------------------


def _same_folder(a: str, b: str) -> bool:
    return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(os.path.expanduser(b))


def _source_folder(source: str | None) -> str | None:
    """The local folder a `--*_name_or_path` value loads from (a file's folder), or None for a Hub id or nothing."""
    if not source:
        return None
    expanded = os.path.expanduser(source)
    if os.path.isdir(expanded):
        return expanded
    if os.path.isfile(expanded):
        return os.path.dirname(os.path.abspath(expanded))
    return None


def check_output_folder(
    output_dir: str,
    model_source: str | None = None,
    tokenizer_source: str | None = None,
    overwrite: bool = False,
    resume: bool = False,
    writes: tuple[str, ...] = (),
) -> list[str]:
    """Raise `OutputFolderError` when a job may not write into `output_dir` (the rules of the module docstring);
    returns the names --overwrite_output_dir is to remove there ([] when nothing is to be removed).

    `writes` names the files the command itself writes besides a model (the tokenizer's files for
    `train-tokenizer`, `model.onnx` for `export`): one of them already there is finished work too. Such a command
    trains nothing, so its refusal does not offer --resume_from_checkpoint."""
    model_folder, tokenizer_folder = _source_folder(model_source), _source_folder(tokenizer_source)
    if model_folder and _same_folder(model_folder, output_dir):
        raise OutputFolderError(
            f"--output_dir {output_dir} is the folder of --model_name_or_path {model_source}: the job would replace "
            "the model it starts from. Pass another --output_dir (to continue this run instead, pass "
            "--resume_from_checkpoint latest without --model_name_or_path)."
        )
    if tokenizer_folder and _same_folder(tokenizer_folder, output_dir) and not resume:
        raise OutputFolderError(
            f"--output_dir {output_dir} is the folder of --tokenizer_name_or_path {tokenizer_source}: the job would "
            "replace the tokenizer it reads. Pass another --output_dir, or --resume_from_checkpoint to continue the "
            "run saved there."
        )
    found = finished_files(output_dir, writes)
    if not found or resume:
        return []
    if not overwrite:
        resuming = "" if writes else "--resume_from_checkpoint latest to continue that run, "
        raise OutputFolderError(
            f"--output_dir {output_dir} holds another run's files ({_shown(found)}). Pass another --output_dir, "
            f"{resuming}or --overwrite_output_dir to remove its model, checkpoints and results first."
        )
    return removable_run_files(output_dir, writes)


def finished_files(folder: str, writes: tuple[str, ...] = ()) -> list[str]:
    """Names in `folder` that are finished work: another run's model, weights or checkpoints, and any of the files
    `writes` names (what the command about to run would write over), sorted. The files of a publish killed halfway
    (`albert_hf.output_files.pending_files`) are not finished work: the same command run again replaces them."""
    present = set(run_files(folder))
    if writes and os.path.isdir(folder):
        present |= set(writes) & set(os.listdir(folder))
    return sorted(present - pending_files(folder)) if present else []


def _shown(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _damaged(folder: str, checkpoints: list[str]) -> str:
    """'checkpoint-2 is damaged (<the file missing or unreadable>)' for `checkpoints`, the newest first."""
    from .reliability import checkpoint_problem

    newest = sorted(checkpoints, key=lambda name: int(CHECKPOINT_NAME.match(name).group(1)), reverse=True)
    shown = [f"{name} is damaged ({checkpoint_problem(os.path.join(folder, name))})" for name in newest[:3]]
    return "; ".join(shown) + (f"; and {len(newest) - 3} more" if len(newest) > 3 else "")


def check_resume_target(output_dir: str, resume_from_checkpoint) -> None:
    """Refuse `--resume_from_checkpoint latest` (or True) over a folder holding a finished model and no complete
    checkpoint: there is nothing to resume, and starting afresh would overwrite that model. (Runs that save no
    checkpoint, e.g. the quickstart's, leave just their model.) A path or None is left to resumption itself."""
    from .reliability import RESUME_LATEST_VALUES, latest_checkpoint

    latest = resume_from_checkpoint is True or str(resume_from_checkpoint).lower() in RESUME_LATEST_VALUES
    if not latest or latest_checkpoint(output_dir) is not None:
        return
    found = run_files(output_dir)
    damaged = [name for name in found if CHECKPOINT_NAME.match(name)]
    if damaged and len(damaged) == len(found):  # checkpoints, none complete, and no model
        raise OutputFolderError(
            f"--resume_from_checkpoint {resume_from_checkpoint}: --output_dir {output_dir} holds no complete "
            f"checkpoint to resume from: {_damaged(output_dir, damaged)}. Pass --resume_from_checkpoint with a "
            "complete checkpoint, or --overwrite_output_dir without --resume_from_checkpoint to start the run again."
        )
    if found:
        model = [name for name in found if name not in damaged]
        also = f" ({_damaged(output_dir, damaged)})" if damaged else ""
        broken = _model_problem(output_dir, model)
        kind = f"a model whose save did not finish ({broken})" if broken else f"a finished model ({_shown(model)})"
        raise OutputFolderError(
            f"--resume_from_checkpoint {resume_from_checkpoint}: --output_dir {output_dir} holds {kind} and no "
            f"complete checkpoint to resume from{also}, so the run would start from step 0 and replace that model. "
            "Pass another --output_dir, or --overwrite_output_dir without --resume_from_checkpoint to replace it."
        )


def _model_problem(folder: str, names: list[str]) -> str | None:
    """Why the model of `folder` (its files `names`) cannot be loaded, naming the file, or None: a weights file
    truncated by a killed save, or no weights beside config.json."""
    from .checkpoints import weights_file_problem

    weights = [name for name in names if name.endswith(WEIGHTS_FILE_SUFFIXES)]
    if "config.json" in names and not weights:
        return f"{os.path.join(folder, 'config.json')} and no weights file"
    for name in weights:
        problem = weights_file_problem(os.path.join(folder, name))
        if problem is not None:
            return problem
    return None


# --------------------------------------------------------------------------------------------------------------------
# The lock
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class FolderLock:
    """The lease on an output folder's lock file, held (and renewed) by this process until `release`.

    A job's lease (`stops_job`, set by `open_output_folder`) also watches its folder: once the folder or the lock
    file is gone, or the lock names another job, the renewal that notices records why (`lost`), the job's writes
    into the folder are refused (`albert_hf.output_files.watch_folder`), and the job's main thread is interrupted,
    so it stops at once instead of making the folder again; the command then reports the loss, never success."""

    path: str
    created_folder: bool = False  # the folder did not exist before this job took the lock
    holder: dict = field(default_factory=dict)  # what this process wrote into the lock file; never changes
    checked: bool = False  # the folder was checked for another run's files since this lease was taken
    stops_job: bool = False  # interrupt the main thread when the lease is lost (a job's lease; not a bare lock)
    lost: str | None = None  # why the lease was lost, once a renewal noticed
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    # (device, inode) of the folder when the lock was taken: a folder deleted and made again (Trainer makes its
    # output folder at each save) is another folder.
    _identity: tuple[int, int] | None = field(default=None, repr=False)

    def __post_init__(self):
        if self._identity is None:
            self._identity = _identity(self.folder)

    @property
    def lease_seconds(self) -> float:
        return float(self.holder.get("lease_seconds", DEFAULT_LEASE_SECONDS))

    @property
    def folder(self) -> str:
        return os.path.dirname(self.path)

    def is_held(self) -> bool:
        """Whether the lock file still names this lease (no other job took it over)."""
        return bool(self.holder) and read_lock(self.path) == self.holder

    def loss(self) -> str | None:
        """Why this process no longer holds the folder (`lost`, or what a look now finds), or None while it does.
        A folder deleted is named as such, also when a renewal first saw its lock go (the deletion under way): a lock
        gone from a folder still there is looked at once more, after the moment `rm -r` takes to reach the folder."""
        if not self._stop.is_set():
            now = self._problem()
            if now is not None and not now.startswith(FOLDER_DELETED) and not os.path.exists(self.path):
                time.sleep(LOOK_AGAIN_SECONDS)
                now = self._problem() or now
            if self.lost is None or (now is not None and now.startswith(FOLDER_DELETED)):
                self.lost = now or self.lost
        return self.lost

    def release(self) -> None:
        """Stop renewing and remove the lock file if it is still this lease's (idempotent; a file another job took
        over stays), and the folder too when this job made it and left nothing in it: a job refused after taking the
        lock (bad data, a tokenizer that does not fit) leaves no empty folder behind to be mistaken for a run."""
        if _HELD.get(self.path) is self:
            del _HELD[self.path]
        self._stop.set()
        unwatch_folder(self.folder)
        if self.holder and _remove_if_unchanged(self.path, self.holder) and self.created_folder:
            with contextlib.suppress(OSError):  # not empty, or gone: nothing to do
                os.rmdir(self.folder)

    def _start_renewing(self) -> None:
        threading.Thread(target=self._renew, name=f"albert_hf lease {self.path}", daemon=True).start()

    def _renew(self) -> None:
        """Renew the lease every `lease_seconds / RENEWALS_PER_LEASE` until released. Once the folder or the lock
        file is gone, or the lock names another job (this one stalled past its lease and was taken over), say so and
        stop: renewing then would keep alive a lease that is not ours, and `release` leaves that file alone. A job's
        lease stops the job too (`stops_job`)."""
        while not self._stop.wait(self.lease_seconds / RENEWALS_PER_LEASE):
            problem = self._renew_once()
            if problem is None:
                continue
            if not self._stop.is_set():  # not the file `release` removed meanwhile
                self.lost = problem
                logger.error(
                    "The lock of %s is no longer this job's: %s. This job stops renewing it; another job may be "
                    "writing into the folder, stop one of them.",
                    self.folder,
                    problem,
                )
                if self.stops_job:
                    _interrupt_main_thread()
            return

    def _problem(self) -> str | None:
        """Why the lock file no longer names this lease (None while it does)."""
        if _identity(self.folder) != self._identity:  # gone, or made again since
            return f"{FOLDER_DELETED} (with its lock {os.path.basename(self.path)})"
        found = read_lock(self.path)
        if found is None:
            return f"{self.path} was removed"
        if found != self.holder:
            return f"{self.path} now names another job ({_describe(found)})"
        return None

    def _renew_once(self) -> str | None:
        """Touch the lock file (its mtime is the renewal time) if it still names this lease; None, or why not.
        A takeover between the check and the touch would make us touch the new holder's lease: harmless, that
        one is alive."""
        problem = self._problem()
        if problem is not None:
            return problem
        try:
            os.utime(self.path)  # no times given: "now" by the clock that stamps the file (see _age_seconds)
        except OSError as error:
            return f"{self.path} cannot be renewed ({error})"
        return None


FOLDER_DELETED = "the folder was deleted or moved"
# How long a lock found gone waits before the folder is looked at again (`FolderLock.loss`).
LOOK_AGAIN_SECONDS = 0.5


def _identity(folder: str) -> tuple[int, int] | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _interrupt_main_thread() -> None:
    """Stop what the main thread is doing with a KeyboardInterrupt, which the error boundary of the command
    (`albert_hf.error_boundary.run_command`) reports as the lost folder (`lost_folder`). A real SIGINT where Python's own handler
    takes it, so that a blocking call (a sleep, a read) is interrupted too; otherwise (SIGINT ignored, as in a
    background job of a script, or handled by other code) the exception is raised in the main thread directly, at
    its next Python instruction."""
    import ctypes
    import signal

    main = threading.main_thread()
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.pthread_kill(main.ident, signal.SIGINT)
    else:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(main.ident), ctypes.py_object(KeyboardInterrupt))


def lost_folder() -> str | None:
    """The one line of a job that lost its output folder while it ran (deleted, its lock removed or taken over), or
    None: a job that lost it never reports success, even when it finished before a renewal noticed."""
    for lock in list(_HELD.values()):
        problem = lock.loss()
        if problem is not None and not problem.startswith(FOLDER_DELETED):
            # A lock removed from a folder that still exists may be a deletion of the whole folder under way
            # (`rm -r` removes the files first): wait a moment to name it for what it is.
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline and _identity(lock.folder) == lock._identity:
                time.sleep(0.05)
            problem = lock.loss()
        if problem is not None:
            return (
                f"--output_dir {lock.folder}: {problem} while the job ran. The job stopped; what it wrote there is "
                "incomplete."
            )
    return None


def interrupted_state() -> str:
    """What a job interrupted (Ctrl-C) leaves in its output folders, for the line of the error boundary: the newest
    complete checkpoint to resume from, else the files it wrote, else that nothing was written."""
    from .reliability import latest_checkpoint

    folders = [lock.folder for lock in _HELD.values()]
    if not folders:
        return "nothing was written"
    said = []
    for folder in folders:
        checkpoint = latest_checkpoint(folder, marked=True)
        written = [path.name for path in written_files(folder)]
        if checkpoint is not None:
            said.append(
                f"the newest complete checkpoint is {checkpoint}; the same command with --resume_from_checkpoint "
                "latest continues the run"
            )
        elif any(CHECKPOINT_NAME.match(name) for name in run_files(folder)):
            said.append(f"{folder} holds no complete checkpoint to resume from")
        elif written:
            said.append(f"it wrote {_shown(list(dict.fromkeys(written)))} to {folder}, and no checkpoint")
        else:
            said.append(f"nothing was written to {folder}")
    return "; ".join(said)


_HELD: dict[str, FolderLock] = {}


def lease_seconds() -> float:
    """The lease a lock taken now states: `ALBERT_HF_LEASE_SECONDS` (seconds, > 0), by default 600."""
    raw = os.environ.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"{LEASE_ENV}={raw!r}: expected a number of seconds greater than 0.")
    return value


def _this_holder(lease: float) -> dict:
    return {
        # Tells two leases of one pid apart (a container restarted on the same host gets the same pid).
        "lease_id": uuid.uuid4().hex,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": _command_line(sys.argv),
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "lease_seconds": lease,
    }


def _command_line(argv: list[str]) -> str:
    """`argv` as one string, the value of any --*token*/--*password*/--*secret* option replaced by "***"."""
    shown, hide_next = [], False
    for arg in argv:
        name, equals, _ = arg.partition("=")
        if hide_next:
            shown.append("***")
        elif equals and _is_secret_option(name):
            shown.append(f"{name}=***")
        else:
            shown.append(arg)
        hide_next = _is_secret_option(arg)
    return " ".join(shown)


def _is_secret_option(arg: str) -> bool:
    """Whether `arg` names an option whose value is a secret, in any spelling or abbreviation argparse accepts."""
    if _SECRET_OPTION.match(arg):
        return True
    name = arg.lower().replace("-", "_").replace("__", "--", 1)
    return any(len(name) > len("--hub_") and secret.startswith(name) for secret in _SECRET_OPTION_NAMES)


def _pid_is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def read_lock(path: str) -> dict | None:
    """The holder a lock file names (lease_id, pid, host, command, started, lease_seconds); None when there is no lock
    file, {} when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            holder = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _read_written(path: str) -> dict | None:
    """`read_lock`, waiting up to half a second for a file being written: a job that has just created its lock
    (`_try_create`) writes into it a moment later, and on a network file system other hosts see the text only
    once the file is closed."""
    for _ in range(10):
        holder = read_lock(path)
        if holder != {}:
            return holder
        time.sleep(0.05)
    return holder


def _describe(holder: dict) -> str:
    return (
        f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}: {holder.get('command')!r}"
    )


def _try_create(path: str, holder: dict) -> bool:
    """Create the lock file naming `holder`, atomically (fails if it exists); whether it was created."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(holder))  # one write: a reader finds the file empty or whole (see _read_written)
        handle.flush()
        os.fsync(handle.fileno())
    return True


def _age_seconds(path: str, mtime_ns: int) -> float:
    """Seconds since `mtime_ns`, the lock file's last renewal, by the clock that stamped it.

    Staleness is judged from the file's mtime, not from a time the holder writes into it: the holder's clock and
    ours may disagree (another node, a restored spot instance), and on a network file system the server stamps the
    mtime, by its own clock, which may disagree with ours too. So "now" is read the same way: the mtime of a probe
    file created beside the lock at this moment, stamped by that same server (or by this kernel, on a local disk).
    Left is the client's attribute cache (NFS serves a stat up to about a minute old), small against the lease."""
    probe = f"{path}.{uuid.uuid4().hex}.probe"
    try:
        descriptor = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:  # a folder we cannot write into: our clock is the best left
        return time.time() - mtime_ns / 1e9
    try:
        now_ns = os.fstat(descriptor).st_mtime_ns
    finally:
        os.close(descriptor)
        with contextlib.suppress(OSError):
            os.remove(probe)
    return (now_ns - mtime_ns) / 1e9


def _remove_if_unchanged(path: str, expected: dict, mtime_ns: int | None = None) -> bool:
    """Remove the lock file at `path` if it still names `expected` (and, with `mtime_ns`, was not renewed since);
    whether this call removed it.

    POSIX has no remove-if-unchanged, and a check followed by a remove could remove a lock another job created
    between the two. So the file is first renamed to a name only this call uses (rename is atomic: of two jobs
    renaming the one file, one gets it, the other finds nothing) and checked there. A file that is not the one
    judged (another job took over or started between our look and our rename, or the holder renewed its lease) is
    put back with link, which fails rather than replace a lock created at `path` meanwhile."""
    if read_lock(path) != expected:
        return False
    aside = f"{path}.{uuid.uuid4().hex}.aside"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    try:
        unchanged = read_lock(aside) == expected and mtime_ns in (None, os.stat(aside).st_mtime_ns)
        if not unchanged:
            _put_back(aside, path)
        return unchanged
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(aside)


def _put_back(aside: str, path: str) -> None:
    try:
        os.link(aside, path)
    except FileExistsError:
        logger.error("Could not put back the lock %s moved aside by mistake: a new lock was created meanwhile.", path)
    except OSError:  # a file system without hard links
        if not os.path.exists(path):
            os.rename(aside, path)


@dataclass
class _Found:
    """A lock file found in the way: the holder it names and how long ago it was last renewed."""

    holder: dict
    mtime_ns: int
    age: float

    @property
    def lease(self) -> float | None:
        """The lease the holder stated; None for a lock of an older albert_hf, which does not renew its lock."""
        lease = self.holder.get("lease_seconds")
        return float(lease) if isinstance(lease, (int, float)) and lease > 0 else None

    def expired(self) -> bool:
        return self.lease is not None and self.age > self.lease

    def renewal(self) -> str:
        """When the lease was last renewed and when it expires, as times of this machine's clock."""
        renewed = time.time() - self.age
        if self.age >= 0:
            text = f"last renewed {_utc(renewed)} ({self.age:.0f} s ago)"
        else:  # stamped by a clock ahead of ours: the holder's host, or a file server, whose clock disagrees
            text = (
                f"last renewed {_utc(renewed)}, {-self.age:.0f} s ahead of this machine's clock (the clocks that "
                "stamp the lock file and this machine's disagree)"
            )
        if self.lease is None:
            return text
        return (
            f"{text}, lease {self.lease:g} s {'expired' if self.expired() else 'expires'} {_utc(renewed + self.lease)}"
        )


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(round(seconds), datetime.timezone.utc).isoformat(timespec="seconds")


def _find(path: str) -> _Found | None:
    holder = _read_written(path)
    try:
        mtime_ns = os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None
    if holder is None:
        return None
    return _Found(holder, mtime_ns, _age_seconds(path, mtime_ns))


def _verdict(found: _Found) -> str:
    """ "gone" (a dead holder on this host: take over at once), "expired" (take over), or "live" (refuse)."""
    holder = found.holder
    if holder.get("host") == socket.gethostname():
        # Our own pid on a lock that is not our lease (those `acquire_lock` keeps) is an earlier process with the
        # same pid: a container restarted on this host.
        if holder["pid"] == os.getpid() or not _pid_is_alive(holder["pid"]):
            return "gone"
        return "live"  # alive here, even past its lease: stopped (SIGSTOP, a suspended job) rather than gone
    return "expired" if found.expired() else "live"


def _refusal(folder: str, path: str, found: _Found) -> FolderInUseError:
    if found.lease is None and found.holder.get("host") != socket.gethostname():
        after = f"if that job is gone (it ran on another machine), remove {path}."
    else:
        after = f"if that job is gone, the folder is free once its lease expires, or at once when {path} is removed."
    return FolderInUseError(
        f"--output_dir {folder} is in use by another job ({_describe(found.holder)}; {found.renewal()}). Wait for "
        f"it to finish or pass another --output_dir; {after}"
    )


def check_output_dir_kind(output_dir: str) -> None:
    """Refuse an --output_dir that cannot be a folder, before anything is made: empty, or a file (a symlink to a
    file, a dangling symlink), or below a file."""
    if not str(output_dir).strip():
        raise OptionError(f"--output_dir {output_dir!r} is empty: pass the folder the job writes into.")
    path = os.path.abspath(os.path.expanduser(output_dir))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise OutputFolderError(
            f"--output_dir {output_dir} is {what_is_there(path)}, not a folder: pass the folder the job writes into."
        )
    above = os.path.dirname(path)
    while not os.path.lexists(above) and above != os.path.dirname(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        raise OutputFolderError(
            f"--output_dir {output_dir}: {above} is {what_is_there(above)}, not a folder, so no folder can be made "
            "below it."
        )


def acquire_lock(folder: str) -> FolderLock:
    """Take the lease on `folder`'s lock (the folder is created if absent) for this process and keep renewing it
    until `release`, or raise `FolderInUseError` naming the job holding it. A lease of this very process is kept;
    the lock of a dead process on this host, and a lease not renewed for longer than it states (on any host), are
    taken over with a warning."""
    check_output_dir_kind(folder)
    lease = lease_seconds()  # a bad value refused before anything is created
    created_folder = not os.path.isdir(folder)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, LOCK_NAME)
    held = _HELD.get(path)
    if held is not None and held.is_held():
        return held
    holder = _this_holder(lease)
    for _ in range(3):  # a lock removed between our attempts: try again
        if _try_create(path, holder):
            lock = _HELD[path] = FolderLock(path, created_folder, holder)
            lock._start_renewing()
            return lock
        found = _find(path)
        if found is None:
            continue
        if not isinstance(found.holder.get("pid"), int) or found.holder["pid"] <= 0:
            raise FolderInUseError(
                f"--output_dir {folder} has a lock file {path} that cannot be read. If no job is writing into "
                "this folder, remove that file and start again."
            )
        verdict = _verdict(found)
        if verdict == "live":
            raise _refusal(folder, path, found)
        # Of several jobs taking over one stale lock at once, one removes it (`_remove_if_unchanged`) and the
        # atomic create above lets one job in: the others find its fresh lease and are refused.
        if _remove_if_unchanged(path, found.holder, found.mtime_ns):
            gone = "a job that is gone" if verdict == "gone" else "a job whose lease expired"
            logger.warning(
                "Taking over the lock of %s from %s (%s; %s).", folder, gone, _describe(found.holder), found.renewal()
            )
    raise FolderInUseError(f"--output_dir {folder}: could not create the lock file {path}; another job races.")


def training_ended(output_dir: str) -> None:
    """The training of the job that holds `output_dir` has ended: a loss of the folder from now on no longer
    interrupts the main thread. What the job still writes there (its final model, results, card) goes through the
    writer, which refuses a lost folder (`albert_hf.output_files.watch_folder`), and a command still reports the loss
    (`lost_folder`); but a process that runs more than one job (a notebook, a sweep, a benchmark) must not get a
    KeyboardInterrupt in a later job because an earlier job's folder was deleted. The lease itself is kept, and
    renewed, until the process releases it."""
    lock = _HELD.get(os.path.join(output_dir, LOCK_NAME))
    if lock is not None:
        lock.stops_job = False


def held_folders() -> list[str]:
    """The output folders whose locks this process holds."""
    return [lock.folder for lock in _HELD.values()]


def release_held_locks() -> None:
    """Release every lock this process holds (at the end of a command, and at exit)."""
    for lock in list(_HELD.values()):
        lock.release()


atexit.register(release_held_locks)


# --------------------------------------------------------------------------------------------------------------------
# At the start of a job
# --------------------------------------------------------------------------------------------------------------------


def open_run_folder(training_args, model_args=None) -> None:
    """Check the job's model and tokenizer sources (readable, a model folder with weights, none of them NaN or
    inf), then on the main process lock `--output_dir`, check it
    (`check_output_folder`) and with --overwrite_output_dir remove the old run's files; every process raises the
    main process's error, if any."""
    from .checkpoints import check_finite_weights, check_pretrained_source

    model_source = getattr(model_args, "model_name_or_path", None)
    tokenizer_source = getattr(model_args, "tokenizer_name_or_path", None)
    if tokenizer_source:
        check_pretrained_source(tokenizer_source, option="--tokenizer_name_or_path", needs_weights=False)
    if model_source:
        check_pretrained_source(model_source, option="--model_name_or_path")
        check_finite_weights(model_source, option="--model_name_or_path")
    error = None
    if training_args.process_index == 0:
        try:
            _lock_and_prepare(training_args, model_args, model_source, tokenizer_source)
        except UserError as raised:
            error = raised
    error = _main_process_verdict(error, training_args)
    if error is not None:
        raise error


def hold_output_folder(training_args) -> None:
    """Hold the lease on `training_args.output_dir` (the reliability plugin's `attach_reliability` asks): taken on the
    main process unless this process holds it already (`open_run_folder` took it at the start of a job), renewed
    until the process ends. Another job holding it is a `FolderInUseError` on every process of the launch. The
    checks of what the folder holds are the job's (`open_run_folder`), before any data or model work."""
    error = None
    if training_args.process_index == 0:
        try:
            acquire_lock(training_args.output_dir)
        except UserError as raised:
            error = raised
    error = _main_process_verdict(error, training_args)
    if error is not None:
        raise error


def guard_output_folder(training_args, resume_from_checkpoint) -> None:
    """The checks of `open_run_folder` on a folder this process holds the lease on but has not checked (a Trainer of
    one's own with the reliability plugin, `resume_training` asks): a folder holding another run's model or
    checkpoints is refused unless the run resumes (`resume_from_checkpoint`), and "latest" over a finished model with
    no complete checkpoint is refused (`check_resume_target`). Nothing when the job checked it at its start. Every
    process raises the main process's error, if any."""
    error = None
    if training_args.process_index == 0:
        lock = _HELD.get(os.path.join(training_args.output_dir, LOCK_NAME))
        if lock is None or not lock.checked:
            resume = resume_from_checkpoint not in (None, False)
            try:
                if resume:
                    check_resume_target(training_args.output_dir, resume_from_checkpoint)
                check_output_folder(training_args.output_dir, resume=resume)
            except UserError as raised:
                error = raised
            if lock is not None and error is None:
                lock.checked = True
    error = _main_process_verdict(error, training_args)
    if error is not None:
        raise error


def _lock_and_prepare(training_args, model_args, model_source, tokenizer_source) -> None:
    resume = training_args.resume_from_checkpoint
    overwrite = bool(getattr(model_args, "overwrite_output_dir", False))
    if resume:
        check_resume_target(training_args.output_dir, resume)
    lock = open_output_folder(training_args.output_dir, overwrite, model_source, tokenizer_source, resume=bool(resume))
    try:
        check_job_files(training_args.output_dir, resume=bool(resume), push_to_hub=training_args.push_to_hub)
    except UserError:
        lock.release()
        raise


def check_job_files(folder: str, resume: bool = False, push_to_hub: bool = False) -> None:
    """Refuse, before any work, a training job's folder holding a file no job wrote under a name the job's model
    files must have (`MODEL_FILE_NAMES`, weights), which the final save could not write beside it; with
    --push_to_hub, a README.md no job wrote too, which the push would upload as the model card. The job's other
    files (card, results, predictions) go beside a user's file of their name (`albert_hf.output_files`).

    A run continued (`resume`) in a folder written by a version that kept no record of its files: its run files
    (`removable_run_files`) are taken as the run's own, and the log says so."""
    if not os.path.isdir(folder):
        return
    names = [name for name in os.listdir(folder) if name in MODEL_FILE_NAMES or _marks_a_run(name)]
    names = [name for name in names if not CHECKPOINT_NAME.match(name)]
    if resume and names and not read_manifest(folder):
        adopted = adopt_files(folder, removable_run_files(folder))
        if adopted:
            logger.warning(
                "%s keeps no record of the files its run wrote (an earlier albert_hf): the run files there (%s) are "
                "taken as the run's own.",
                folder,
                _shown(adopted),
            )
    foreign = foreign_files(folder, names)
    if foreign:
        raise OutputFolderError(
            f"--output_dir {folder} holds {_shown(foreign)}, which no albert_hf job wrote: the job's model files have "
            "these names (they are read by name). Move them, pass another --output_dir, or --overwrite_output_dir to remove them first."
        )
    if push_to_hub and foreign_files(folder, ["README.md"]):
        raise OutputFolderError(
            f"--output_dir {folder} holds a README.md that no job wrote: --push_to_hub would upload it as the "
            "model card (the job's card would go beside it). Move it, or pass another --output_dir."
        )


def open_output_folder(
    output_dir: str,
    overwrite: bool = False,
    model_source: str | None = None,
    tokenizer_source: str | None = None,
    resume: bool = False,
    writes: tuple[str, ...] = (),
) -> FolderLock:
    """Lock `output_dir` for this process, check it (`check_output_folder`) and with `overwrite` remove the finished
    work there; the lock is released again when the folder is refused. The one guard of every command that writes a
    folder: the training jobs (through `open_run_folder`), `train-tokenizer` and `export`."""
    lock = acquire_lock(output_dir)
    lock.stops_job = True
    watch_folder(output_dir, lock.loss)
    try:
        to_remove = check_output_folder(output_dir, model_source, tokenizer_source, overwrite, resume, writes)
    except UserError:
        lock.release()
        raise
    remove_stale_staging(output_dir)  # no writer is at work here: we hold the lock
    if to_remove:
        remove_run_files(output_dir, writes)
    lock.checked = True
    return lock


def _main_process_verdict(error: UserError | None, training_args) -> UserError | None:
    """The main process's error (or None) on every process of the launch."""
    import torch.distributed as dist

    if training_args.world_size <= 1 or not (dist.is_available() and dist.is_initialized()):
        return error
    shared = [error]
    dist.broadcast_object_list(shared, src=0)
    return shared[0]
