"""The steps of the SQuAD v1.1 / v2.0 job (albert_hf/scripts/squad.py, `albert-hf squad`) as functions a copy of
the script calls as they are: the paper's presets, loading a split (a file in the official JSON layout or the Hub's
flattened layout, or a Hub dataset), checking and preparing its questions, cutting the contexts into windows, the
model card's dataset, and `SquadTrainer`, whose evaluation answers every question from all its windows, writes
`predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json` to `--output_dir`, and reports the official
metrics. For v2.0 it reports the scores at `--null_score_diff_threshold` and, as the original does, the best exact/F1
over all thresholds on the evaluation set (`best_f1_thresh`: rerun with that threshold to use it).
"""

from __future__ import annotations

import logging
import math
import time

from datasets import Dataset, load_dataset
from transformers import TrainingArguments
from transformers.trainer_utils import speed_metrics

from ..argument_parsing import ModelArguments
from ..arguments import SquadArguments
from ..data.caching import map_fingerprint
from ..data.squad_windows import (
    check_squad_examples,
    count_unanswerable,
    load_squad_examples,
    postprocess_predictions,
    prepare_eval_features,
    prepare_train_features,
    truncate_questions,
    write_prediction_files,
)
from ..data.word_segmentation import log_edges_inside_pieces, unspaced_language
from ..errors import UserError
from ..hub import CardInfo
from ..metrics.squad import squad_metrics
from ..training.trainer import AlbertTrainer

logger = logging.getLogger(__name__)


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


class SquadTrainer(AlbertTrainer):
    """A Trainer whose evaluation answers every question and scores the answers with the official SQuAD metric.

    It evaluates in dataset order (AlbertTrainer): post-processing matches windows to questions by position, and
    transformers 5 would otherwise reorder evaluation by length under `--train_sampling_strategy group_by_length`.

    The model's start/end logits over all evaluation windows are merged per question by `postprocess_predictions`;
    the prediction files are written to `output_dir` by the main process.
    """

    def __init__(self, *args, eval_examples: Dataset, squad_args: SquadArguments, **kwargs):
        super().__init__(*args, **kwargs)
        self.eval_examples = eval_examples
        self.squad_args = squad_args

    def evaluate(
        self, eval_dataset: Dataset | None = None, ignore_keys: list[str] | None = None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        features = self.eval_dataset if eval_dataset is None else eval_dataset
        start_time = time.time()
        # Windows carry no labels: the loop returns the logits only, and the metrics come from the answers below.
        output = self.evaluation_loop(
            self.get_eval_dataloader(features),
            description="Evaluation",
            prediction_loss_only=False,
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        start_logits, end_logits = output.predictions[:2]
        args = self.squad_args
        predictions = postprocess_predictions(
            self.eval_examples,
            features,
            start_logits,
            end_logits,
            n_best_size=args.n_best_size,
            max_answer_length=args.max_answer_length,
            version_2_with_negative=args.version_2_with_negative,
            null_score_diff_threshold=args.null_score_diff_threshold,
        )
        if self.is_world_process_zero():
            paths = write_prediction_files(self.args.output_dir, predictions)
            logger.info("Wrote %s", ", ".join(paths))

        scores = squad_metrics(
            predictions, self.eval_examples, args.version_2_with_negative, args.null_score_diff_threshold
        )
        scores["questions_without_valid_span"] = len(predictions.no_valid_span)
        metrics = {f"{metric_key_prefix}_{key}": value for key, value in scores.items()}
        metrics.update(output.metrics)
        total_batch_size = self.args.eval_batch_size * self.args.world_size
        metrics.update(
            speed_metrics(metric_key_prefix, start_time, len(features), math.ceil(len(features) / total_batch_size))
        )
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
