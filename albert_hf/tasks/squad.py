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
import math
import time

from datasets import Dataset, load_dataset
from transformers import TrainingArguments, default_data_collator
from transformers.trainer_utils import speed_metrics

from ..data.caching import map_fingerprint
from ..data.squad import (
    check_squad_examples,
    count_unanswerable,
    load_squad_examples,
    postprocess_predictions,
    prepare_eval_features,
    prepare_train_features,
    truncate_questions,
    write_prediction_files,
)
from ..errors import UserError
from ..hub import CardInfo
from ..metrics.squad import squad_metrics
from ..modeling import AlbertForQuestionAnswering
from ..training.trainer import FineTuningTrainer
from .arguments import SquadArguments
from .common import ModelArguments, fill_unset
from .finetuning import FineTuningJob, PaperHyperparameters, apply_paper_preset, preset_key

logger = logging.getLogger(__name__)

# Lan et al. (2020), Table 14, SQuAD rows: lr, global batch, ALBERT dropout, classifier dropout, steps, warmup, length.
SQUAD_HYPERPARAMETERS: dict[str, PaperHyperparameters] = {
    "squad1.1": PaperHyperparameters(5e-5, 48, 0.0, 0.1, 3649, 365, 384),
    "squad2.0": PaperHyperparameters(3e-5, 48, 0.0, 0.1, 8144, 814, 512),
}


def apply_squad_preset(
    model_args: ModelArguments, squad_args: SquadArguments, training_args: TrainingArguments
) -> dict[str, float]:
    """Apply `--preset` (a Table 14 SQuAD row) in place, like the other tasks' presets; return the dropout fields.

    Only fields the user did not give are filled, so `--preset squad1.1 --max_steps 10` trains for 10 steps.
    """
    dropout = apply_paper_preset(model_args, squad_args, training_args, SQUAD_HYPERPARAMETERS)
    if squad_args.preset is not None and preset_key(squad_args.preset) == "squad2.0":
        fill_unset((squad_args,), {"version_2_with_negative": True})
    return dropout


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


class SquadTrainer(FineTuningTrainer):
    """A Trainer whose evaluation answers every question and scores the answers with the official SQuAD metric.

    It evaluates in dataset order (FineTuningTrainer): post-processing matches windows to questions by position, and
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


class SquadJob(FineTuningJob):
    """SQuAD on the fine-tuning skeleton: questions cut into windows, answers extracted by `SquadTrainer`."""

    argument_types = (SquadArguments,)
    model_class = AlbertForQuestionAnswering
    trainer_class = SquadTrainer
    task_name = "squad"

    def apply_preset(self) -> dict[str, float]:
        return apply_squad_preset(self.model_args, self.data_args, self.training_args)

    def check_arguments(self) -> None:
        if not (self.training_args.do_train or self.training_args.do_eval):
            raise UserError("Nothing to do: pass --do_train and/or --do_eval.")
        if self.training_args.do_predict:
            raise UserError(
                "SQuAD has no test split: --do_eval answers the questions of --validation_file and writes "
                "predictions.json; drop --do_predict."
            )
        self.data_args.check_window_room()

    def load_splits(self, splits: list[str]) -> dict[str, Dataset]:
        return {split: load_squad_split(self.data_args, split) for split in splits}

    def prepare(self, split: str, examples: Dataset) -> Dataset:
        """Refuse unanswerable questions outside v2.0; cut long questions (and count them)."""
        unanswerable = count_unanswerable(examples)
        if unanswerable and not self.data_args.version_2_with_negative:
            raise UserError(
                f"The {split} data has {unanswerable} unanswerable questions (no answer): that is SQuAD v2.0, pass "
                "--version_2_with_negative (or --preset squad2.0)."
            )
        examples, cut = truncate_questions(examples, self.tokenizer, self.data_args.max_query_length)
        if cut:
            logger.warning(
                "%s: %d of %d questions were longer than %d tokens and were cut.",
                split,
                cut,
                len(examples),
                self.data_args.max_query_length,
            )
        logger.info("%s: %d questions (%d unanswerable).", split, len(examples), unanswerable)
        return examples

    def encode(self, split: str, examples: Dataset) -> Dataset:
        """Windows of `examples`: labelled for training, with ids and offsets for evaluation."""
        prepare = prepare_train_features if split == "train" else prepare_eval_features
        settings = {"max_seq_length": self.data_args.max_seq_length, "doc_stride": self.data_args.doc_stride}
        with self.training_args.main_process_first(desc=f"{split} windows"):
            return examples.map(
                prepare,
                batched=True,
                remove_columns=examples.column_names,
                fn_kwargs={"tokenizer": self.tokenizer, **settings},
                new_fingerprint=map_fingerprint(examples, prepare, self.tokenizer, **settings),
                desc=f"Cutting {split} contexts into windows",
            )

    def data_collator(self, pad_to_multiple_of: int | None):
        return default_data_collator  # windows are padded to max_seq_length already

    def card_info(self) -> CardInfo:
        v2 = self.data_args.version_2_with_negative
        return CardInfo(
            base_model=self.model_args.model_name_or_path,
            dataset_id="rajpurkar/squad_v2" if v2 else "rajpurkar/squad",
            dataset_name="SQuAD v2.0" if v2 else "SQuAD v1.1",
        )

    def trainer_arguments(self) -> dict:
        return {"eval_examples": self.raw.get("validation"), "squad_args": self.data_args}


def main(argv: list[str] | None = None) -> int:
    return SquadJob.main(argv)
