"""The one error boundary of every job: [`run_command`], what `albert-hf <command>` runs each command in, and what a
job script copied out of `albert_hf/scripts/` calls under `if __name__ == "__main__"`, so that the copy gives the same
one-line errors and exit statuses. Each family of failure becomes one line, `albert-hf <command>: error: <message>`,
naming the cause and the file, option or folder, with its exit status:

    2  what was given: an option, a file, its data (`UserError`, argparse's errors, and what libraries raise for the
       user's data: JSON and UTF-8 decoding, safetensors headers, transformers' "cannot load" errors, the checks of
       the configuration, model and tokenizer modules, which travel as remote code and raise plain `ValueError`s)
    3  the machine's state: no space left (also torch's "unexpected pos" of a save to a full disk; the file named is
       the output folder's being written), a read-only folder or a permission refused (a cache folder named as
       the cache, with what moves it), no network; the output folder deleted, or its lock removed or taken over,
       while the job ran (the lease stops the job: `albert_hf.training.run_folder.FolderLock`; such a job never reports
       success)
    4  an optional dependency missing: the line gives the `pip install "albert_hf[<extra>]"` to run
    130  interrupted (Ctrl-C): one line naming what the job left, the newest complete checkpoint and the command
       that continues from it, or that nothing was written
    128+N  training stopped by signal N, as schedulers announce a preemption or a time limit: 143 for SIGTERM, 138
       for SIGUSR1 (`sbatch --signal=USR1@<seconds>`). A complete checkpoint of the step reached was written, and
       no final model, results or card (`StoppedBySignal`, `albert_hf.training.preemption`); the line names the
       checkpoint, and the same command with `--resume_from_checkpoint latest` continues the run exactly. The
       status a shell gives a process killed by that signal, so a scheduler reads the job as stopped, not done.

`--debug` (anywhere on the command line) or `ALBERT_HF_DEBUG=1` shows the traceback too. Any other exception is a
fault of albert_hf or of a library below it and keeps its traceback (exit status 1). [`explain_failure`] is the one
place that turns a failure into its line.
"""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import sys
import traceback
from pathlib import Path

from .errors import MachineStateError, StoppedBySignal, UserError
from .output_files import out_of_space

DEBUG_FLAG = "--debug"
USER_ERROR_STATUS = 2  # argparse's status for a bad command line
MACHINE_STATE_STATUS = 3
MISSING_EXTRA_STATUS = 4
INTERRUPTED_STATUS = 130  # 128 + SIGINT, what a shell reports for a process stopped by Ctrl-C

# What the path of a file the user named can be instead, by errno.
NOT_A_FILE = {
    errno.ENOENT: "no such file or folder",
    errno.EISDIR: "a folder, not a file",
    errno.ENOTDIR: "no such file",
}
# Optional modules -> the extra of albert_hf that installs them.
EXTRAS = {
    "fugashi": "ja",
    "unidic_lite": "ja",
    "jieba": "zh",
    "onnx": "onnx",
    "onnxruntime": "onnx",
    "onnxscript": "onnx",
    "deepspeed": "deepspeed",
}
# Names of the exception classes of the network libraries (requests, httpx, urllib3, huggingface_hub, socket) that
# mean the network or the Hub cannot be reached.
NETWORK_ERRORS = frozenset(
    {
        "ConnectionError",
        "ConnectError",
        "ConnectTimeout",
        "ConnectTimeoutError",
        "NewConnectionError",
        "MaxRetryError",
        "gaierror",
        "OfflineModeIsEnabled",
        "LocalEntryNotFoundError",
    }
)
# The remote-code modules import nothing of the package, so their checks of what was given are plain ValueErrors:
# those of the configuration and the tokenizer, and of a model being built (the model's forward is not checked here).
REMOTE_CODE_CHECKS = {"configuration.py": None, "tokenization.py": None, "modeling.py": "__init__"}


def debug_wanted(argv: list[str]) -> tuple[bool, list[str]]:
    """(whether tracebacks of user errors are wanted, argv without the global --debug flag), so that no command
    sees the flag; ALBERT_HF_DEBUG=1 asks for them too.

    TrainingArguments has a `--debug <options>` of its own (`--debug underflow_overflow`): after the command, a
    `--debug` followed by a value is that option and stays.
    """
    rest = []
    for position, arg in enumerate(argv):
        following = argv[position + 1] if position + 1 < len(argv) else "--"
        if arg == DEBUG_FLAG and (position == 0 or following.startswith("-")):
            continue
        rest.append(arg)
    return len(rest) < len(argv) or os.environ.get("ALBERT_HF_DEBUG", "") not in ("", "0"), rest


def run_command(command: str, function, argv: list[str] | None = None, debug: bool | None = None) -> int:
    """`function(argv)` inside the error boundary of `albert-hf <command>`: what `albert-hf` does for each command,
    and what a job script copied out of `albert_hf/scripts/` calls under `if __name__ == "__main__"`, so that a
    forked script gives the same one-line errors and exit statuses. `argv` is the command line after the command
    (sys.argv[1:] when None); `debug` is read from it (--debug) and ALBERT_HF_DEBUG when None."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if debug is None:  # read as after the command, where `--debug <value>` is TrainingArguments' own option
        debug, (_, *argv) = debug_wanted([command, *argv])
    from .training.run_folder import interrupted_state, lost_folder, release_held_locks

    try:
        result = function(argv)
        _end_process_group()
        lost = lost_folder()  # a job whose folder went while it ran does not report success
        if lost is not None:
            return _say(command, f"error: {lost}", MACHINE_STATE_STATUS)
    except StoppedBySignal as stop:  # its status is what the scheduler reads, --debug or not
        return _say(command, str(stop), stop.exit_status)
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        lost = lost_folder()  # the lease stops a job whose folder went (`albert_hf.training.run_folder.FolderLock`)
        if lost is not None:
            return _say(command, f"error: {lost}", MACHINE_STATE_STATUS)
        return _say(command, f"interrupted (Ctrl-C): {_interrupted_state(interrupted_state)}", INTERRUPTED_STATUS)
    except Exception as error:
        lost = lost_folder()  # what failed once the folder went: the loss is the cause to name
        if lost is not None and not debug:
            return _say(command, f"error: {lost}", MACHINE_STATE_STATUS)
        failure = explain_failure(error, argv)
        if failure is None or debug:
            raise
        status, message = failure
        return _say(command, f"error: {message}", status)
    finally:
        release_held_locks()
    return int(result or 0)


def _end_process_group() -> None:
    """End the launcher's process group once the command has succeeded, every process together (a barrier: the main
    process may still be writing its card or results). A process that leaves alone, or leaves the group to
    interpreter shutdown, sometimes aborts there ("terminate called without an active exception": the backend's
    threads destroyed while still joinable), and the launcher then fails a job whose work is done. Not after a
    failure: the other processes may still wait in a collective, and the launcher ends them (as it ends one waiting
    here for a process that failed)."""
    if "torch" not in sys.modules:  # a command that never loaded torch started no process group
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _say(command: str, line: str, status: int) -> int:
    """Write `albert-hf <command>: <line>` on stderr in one write (print() writes the text and its newline apart, and
    the processes of a launch that stop together would interleave their lines on the shared stderr); `status`."""
    sys.stderr.write(f"albert-hf {command}: {line}\n")
    sys.stderr.flush()
    return status


def _interrupted_state(describe) -> str:
    try:
        return describe()
    except Exception as error:  # noqa: BLE001 - the line must come out, whatever the folder holds
        return f"the state of the output folder is unknown ({_first_line(error)})"


# --------------------------------------------------------------------------------------------------------------------
# The families of failure
# --------------------------------------------------------------------------------------------------------------------


def explain_failure(error: BaseException, argv: list[str]) -> tuple[int, str] | None:
    """(exit status, one-line message) for a failure of a known family, or None (a fault: keep the traceback).
    The exception and those it was raised from are asked in turn, the outermost first: a `UserError` raised from a
    decoding error keeps its own message."""
    for link in _chain(error):
        for family in (_user_input, _machine_state, _missing_extra, _user_data):
            found = family(link, argv)
            if found is not None:
                return found
    return None


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ if error.__suppress_context__ else error.__cause__ or error.__context__


def _user_input(error: BaseException, argv: list[str]) -> tuple[int, str] | None:
    if isinstance(error, UserError):
        return USER_ERROR_STATUS, str(error)
    if isinstance(error, OSError) and error.errno in NOT_A_FILE and error.filename:
        return USER_ERROR_STATUS, f"{error.filename}: {NOT_A_FILE[error.errno]}"
    return None


def _machine_state(error: BaseException, argv: list[str]) -> tuple[int, str] | None:
    if isinstance(error, MachineStateError):
        return MACHINE_STATE_STATUS, str(error)
    names = {cls.__name__ for cls in type(error).__mro__}
    if names & NETWORK_ERRORS:
        return MACHINE_STATE_STATUS, f"no network: cannot reach the Hub ({_first_line(error)})"
    code = error.errno if isinstance(error, OSError) else None
    if code in (errno.ENOSPC, errno.EDQUOT) or out_of_space(error):
        return MACHINE_STATE_STATUS, f"no space left on the device writing {_file_of(error)}{_free_space(argv)}"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        path = _file_of(error)
        kind = "read-only file system" if code == errno.EROFS else "permission denied"
        cache = _cache_folder(path, argv)
        if cache is not None:
            return MACHINE_STATE_STATUS, f"{path}: {kind}: {cache}"
        if _in_output_dir(path, argv):
            return MACHINE_STATE_STATUS, f"{path}: {kind}; choose another --output_dir"
        return MACHINE_STATE_STATUS, f"{path}: {kind}"
    return None


def _file_of(error: BaseException) -> str:
    return getattr(error, "filename", None) or file_in_use(error) or "a file"


def _is_within(path: str, folder: str | None) -> bool:
    if not folder:
        return False
    path, folder = os.path.realpath(os.path.expanduser(path)), os.path.realpath(os.path.expanduser(folder))
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _in_output_dir(path: str, argv: list[str]) -> bool:
    """Whether `path` is in the job's output folder (the folders it holds, or --output_dir of the command line)."""
    from .training.run_folder import held_folders

    return any(_is_within(path, folder) for folder in [*held_folders(), _option_value(argv, "--output_dir")])


def _cache_folder(path: str, argv: list[str]) -> str | None:
    """'it is in the <kind> cache folder <folder>; <what to do>' when `path` is in a cache a library keeps (the
    datasets cache, --cache_dir, the Hub's), else None: such a folder is set by an option or a variable, and another
    --output_dir would not help."""
    caches = [(_option_value(argv, "--cache_dir"), "the datasets cache folder", "pass a writable --cache_dir")]
    if "datasets" in sys.modules:
        caches.append(
            (
                sys.modules["datasets"].config.HF_DATASETS_CACHE,
                "the datasets cache folder",
                "set HF_DATASETS_CACHE to a writable folder",
            )
        )
    if "huggingface_hub" in sys.modules:
        constants = sys.modules["huggingface_hub"].constants
        caches.append((constants.HF_HUB_CACHE, "the Hub cache folder", "set HF_HUB_CACHE to a writable folder"))
        caches.append((constants.HF_HOME, "the Hugging Face cache folder", "set HF_HOME to a writable folder"))
    for folder, kind, advice in caches:
        if _is_within(path, os.fspath(folder) if folder else None):
            return f"it is in {kind} {folder}; {advice}"
    return None


def _free_space(argv: list[str]) -> str:
    """' (N MiB free on the disk of --output_dir X)' when the command names an --output_dir."""
    folder = _option_value(argv, "--output_dir")
    if folder is None:
        return ""
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return f" ({shutil.disk_usage(existing).free / 2**20:.0f} MiB free on the disk of --output_dir {folder})"


def _option_value(argv: list[str], option: str) -> str | None:
    for position, item in enumerate(argv):
        if item == option and position + 1 < len(argv):
            return argv[position + 1]
        if item.startswith(option + "="):
            return item.split("=", 1)[1]
    return None


def _missing_extra(error: BaseException, argv: list[str]) -> tuple[int, str] | None:
    if not isinstance(error, ImportError):
        return None
    module = (error.name or "").split(".")[0]
    if module in EXTRAS:
        extra = EXTRAS[module]
        return MISSING_EXTRA_STATUS, f'{module} is not installed: pip install "albert_hf[{extra}]"'
    if "pip install" in str(error):  # an ImportError of albert_hf that says what to install
        return MISSING_EXTRA_STATUS, _first_line(error)
    return None


def _user_data(error: BaseException, argv: list[str]) -> tuple[int, str] | None:
    """Errors libraries raise for the user's files and values, with the file the failing code was reading."""
    if isinstance(error, json.JSONDecodeError):
        detail = f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
    elif isinstance(error, UnicodeDecodeError):
        detail = f"not valid UTF-8{_decode_line(error)} ({error.reason})"
    elif type(error).__name__ == "SafetensorError":
        detail = f"not a readable safetensors file ({error})"
    elif isinstance(error, ValueError) and _remote_code_check(error):
        return USER_ERROR_STATUS, _first_line(error)
    elif (
        type(error) is OSError
        and error.errno is None
        and _raised_in_package(error, ("transformers", "huggingface_hub"))
    ):
        return USER_ERROR_STATUS, _first_line(error)  # from_pretrained's "cannot load" / "not a valid JSON file"
    else:
        return None
    source = file_in_use(error)
    return USER_ERROR_STATUS, f"{source}: {detail}" if source else detail


def _decode_line(error: UnicodeDecodeError) -> str:
    """' at line N' when the undecodable bytes are the start of the input (a whole file read at once)."""
    line = error.object[: error.start].count(b"\n") + 1
    return f" at line {line}" if isinstance(error.object, bytes) else ""


def file_in_use(error: BaseException) -> str | None:
    """The file the code that raised `error` was reading or writing: the innermost frame of its traceback holding the path of an
    existing file (or an open file) among its local variables."""
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    for frame in reversed(frames):
        for value in list(frame.f_locals.values()):
            path = value.name if isinstance(value, io.IOBase) else value
            if isinstance(path, (str, Path)) and len(str(path)) < 4096 and os.path.isfile(path):
                return str(path)
    return None


def _innermost_frame(error: BaseException):
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    return frames[-1] if frames else None


def _remote_code_check(error: BaseException) -> bool:
    """Whether `error` was raised by one of `REMOTE_CODE_CHECKS` (albert_hf's module, in the function named there)."""
    frame = _innermost_frame(error)
    if frame is None:
        return False
    folder, name = os.path.split(frame.f_code.co_filename)
    function = REMOTE_CODE_CHECKS.get(name, "")
    return os.path.basename(folder) == "albert_hf" and function in (None, frame.f_code.co_name)


def _raised_in_package(error: BaseException, packages: tuple[str, ...]) -> bool:
    """Whether the innermost frame of `error`'s traceback is in one of `packages`."""
    frame = _innermost_frame(error)
    return frame is not None and any(f"{os.sep}{package}{os.sep}" in frame.f_code.co_filename for package in packages)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
