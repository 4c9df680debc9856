"""Fine-tune ALBERT on SQuAD v1.1 / v2.0 (extractive question answering) with Trainer: `albert-hf squad`.

    albert-hf squad --model_name_or_path <albert checkpoint> --preset squad2.0 \\
        --train_file train-v2.0.json --validation_file dev-v2.0.json --do_train --do_eval --output_dir out/squad2

Reads `--train_file` / `--validation_file` in the official SQuAD JSON layout or the Hub's flattened layout (json /
jsonl), or without files the Hub dataset `--dataset_name` (needs a network). Each context is cut into overlapping
windows of `--max_seq_length` tokens; evaluation answers every question from all its windows (`SquadTrainer`).
Writes to `--output_dir` the model, `train_results.json` / `eval_results.json` (the official exact match and F1; for
v2.0 also the best F1 over all null thresholds), `predictions.json`, `nbest_predictions.json`, (v2.0)
`null_odds.json`, and the model card.

To change the job (a model head, a data format, a metric), copy this file and run the copy with `python my_squad.py
<options>`: the task's own code is in it, above `main`, and it calls only the library functions listed in docs/api.md,
with absolute imports; it gives the same one-line errors and exit statuses as `albert-hf squad`.
"""

from __future__ import annotations

import logging
import sys

from datasets import Dataset, load_dataset
from transformers import TrainingArguments, default_data_collator, set_seed

from albert_hf.arguments import ModelArguments, SquadArguments
from albert_hf.data.caching import map_fingerprint
from albert_hf.data.squad_windows import (
    check_squad_examples,
    count_unanswerable,
    load_squad_examples,
    prepare_eval_features,
    prepare_train_features,
    truncate_questions,
)
from albert_hf.data.word_segmentation import log_edges_inside_pieces, unspaced_language
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
from albert_hf.hub import CardInfo
from albert_hf.job_setup import build_model, load_tokenizer, start_job
from albert_hf.modeling import AlbertForQuestionAnswering
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.squad_trainer import SquadTrainer

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# The task's data: questions, their windows, the model card's dataset
# --------------------------------------------------------------------------------------------------------------------


def load_squad_split(squad_args: SquadArguments, split: str) -> Dataset:
    """The training ("train") or evaluation (any other split name) questions, from the given file or from the Hub."""
    file_flag, hub_split = ("train_file", "train") if split == "train" else ("validation_file", "validation")
    path = getattr(squad_args, file_flag)
    if path:
        return load_squad_examples(path)
    if not squad_args.dataset_name:
        raise UserError(f"No {split} data: pass --{file_flag} or --dataset_name.")
    examples = load_dataset(squad_args.dataset_name, split=hub_split)
    return check_squad_examples(examples, f"{squad_args.dataset_name}[{hub_split}]")


def prepare_squad_examples(split: str, examples: Dataset, squad_args: SquadArguments, tokenizer) -> Dataset:
    """One split's questions, checked and cut: unanswerable questions are refused outside v2.0, and questions longer
    than --max_query_length tokens are cut (and counted in a warning)."""
    unanswerable = count_unanswerable(examples)
    if unanswerable and not squad_args.version_2_with_negative:
        raise UserError(
            f"The {split} data has {unanswerable} unanswerable questions (no answer): that is SQuAD v2.0, pass "
            "--version_2_with_negative (or --preset squad2.0)."
        )
    examples, cut = truncate_questions(examples, tokenizer, squad_args.max_query_length)
    if cut:
        logger.warning(
            "%s: %d of %d questions were longer than %d tokens and were cut.",
            split,
            cut,
            len(examples),
            squad_args.max_query_length,
        )
    logger.info("%s: %d questions (%d unanswerable).", split, len(examples), unanswerable)
    log_answer_edges(split, examples, tokenizer)
    return examples


def log_answer_edges(split: str, examples: Dataset, tokenizer) -> tuple[int, int] | None:
    """For contexts written without spaces (Japanese, Chinese): logs once the share of the answers' edges that fall
    inside a piece, answers no span of pieces can reproduce (`log_edges_inside_pieces`: with what to do about it
    when the vocabulary's pieces run across words). Returns (inside, total), or None for spaced text."""
    contexts = list(examples["context"])
    if not unspaced_language(contexts[:200]):
        return None
    edges: dict[str, list[int]] = {}
    for context, answers in zip(contexts, examples["answers"]):
        for text, start in zip(answers["text"], answers["answer_start"]):
            edges.setdefault(context, []).extend((start, start + len(text)))
    return log_edges_inside_pieces(tokenizer, split, ("answer", "answers"), list(edges), list(edges.values()))


def encode_squad_windows(
    split: str, examples: Dataset, squad_args: SquadArguments, tokenizer, training_args: TrainingArguments
) -> Dataset:
    """The windows of one split's questions, padded to --max_seq_length: labelled with the answer span for "train",
    with example ids and context offsets for evaluation (any other split). The main process encodes first; the
    others read its cache."""
    prepare = prepare_train_features if split == "train" else prepare_eval_features
    settings = {"max_seq_length": squad_args.max_seq_length, "doc_stride": squad_args.doc_stride}
    with training_args.main_process_first(desc=f"{split} windows"):
        return examples.map(
            prepare,
            batched=True,
            remove_columns=examples.column_names,
            fn_kwargs={"tokenizer": tokenizer, **settings},
            new_fingerprint=map_fingerprint(examples, prepare, tokenizer, **settings),
            desc=f"Cutting {split} contexts into windows",
        )


def squad_card_info(model_args: ModelArguments, squad_args: SquadArguments) -> CardInfo:
    """The model card's base model and dataset (SQuAD v2.0 with --version_2_with_negative, else v1.1)."""
    v2 = squad_args.version_2_with_negative
    return CardInfo(
        base_model=model_args.model_name_or_path,
        dataset_id="rajpurkar/squad_v2" if v2 else "rajpurkar/squad",
        dataset_name="SQuAD v2.0" if v2 else "SQuAD v1.1",
    )


# --------------------------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------------------------

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
