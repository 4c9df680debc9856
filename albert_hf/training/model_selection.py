"""Which evaluated step's model a run ends with when it keeps its best checkpoint (Trainer's `load_best_model_at_end`
with `metric_for_best_model`), read from the run's own record: `TrainerState.best_model_checkpoint` names the
checkpoint Trainer loaded at the end, and `log_history` holds every evaluation it was chosen among.

The fine-tuning jobs write it into `train_results.json` (`best_step`, `best_<metric>`, `best_of_evaluations`) and the
model card's training procedure, so a dev figure says which step it is the figure of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .reliability import checkpoint_step


@dataclass(frozen=True)
class KeptCheckpoint:
    """The checkpoint a run kept: its `step`, the `metric` it was chosen by (as logged: "eval_accuracy"), its
    `value` there, and the logged `evaluations` of that metric, (step, value) in order."""

    step: int
    metric: str
    value: float | None
    evaluations: tuple[tuple[int, float], ...]

    def results(self) -> dict[str, Any]:
        """What `train_results.json` says of it."""
        return {
            "best_step": self.step,
            f"best_{self.metric}": self.value,
            "best_of_evaluations": len(self.evaluations),
        }

    def describe(self) -> str:
        """One line for the model card."""
        value = "" if self.value is None else f" ({self.value:.4f})"
        return f"step {self.step}: the best {self.metric}{value} of {len(self.evaluations)} evaluations on the dev set"


def logged_metric_name(metric_for_best_model: str) -> str:
    """The key Trainer logs `metric_for_best_model` under ("accuracy" -> "eval_accuracy")."""
    return metric_for_best_model if metric_for_best_model.startswith("eval_") else f"eval_{metric_for_best_model}"


def kept_checkpoint(state, args) -> KeptCheckpoint | None:
    """The checkpoint a finished `Trainer.train()` loaded as its best (`args.load_best_model_at_end`), or None when
    the run ends with its last step's model: no selection asked, or no checkpoint evaluated before the end (fewer
    steps than `eval_steps`)."""
    if not args.load_best_model_at_end or not state.best_model_checkpoint or not args.metric_for_best_model:
        return None
    step = checkpoint_step(state.best_model_checkpoint)
    if step is None:
        return None
    metric = logged_metric_name(args.metric_for_best_model)
    evaluations = tuple((entry["step"], entry[metric]) for entry in training_log(state.log_history) if metric in entry)
    value = next((logged for logged_step, logged in evaluations if logged_step == step), state.best_metric)
    return KeptCheckpoint(step=step, metric=metric, value=value, evaluations=evaluations)


def training_log(log_history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries `train()` logged: those before its closing summary (the entry with `train_runtime`); evaluations
    a job runs after training (of the kept model, at the last step's number) come after it."""
    ends = [position for position, entry in enumerate(log_history) if "train_runtime" in entry]
    return log_history[: ends[-1]] if ends else log_history
