"""Fine-tune ALBERT for named-entity recognition (CoNLL-2003 or any tagged words) with Trainer: `albert-hf ner`.

    albert-hf ner --data_dir conll2003 --model_name_or_path <albert checkpoint> \\
        --do_train --do_eval --do_predict --test_file conll2003/valid.txt --output_dir out/ner

Reads CoNLL column files (`--data_dir` with train.txt/valid.txt/test.txt or eng.train/eng.testa/eng.testb, or
`--train_file` etc.), json lines in the Hub layout, a Hub dataset (`--dataset_name`), or tables of any format (json,
jsonl, parquet; `--tokens_column`/`--tags_column`, tags as names or as ids named by `--tag_names`). Japanese or Chinese
words are joined as running text and tokenized once (`--alignment`). One tag per word, read from its first sub-token;
evaluation is entity-level (seqeval, conlleval-equivalent).

Writes to --output_dir the model, its card and `train_results.json`/`eval_results.json`; `--do_predict` adds
`predictions_test.txt` (`word gold predicted` per line, the user's own words) and `predict_results.json` (the scores
over every word of the test file).

To change the job (a model head, a data format, a metric), copy this file and run the copy with `python my_ner.py
<options>`: the task's own code is in it, above `main`, and it calls only the library functions listed in docs/api.md,
with absolute imports; it gives the same one-line errors and exit statuses as `albert-hf ner`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

import numpy as np
from datasets import Dataset
from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments, set_seed

from albert_hf.arguments import FineTuningArguments, ModelArguments, NerArguments
from albert_hf.configuration import AlbertConfig
from albert_hf.data.ner import (
    ALIGN_RUNNING_TEXT,
    build_label_list,
    check_tags_seen_in_training,
    entity_edges,
    from_hub_layout,
    load_ner_file,
    ner_sentences_from_rows,
    resolve_alignment,
    tokenize_and_align,
    word_predictions,
    write_conll_predictions,
)
from albert_hf.data.sources import data_extension, load_rows, row_places
from albert_hf.data.word_segmentation import log_edges_inside_pieces
from albert_hf.error_boundary import run_command
from albert_hf.errors import UserError
from albert_hf.finetuning import (
    checked_config,
    first_output,
    hub_dataset_name,
    limit_samples,
    log_truncation,
    output_path,
    pad_to_multiple_of,
    parse_finetuning_args,
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.hub import CardInfo
from albert_hf.job_setup import build_model, load_tokenizer, start_job
from albert_hf.metrics import load as load_metric_module
from albert_hf.metrics.ner import ner_compute_metrics
from albert_hf.modeling import AlbertForTokenClassification
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# The task's data, features, metrics and predictions
# --------------------------------------------------------------------------------------------------------------------

# File names looked for in --data_dir, by split: this project's copy first, then the original CoNLL-2003 names.
DATA_DIR_FILES = {
    "train": ("train.txt", "eng.train"),
    "validation": ("valid.txt", "dev.txt", "eng.testa"),
    "test": ("test.txt", "eng.testb"),
}
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "labels")


def find_split_files(data_args: FineTuningArguments, splits: list[str]) -> dict[str, str]:
    """The file of each split: --train_file/--validation_file/--test_file, else the usual names in --data_dir."""
    given = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    files = {}
    for split in splits:
        if given[split]:
            files[split] = given[split]
        elif data_args.data_dir:
            candidates = [os.path.join(data_args.data_dir, name) for name in DATA_DIR_FILES[split]]
            found = [path for path in candidates if os.path.isfile(path)]
            if not found:
                raise UserError(f"No {split} file: none of {candidates} exists (or pass --{split}_file).")
            files[split] = found[0]
    return files


def load_ner_splits(data_args: FineTuningArguments, ner_args: NerArguments, splits: list[str]) -> dict[str, Dataset]:
    """Each split from its local file when there is one, else from the Hub dataset --dataset_name; read as tables
    (any format, by column) when --tokens_column/--tags_column/--tag_names say so, or when a file is parquet."""
    files = find_split_files(data_args, splits)
    datasets = {}
    for split in splits:
        if ner_args.reads_tables() or data_extension(files.get(split, "")) == ".parquet":
            datasets[split] = load_ner_table(files.get(split), ner_args, split)
        elif split in files:
            datasets[split] = load_ner_file(files[split], ner_args.tag_column)
        elif ner_args.dataset_name:
            from datasets import load_dataset

            hub_split = load_dataset(ner_args.dataset_name, split=split)
            datasets[split] = from_hub_layout(hub_split, ner_args.dataset_name)
        else:
            raise UserError(f"No {split} data: pass --data_dir, --{split}_file or --dataset_name.")
    return datasets


def load_ner_table(file: str | None, ner_args: NerArguments, split: str) -> Dataset:
    """The sentences of one split's table: the file, else that split of --dataset_name."""
    places = None
    if file:
        rows, source = load_rows(data_files=file, split=split), file
        places = row_places(file, source)
    elif ner_args.dataset_name:
        rows, source = load_rows(dataset_name=ner_args.dataset_name, split=split), f"{ner_args.dataset_name}[{split}]"
    else:
        raise UserError(f"No {split} data: pass --{split}_file or --dataset_name.")
    tag_names = [name.strip() for name in ner_args.tag_names.split(",")] if ner_args.tag_names else None
    sentences = ner_sentences_from_rows(
        rows, source, ner_args.tokens_column or "tokens", ner_args.tags_column or "ner_tags", tag_names, places=places
    )
    return Dataset.from_list(sentences)


def checkpoint_label_order(model_args: ModelArguments, labels: list[str]) -> list[str]:
    """Keep a fine-tuned checkpoint's label order when it has exactly the data's labels (else the data's order)."""
    if not model_args.model_name_or_path:
        return labels
    config = AlbertConfig.from_pretrained(model_args.model_name_or_path)
    trained = [config.id2label[i] for i in range(config.num_labels)]
    return trained if sorted(trained) == sorted(labels) else labels


def predict_words(
    trainer: Trainer, model_inputs: Dataset, sentences: Dataset, label_list: list[str]
) -> tuple[list[list[str]], int]:
    """Word-level tags for every sentence (from the sub-token that predicts each word: its first), and the count of
    words cut by truncation."""
    logits = trainer.predict(model_inputs, metric_key_prefix="predict").predictions
    predicted_ids = np.argmax(first_output(logits), axis=-1)  # [sentences, seq_len]
    tags, num_cut = [], 0
    for row, word_ids, positions in zip(predicted_ids, sentences["word_ids"], sentences["word_positions"]):
        words, missing = word_predictions(row, word_ids, len(positions), label_list, positions)
        tags.append(words)
        num_cut += missing
    return tags, num_cut


def check_split_tags(raw: dict[str, Dataset], data_args: FineTuningArguments, ner_args: NerArguments) -> None:
    """Refuse evaluation or test tags that never occur in the training data (a CoNLL file's error names its line)."""
    conll_files = {
        split: path
        for split, path in find_split_files(data_args, list(raw)).items()
        if not (ner_args.reads_tables() or data_extension(path) == ".parquet")
    }
    check_tags_seen_in_training(raw, conll_files, ner_args.tag_column)


def ner_label_list(model_args: ModelArguments, raw: dict[str, Dataset]) -> list[str]:
    """The tags of every loaded split (a fine-tuned checkpoint's order when it has the same ones)."""
    labels = checkpoint_label_order(model_args, build_label_list(*raw.values()))
    logger.info("Labels: %s", labels)
    return labels


def choose_alignment(raw: dict[str, Dataset], ner_args: NerArguments) -> str:
    """'running_text' or 'words' (`--alignment`), chosen once for every split: from the training data when there is
    one, else from the first split loaded."""
    sentences = raw["train"] if "train" in raw else next(iter(raw.values()))
    alignment = resolve_alignment(ner_args.alignment, sentences["tokens"][:200])
    logger.info("Words to input: %s (--alignment %s)", alignment, ner_args.alignment)
    return alignment


def encode_sentences(
    split: str,
    sentences: Dataset,
    tokenizer,
    label_list: list[str],
    alignment: str,
    data_args: FineTuningArguments,
    ner_args: NerArguments,
) -> Dataset:
    """The features of one split (`tokenize_and_align`): input ids, labels, and each token's word for the word-level
    predictions; the count of truncated sentences is logged."""
    # Only training may label every sub-token: evaluation reads one prediction per word.
    all_tokens = ner_args.label_all_tokens and split == "train"
    max_seq_length = data_args.max_seq_length
    encoded, num_truncated = tokenize_and_align(
        sentences, tokenizer, label_list, max_seq_length, all_tokens, data_args.pad_to_max_length, alignment
    )
    log_truncation(split, num_truncated, len(sentences), max_seq_length)
    if alignment == ALIGN_RUNNING_TEXT:
        log_entity_edges(split, sentences, tokenizer)
    return encoded


def log_entity_edges(split: str, sentences: Dataset, tokenizer) -> tuple[int, int]:
    """For sentences read as running text (Japanese, Chinese): logs once the share of the entities' edges that fall
    inside a piece, where one piece carries the tags of two words and gold tags cannot round-trip
    (`log_edges_inside_pieces`: with what to do about it when the vocabulary's pieces run across words)."""
    texts, edges = zip(*map(entity_edges, sentences["tokens"], sentences["ner_tags"])) if len(sentences) else ((), ())
    return log_edges_inside_pieces(tokenizer, split, ("entity", "entities"), list(texts), list(edges))


def model_inputs(features: Dataset) -> Dataset:
    """The columns the model reads: the word ids stay in the features for the word-level predictions."""
    return features.select_columns(list(MODEL_INPUTS))


def evaluation_metrics(
    label_list: list[str], alignment: str, features: dict[str, Dataset], raw: dict[str, Dataset]
) -> Callable:
    """Trainer's `compute_metrics`: entity-level scores; in running text, over the user's own words of the validation
    split (the pieces of a word are read back from each token's position in the text)."""
    if alignment == ALIGN_RUNNING_TEXT and "validation" in features:
        return ner_compute_metrics(label_list, features["validation"]["word_positions"], raw["validation"]["ner_tags"])
    return ner_compute_metrics(label_list)


def card_info(model_args: ModelArguments) -> CardInfo:
    """The model card's base model and dataset (CoNLL-2003)."""
    return CardInfo(base_model=model_args.model_name_or_path, dataset_id="eriktks/conll2003", dataset_name="CoNLL-2003")


def write_test_predictions(
    trainer: Trainer,
    test_features: Dataset,
    test_sentences: Dataset,
    label_list: list[str],
    training_args: TrainingArguments,
    max_seq_length: int,
) -> None:
    """--do_predict: word-level tags of the test split, their scores over every word (`predict_results.json`), and
    `predictions_test.txt` (`word gold predicted` per line, the user's own words)."""
    predicted, num_cut = predict_words(trainer, model_inputs(test_features), test_features, label_list)
    if num_cut:
        logger.warning("test: %d words lay beyond max_seq_length=%d and were predicted 'O'.", num_cut, max_seq_length)
    scores = load_metric_module("seqeval").compute(predictions=predicted, references=test_sentences["ner_tags"])
    metrics = {f"predict_{key}": value for key, value in scores.items()}
    metrics.update(predict_samples=len(predicted), predict_words_beyond_max_seq_length=num_cut)
    if trainer.is_world_process_zero():
        trainer.log_metrics("predict", metrics)
        trainer.save_metrics("predict", metrics)
        path = write_conll_predictions(
            output_path(training_args, "predictions_test.txt"),
            test_sentences["tokens"],
            test_sentences["ner_tags"],
            predicted,
        )
        logger.info("Wrote word-level predictions for %d sentences to %s", len(predicted), path)


# --------------------------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------------------------

ARGUMENTS = (ModelArguments, FineTuningArguments, NerArguments, TrainingArguments)


def main(argv: list[str] | None = None) -> int:
    # 1. Arguments: --preset or --config give the defaults, the command line wins.
    model_args, data_args, ner_args, training_args = parse_finetuning_args(ARGUMENTS, argv)

    # --seeds 0,1,2,3,4: this job once per seed, each in <output_dir>/seed-<N>, then the spread of their results.
    if seed_runs_asked(data_args):
        return run_seeds(main, argv, model_args, data_args, ner_args, training_args)

    # 2. Start: process group, logs, the lock on --output_dir; then the seed.
    start_job(training_args, model_args=model_args, dataset_name=hub_dataset_name(data_args, ner_args))
    set_seed(training_args.seed)

    # 3. Data: the requested splits, their first --max_*_samples; evaluation and test tags must occur in training.
    tokenizer = load_tokenizer(model_args)
    raw = limit_samples(load_ner_splits(data_args, ner_args, requested_splits(training_args)), data_args)
    check_split_tags(raw, data_args, ner_args)

    # 4. Model: one output per tag, in a fine-tuned checkpoint's order when it has the same tags.
    labels = ner_label_list(model_args, raw)
    config = checked_config(
        model_args,
        data_args.max_seq_length,
        tokenizer,
        finetuning_task="ner",
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    model = build_model(AlbertForTokenClassification, model_args, config)

    # 5. Features: words to tokens (as words, or as running text), each token labelled with its word's tag.
    alignment = choose_alignment(raw, ner_args)
    features = {
        split: encode_sentences(split, sentences, tokenizer, labels, alignment, data_args, ner_args)
        for split, sentences in raw.items()
    }
    eval_sets = {"eval": model_inputs(features["validation"])} if "validation" in features else {}

    # 6. Trainer: the model reads the input columns only; the word ids stay in `features` for the predictions.
    trainer = AlbertTrainer(
        model=model,
        args=training_args,
        train_dataset=model_inputs(features["train"]) if "train" in features else None,
        eval_dataset=eval_sets.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(
            tokenizer, pad_to_multiple_of=pad_to_multiple_of(data_args, training_args)
        ),
        compute_metrics=evaluation_metrics(labels, alignment, features, raw),
        card_info=card_info(model_args),
    )
    # Complete checkpoints, checked and exact resumption, the loss checks, the SIGTERM checkpoint; and what a
    # resume must not change.
    attach_reliability(trainer, fingerprint_extra=training_fingerprint("ner", model_args, data_args, ner_args))

    # 7. Train, save, evaluate, write the card (or push).
    train_and_evaluate(trainer, training_args, eval_sets)

    # 8. Predict: one tag per word of the test split, scored and written beside the gold tags.
    if training_args.do_predict:
        write_test_predictions(trainer, features["test"], raw["test"], labels, training_args, data_args.max_seq_length)
    return 0


if __name__ == "__main__":
    sys.exit(run_command("ner", main))
