"""The distinctions the command line makes between errors: the user's, the machine's, and ours.

A [`UserError`] is a problem with what the user gave: an option, a file, a folder, the data in it. Its message names
the option, the file (and line) or the folder, and says what to do; `albert-hf` prints it as one message and exits
with status 2, without a traceback (`--debug` or `ALBERT_HF_DEBUG=1` shows it). A [`MachineStateError`] is the
machine's (no space, no network): status 3. `albert_hf.error_boundary.explain_failure` also recognizes those families in what
libraries raise, and a missing optional dependency (status 4). A [`StoppedBySignal`] is no failure: a scheduler
stopped training, a checkpoint was written, and the status is 128 + the signal number. Any other exception is a fault
of albert_hf or of a library below it and keeps its traceback.

Library modules raise a `UserError` subclass for each kind of problem they find (`CheckpointError`,
`PretrainingSetupError`, `OptionError`, ...), so callers can catch the kind they handle and the CLI catches them all.
"""

from __future__ import annotations

import signal


class UserError(ValueError):
    """What the user gave (an option, a file, a folder, its data) cannot be used; the message says which and why.

    A `ValueError`, so code that caught the `ValueError`s raised before this class existed still catches them.
    """


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the user named does not exist. Also a `FileNotFoundError`, which callers caught before."""


class UnreadableFileError(UserError, OSError):
    """A file the user named exists but cannot be read as what it should be (truncated weights, bad bytes)."""


class DataError(UserError):
    """A data file holds something the job cannot use (a malformed row, a label out of range); the message names the
    file and the line (or the record)."""


class OptionError(UserError):
    """An option of the command line cannot be used: unknown, of the wrong type, outside its declared range, or in
    conflict with another option (`albert_hf.options`)."""


class MachineStateError(RuntimeError):
    """The machine cannot do what the job asks, whatever the options: no space left, a read-only or forbidden folder,
    no network. `albert-hf` prints one line and exits with status 3."""


class StoppedBySignal(RuntimeError):
    """Training stopped on a scheduler's signal (SIGTERM, SIGUSR1) after writing a complete checkpoint of the step it
    reached, and wrote no final model (`albert_hf.training.preemption`). `albert-hf` prints one line and exits with
    status 128 + the signal number (143 for SIGTERM), as a process killed by that signal reports itself to a
    scheduler; `--resume_from_checkpoint latest` continues the run."""

    def __init__(self, signal_number: int, step: int | None, checkpoint: str | None):
        self.signal_number, self.step, self.checkpoint = signal_number, step, checkpoint
        name = signal.Signals(signal_number).name
        if checkpoint is not None:
            written = f"{checkpoint} written"
        else:  # a callback after CheckpointOnSignal cancelled the save
            written = "no checkpoint of that step was written, the newest complete one is kept"
        super().__init__(f"stopped by {name} at step {step}: {written}; resume with --resume_from_checkpoint latest")

    @property
    def exit_status(self) -> int:
        return 128 + self.signal_number
