"""GLUE and NER metrics against independent reference computations (textbook formulas, a conlleval re-statement)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.metric_references import (
    reference_f1,
    reference_matthews,
    reference_ner_scores,
    reference_pearson,
    reference_spearman,
)
from transformers import EvalPrediction

from albert_hf.metrics.glue import glue_compute_metrics, glue_metric
from albert_hf.metrics.ner import ner_compute_metrics, ner_metrics, tags_from_token_ids

# ----------------------------------------------------------------------------------------------------------------------
# GLUE


@pytest.mark.parametrize("seed", range(5))
def test_glue_classification_metrics_match_the_formulas(seed):
    rng = np.random.default_rng(seed)
    y_true, y_pred = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert glue_metric("cola", y_pred, y_true)["matthews_correlation"] == pytest.approx(
        reference_matthews(y_true, y_pred)
    )
    mrpc = glue_metric("mrpc", y_pred, y_true)
    assert mrpc["accuracy"] == pytest.approx(np.mean(y_true == y_pred))
    assert mrpc["f1"] == pytest.approx(reference_f1(y_true, y_pred))
    assert glue_metric("qqp", y_pred, y_true) == mrpc
    assert set(glue_metric("rte", y_pred, y_true)) == {"accuracy"}


@pytest.mark.parametrize("seed", range(5))
def test_stsb_correlations_match_the_formulas(seed):
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 5, 300)
    predicted = gold + rng.normal(0, 1.5, 300)
    metrics = glue_metric("stsb", predicted, gold)
    assert metrics["pearson"] == pytest.approx(reference_pearson(predicted, gold))
    assert metrics["spearmanr"] == pytest.approx(reference_spearman(predicted, gold))


def test_glue_compute_metrics_reads_logits():
    labels = np.array([0, 1, 1, 0, 2])
    logits = np.array([[2.0, 0, 0], [0, 1, 0], [0, 0, 3], [1, 0, 0], [0, 0, 1]])  # argmax: 0 1 2 0 2
    assert glue_compute_metrics("mnli")(EvalPrediction(logits, labels)) == {"accuracy": pytest.approx(0.8)}
    scores = np.array([[1.0], [2.5], [4.0]])  # STS-B regression head: [N, 1]
    metrics = glue_compute_metrics("stsb")(EvalPrediction(scores, np.array([1.2, 2.0, 4.9])))
    assert metrics["pearson"] == pytest.approx(reference_pearson([1.0, 2.5, 4.0], [1.2, 2.0, 4.9]))
    assert metrics["spearmanr"] == pytest.approx(1.0)


def test_glue_metric_rejects_bad_input():
    with pytest.raises(ValueError, match="Unknown GLUE task 'glue'"):
        glue_metric("glue", [0], [0])
    with pytest.raises(ValueError, match="2 predictions for 3 references"):
        glue_metric("sst2", [0, 1], [0, 1, 1])


# ----------------------------------------------------------------------------------------------------------------------
# NER


def test_ner_metrics_on_a_hand_counted_example():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    metrics = ner_metrics(gold, predicted)
    # 3 gold entities, 3 predicted, 2 right (PER, the second ORG).
    assert metrics["precision"] == pytest.approx(2 / 3)
    assert metrics["recall"] == pytest.approx(2 / 3)
    assert metrics["f1"] == pytest.approx(2 / 3)
    assert metrics["accuracy"] == pytest.approx(5 / 6)
    assert metrics["PER_f1"] == 1.0 and metrics["LOC_recall"] == 0.0 and metrics["ORG_precision"] == 0.5
    assert metrics["ORG_number"] == 1 and metrics["LOC_number"] == 1


def test_ner_metrics_reads_iob1_like_conlleval():
    # conlleval opens an entity at an I- tag after O: IOB1 and IOB2 spellings of one entity match.
    assert ner_metrics([["I-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])["f1"] == 1.0
    # A type change inside a run of I- tags splits it into two entities.
    assert ner_metrics([["B-PER", "I-LOC"]], [["B-PER", "I-PER"]])["f1"] == 0.0


@pytest.mark.parametrize("seed", range(10))
def test_ner_metrics_match_a_conlleval_restatement(seed):
    rng = np.random.default_rng(seed)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-MISC"]
    references = [list(rng.choice(tags, rng.integers(1, 15))) for _ in range(30)]
    predictions = [[tag if rng.random() < 0.7 else str(rng.choice(tags)) for tag in row] for row in references]
    precision, recall, f1 = reference_ner_scores(references, predictions)
    metrics = ner_metrics(references, predictions)
    assert (metrics["precision"], metrics["recall"], metrics["f1"]) == pytest.approx((precision, recall, f1))


def test_ner_metrics_rejects_misaligned_input():
    with pytest.raises(ValueError, match="sentence 0: 1 predicted tags for 2 words"):
        ner_metrics([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="1 predicted sentences for 2 reference"):
        ner_metrics([["O"], ["O"]], [["O"]])


def test_ner_compute_metrics_scores_only_labelled_positions():
    label_list = ["O", "B-PER", "I-PER"]
    labels = np.array([[-100, 1, -100, 2, 0, -100], [-100, 0, 1, -100, -100, -100]])
    # Wrong guesses at ignored positions (sub-tokens, [CLS], padding) must not count.
    predicted = np.array([[2, 1, 0, 2, 0, 1], [1, 0, 1, 2, 2, 2]])
    references, predictions = tags_from_token_ids(predicted, labels, label_list)
    assert references == predictions == [["B-PER", "I-PER", "O"], ["O", "B-PER"]]
    logits = np.eye(3)[predicted]  # [2, 6, 3] one-hot
    assert ner_compute_metrics(label_list)(EvalPrediction(logits, labels))["f1"] == 1.0
