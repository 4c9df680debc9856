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

To change the job (a model head, a data format, a metric), copy this file and run the copy with
`python my_ner.py <options>`: it imports only public functions of albert_hf (`albert_hf.tasks.ner` holds the steps).
"""

from __future__ import annotations

import sys

from transformers import DataCollatorForTokenClassification, TrainingArguments, set_seed

from albert_hf.argument_parsing import ModelArguments, build_model, load_tokenizer, start_job
from albert_hf.arguments import NerArguments
from albert_hf.error_boundary import run_command
from albert_hf.finetuning import (
    FineTuningArguments,
    checked_config,
    hub_dataset_name,
    limit_samples,
    pad_to_multiple_of,
    parse_finetuning_args,
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.modeling import AlbertForTokenClassification
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.tasks.ner import (
    card_info,
    check_split_tags,
    choose_alignment,
    encode_sentences,
    evaluation_metrics,
    load_ner_splits,
    model_inputs,
    ner_label_list,
    write_test_predictions,
)
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

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
