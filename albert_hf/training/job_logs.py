"""What a job's log says, and what it leaves to the debug level.

* [`quiet_library_noise`]: messages of the libraries below that tell a user nothing about their run (transformers'
  config dumps and weight-load reports, its "Do not forget to share your model", DeepSpeed's "Setting accelerator to
  CPU") are demoted to the debug level at their source logger: they still show where that logger is set to DEBUG.
* [`busy_machine_advice`]: on a machine busier than its cores, the advice that makes a CPU run faster.
* [`TrainingProgressLog`]: the training loss every `--logging_steps` and the held-out figures at each evaluation,
  logged as they happen (a Trainer callback: the public hook for logs).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

# (logger name, a fragment of the message): library messages demoted to the debug level.
LIBRARY_NOISE: tuple[tuple[str, str], ...] = (
    ("transformers.configuration_utils", "Model config "),  # the whole config, at every load and save
    ("transformers.configuration_utils", "loading configuration file"),
    ("transformers.configuration_utils", "Configuration saved in"),
    ("transformers.modeling_utils", "LOAD REPORT"),  # e.g. the new head of a fine-tuning run, which is expected
    ("transformers.trainer", "Do not forget to share your model"),
    ("DeepSpeed", "Setting accelerator to CPU"),  # said on every CPU machine, where the CPU is the one asked for
)


class DemoteToDebug(logging.Filter):
    """A logger filter that turns its matching records into DEBUG records, kept only where the logger shows DEBUG."""

    def __init__(self, fragments: tuple[str, ...]):
        super().__init__()
        self.fragments = fragments

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG and any(fragment in record.getMessage() for fragment in self.fragments):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def quiet_library_noise() -> None:
    """Install [`DemoteToDebug`] on each logger of `LIBRARY_NOISE` (once; loggers exist before their library)."""
    fragments: dict[str, tuple[str, ...]] = {}
    for name, fragment in LIBRARY_NOISE:
        fragments[name] = (*fragments.get(name, ()), fragment)
    for name, wanted in fragments.items():
        source = logging.getLogger(name)
        if not any(isinstance(existing, DemoteToDebug) for existing in source.filters):
            source.addFilter(DemoteToDebug(wanted))


def busy_machine_advice(load_average: float, cores: int, omp_threads: str | None) -> str | None:
    """The advice for a CPU run on a machine whose 1-minute load average exceeds its cores, where OMP_NUM_THREADS
    is not set: each process then starts one thread per core, and the threads of all processes fight over them."""
    if omp_threads is not None or load_average <= cores:
        return None
    return (
        f"This machine is busy (load average {load_average:.1f} on {cores} cores): threads of other processes compete "
        "for the cores. Running with OMP_NUM_THREADS=1 (e.g. `OMP_NUM_THREADS=1 albert-hf ...`) is often faster here."
    )


def warn_if_busy() -> None:
    """Log [`busy_machine_advice`] for this machine now, if any (a platform without load averages gets none)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return
    advice = busy_machine_advice(load, os.cpu_count() or 1, os.environ.get("OMP_NUM_THREADS"))
    if advice:
        logger.warning(advice)


def _figures(logs: Mapping[str, float], keys: list[str]) -> str:
    return ", ".join(f"{key} {logs[key]:.4g}" for key in keys)


class TrainingProgressLog(TrainerCallback):
    """Logs each of Trainer's log events as one line as it happens: `step 40/2000: loss 6.21, mlm_loss ...` every
    `--logging_steps`, and `step 400/2000 held-out: eval_loss ..., eval_mlm_accuracy ...` at each evaluation."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        where = f"step {state.global_step}/{state.max_steps}"
        numbers = [key for key, value in logs.items() if isinstance(value, (int, float)) and key != "epoch"]
        held_out = [key for key in numbers if key.startswith("eval_") and not key.endswith(("per_second", "runtime"))]
        if held_out:
            logger.info("%s held-out: %s", where, _figures(logs, held_out))
        elif "loss" in logs:
            logger.info("%s: %s", where, _figures(logs, numbers))
