"""GLUE metric as an `evaluate` module, offline: each task's official measure, from `albert_hf.metrics.glue`."""

import datasets
import evaluate

from albert_hf.metrics.glue import GLUE_METRIC_TASKS, glue_metric

_DESCRIPTION = """The official metric of a GLUE task (the configuration name): Matthews correlation (cola), Pearson
and Spearman correlation (stsb), accuracy and F1 (mrpc, qqp), accuracy (sst2, mnli, qnli, rte, wnli)."""
_KWARGS_DESCRIPTION = """
Args:
    predictions: predicted class ids (stsb: scores).
    references: gold class ids (stsb: scores).
Returns:
    matthews_correlation (cola); pearson, spearmanr (stsb); accuracy and f1 (mrpc, qqp); accuracy (others).
Example:
    >>> glue = evaluate.load(albert_hf.metrics.path("glue"), "mrpc")
    >>> glue.compute(predictions=[1, 0, 1], references=[1, 1, 1])
    {'accuracy': 0.6666666666666666, 'f1': 0.8}
"""
_CITATION = """@inproceedings{wang2019glue,
  title={{GLUE}: A Multi-Task Benchmark and Analysis Platform for Natural Language Understanding},
  author={Wang, Alex and Singh, Amanpreet and Michael, Julian and Hill, Felix and Levy, Omer and Bowman, Samuel R.},
  booktitle={International Conference on Learning Representations},
  year={2019}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Glue(evaluate.Metric):
    def _info(self):
        if self.config_name not in GLUE_METRIC_TASKS:
            raise KeyError(f"Unknown GLUE task {self.config_name!r}; choose one of {GLUE_METRIC_TASKS}.")
        # float64: Arrow would otherwise round the scores, and the correlation with them, to float32.
        value = datasets.Value("float64" if self.config_name == "stsb" else "int64")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": value, "references": value}),
            format="numpy",
        )

    def _compute(self, predictions, references):
        return glue_metric(self.config_name, predictions, references)
