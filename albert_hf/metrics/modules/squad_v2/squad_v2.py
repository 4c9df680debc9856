"""SQuAD v2.0 metric (`evaluate-v2.0.py`) as an `evaluate` module, from `albert_hf.metrics.squad`."""

import datasets
import evaluate

from albert_hf.metrics.squad import squad_v2_scores

_DESCRIPTION = """Exact and F1 (in percent) of SQuAD v2.0, as the official `evaluate-v2.0.py`, with unanswerable
questions (no reference answer: right only when answered ""). Questions whose `no_answer_probability` exceeds
`no_answer_threshold` count as answered "", and the best threshold for exact and F1 is searched over those scores."""
_KWARGS_DESCRIPTION = """
Args:
    predictions: [{"id", "prediction_text", "no_answer_probability"}] (the score may be a probability or a null-score
        difference, compared with `no_answer_threshold`).
    references: [{"id", "answers": {"text": [...], "answer_start": [...]}}]; empty lists mark unanswerable questions.
    no_answer_threshold: the threshold applied to `no_answer_probability` (1.0).
Returns:
    exact, f1, total, missing; HasAns_* and NoAns_* breakdowns; best_exact, best_exact_thresh, best_f1, best_f1_thresh.
"""
_CITATION = """@inproceedings{rajpurkar2018know,
  title={Know What You Don't Know: Unanswerable Questions for {SQuAD}},
  author={Rajpurkar, Pranav and Jia, Robin and Liang, Percy},
  booktitle={ACL},
  year={2018}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SquadV2(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": {
                        "id": datasets.Value("string"),
                        "prediction_text": datasets.Value("string"),
                        "no_answer_probability": datasets.Value("float64"),
                    },
                    "references": {
                        "id": datasets.Value("string"),
                        "answers": datasets.Sequence(
                            {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
                        ),
                    },
                }
            ),
        )

    def _compute(self, predictions, references, no_answer_threshold=1.0):
        answers = {reference["id"]: list(reference["answers"]["text"]) for reference in references}
        texts = {p["id"]: p["prediction_text"] for p in predictions}
        na_probs = {p["id"]: p["no_answer_probability"] for p in predictions}
        return squad_v2_scores(texts, answers, na_probs=na_probs, na_prob_thresh=no_answer_threshold)
