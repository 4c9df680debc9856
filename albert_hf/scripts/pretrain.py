"""Pretrain ALBERT (masked language model + sentence-order prediction, LAMB) with Trainer: `albert-hf pretrain`.

    albert-hf pretrain --recipe laptop --train_files corpus.txt --validation_documents 20 \\
        --tokenizer_name_or_path spiece.model --output_dir out/albert-small

Reads text files of one sentence per line with a blank line between documents (`--lines_are_paragraphs` for one
paragraph per line), tables with --text_column, or --dataset_name; with --streaming they are read as training goes.
`--recipe paper` is the paper's setup (ALBERT-base, batch 4096 through gradient accumulation, LAMB at 0.00176, 3,125
warmup steps, 125k steps, length 512); `laptop` and `tiny` are small ones (see `albert_hf.pretraining.recipes`). Any
argument given on the command line wins over the recipe. --model_name_or_path continues the pretraining of a
checkpoint, whose vocabulary must be the tokenizer's.

Writes to --output_dir the checkpoints (`--resume_from_checkpoint latest` continues from the newest complete one),
then the model and tokenizer (`AutoModelForPreTraining.from_pretrained`), train/eval results, the Trainer state and
the model card. A SIGTERM or SIGUSR1 (a preemption) writes a checkpoint of the step reached and stops, exit status
128 + the signal's number.

To change the job (a data format, the model, the masking), copy this file and run `python my_pretrain.py <options>`.
"""

from __future__ import annotations

import logging
import sys

from transformers import set_seed

from albert_hf.error_boundary import run_command
from albert_hf.job_setup import load_tokenizer
from albert_hf.pretraining.arguments import parse_pretraining_args
from albert_hf.pretraining.corpus import prepare_datasets
from albert_hf.pretraining.run import (
    build_pretraining_model,
    build_trainer,
    check_first_instances,
    run_fingerprint,
    start_pretraining_job,
)
from albert_hf.training.callbacks import resume_training, save_final_model

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    # 1. Arguments: the dataclasses of albert_hf.pretraining.recipes, the --recipe applied.
    job = parse_pretraining_args(argv)
    model_args, data_args, training_args = job.model, job.data, job.training

    # 2. Start: refuse what the run could not do, join the launcher's processes, set up logs, lock --output_dir.
    start_pretraining_job(job)
    set_seed(training_args.seed)

    # 3. Data: the tokenizer, then the documents cut into sentence-order instances (or the stream of them).
    tokenizer = load_tokenizer(model_args)
    train_dataset, eval_dataset, stats = prepare_datasets(data_args, tokenizer, training_args.seed)
    logger.info("Pretraining data: %s", stats.describe())

    # 4. Model: a fresh ALBERT sized to the tokenizer, or the checkpoint of --model_name_or_path.
    model = build_pretraining_model(model_args, tokenizer, data_args.max_seq_length, training_args.sanity_checks)

    # 5. Trainer: the masking collator, the progress log, and the reliability plugin with what a resume must not
    # change.
    trainer = build_trainer(
        model, tokenizer, data_args, training_args, train_dataset, eval_dataset, run_fingerprint(job)
    )
    check_first_instances(trainer, data_args, stats.word_boundaries)

    # 6. Train: from --resume_from_checkpoint (`latest`: the newest complete checkpoint of --output_dir). A SIGTERM
    # or SIGUSR1 checkpoints the step reached and raises StoppedBySignal, before anything final is written.
    result = resume_training(trainer, training_args.resume_from_checkpoint)
    save_final_model(trainer)  # model and tokenizer, loadable with from_pretrained
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)

    # 7. Evaluate on the held-out instances.
    if eval_dataset is not None:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)

    # 8. Save the state and the model card with the evaluation's results (README.md beside the model); with
    # --push_to_hub, one upload of all of it, after the evaluation.
    trainer.save_state()
    if training_args.push_to_hub:
        trainer.push_to_hub()
    else:
        trainer.create_model_card()
    if trainer.is_world_process_zero():
        print(f"Pretraining data: {stats.describe()}")
        print(f"Model and tokenizer saved to {training_args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(run_command("pretrain", main))
