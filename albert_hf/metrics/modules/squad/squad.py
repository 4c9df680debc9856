"""SQuAD v1.1 metric (`evaluate-v1.1.py`) as an `evaluate` module, from `albert_hf.metrics.squad`."""

import datasets
import evaluate

from albert_hf.metrics.squad import squad_v1_scores

_DESCRIPTION = """Exact match and F1 (in percent) of SQuAD v1.1, as the official `evaluate-v1.1.py`: answers are
lowercased, stripped of punctuation and articles, and compared with the best of the reference answers."""
_KWARGS_DESCRIPTION = """
Args:
    predictions: [{"id": question id, "prediction_text": answer}].
    references: [{"id": question id, "answers": {"text": [...], "answer_start": [...]}}].
Returns:
    exact_match, f1 (percent), total (questions), missing (questions without a prediction, scored 0).
"""
_CITATION = """@inproceedings{rajpurkar2016squad,
  title={{SQuAD}: 100,000+ Questions for Machine Comprehension of Text},
  author={Rajpurkar, Pranav and Zhang, Jian and Lopyrev, Konstantin and Liang, Percy},
  booktitle={EMNLP},
  year={2016}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Squad(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                    "references": {
                        "id": datasets.Value("string"),
                        "answers": datasets.Sequence(
                            {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
                        ),
                    },
                }
            ),
        )

    def _compute(self, predictions, references):
        answers = {reference["id"]: list(reference["answers"]["text"]) for reference in references}
        return squad_v1_scores({p["id"]: p["prediction_text"] for p in predictions}, answers)
