"""What a pretraining run is measured against, and how the quickstart shows it: the held-out baselines of a model
that ignores its input, the learning-curve plot, and the quickstart's closing report."""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
from datasets import Dataset

from ..configuration import AlbertConfig
from ..output_files import write_with
from .arguments import PretrainingJob
from .corpus import CorpusStats
from .trainer import AlbertPretrainingTrainer


@dataclass
class HeldOutBaselines:
    """What a model that ignores its input scores on the held-out instances, with their masks as evaluated.

    mlm: the accuracy of always predicting the most frequent masked token (`mlm_token_id`) of the held-out set.
    sop: the accuracy of always predicting the more frequent sentence-order label (about 0.5: pairs are swapped
    with probability one half).
    """

    mlm: float
    mlm_token_id: int
    sop: float
    mlm_targets: int
    sop_targets: int


def frequency_baselines(batches) -> HeldOutBaselines:
    """Baselines of evaluation batches (`labels`: -100 where not masked; `sentence_order_label`)."""
    token_counts: Counter = Counter()
    order_counts: Counter = Counter()
    for batch in batches:
        labels = batch["labels"]
        token_counts.update(labels[labels != -100].tolist())
        order = batch.get("sentence_order_label")
        if order is not None:
            order_counts.update(torch.as_tensor(order).tolist())
    if not token_counts:
        raise ValueError("The held-out instances have no masked tokens: no MLM baseline to compare with.")
    token_id, count = token_counts.most_common(1)[0]
    mlm_targets, sop_targets = sum(token_counts.values()), sum(order_counts.values())
    sop = order_counts.most_common(1)[0][1] / sop_targets if sop_targets else math.nan
    return HeldOutBaselines(
        mlm=count / mlm_targets, mlm_token_id=token_id, sop=sop, mlm_targets=mlm_targets, sop_targets=sop_targets
    )


def held_out_baselines(trainer: AlbertPretrainingTrainer, eval_dataset: Dataset) -> HeldOutBaselines:
    """The baselines of exactly what `trainer.evaluate` scored: the collator's masks depend only on its seed and
    each batch's token ids, and evaluation batches come in dataset order, so these are the evaluated targets."""
    return frequency_baselines(trainer.get_eval_dataloader(eval_dataset))


def plot_learning_curves(
    log_history: list[dict], path: str | os.PathLike, baselines: HeldOutBaselines | None = None
) -> Path:
    """A PNG of MLM loss, MLM accuracy and SOP accuracy against the step, training and held-out, with the held-out
    baselines (most frequent token, majority order) drawn as dotted lines when given; returns the path written."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    def series(key: str) -> tuple[list[int], list[float]]:
        points = [(entry["step"], entry[key]) for entry in log_history if key in entry]
        return [step for step, _ in points], [value for _, value in points]

    reference_lines = {"sop_accuracy": (0.5, "chance")}
    if baselines is not None:
        reference_lines = {
            "mlm_accuracy": (baselines.mlm, "most frequent token (held-out)"),
            "sop_accuracy": (baselines.sop, "majority order (held-out)"),
        }
    panels = [("MLM loss", "mlm_loss"), ("MLM accuracy", "mlm_accuracy"), ("SOP accuracy", "sop_accuracy")]
    figure, axes = plt.subplots(1, len(panels), figsize=(14, 4))
    for axis, (title, key) in zip(axes, panels):
        axis.plot(*series(key), label="training", alpha=0.7)
        axis.plot(*series(f"eval_{key}"), "o-", label="held-out documents")
        if key in reference_lines:
            value, label = reference_lines[key]
            axis.axhline(value, color="grey", linestyle=":", label=f"{label}: {value:.3f}")
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.legend()
    figure.tight_layout()
    path = Path(path)
    try:  # through albert_hf's writer: atomic, and beside a user's file of that name, never over it
        return write_with(path, lambda staging: figure.savefig(staging, dpi=100, format=path.suffix[1:] or "png"))
    finally:
        plt.close(figure)


def quickstart_report(
    trainer: AlbertPretrainingTrainer,
    job: PretrainingJob,
    stats: CorpusStats,
    metrics: dict[str, float],
    baselines: HeldOutBaselines,
    plot_path: Path,
    seconds: float,
) -> str:
    """The quickstart's closing report: corpus (`stats`), model and training (the trained `trainer`), and each
    held-out figure (`metrics`) beside its baseline; `seconds` the run took, `plot_path` its learning curves."""
    model = trainer.model
    config: AlbertConfig = model.config
    train_metrics = next((e for e in reversed(trainer.state.log_history) if "train_runtime" in e), {})
    corpus = job.corpus or "embedded: " + " + ".join(job.embedded)
    mlm, sop = metrics.get("eval_mlm_accuracy", math.nan), metrics.get("eval_sop_accuracy", math.nan)
    token = trainer.processing_class.convert_ids_to_tokens(baselines.mlm_token_id)
    lines = [
        "",
        f"ALBERT quickstart finished in {seconds / 60:.1f} min",
        f"  corpus        {corpus}: {stats.train_documents} training / {stats.eval_documents} held-out documents, "
        f"{stats.train_instances} / {stats.eval_instances} instances (dupe_factor {job.dupe_factor})"
        + (
            f" ({stats.skipped_single_sentence_documents} single-sentence documents skipped)"
            if stats.skipped_single_sentence_documents
            else ""
        ),
        f"  model         {model.num_parameters() / 1e6:.2f}M parameters: hidden {config.hidden_size}, "
        f"{config.num_hidden_layers} layers sharing {config.num_hidden_groups} group, vocabulary {config.vocab_size}",
        f"  training      {trainer.state.global_step} steps of {trainer.args.train_batch_size} sequences of up to "
        f"{job.max_seq_length} tokens, {train_metrics.get('train_steps_per_second', math.nan):.2f} steps/s",
        f"  held-out      MLM accuracy {mlm:.3f} (loss {metrics.get('eval_mlm_loss', math.nan):.2f}); baseline "
        f"{baselines.mlm:.3f} (always {token!r}, the most frequent of {baselines.mlm_targets} masked tokens): "
        f"{mlm / baselines.mlm:.1f}x",
        f"                SOP accuracy {sop:.3f}; baseline {baselines.sop:.3f} (always the more frequent order of "
        f"{baselines.sop_targets} pairs)",
        f"  saved         {trainer.args.output_dir} (model + tokenizer: "
        "`import albert_hf; AutoModelForPreTraining.from_pretrained(...)`)",
        f"  curves        {plot_path}",
    ]
    return "\n".join(lines)
