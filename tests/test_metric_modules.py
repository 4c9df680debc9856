"""The `evaluate` modules shipped in the package: offline, equal to `albert_hf.metrics`' functions on real data, and
what the fine-tuning jobs score with.

Predictions are the real dev sets' gold labels, perturbed (a fraction flipped, shifted, cut or emptied with a fixed
seed), so the scores are far from trivial; the modules must give exactly the functions' numbers.
"""

from __future__ import annotations

import random
from pathlib import Path

import evaluate
import numpy as np
import pytest
import tomllib
from helpers.data import is_full
from transformers import EvalPrediction

import albert_hf.metrics
from albert_hf.data.glue_files import get_glue_task, read_glue_tsv
from albert_hf.data.ner import read_conll
from albert_hf.data.squad_windows import gold_answers, load_squad_examples
from albert_hf.metrics import glue as glue_metrics
from albert_hf.metrics import ner as ner_module
from albert_hf.metrics.glue import glue_compute_metrics, glue_metric
from albert_hf.metrics.ner import ner_compute_metrics, ner_metrics
from albert_hf.metrics.squad import squad_v1_scores, squad_v2_scores

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")


def perturbed_labels(gold: np.ndarray, task: str, rng: np.random.Generator) -> np.ndarray:
    if task == "stsb":
        return np.clip(gold + rng.normal(0, 1.0, size=gold.shape), 0, 5).astype(np.float32)
    flip = rng.random(gold.shape) < 0.25
    return np.where(flip, 1 - gold, gold)


@pytest.mark.parametrize(
    ("task", "folder"), [("mrpc", "MRPC"), ("cola", "CoLA"), ("stsb", "STS-B"), ("sst2", "SST-2"), ("rte", "RTE")]
)
def test_glue_module_equals_the_function_on_real_dev_sets(shared_data, task, folder):
    dev = read_glue_tsv(str(shared_data / "glue" / folder / "dev.tsv"), get_glue_task(task), labelled=True)
    gold = np.asarray([row["label"] for row in dev], dtype=np.float32 if task == "stsb" else np.int64)
    predictions = perturbed_labels(gold, task, np.random.default_rng(0))
    expected = glue_metric(task, predictions, gold)

    by_path = evaluate.load(albert_hf.metrics.path("glue"), task)
    assert by_path.compute(predictions=predictions, references=gold) == expected
    metric = albert_hf.metrics.load("glue", task)
    for start in range(0, len(gold), 100):  # batch by batch, as an evaluation loop adds them
        metric.add_batch(predictions=predictions[start : start + 100], references=gold[start : start + 100])
    assert metric.compute() == expected
    assert 0.0 < abs(next(iter(expected.values()))) < 1.0  # perturbed: neither perfect nor empty


def test_glue_modules_combine():
    combined = evaluate.combine([albert_hf.metrics.load("glue", "mrpc"), albert_hf.metrics.load("glue", "cola")])
    scores = combined.compute(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1])
    assert scores["accuracy"] == glue_metric("mrpc", [1, 0, 1, 1], [1, 0, 0, 1])["accuracy"]
    assert scores["matthews_correlation"] == glue_metric("cola", [1, 0, 1, 1], [1, 0, 0, 1])["matthews_correlation"]


def perturbed_answer(answer: str, rng: random.Random) -> str:
    words = answer.split()
    choice = rng.random()
    if choice < 0.4 or not words:
        return answer  # right
    if choice < 0.6:
        return " ".join(words[: max(1, len(words) // 2)])  # cut: partial F1
    if choice < 0.75:
        return f"the {answer} in"  # extra words and an article
    if choice < 0.9:
        return ""  # no answer
    return "completely unrelated words"


def squad_rows(answers: dict[str, list[str]], predictions: dict[str, str], na_probs: dict[str, float] | None = None):
    references = [
        {"id": key, "answers": {"text": texts, "answer_start": [0] * len(texts)}} for key, texts in answers.items()
    ]
    rows = [{"id": key, "prediction_text": predictions[key]} for key in answers]
    if na_probs is not None:
        rows = [{**row, "no_answer_probability": na_probs[row["id"]]} for row in rows]
    return rows, references


def test_squad_v1_module_equals_the_function_on_the_real_dev_set(shared_data):
    answers = gold_answers(load_squad_examples(shared_data / "squad" / "dev-v1.1-part-a.json"))
    rng = random.Random(0)
    predictions = {key: perturbed_answer(rng.choice(texts), rng) for key, texts in answers.items()}
    expected = squad_v1_scores(predictions, answers)
    rows, references = squad_rows(answers, predictions)
    assert evaluate.load(albert_hf.metrics.path("squad")).compute(predictions=rows, references=references) == expected
    assert expected["total"] == (5696 if is_full(shared_data) else 1057)  # the first two articles in the excerpt
    assert 30 < expected["exact_match"] < 90 and expected["f1"] > expected["exact_match"]


@pytest.mark.parametrize("threshold", [1.0, 0.5, -0.3])
def test_squad_v2_module_equals_the_function_on_the_real_dev_sample(shared_data, threshold):
    answers = gold_answers(load_squad_examples(shared_data / "squad" / "dev-v2.0.json"))
    assert any(not texts for texts in answers.values()) and any(answers.values())
    rng = random.Random(1)
    predictions = {
        key: perturbed_answer(rng.choice(texts), rng) if texts else rng.choice(["", "some span"])
        for key, texts in answers.items()
    }
    na_probs = {key: rng.uniform(-1, 1) for key in answers}
    expected = squad_v2_scores(predictions, answers, na_probs=na_probs, na_prob_thresh=threshold)
    rows, references = squad_rows(answers, predictions, na_probs)
    module = albert_hf.metrics.load("squad_v2")
    assert module.compute(predictions=rows, references=references, no_answer_threshold=threshold) == expected
    assert "best_f1_thresh" in expected and "NoAns_exact" in expected


def perturbed_tags(sentences: list[list[str]], rng: random.Random) -> list[list[str]]:
    kinds = ["PER", "ORG", "LOC", "MISC"]
    out = []
    for tags in sentences:
        tags = list(tags)
        for i, tag in enumerate(tags):
            draw = rng.random()
            if tag != "O" and draw < 0.1:
                tags[i] = f"{tag[:2]}{rng.choice(kinds)}"  # wrong type
            elif tag != "O" and draw < 0.15:
                tags[i] = "O"  # missed
            elif tag == "O" and draw < 0.02:
                tags[i] = f"B-{rng.choice(kinds)}"  # spurious
        out.append(tags)
    return out


def test_seqeval_module_equals_the_function_on_real_conll(shared_data):
    gold = [sentence["ner_tags"] for sentence in read_conll(str(shared_data / "conll2003" / "valid.txt"))]
    predictions = perturbed_tags(gold, random.Random(0))
    expected = ner_metrics(gold, predictions)
    assert albert_hf.metrics.load("seqeval").compute(predictions=predictions, references=gold) == expected
    assert 0.5 < expected["f1"] < 0.95
    assert expected["PER_number"] > 1000 if is_full(shared_data) else expected["PER_number"] == 7  # 10 sentences


def test_the_jobs_score_through_the_modules(monkeypatch):
    loaded = []

    def spy(name, config_name=None, **kwargs):
        loaded.append((name, config_name))
        return albert_hf.metrics.load(name, config_name, **kwargs)

    monkeypatch.setattr(glue_metrics, "load_metric_module", spy)
    monkeypatch.setattr(ner_module, "load_metric_module", spy)
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    compute = glue_compute_metrics("mrpc")
    assert compute(EvalPrediction(logits, np.array([1, 1, 1]))) == glue_metric("mrpc", [1, 0, 1], [1, 1, 1])
    compute(EvalPrediction(logits, np.array([1, 1, 0])))
    labels = ["O", "B-PER", "I-PER"]
    token_logits = np.eye(3)[[[1, 2, 0, 0]]] + 0.0
    ner = ner_compute_metrics(labels)
    assert ner(EvalPrediction(token_logits, np.array([[1, 2, 0, -100]]))) == ner_metrics(
        [["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]]
    )
    assert loaded == [("glue", "mrpc"), ("seqeval", None)]  # loaded once per job, at the first evaluation


def test_the_module_files_ship_in_the_wheel():
    """Every module file matches a package-data pattern of pyproject.toml (setuptools puts those in the wheel)."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["albert_hf"]
    package = REPO_ROOT / "albert_hf"
    shipped = {path for pattern in patterns for path in package.glob(pattern)}
    for name in albert_hf.metrics.METRIC_MODULES:
        script = Path(albert_hf.metrics.path(name)) / f"{name}.py"
        assert script.is_file() and script in shipped, script
