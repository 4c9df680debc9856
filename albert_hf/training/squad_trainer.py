"""`SquadTrainer`: the Trainer of extractive question answering (SQuAD v1.1 / v2.0), whose evaluation answers every
question from all its windows, writes `predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json` to
`--output_dir`, and reports the official metrics. For v2.0 it reports the scores at `--null_score_diff_threshold` and,
as the original does, the best exact/F1 over all thresholds on the evaluation set (`best_f1_thresh`: rerun with that
threshold to use it). One of the two albert_hf Trainers above `AlbertTrainer`, each where a task changes the loss or
the evaluation; the SQuAD job (albert_hf/scripts/squad.py) builds it.
"""

from __future__ import annotations

import logging
import math
import time

from datasets import Dataset
from transformers.trainer_utils import speed_metrics

from ..arguments import SquadArguments
from ..data.squad_windows import postprocess_predictions, write_prediction_files
from ..metrics.squad import squad_metrics
from .trainer import AlbertTrainer

logger = logging.getLogger(__name__)


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
