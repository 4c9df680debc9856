"""The official SQuAD v1.1 / v2.0 metrics, checked against small computations done independently (by hand or by brute
force), and against the rules where the two official scripts differ."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from albert_hf.metrics.squad import (
    apply_no_answer_threshold,
    exact_match_score,
    f1_score_v1,
    f1_score_v2,
    find_best_threshold,
    normalize_answer,
    squad_v1_scores,
    squad_v2_scores,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   apple,\ta PEAR! ", "apple pear"),
        ("Theory of the 'anthem'", "theory of anthem"),  # articles only as whole words: "Theory" keeps its "the"
        ("U.S.-based", "usbased"),  # punctuation is deleted, not replaced by a space
        ("«quoted» café", "«quoted» café"),  # only ASCII punctuation is removed; accents stay
        ("A", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_by_hand():
    assert exact_match_score("the Eiffel tower!", "Eiffel Tower") == 1
    assert exact_match_score("Eiffel", "Eiffel Tower") == 0
    # prediction [in, paris, france] vs reference [paris]: precision 1/3, recall 1 -> F1 = 2 * (1/3) / (4/3) = 0.5
    assert f1_score_v1("in Paris, France", "Paris") == pytest.approx(0.5)
    # [x, x, y] vs [x, y, y]: common bag {x, y} -> 2 tokens; precision = recall = 2/3
    assert f1_score_v1("x x y", "x y y") == pytest.approx(2 / 3)
    assert f1_score_v1("red", "blue") == 0.0


def test_empty_answers_differ_between_v1_and_v2():
    # v1.1 has no unanswerable questions: an empty prediction scores 0, even against an empty reference.
    assert f1_score_v1("", "") == 0.0
    # v2.0: an empty side means "no answer"; F1 is 1 when both are empty (after normalization), else 0.
    assert f1_score_v2("", "") == 1.0
    assert f1_score_v2("The", "") == 1.0  # "The" normalizes to ""
    assert f1_score_v2("", "Paris") == 0.0
    assert f1_score_v2("Paris", "") == 0.0


def test_squad_v1_scores_by_hand():
    references = {"q1": ["Denver Broncos", "The Broncos"], "q2": ["Paris"], "q3": ["1990"], "q4": ["blue"]}
    predictions = {"q1": "Broncos", "q2": "in Paris, France", "q3": "1990"}  # q4 unanswered
    # q1: "Broncos" equals "The Broncos" once articles go: EM 1, F1 1; q2: EM 0, F1 0.5; q3: EM 1, F1 1; q4: 0, 0.
    scores = squad_v1_scores(predictions, references)
    assert scores["exact_match"] == pytest.approx(100 * 2 / 4)
    assert scores["f1"] == pytest.approx(100 * (1.0 + 0.5 + 1.0 + 0.0) / 4)
    assert scores["total"] == 4
    assert scores["missing"] == 1


def test_squad_v1_refuses_unanswerable_questions():
    with pytest.raises(ValueError, match="q2.*unanswerable.*squad_v2_scores"):
        squad_v1_scores({"q1": "a", "q2": ""}, {"q1": ["a"], "q2": []})


def test_squad_v2_scores_by_hand():
    references = {"a1": ["Paris"], "a2": ["blue sky"], "n1": [], "n2": []}
    predictions = {"a1": "Paris", "a2": "sky", "n1": "", "n2": "something"}
    # a1: EM 1 F1 1; a2: EM 0, F1 [sky] vs [blue, sky] = 2*(1*0.5)/1.5 = 2/3; n1: 1, 1; n2: 0, 0.
    scores = squad_v2_scores(predictions, references)
    assert scores["exact"] == pytest.approx(100 * 2 / 4)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert scores["HasAns_exact"] == pytest.approx(50.0)
    assert scores["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert scores["NoAns_exact"] == scores["NoAns_f1"] == pytest.approx(50.0)
    assert scores["HasAns_total"] == scores["NoAns_total"] == 2
    assert "best_f1" not in scores  # no null odds, no threshold search


def test_squad_v2_references_that_normalize_to_empty_are_dropped():
    # A reference "the" cannot be matched; the question keeps its other reference, or becomes unanswerable.
    scores = squad_v2_scores({"q1": "", "q2": "x"}, {"q1": ["The"], "q2": ["the", "x"]})
    assert scores["exact"] == 100.0
    assert scores["HasAns_total"] == 2  # has_answer follows the raw reference list, as in the official script


def test_squad_v2_no_answer_threshold_by_hand():
    references = {"a1": ["Paris"], "a2": ["blue"], "n1": []}
    predictions = {"a1": "Paris", "a2": "blue", "n1": "Rome"}  # best non-null spans
    na_probs = {"a1": -2.0, "a2": 0.5, "n1": 1.0}
    # Threshold 0: a2 and n1 are answered "" -> a1 right, a2 wrong, n1 right.
    scores = squad_v2_scores(predictions, references, na_probs=na_probs, na_prob_thresh=0.0)
    assert scores["exact"] == pytest.approx(100 * 2 / 3)
    # Best: threshold 0.5 answers a1 and a2 and leaves n1 empty: all three right.
    assert scores["best_exact"] == pytest.approx(100.0)
    assert scores["best_exact_thresh"] == 0.5
    assert scores["best_f1_thresh"] == 0.5


def test_missing_prediction_scores_zero_in_v2():
    scores = squad_v2_scores({"q1": "x"}, {"q1": ["x"], "q2": ["y"]})
    assert scores["missing"] == 1
    assert scores["exact"] == pytest.approx(50.0)
    assert scores["HasAns_exact"] == pytest.approx(50.0)


def test_na_probs_must_cover_the_predictions():
    with pytest.raises(ValueError, match="na_probs has no entry.*'q2'"):
        squad_v2_scores({"q1": "x", "q2": "y"}, {"q1": ["x"], "q2": ["y"]}, na_probs={"q1": 0.0})


def _brute_force_best(raw_scores, na_probs, has_answer):
    """Try every threshold, summing exactly (F1 as the fraction it is, e.g. 2/3): questions with na_prob <= t keep their prediction, the
    others answer "". Returns the best total and every threshold that reaches it (0.0 = below every question)."""
    totals = {None: sum(Fraction(not has_answer[q]) for q in raw_scores)}  # None: below every question
    for threshold in sorted(set(na_probs.values())):
        totals[threshold] = sum(
            Fraction(raw_scores[q]).limit_denominator(1000) if na_probs[q] <= threshold else Fraction(not has_answer[q])
            for q in raw_scores
        )
    best = max(totals.values())
    return best, {0.0 if threshold is None else threshold for threshold, total in totals.items() if total == best}


def _official_find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    """`find_best_thresh` of the official SQuAD v2.0 script (evaluate-v2.0.py), kept line for line as the reference:
    it sums in floating point, so where two thresholds tie exactly, the rounding of the running sum picks one."""
    num_no_ans = sum(1 for k in qid_to_has_ans if not qid_to_has_ans[k])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for qid in qid_list:
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


question_cases = st.lists(
    st.tuples(
        st.booleans(),  # has an answer
        st.sampled_from(["", "paris", "in paris", "rome"]),  # prediction (reference of answerable ones: "paris")
    ),
    min_size=1,
    max_size=12,
)


def _threshold_case(cases, odds):
    references = {f"q{i}": (["Paris"] if has else []) for i, (has, _) in enumerate(cases)}
    predictions = {f"q{i}": prediction for i, (_, prediction) in enumerate(cases)}
    na_probs = {f"q{i}": odds[i] / 10 for i in range(len(cases))}
    has_answer = {q: bool(answers) for q, answers in references.items()}
    raw_f1 = {q: max(f1_score_v2(predictions[q], r) for r in (references[q] or [""])) for q in references}
    raw_exact = {
        q: float(normalize_answer(predictions[q]) == normalize_answer((references[q] or [""])[0])) for q in references
    }
    return references, predictions, na_probs, has_answer, raw_exact, raw_f1


def _check_best_thresholds(cases, odds):
    references, predictions, na_probs, has_answer, raw_exact, raw_f1 = _threshold_case(cases, odds)
    scores = squad_v2_scores(predictions, references, na_probs=na_probs)
    for kind, raw in (("exact", raw_exact), ("f1", raw_f1)):
        best, best_thresholds = _brute_force_best(raw, na_probs, has_answer)
        # The official script's answer, threshold included (its float sums decide between exact ties) ...
        official = _official_find_best_thresh(predictions, raw, na_probs, has_answer)
        assert (scores[f"best_{kind}"], scores[f"best_{kind}_thresh"]) == official
        # ... is a best threshold of the exact search, with the best score.
        assert scores[f"best_{kind}"] == pytest.approx(100.0 * float(best) / len(cases), abs=1e-9)
        assert scores[f"best_{kind}_thresh"] in best_thresholds


@settings(max_examples=150)
@given(cases=question_cases, odds=st.lists(st.integers(-50, 50), min_size=12, max_size=12, unique=True))
def test_best_threshold_equals_brute_force_search(cases, odds):
    _check_best_thresholds(cases, odds)


def test_best_threshold_tie_is_decided_as_the_official_script_does():
    """Found by the property above: F1 2/3 three times ties "answer nothing" (6 of 9) at threshold 0.8; in floating
    point 6 - 1 - 1 + 2/3 + 2/3 + 2/3 + ... lands just above 6, so the official script reports 0.8, not 0.0."""
    cases = [(False, "")] * 4 + [(False, "paris")] * 2 + [(True, "in paris")] * 3
    odds = list(range(12))
    _check_best_thresholds(cases, odds)
    references, predictions, na_probs, _, _, _ = _threshold_case(cases, odds)
    scores = squad_v2_scores(predictions, references, na_probs=na_probs)
    assert scores["best_f1_thresh"] == 0.8
    assert scores["best_f1"] == pytest.approx(100.0 * 6 / 9)


def test_apply_no_answer_threshold_only_touches_questions_above_it():
    scores = apply_no_answer_threshold(
        {"a": 0.5, "n": 0.0, "b": 1.0}, {"a": 2.0, "n": 2.0, "b": -1.0}, {"a": True, "n": False, "b": True}, 1.0
    )
    assert scores == {"a": 0.0, "n": 1.0, "b": 1.0}


def test_find_best_threshold_prefers_answering_nothing_when_all_predictions_are_wrong():
    score, threshold = find_best_threshold(
        {"n1": "x", "a1": "wrong"}, {"n1": 0.0, "a1": 0.0}, {"n1": 0.3, "a1": 0.1}, {"n1": False, "a1": True}
    )
    assert (score, threshold) == (50.0, 0.0)


words = st.lists(st.sampled_from(["the", "a", "cat", "sat", "on", "mat", "Mat,", "CAT!", "dog"]), max_size=6)


@settings(max_examples=200, deadline=None)
@given(prediction=words.map(" ".join), reference=words.map(" ".join))
def test_f1_properties(prediction, reference):
    for f1 in (f1_score_v1, f1_score_v2):
        value = f1(prediction, reference)
        assert 0.0 <= value <= 1.0
        assert value == pytest.approx(f1(reference, prediction))  # F1 is symmetric
    if exact_match_score(prediction, reference):
        assert f1_score_v2(prediction, reference) == 1.0
        assert f1_score_v1(prediction, reference) == (1.0 if normalize_answer(reference) else 0.0)
    if normalize_answer(prediction) and normalize_answer(reference):
        assert math.isclose(f1_score_v1(prediction, reference), f1_score_v2(prediction, reference))
