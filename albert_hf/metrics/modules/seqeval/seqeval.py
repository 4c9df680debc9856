"""Entity-level NER metric (seqeval, conlleval mode) as an `evaluate` module, from `albert_hf.metrics.ner`."""

import datasets
import evaluate

from albert_hf.metrics.ner import ner_metrics

_DESCRIPTION = """Entity-level precision, recall and F1 (an entity counts only when its type and exact span match, as
in conlleval) and token accuracy, computed with seqeval; per entity type as flat `<TYPE>_precision/recall/f1/number`
keys (the Hub's "seqeval" module nests them in one dict per type)."""
_KWARGS_DESCRIPTION = """
Args:
    predictions: one list of IOB tags per sentence.
    references: the gold tags, same shapes.
Returns:
    precision, recall, f1, accuracy, and <TYPE>_precision, <TYPE>_recall, <TYPE>_f1, <TYPE>_number per entity type.
"""
_CITATION = """@misc{seqeval,
  title={{seqeval}: A Python framework for sequence labeling evaluation},
  url={https://github.com/chakki-works/seqeval},
  author={Hiroki Nakayama},
  year={2018}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Seqeval(evaluate.Metric):
    def _info(self):
        tags = datasets.Sequence(datasets.Value("string"))
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": tags, "references": tags}),
        )

    def _compute(self, predictions, references):
        return ner_metrics(references, predictions)
