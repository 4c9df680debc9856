"""Fine-tune ALBERT on SQuAD v1.1 / v2.0 (extractive question answering) with Trainer: `albert-hf squad`.

    albert-hf squad --model_name_or_path <albert checkpoint> --preset squad2.0 \\
        --train_file train-v2.0.json --validation_file dev-v2.0.json --do_train --do_eval --output_dir out/squad2

Reads `--train_file` / `--validation_file` in the official SQuAD JSON layout or the Hub's flattened layout (json /
jsonl), or without files the Hub dataset `--dataset_name` (needs a network). Each context is cut into overlapping
windows of `--max_seq_length` tokens; evaluation answers every question from all its windows (`SquadTrainer`).
Writes to `--output_dir` the model, `train_results.json` / `eval_results.json` (the official exact match and F1; for
v2.0 also the best F1 over all null thresholds), `predictions.json`, `nbest_predictions.json`, (v2.0)
`null_odds.json`, and the model card.

To change the job (a model head, a data format, a metric), copy this file and edit the copy: it uses only public
functions of albert_hf with absolute imports, and `python my_squad.py <options>` runs it with the same options, one-line
errors and exit statuses as `albert-hf squad`.
"""

from __future__ import annotations

import sys

from transformers import TrainingArguments, default_data_collator, set_seed

from albert_hf.argument_parsing import ModelArguments, build_model, load_tokenizer, start_job
from albert_hf.error_boundary import run_command
from albert_hf.errors import UserError
from albert_hf.finetuning import (
    checked_config,
    hub_dataset_name,
    limit_samples,
    parse_finetuning_args,
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.modeling import AlbertForQuestionAnswering
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.tasks.squad import (
    SquadArguments,
    SquadTrainer,
    encode_squad_windows,
    load_squad_split,
    prepare_squad_examples,
    squad_card_info,
)
from albert_hf.training.callbacks import attach_reliability

ARGUMENTS = (ModelArguments, SquadArguments, TrainingArguments)


def main(argv: list[str] | None = None) -> int:
    # 1. Arguments: --preset (a SQuAD row of Table 14, albert_hf/recipes/squad/) gives the defaults the command line
    # overrides; squad2.0's also sets --version_2_with_negative.
    model_args, squad_args, training_args = parse_finetuning_args(ARGUMENTS, argv, presets="squad")
    if not (training_args.do_train or training_args.do_eval):
        raise UserError("Nothing to do: pass --do_train and/or --do_eval.")
    if training_args.do_predict:
        raise UserError(
            "SQuAD has no test split: --do_eval answers the questions of --validation_file and writes "
            "predictions.json; drop --do_predict."
        )
    squad_args.check_window_room()

    # --seeds 0,1,2,3,4: this job once per seed, each in <output_dir>/seed-<N>, then the spread of their results.
    if seed_runs_asked(squad_args):
        return run_seeds(main, argv, model_args, squad_args, training_args)

    # 2. Start: process group, logs, the locked output folder; then the seed.
    start_job(training_args, model_args=model_args, dataset_name=hub_dataset_name(squad_args))
    set_seed(training_args.seed)

    # 3. Data: the questions of each split, the first --max_*_samples of them, checked and with long questions cut.
    tokenizer = load_tokenizer(model_args)
    splits = {split: load_squad_split(squad_args, split) for split in requested_splits(training_args)}
    examples = {
        split: prepare_squad_examples(split, questions, squad_args, tokenizer)
        for split, questions in limit_samples(splits, squad_args).items()
    }

    # 4. Model: the config (refused if it has no positions for --max_seq_length), then the model with a span head.
    config = checked_config(model_args, squad_args.max_seq_length, tokenizer, finetuning_task="squad")
    model = build_model(AlbertForQuestionAnswering, model_args, config)

    # 5. Features: windows of --max_seq_length tokens overlapping by --doc_stride, already padded.
    windows = {
        split: encode_squad_windows(split, questions, squad_args, tokenizer, training_args)
        for split, questions in examples.items()
    }

    # 6. Trainer: its evaluation answers the validation questions from all their windows and scores the answers.
    trainer = SquadTrainer(
        model=model,
        args=training_args,
        train_dataset=windows.get("train"),
        eval_dataset=windows.get("validation"),
        processing_class=tokenizer,
        data_collator=default_data_collator,  # every window is padded to --max_seq_length already
        card_info=squad_card_info(model_args, squad_args),
        eval_examples=examples.get("validation"),
        squad_args=squad_args,
    )
    # Complete checkpoints, checked and exact resumption, the loss checks, the SIGTERM checkpoint; and what a
    # resume must not change.
    attach_reliability(trainer, fingerprint_extra=training_fingerprint("squad", model_args, squad_args))

    # 7. Train (a checkpoint on SIGTERM), save, evaluate, write the card. No 8th step: --do_predict was refused.
    eval_sets = {"eval": windows["validation"]} if "validation" in windows else {}
    train_and_evaluate(trainer, training_args, eval_sets)
    return 0


if __name__ == "__main__":
    sys.exit(run_command("squad", main))
