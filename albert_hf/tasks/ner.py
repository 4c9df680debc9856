"""Fine-tune ALBERT for named-entity recognition (CoNLL-2003) with Trainer: `albert-hf ner`, `examples/ner/run_ner.py`.

    python examples/ner/run_ner.py --data_dir conll2003 --model_name_or_path <albert checkpoint> \\
        --do_train --do_eval --do_predict --test_file conll2003/valid.txt --output_dir out/ner

Data: CoNLL column files (`--data_dir` with train.txt/valid.txt/test.txt or eng.train/eng.testa/eng.testb, or
`--train_file` etc.), json lines in the Hub layout, or a Hub dataset (`--dataset_name`). Evaluation is entity-level
(seqeval, conlleval-equivalent). `--do_predict` writes `predictions_test.txt` (`word gold predicted` per line) and the
word-level scores over every word of the test file.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np
from datasets import Dataset
from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments, set_seed

from ..configuration import AlbertConfig
from ..data.ner import (
    build_label_list,
    check_tags_seen_in_training,
    from_hub_layout,
    load_ner_file,
    tokenize_and_align,
    word_predictions,
    write_conll_predictions,
)
from ..errors import MissingFileError, UserError
from ..hub import CardInfo
from ..metrics import load as load_metric_module
from ..metrics.ner import ner_compute_metrics
from ..modeling import AlbertForTokenClassification
from ..training.trainer import FineTuningTrainer
from .common import ModelArguments, build_config, build_model, load_tokenizer, parse_args, start_job
from .finetuning import (
    FineTuningArguments,
    apply_paper_preset,
    log_truncation,
    output_path,
    requested_splits,
    take_first,
    train_and_evaluate,
)

logger = logging.getLogger(__name__)

# File names looked for in --data_dir, by split: this project's copy first, then the original CoNLL-2003 names.
DATA_DIR_FILES = {
    "train": ("train.txt", "eng.train"),
    "validation": ("valid.txt", "dev.txt", "eng.testa"),
    "test": ("test.txt", "eng.testb"),
}
MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask", "labels")


@dataclass
class NerArguments:
    label_all_tokens: bool = field(
        default=False,
        metadata={
            "help": "Train on every sub-token of a word (B-X becomes I-X after the first), not only the first. "
            "Evaluation always reads the first sub-token."
        },
    )
    tag_column: int = field(default=-1, metadata={"help": "Column of the NER tag in CoNLL files (default: last)."})
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset (e.g. eriktks/conll2003) when no local files are given."}
    )


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
                raise MissingFileError(f"No {split} file: none of {candidates} exists (or pass --{split}_file).")
            files[split] = found[0]
    return files


def load_ner_splits(data_args: FineTuningArguments, ner_args: NerArguments, splits: list[str]) -> dict[str, Dataset]:
    """Each split from its local file when there is one, else from the Hub dataset --dataset_name."""
    files = find_split_files(data_args, splits)
    datasets = {}
    for split in splits:
        if split in files:
            datasets[split] = load_ner_file(files[split], ner_args.tag_column)
        elif ner_args.dataset_name:
            from datasets import load_dataset

            hub_split = load_dataset(ner_args.dataset_name, split=split)
            datasets[split] = from_hub_layout(hub_split, ner_args.dataset_name)
        else:
            raise UserError(f"No {split} data: pass --data_dir, --{split}_file or --dataset_name.")
    return datasets


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
    """Word-level tags for every sentence (first sub-token of each word), and the count of words cut by truncation."""
    logits = trainer.predict(model_inputs, metric_key_prefix="predict").predictions
    predicted_ids = np.argmax(logits[0] if isinstance(logits, tuple) else logits, axis=-1)  # [sentences, seq_len]
    tags, num_cut = [], 0
    for row, word_ids, tokens in zip(predicted_ids, sentences["word_ids"], sentences["tokens"]):
        words, missing = word_predictions(row, word_ids, len(tokens), label_list)
        tags.append(words)
        num_cut += missing
    return tags, num_cut


def main(argv: list[str] | None = None) -> int:
    model_args, data_args, ner_args, training_args = parse_args(
        (ModelArguments, FineTuningArguments, NerArguments, TrainingArguments), argv
    )
    preset_config = apply_paper_preset(model_args, data_args, training_args)
    start_job(training_args, model_args=model_args)
    set_seed(training_args.seed)

    splits = requested_splits(training_args)
    raw = load_ner_splits(data_args, ner_args, splits)
    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    raw = {split: take_first(dataset, limits[split]) for split, dataset in raw.items()}
    check_tags_seen_in_training(raw, find_split_files(data_args, list(raw)), ner_args.tag_column)
    label_list = checkpoint_label_order(model_args, build_label_list(*raw.values()))
    logger.info("Labels: %s", label_list)

    tokenizer = load_tokenizer(model_args)
    config = build_config(
        model_args,
        num_labels=len(label_list),
        id2label=dict(enumerate(label_list)),
        label2id={label: i for i, label in enumerate(label_list)},
        finetuning_task="ner",
        **preset_config,
    )
    model = build_model(AlbertForTokenClassification, model_args, config)

    encoded = {}
    for split, dataset in raw.items():
        # Only training may label every sub-token: evaluation reads one prediction per word.
        all_tokens = ner_args.label_all_tokens and split == "train"
        encoded[split], num_truncated = tokenize_and_align(
            dataset, tokenizer, label_list, data_args.max_seq_length, all_tokens, data_args.pad_to_max_length
        )
        log_truncation(split, num_truncated, len(dataset), data_args.max_seq_length)
    model_inputs = {split: dataset.select_columns(list(MODEL_INPUTS)) for split, dataset in encoded.items()}

    pad_to_multiple_of = 8 if (training_args.fp16 or training_args.bf16) and not data_args.pad_to_max_length else None
    trainer = FineTuningTrainer(
        model=model,
        card_info=CardInfo(
            base_model=model_args.model_name_or_path, dataset_id="eriktks/conll2003", dataset_name="CoNLL-2003"
        ),
        args=training_args,
        train_dataset=model_inputs.get("train"),
        eval_dataset=model_inputs.get("validation"),
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer, pad_to_multiple_of=pad_to_multiple_of),
        compute_metrics=ner_compute_metrics(label_list),
    )
    eval_sets = {"eval": model_inputs["validation"]} if "validation" in model_inputs else {}
    train_and_evaluate(trainer, training_args, eval_sets)

    if training_args.do_predict:
        predicted, num_cut = predict_words(trainer, model_inputs["test"], encoded["test"], label_list)
        if num_cut:
            logger.warning(
                "test: %d words lay beyond max_seq_length=%d and were predicted 'O'.", num_cut, data_args.max_seq_length
            )
        scores = load_metric_module("seqeval").compute(predictions=predicted, references=raw["test"]["ner_tags"])
        metrics = {f"predict_{key}": value for key, value in scores.items()}
        metrics.update(predict_samples=len(predicted), predict_words_beyond_max_seq_length=num_cut)
        if trainer.is_world_process_zero():
            trainer.log_metrics("predict", metrics)
            trainer.save_metrics("predict", metrics)
            path = output_path(training_args, "predictions_test.txt")
            write_conll_predictions(path, raw["test"]["tokens"], raw["test"]["ner_tags"], predicted)
            logger.info("Wrote word-level predictions for %d sentences to %s", len(predicted), path)
    return 0
