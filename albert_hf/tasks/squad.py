"""Fine-tune ALBERT on SQuAD v1.1 / v2.0 with Trainer: `albert-hf squad` and `examples/squad/run_squad.py`.

    python examples/squad/run_squad.py --model_name_or_path <albert checkpoint> --preset squad2.0 \\
        --train_file train-v2.0.json --validation_file dev-v2.0.json --do_train --do_eval --output_dir out/squad2

Files are in the official JSON layout or the Hub's flattened layout (json / jsonl); without files, `--dataset_name`
loads a Hub dataset (needs a network). Evaluation answers every question from all its windows, writes
`predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json` to `--output_dir`, and reports the official
metrics. For v2.0 it reports the scores at `--null_score_diff_threshold` and, as the original does, the best exact/F1
over all thresholds on the evaluation set (`best_f1_thresh`: rerun with that threshold to use it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from datasets import Dataset, load_dataset
from transformers import TrainingArguments, default_data_collator, set_seed

from ..data.squad import (
    check_squad_examples,
    count_unanswerable,
    load_squad_examples,
    prepare_eval_features,
    prepare_train_features,
    truncate_questions,
)
from ..errors import DataError, UserError
from ..hub import CardInfo
from ..modeling import AlbertForQuestionAnswering
from ..training.trainer import SquadTrainer
from .common import ModelArguments, build_config, build_model, fill_unset, load_tokenizer, parse_args, start_job
from .finetuning import (
    PaperHyperparameters,
    apply_table_row,
    take_first,
    train_and_evaluate,
)

logger = logging.getLogger(__name__)

# Lan et al. (2020), Table 14, SQuAD rows: lr, global batch, ALBERT dropout, classifier dropout, steps, warmup, length.
SQUAD_HYPERPARAMETERS: dict[str, PaperHyperparameters] = {
    "squad1.1": PaperHyperparameters(5e-5, 48, 0.0, 0.1, 3649, 365, 384),
    "squad2.0": PaperHyperparameters(3e-5, 48, 0.0, 0.1, 8144, 814, 512),
}


@dataclass
class SquadArguments:
    """Data, windowing and answer-extraction options of the SQuAD job."""

    train_file: str | None = field(
        default=None, metadata={"help": "Training file: official SQuAD json, or the flattened layout (json/jsonl)."}
    )
    validation_file: str | None = field(default=None, metadata={"help": "Evaluation file, same layouts."})
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "Hub dataset (e.g. rajpurkar/squad_v2) used when no file is given; needs a network."},
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD v2.0: some questions have no answer (null answer at [CLS])."}
    )
    preset: str | None = field(
        default=None,
        metadata={
            "help": "The paper's Table 14 row: squad1.1 or squad2.0 (lr, batch 48, steps, warmup, dropout, "
            "max length; squad2.0 also sets --version_2_with_negative). Flags given explicitly win."
        },
    )
    max_seq_length: int = field(default=384, metadata={"help": "Window length in tokens, question included."})
    doc_stride: int = field(
        default=128,
        metadata={
            "help": "Context tokens shared by consecutive windows (the tokenizer's stride; the original scripts' "
            "doc_stride was the step between windows instead)."
        },
    )
    max_query_length: int = field(
        default=64, metadata={"help": "Questions longer than this many tokens are cut (the count is logged)."}
    )
    n_best_size: int = field(
        default=20, metadata={"help": "Starts and ends tried per window, and answers kept per question."}
    )
    max_answer_length: int = field(default=30, metadata={"help": "Longest answer, in tokens."})
    null_score_diff_threshold: float = field(
        default=0.0, metadata={"help": "v2.0: answer '' when null score - best span score exceeds this."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N training questions."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only the first N evaluation questions."})

    def __post_init__(self):
        for name in ("max_train_samples", "max_eval_samples"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UserError(f"--{name} must be positive, got {value}.")
        for name in ("n_best_size", "max_answer_length", "max_query_length", "doc_stride"):
            if getattr(self, name) <= 0:
                raise UserError(f"--{name} must be positive, got {getattr(self, name)}.")

    def check_window_room(self) -> None:
        """A window holds [CLS] question [SEP] context [SEP]; the stride must leave context tokens to advance by."""
        context_room = self.max_seq_length - self.max_query_length - 3
        if self.doc_stride >= context_room:
            raise UserError(
                f"--doc_stride {self.doc_stride} must be smaller than the context room of a window, max_seq_length "
                f"({self.max_seq_length}) - max_query_length ({self.max_query_length}) - 3 = {context_room}."
            )


def apply_squad_preset(
    model_args: ModelArguments, squad_args: SquadArguments, training_args: TrainingArguments
) -> dict[str, float]:
    """Apply `--preset` (a Table 14 SQuAD row) in place, like the other tasks' presets; return the dropout fields.

    Only fields the user did not give are filled, so `--preset squad1.1 --max_steps 10` trains for 10 steps.
    """
    if squad_args.preset is None:
        return {}
    name = squad_args.preset.lower().replace("-", "").replace("_", "").replace("v", "")
    if name not in SQUAD_HYPERPARAMETERS:
        raise UserError(f"--preset {squad_args.preset!r}: choose one of {sorted(SQUAD_HYPERPARAMETERS)}.")
    dropout = apply_table_row(SQUAD_HYPERPARAMETERS[name], model_args, squad_args, training_args)
    if name == "squad2.0":
        fill_unset((squad_args,), {"version_2_with_negative": True})
    return dropout


def load_squad_split(squad_args: SquadArguments, split: str) -> Dataset:
    """The training or evaluation questions, from the given file or from the Hub."""
    file_flag, hub_split = ("train_file", "train") if split == "train" else ("validation_file", "validation")
    path = getattr(squad_args, file_flag)
    if path:
        return load_squad_examples(path)
    if not squad_args.dataset_name:
        raise UserError(f"No {split} data: pass --{file_flag} or --dataset_name.")
    examples = load_dataset(squad_args.dataset_name, split=hub_split)
    return check_squad_examples(examples, f"{squad_args.dataset_name}[{hub_split}]")


def _features(examples: Dataset, tokenizer, squad_args: SquadArguments, split: str, training_args) -> Dataset:
    """Windows of `examples`: labelled for training, with ids and offsets for evaluation."""
    prepare = prepare_train_features if split == "train" else prepare_eval_features
    with training_args.main_process_first(desc=f"{split} windows"):
        return examples.map(
            prepare,
            batched=True,
            remove_columns=examples.column_names,
            fn_kwargs={
                "tokenizer": tokenizer,
                "max_seq_length": squad_args.max_seq_length,
                "doc_stride": squad_args.doc_stride,
            },
            desc=f"Cutting {split} contexts into windows",
        )


def _prepare_split(split: str, squad_args: SquadArguments, tokenizer) -> Dataset:
    """Load, limit and check one split's questions; long questions are cut (and counted)."""
    limit = squad_args.max_train_samples if split == "train" else squad_args.max_eval_samples
    examples = take_first(load_squad_split(squad_args, split), limit)
    unanswerable = count_unanswerable(examples)
    if unanswerable and not squad_args.version_2_with_negative:
        raise DataError(
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
    return examples


def main(argv: list[str] | None = None) -> int:
    model_args, squad_args, training_args = parse_args((ModelArguments, SquadArguments, TrainingArguments), argv)
    if not (training_args.do_train or training_args.do_eval):
        raise UserError("Nothing to do: pass --do_train and/or --do_eval.")
    preset_config = apply_squad_preset(model_args, squad_args, training_args)
    start_job(training_args, model_args=model_args)
    squad_args.check_window_room()
    set_seed(training_args.seed)

    tokenizer = load_tokenizer(model_args)
    config = build_config(model_args, **preset_config)
    if squad_args.max_seq_length > config.max_position_embeddings:
        raise UserError(
            f"--max_seq_length {squad_args.max_seq_length} exceeds the model's max_position_embeddings "
            f"({config.max_position_embeddings})."
        )
    model = build_model(AlbertForQuestionAnswering, model_args, config)

    train_features = eval_examples = eval_features = None
    if training_args.do_train:
        train_examples = _prepare_split("train", squad_args, tokenizer)
        train_features = _features(train_examples, tokenizer, squad_args, "train", training_args)
    if training_args.do_eval:
        eval_examples = _prepare_split("eval", squad_args, tokenizer)
        eval_features = _features(eval_examples, tokenizer, squad_args, "eval", training_args)

    trainer = SquadTrainer(
        model=model,
        args=training_args,
        train_dataset=train_features,
        eval_dataset=eval_features,
        processing_class=tokenizer,
        data_collator=default_data_collator,  # windows are padded to max_seq_length already
        eval_examples=eval_examples,
        squad_args=squad_args,
        card_info=CardInfo(
            base_model=model_args.model_name_or_path,
            dataset_id="rajpurkar/squad_v2" if squad_args.version_2_with_negative else "rajpurkar/squad",
            dataset_name="SQuAD v2.0" if squad_args.version_2_with_negative else "SQuAD v1.1",
        ),
    )
    train_and_evaluate(trainer, training_args, {"eval": eval_features} if eval_features is not None else {})
    return 0
