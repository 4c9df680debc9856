"""One writer for every file a job writes into a folder: staged, atomic, and never over a file it did not write.

A job's files land in folders users keep their own files in too (a folder holding other files is used as it is), and
several have names a user's file may have: `README.md`, `RTE.tsv`, `predictions_test.tsv`, `spiece.model`. Written
with `open(path, "w")` they would replace such a file, write through a symlink into a file outside the folder, and
leave a truncated file under the name when the job is killed or the disk fills. Every file albert_hf writes into an
output folder goes through this module instead:

* **Staged and atomic.** The content is written under a hidden name in the same folder (created exclusively, so never
  through a link), flushed and fsynced, and given its name by one rename (`link` where the name is new, which fails
  rather than replace a file that appeared meanwhile). A kill or a full disk leaves the name as it was.
* **Never over a file the job did not write.** What is at the name is looked at without following links. It is the
  job's only when the folder's manifest, `_albert_hf.files.json`, records a file of that name with the same content
  (size and sha256), or when it is a model card rendered by albert_hf (cards written before the manifest existed).
  Anything else (a user's file, a symlink, a folder) stays as it is:

    - a file that must keep its name (a model's files, which loaders read by name: `keep_name=True`) is an
      [`OutputFileError`] naming it; the jobs look for such files before any work (`foreign_files`), so the error
      comes first;
    - any other file (the model card, results, predictions, plots) goes beside it, `README.albert_hf.md`,
      `RTE.albert_hf.tsv`, and a warning names both.
* **Recorded before it is named.** A file's manifest entry is written before its rename, so a file of the job is never
  without its record (a record without its file, after a kill, is harmless).
* **Whole folders.** `train-tokenizer`, `export` and `import` write into a staging folder inside the output folder
  ([`staged_folder`]) and publish it at the end; a failed or interrupted run publishes none of its files, and a killed
  one leaves a hidden staging folder that the next job on the folder removes ([`remove_stale_staging`]). A publish
  killed halfway leaves its files marked pending in the manifest ([`pending_files`]): not finished work.
* **Errors name the destination.** An `OSError` while writing (no space, a read-only disk) becomes an
  [`OutputWriteError`], an `OSError` of the same errno whose `filename` is the file of the output folder being
  written, not a file the failing library code held open (the installed tokenization.py that `save_pretrained`
  copies).
* **Folders under a lease.** A job's output folder is watched by its lease (`albert_hf.training.run_folder`): a write into a
  folder whose lease is lost (the folder or its lock deleted) is refused with a [`FolderLostError`] instead of making
  the folder again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import itertools
import json
import logging
import os
import shutil
import stat
import tempfile
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import MachineStateError, UserError

logger = logging.getLogger(__name__)

# "_" first, as the lock's name: Trainer's upload of an output folder (push_to_hub) leaves such names out.
MANIFEST_NAME = "_albert_hf.files.json"
MANIFEST_FORMAT = 1
# Hidden (a leading "."): uploads of the folder leave it out (albert_hf's own checkpoint uploads ignore ".*").
STAGING_PREFIX = ".albert_hf-staging-"
# What a job's file written beside a user's file of the same name carries in its name: README.albert_hf.md.
BESIDE_TAG = "albert_hf"
# Files up to this size are identified by the sha256 of their whole content; larger ones (model weights) by their
# size and the sha256 of `DIGEST_SAMPLES` evenly spaced samples, read in a few milliseconds.
FULL_DIGEST_LIMIT = 64 * 2**20
DIGEST_SAMPLES, DIGEST_SAMPLE_BYTES = 64, 2**16
# A model card rendered by albert_hf holds this sentence (albert_hf/model_cards/template.md): a README.md written by
# a version that kept no manifest is still the job's own.
CARD_SENTENCE = "ALBERT cuts BERT's parameter count with a factorized embedding"
# errno values of a file system without hard links: the new name is then given by rename, after a look.
NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}


class OutputFileError(UserError):
    """A file the job must write under its own name is in the way: a user's file, a symlink or a folder."""


class FolderLostError(MachineStateError):
    """The output folder a job holds was deleted, or its lock removed or taken over, while the job ran."""


class OutputWriteError(OSError):
    """An `OSError` (same errno) while writing a file of an output folder; `filename` is that file."""


# --------------------------------------------------------------------------------------------------------------------
# What a file is: the job's own, or not
# --------------------------------------------------------------------------------------------------------------------


def content_digest(path: str | os.PathLike) -> str:
    """An identity of a file's content: the sha256 of all of it up to `FULL_DIGEST_LIMIT` bytes, else of its size
    and `DIGEST_SAMPLES` evenly spaced samples."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= FULL_DIGEST_LIMIT:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
            return f"sha256:{digest.hexdigest()}"
        digest.update(str(size).encode())
        for index in range(DIGEST_SAMPLES):
            handle.seek(index * (size - DIGEST_SAMPLE_BYTES) // (DIGEST_SAMPLES - 1))
            digest.update(handle.read(DIGEST_SAMPLE_BYTES))
    return f"sha256-sampled:{digest.hexdigest()}"


def read_manifest(folder: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """{name: {"size", "digest", ["pending"]}} of the files the folder's manifest records; {} without one (or when
    it cannot be read: its files then count as nobody's, which keeps them)."""
    path = os.path.join(folder, MANIFEST_NAME)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return {}
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    files = manifest.get("files") if isinstance(manifest, dict) else None
    return {name: entry for name, entry in (files or {}).items() if isinstance(entry, dict)}


def _update_manifest(
    folder: Path, recorded: dict[str, dict[str, Any]] | None = None, published: Iterable[str] = ()
) -> None:
    """Record the entries `recorded` (name -> size and digest) in the manifest of `folder`, and clear the pending
    mark of the names `published`; entries of files no longer there are dropped. Read, changed and replaced in one
    go (a rename), so that writers of other names (the processes of a launch writing one tokenizer, say) lose none
    of each other's entries but in the moment between the read and the rename."""
    recorded, published = dict(recorded or {}), set(published)
    files = read_manifest(folder)
    files.update(recorded)
    for name in published:
        files.get(name, {}).pop("pending", None)
    kept = {name: entry for name, entry in sorted(files.items()) if name in recorded or os.path.lexists(folder / name)}
    text = json.dumps({"format": MANIFEST_FORMAT, "files": kept}, indent=1) + "\n"
    staging = folder / f"{STAGING_PREFIX}{uuid.uuid4().hex}-{MANIFEST_NAME}"
    _write_new_file(staging, text.encode("utf-8"))
    os.replace(staging, folder / MANIFEST_NAME)


def _entry(path: Path) -> dict[str, Any]:
    return {"size": os.path.getsize(path), "digest": content_digest(path)}


def is_own_file(path: str | os.PathLike, manifest: dict[str, dict[str, Any]] | None = None) -> bool:
    """Whether the regular file at `path` (never followed through a link) was written by a job: its folder's
    manifest records its content, or it is a model card rendered by albert_hf."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    entry = (read_manifest(path.parent) if manifest is None else manifest).get(path.name)
    if entry and entry.get("size") == info.st_size and entry.get("digest") == content_digest(path):
        return True
    return path.name == "README.md" and info.st_size < 2**20 and CARD_SENTENCE in path.read_text("utf-8", "replace")


def what_is_there(path: str | os.PathLike) -> str:
    """How a message names what is at `path`: a symlink (and where to), a folder, or a file."""
    path = Path(path)
    if path.is_symlink():
        return f"a symlink to {os.readlink(path)}"
    return "a folder" if path.is_dir() else "a file"


def foreign_files(folder: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """The names among `names` present in `folder` (as anything: a file, a symlink, a folder) that no job wrote."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    manifest = read_manifest(folder)
    return sorted(
        name for name in set(names) if os.path.lexists(folder / name) and not is_own_file(folder / name, manifest)
    )


def pending_files(folder: str | os.PathLike) -> set[str]:
    """Names a publish of a whole folder recorded and did not finish (it was killed halfway): present, the job's
    own by content, and not finished work."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    return {name for name, entry in manifest.items() if entry.get("pending") and is_own_file(folder / name, manifest)}


def adopt_files(folder: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Record the regular files among `names` in `folder` as the job's own (the files of a run written by a version
    that kept no manifest, which the job continues); returns the names recorded."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    adopted = {
        name: _entry(folder / name)
        for name in sorted(set(names))
        if name not in manifest and (folder / name).is_file() and not (folder / name).is_symlink()
    }
    if adopted:
        _update_manifest(folder, adopted)
    return sorted(adopted)


def folder_state(folder: str | os.PathLike) -> dict[str, tuple[int, int]]:
    """(size, modification time in ns) of each regular file directly in `folder`: what tells a file another program
    (re)wrote there since an earlier look."""
    state = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                state[entry.name] = (info.st_size, info.st_mtime_ns)
    return state


def claim_files(folder: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """Record the regular files among `names` in `folder`, as they are now, as the job's own: files the job had
    another library write by name (Trainer's copy of a checkpoint's model before an upload), which only the job's
    writer would otherwise be allowed to replace. Returns the names recorded."""
    folder = Path(folder)
    claimed = {
        name: _entry(folder / name)
        for name in sorted(set(names))
        if (folder / name).is_file() and not (folder / name).is_symlink() and not name.startswith((".", "_albert_hf"))
    }
    if claimed:
        _update_manifest(folder, claimed)
    return sorted(claimed)


def beside_name(name: str, number: int = 1) -> str:
    """The name of a job's file written beside a user's file `name`: README.md -> README.albert_hf.md, then
    README.albert_hf-2.md, ..."""
    stem, suffix = os.path.splitext(name)
    tag = BESIDE_TAG if number == 1 else f"{BESIDE_TAG}-{number}"
    return f"{stem}.{tag}{suffix}"


_SAID_BESIDE: set[tuple[str, str]] = set()
# Every file this process published, in order: what an interrupted job names as written.
_WRITTEN: list[Path] = []


def written_files(folder: str | os.PathLike | None = None) -> list[Path]:
    """The files this process wrote through this module (into `folder` when given), in order."""
    if folder is None:
        return list(_WRITTEN)
    folder = os.path.abspath(folder)
    return [path for path in _WRITTEN if os.path.abspath(path.parent) == folder]


def destination(path: str | os.PathLike, keep_name: bool = False) -> Path:
    """Where a write of `path` goes now: `path` when it is free or the job's own; otherwise, for a file that may be
    written beside (`keep_name` False), the first free or own `beside_name`; with `keep_name`, an `OutputFileError`."""
    path = Path(path)
    folder, name = path.parent, path.name
    manifest = read_manifest(folder)
    if not os.path.lexists(path) or is_own_file(path, manifest):
        return path
    if keep_name:
        raise OutputFileError(
            f"{path} is {what_is_there(path)} that this job did not write, and the job's {name} must have that name "
            "(it is read by name). Move it away, or pass another --output_dir."
        )
    for number in itertools.count(1):
        candidate = folder / beside_name(name, number)
        if not os.path.lexists(candidate) or is_own_file(candidate, manifest):
            if (str(path), candidate.name) not in _SAID_BESIDE:
                _SAID_BESIDE.add((str(path), candidate.name))
                logger.warning(
                    "%s is %s that this job did not write: it stays as it is, and the job writes %s beside it.",
                    path,
                    what_is_there(path),
                    candidate.name,
                )
            return candidate
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------------------------


def write_file(path: str | os.PathLike, content: str | bytes, keep_name: bool = False) -> Path:
    """Write `content` (text as UTF-8) as the file `path` of an output folder, staged and atomic, never over a file
    the job did not write (see the module); returns the path written (`path`, or the name beside a user's file)."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return write_with(path, lambda staging: _write_new_file(staging, data), keep_name=keep_name)


def write_json(path: str | os.PathLike, value: Any, keep_name: bool = False, **dump_options: Any) -> Path:
    """`value` as JSON (`json.dumps(value, **dump_options)` and a newline) through [`write_file`]."""
    return write_file(path, json.dumps(value, **dump_options) + "\n", keep_name=keep_name)


def write_with(path: str | os.PathLike, writer: Callable[[Path], Any], keep_name: bool = False) -> Path:
    """`writer(staging_path)` writes the file (a library's save function: `savefig`, `torch.save`, `onnx.save`) at a
    fresh hidden name beside `path`; the file is then fsynced and published as `path` like [`write_file`]'s."""
    path = Path(path)
    folder = path.parent
    check_watched(folder)
    folder.mkdir(parents=True, exist_ok=True)
    staging = folder / f"{STAGING_PREFIX}{uuid.uuid4().hex}-{path.name}"
    try:
        writer(staging)
        fsync_path(staging)
        return _publish(staging, folder, path.name, keep_name)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.remove(staging)
        named = naming_the_destination(error, {str(staging): path})
        if named is None:
            raise
        raise named from error


class Staging:
    """A staging folder of [`staged_folder`]: write into `path`; once the block ended, `published` maps each name
    written to the path it was published as."""

    def __init__(self, path: Path, folder: Path):
        self.path, self.folder = path, folder
        self.published: dict[str, Path] = {}


@contextlib.contextmanager
def staged_folder(
    folder: str | os.PathLike, keep_name: bool | Callable[[str], bool] = True, last: Iterable[str] = ()
) -> Iterator[Staging]:
    """A fresh staging folder inside `folder` for files that belong together (a tokenizer, an export, a model): what
    the block writes into `.path` is published into `folder` when it ends without error ([`publish_folder`], the
    names of `last` last), and removed with nothing published on any error or interruption. An OS error of a write
    inside it names the file of `folder` that was being written."""
    folder = Path(folder)
    check_watched(folder)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    staging = Staging(Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=folder)), folder)
    try:
        yield staging
        fsync_tree(staging.path)
        staging.published = publish_folder(staging.path, folder, keep_name=keep_name, last=last)
    except BaseException as error:
        shutil.rmtree(staging.path, ignore_errors=True)
        if created:  # a folder made for files that were not published goes again
            with contextlib.suppress(OSError):
                folder.rmdir()
        named = naming_the_destination(error, {str(staging.path): folder})
        if named is None:
            raise
        raise named from error
    finally:
        shutil.rmtree(staging.path, ignore_errors=True)


def publish_folder(
    staging: str | os.PathLike,
    folder: str | os.PathLike,
    keep_name: bool | Callable[[str], bool] = True,
    first: Iterable[str] = (),
    last: Iterable[str] = (),
) -> dict[str, Path]:
    """Move every entry of a completely written (and fsynced) `staging` folder into `folder`, through the rules of
    the module: every name is checked before anything moves (a file that must keep its name and is in the way is
    an `OutputFileError`, and nothing is published), all are recorded in the manifest as pending, moved (the names
    ending with one of `first` first, those of `last` last), then recorded as published. Returns {name: path
    written}; `staging` is removed."""
    staging, folder = Path(staging), Path(folder)
    check_watched(folder)
    keeps = keep_name if callable(keep_name) else (lambda name: keep_name)
    # The record of files written into the staging folder through this module is not published: the folder's own
    # manifest records every file moved in.
    names = sorted(name for name in os.listdir(staging) if name != MANIFEST_NAME)
    last = tuple(last)
    ordered = [name for name in names if name.endswith(tuple(first))]
    ordered += [name for name in names if name not in ordered and name not in last]
    ordered += [name for name in names if name in last]
    targets = {name: destination(folder / name, keeps(name)) for name in ordered}
    recorded = {
        target.name: {**_entry(staging / name), "pending": True}
        for name, target in targets.items()
        if (staging / name).is_file()
    }
    _update_manifest(folder, recorded)
    for name in ordered:
        _move(staging / name, targets[name])
        _WRITTEN.append(targets[name])
    _update_manifest(folder, published=recorded)
    fsync_path(folder)
    with contextlib.suppress(OSError):
        os.rmdir(staging)
    return targets


def _publish(staging: Path, folder: Path, name: str, keep_name: bool) -> Path:
    """Give the staged file `staging` its name `name` in `folder` (or the name beside a user's file)."""
    for _ in range(5):  # a file that appeared at the free name between the look and the link: look again
        target = destination(folder / name, keep_name)
        _update_manifest(folder, {target.name: _entry(staging)})
        try:
            _move(staging, target)
        except FileExistsError:
            continue
        fsync_path(folder)
        _WRITTEN.append(target)
        return target
    raise OutputFileError(f"{folder / name}: another process keeps creating this file; nothing was written.")


def _move(source: Path, target: Path) -> None:
    """Rename `source` to `target`: over `target` when one is there (the job's own: checked by `destination`), else
    with `link`, which fails (FileExistsError) rather than replace a file created meanwhile."""
    if os.path.lexists(target):
        if target.is_dir() and not target.is_symlink():
            raise OutputFileError(f"{target} is a folder: the job's file of that name was not written.")
        os.replace(source, target)
        return
    if source.is_dir():
        os.rename(source, target)
        return
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError as error:
        if error.errno not in NO_HARD_LINKS:
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from error
        os.rename(source, target)
        return
    os.remove(source)


def _write_new_file(path: Path, data: bytes) -> None:
    """Create `path` (never through a link: it must not exist), write `data`, fsync."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_path(path: str | os.PathLike) -> None:
    """fsync one file or folder (a folder's fsync makes the names of its entries durable)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def fsync_tree(folder: str | os.PathLike) -> None:
    """fsync every file under `folder`, then every folder bottom-up, so the whole tree is on disk before a rename."""
    for root, _, files in os.walk(folder, topdown=False):
        for name in files:
            fsync_path(os.path.join(root, name))
        fsync_path(root)


def remove_stale_staging(folder: str | os.PathLike) -> list[str]:
    """Remove the staging files and folders that killed writers left in `folder` (call it holding the folder's
    lock: no writer is then at work there); returns their names."""
    if not os.path.isdir(folder):
        return []
    stale = sorted(name for name in os.listdir(folder) if name.startswith(STAGING_PREFIX))
    for name in stale:
        path = os.path.join(folder, name)
        logger.info("Removing %s, left by a job that stopped while writing.", path)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)
    return stale


# --------------------------------------------------------------------------------------------------------------------
# Errors that name the file of the output folder
# --------------------------------------------------------------------------------------------------------------------


def out_of_space(error: BaseException) -> bool:
    """A write that failed for space, as libraries report it without an errno: torch.save's zip writer
    (`[enforce fail at inline_container.cc:...] . unexpected pos 7552 vs 7444`, `PytorchStreamWriter failed writing
    file ...`) and Rust's `StorageFull` / "No space left on device" inside a message (safetensors)."""
    text = str(error)
    torch_writer = isinstance(error, RuntimeError) and (
        "unexpected pos" in text or "PytorchStreamWriter failed" in text
    )
    return torch_writer or "No space left on device" in text or "StorageFull" in text


def naming_the_destination(error: BaseException, staged: dict[str, Path]) -> OutputWriteError | None:
    """An `OutputWriteError` naming the destination of the staged path (`staged`: staging path -> destination) that
    the failing code was writing, for an OS error or a write out of space; None for any other error."""
    if isinstance(error, OutputWriteError) or not (isinstance(error, OSError) or out_of_space(error)):
        return None
    target = _staged_path_in(error, staged)
    code = getattr(error, "errno", None) or errno.ENOSPC
    reason = getattr(error, "strerror", None) or os.strerror(code)
    return OutputWriteError(code, reason, str(target))


def _staged_path_in(error: BaseException, staged: dict[str, Path]) -> Path:
    """The destination of the staged path the error names, or that a frame of its traceback (innermost first) holds
    in a local variable (a file inside a staging folder before the folder itself, which a writer's frame holds too);
    the first destination when none does."""
    candidates = [getattr(error, "filename", None), getattr(error, "filename2", None)]
    folder = None  # a staging folder itself, named where no file inside one is
    frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)]
    for frame in reversed(frames):
        candidates += list(frame.f_locals.values())
    for value in candidates:
        value = getattr(value, "name", None) if isinstance(value, io.IOBase) else value
        if isinstance(value, bytes):
            value = os.fsdecode(value)
        if not isinstance(value, (str, os.PathLike)) or len(os.fspath(value)) > 4096:
            continue
        written = os.path.abspath(os.fspath(value))
        for staging, target in staged.items():
            staging = os.path.abspath(staging)
            if written == staging:
                folder = folder or target
            elif written.startswith(staging + os.sep):
                return target / os.path.relpath(written, staging)
    return folder or next(iter(staged.values()))


# --------------------------------------------------------------------------------------------------------------------
# Folders watched by a lease
# --------------------------------------------------------------------------------------------------------------------

# abspath of a job's output folder -> a function saying why the job no longer holds it (None while it does).
_WATCHED: dict[str, Callable[[], str | None]] = {}


def watch_folder(folder: str | os.PathLike, problem: Callable[[], str | None]) -> None:
    """Refuse every write into `folder` (and below it) once `problem()` says why the job lost it."""
    _WATCHED[os.path.abspath(folder)] = problem


def unwatch_folder(folder: str | os.PathLike) -> None:
    _WATCHED.pop(os.path.abspath(folder), None)


def check_watched(folder: str | os.PathLike) -> None:
    """Raise `FolderLostError` when `folder` is (in) a watched folder the job lost."""
    here = os.path.abspath(folder)
    for watched, problem in list(_WATCHED.items()):
        if here == watched or here.startswith(watched + os.sep):
            found = problem()
            if found is not None:
                raise FolderLostError(f"--output_dir {watched}: {found}; the job wrote nothing more there.")


__all__ = [
    "FolderLostError",
    "OutputFileError",
    "OutputWriteError",
    "Staging",
    "adopt_files",
    "beside_name",
    "content_digest",
    "destination",
    "foreign_files",
    "is_own_file",
    "naming_the_destination",
    "out_of_space",
    "pending_files",
    "publish_folder",
    "read_manifest",
    "remove_stale_staging",
    "watch_folder",
    "written_files",
    "staged_folder",
    "write_file",
    "write_json",
    "write_with",
]
