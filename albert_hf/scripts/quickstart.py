"""Train a tokenizer and pretrain a small ALBERT from scratch in a few minutes, offline: `albert-hf quickstart`.

    albert-hf quickstart --output_dir quickstart-output          # --fast: a 12-step smoke run

The pretraining run of `albert-hf pretrain` (albert_hf/scripts/pretrain.py) with `--recipe quickstart`, on an
offline corpus: the embedded one (Python's documentation and docstrings, `--embedded`) or `--corpus` (a text file or
a folder of .txt files, one sentence or paragraph per line), of which --held_out_fraction of the documents is held
out. Without --tokenizer_name_or_path it first trains a SentencePiece tokenizer on the training documents.

Writes to --output_dir the tokenizer (spiece.model), the model (`AutoModelForPreTraining.from_pretrained`), results,
the Trainer state, learning_curves.png and the model card; prints a report of the held-out figures beside the
baselines of a model that ignores its input.

To change the job (a corpus, the model, the report), copy this file and run `python my_quickstart.py <options>`.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from transformers import set_seed

from albert_hf.error_boundary import run_command
from albert_hf.job_setup import load_tokenizer
from albert_hf.pretraining.arguments import parse_quickstart_args
from albert_hf.pretraining.corpus import hold_out, prepare_datasets, quickstart_documents, quickstart_held_out_count
from albert_hf.pretraining.report import held_out_baselines, plot_learning_curves, quickstart_report
from albert_hf.pretraining.run import (
    build_pretraining_model,
    build_trainer,
    check_first_instances,
    run_fingerprint,
    start_pretraining_job,
    train_quickstart_tokenizer,
)
from albert_hf.training.callbacks import resume_training, save_final_model

logger = logging.getLogger(__name__)


def indented(line: str) -> None:
    """Print a line of detail under the step it belongs to."""
    print(f"      {line}")


def main(argv: list[str] | None = None) -> int:
    started = time.time()
    # 1. Arguments: those of `albert-hf pretrain` with --recipe quickstart (--fast: smoke) and the quickstart's own.
    job = parse_quickstart_args(argv)
    model_args, data_args, training_args = job.model, job.data, job.training

    # 2. Documents: the corpus, some of it held out for evaluation.
    documents = quickstart_documents(job.quickstart)
    held_out_count = quickstart_held_out_count(documents, job.quickstart)
    train_documents, held_out = hold_out(documents, held_out_count, training_args.seed, "--held_out_fraction")

    # 3. Start: before the tokenizer is trained into --output_dir, which is locked and checked there (a finished
    # run's spiece.model is never replaced unless --overwrite_output_dir).
    start_pretraining_job(job)

    # 4. Tokenizer: trained on the training documents unless one is given.
    tokenizer = None
    if model_args.tokenizer_name_or_path is None and model_args.model_name_or_path is None:
        tokenizer = train_quickstart_tokenizer(job, train_documents)
    print("[2/4] Cutting documents into sentence-order instances")
    set_seed(training_args.seed)
    tokenizer = load_tokenizer(model_args) if tokenizer is None else tokenizer

    # 5. Instances of the documents.
    train_dataset, eval_dataset, stats = prepare_datasets(
        data_args, tokenizer, training_args.seed, documents=(train_documents, held_out), say=indented
    )
    logger.info("Pretraining data: %s", stats.describe())

    # 6. Model and Trainer, as `albert-hf pretrain` makes them.
    model = build_pretraining_model(model_args, tokenizer, data_args.max_seq_length, training_args.sanity_checks)
    trainer = build_trainer(
        model, tokenizer, data_args, training_args, train_dataset, eval_dataset, run_fingerprint(job)
    )
    check_first_instances(trainer, data_args, stats.word_boundaries, say=indented)

    # 7. Train (a SIGTERM or SIGUSR1 checkpoints the step reached and stops), save, evaluate on the held-out set.
    print("[3/4] Pretraining a small ALBERT (MLM + SOP, LAMB)")
    result = resume_training(trainer, training_args.resume_from_checkpoint)
    save_final_model(trainer)
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    metrics = trainer.evaluate()
    trainer.log_metrics("eval", metrics)
    trainer.save_metrics("eval", metrics)
    trainer.save_state()

    # 8. Report: the held-out figures beside what a model that ignores its input scores, and the learning curves.
    baselines = held_out_baselines(trainer, eval_dataset)
    print("[4/4] Writing the learning curves")
    plot_path = plot_learning_curves(
        trainer.state.log_history, Path(training_args.output_dir) / "learning_curves.png", baselines
    )
    # Last, so that the card lists the curves and every other file of the folder; with --push_to_hub, one upload.
    if training_args.push_to_hub:
        trainer.push_to_hub()
    else:
        trainer.create_model_card()
    print(quickstart_report(trainer, job, stats, metrics, baselines, plot_path, time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(run_command("quickstart", main))
