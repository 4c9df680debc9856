"""SQuAD v1.1 / v2.0: reading the data, cutting long contexts into windows, and turning window logits into answers.

Three steps, as in the original BERT/ALBERT `run_squad.py`:

1. `load_squad_examples` reads the official JSON layout (`{"data": [{"title", "paragraphs": [{"context", "qas"}]}]}`)
   or the Hub's flattened layout (one record per question: `id, title, context, question, answers: {"text": [...],
   "answer_start": [...]}` as a JSON list, under `"data"`, or as JSON lines) into a `datasets.Dataset` with the Hub's
   columns, checking every answer against its context.
2. `prepare_train_features` / `prepare_eval_features` tokenize question + context into windows of `max_seq_length`
   tokens that overlap by `doc_stride` tokens. Training windows carry the answer's token span (or the [CLS] index
   when the answer is not inside the window, or the question is unanswerable); evaluation windows keep the character
   offsets of their context tokens, so predicted spans map back to the original, unnormalized context text.
3. `postprocess_predictions` scores every (start, end) pair among the top `n_best_size` starts and ends of every
   window, merges the windows of each question, and keeps the `n_best_size` best distinct answers. For v2.0 the
   null score (start and end at [CLS]) is compared with the best span: the question is answered "" when
   `null score - best span score > null_score_diff_threshold`; that difference is what `null_odds.json` holds.

Windows follow the tokenizer's `stride` convention: `doc_stride` is the number of context tokens shared by
consecutive windows (as in transformers' examples). The original scripts' `doc_stride` was the step between window
starts instead; with `max_seq_length=384` their step of 128 is an overlap of about 230 tokens.
"""

from __future__ import annotations

import collections
import io
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from datasets import Array2D, Dataset

from ..errors import DataError
from ..output_files import write_json
from .text_checks import check_text
from .textfiles import read_utf8

logger = logging.getLogger(__name__)

# Offsets of tokens that are not context tokens (question, special tokens, padding) in evaluation features.
NOT_CONTEXT = (-1, -1)


# ----------------------------------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------------------------------


def load_squad_examples(path: str | os.PathLike) -> Dataset:
    """Read a SQuAD file in the official or the flattened (Hub) layout into a `Dataset`.

    Columns: `id`, `title`, `context`, `question`, `answers` (`{"text": [...], "answer_start": [...]}`; empty lists for
    an unanswerable v2.0 question). Errors name the file and the place in it (JSON path, or line for JSON lines).
    """
    path = os.fspath(path)
    records = [_check_record(record, where) for where, record in _iter_raw_records(path)]
    if not records:
        raise DataError(f"{path}: no questions found.")
    _check_unique_ids(records, path)
    return Dataset.from_list(records)


def check_squad_examples(examples: Dataset, source: str) -> Dataset:
    """Apply the checks of `load_squad_examples` to a dataset that came from elsewhere (e.g. the Hub)."""
    records = [_check_record(record, f"{source}: row index {row}") for row, record in enumerate(examples)]
    _check_unique_ids(records, source)
    return examples


def _iter_raw_records(path: str):
    """Yield (location in the file, flattened record) for every question of the file, whatever its layout."""
    if path.endswith((".jsonl", ".jsonlines")):
        yield from _iter_json_lines(path)
        return
    try:
        content = json.loads(read_utf8(path))  # bad bytes: the error names file and line
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not valid JSON (line {error.lineno}, column {error.colno}): {error.msg}") from None
    data = content.get("data") if isinstance(content, dict) else content
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of articles or questions under 'data', got {type(data).__name__}.")
    for index, item in enumerate(data):
        if isinstance(item, dict) and "paragraphs" in item:
            yield from _iter_official_article(item, f"{path}: data[{index}]")
        else:
            yield f"{path}: data[{index}]", item


def _iter_json_lines(path: str):
    with io.StringIO(read_utf8(path), newline=None) as handle:  # bad bytes: the error names file and line
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield f"{path}:{line_number}", json.loads(line)
            except json.JSONDecodeError as error:
                raise DataError(f"{path}:{line_number}: not valid JSON: {error.msg}") from None


def _iter_official_article(article: dict, where: str):
    """Flatten one article of the official layout: one record per question, answers as the Hub's dict of lists."""
    for p_index, paragraph in enumerate(article["paragraphs"]):
        p_where = f"{where}.paragraphs[{p_index}]"
        if not isinstance(paragraph, dict) or "context" not in paragraph or "qas" not in paragraph:
            raise DataError(f"{p_where}: a paragraph needs 'context' and 'qas'.")
        for q_index, qa in enumerate(paragraph["qas"]):
            q_where = f"{p_where}.qas[{q_index}]"
            answers = qa.get("answers")
            if not isinstance(answers, list) or not all(isinstance(answer, dict) for answer in answers):
                raise DataError(f"{q_where}: 'answers' must be a list of {{'text', 'answer_start'}} objects.")
            if qa.get("is_impossible") and answers:
                raise DataError(f"{q_where}: question {qa.get('id')!r} is marked is_impossible but has answers.")
            yield (
                q_where,
                {
                    "id": qa.get("id"),
                    "title": article.get("title", ""),
                    "context": paragraph["context"],
                    "question": qa.get("question"),
                    "answers": {
                        "text": [answer.get("text") for answer in answers],
                        "answer_start": [answer.get("answer_start") for answer in answers],
                    },
                },
            )


def _check_record(record: Any, where: str) -> dict[str, Any]:
    """Validate one flattened record: its id, context and question by the reader contract (`text_checks`: a text,
    no NUL byte, not empty, as the question-answering pipeline refuses an empty question), and every answer must be
    found at its `answer_start` in the context."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: expected an object with id/context/question/answers, got {type(record).__name__}.")
    for key in ("id", "context", "question"):
        check_text(record.get(key), where, f"field {key!r}")
    if record.get("title") is not None:
        check_text(record["title"], where, "field 'title'", required=False)
    answers = record.get("answers")
    if not isinstance(answers, dict) or not {"text", "answer_start"} <= set(answers):
        raise DataError(f"{where}: 'answers' must be {{'text': [...], 'answer_start': [...]}}, got {answers!r}.")
    texts, starts = list(answers["text"]), list(answers["answer_start"])
    if len(texts) != len(starts):
        raise DataError(f"{where}: answers has {len(texts)} texts but {len(starts)} answer_start values.")
    context = record["context"]
    for text, start in zip(texts, starts):
        if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
            raise DataError(f"{where}: answer ({text!r}, {start!r}) needs a string text and an integer answer_start.")
        if not text.strip():
            # An empty answer is found at any position, so the check below would pass it; it would train the model
            # to point at nothing. Unanswerable (v2.0) questions have no answers at all, not an empty one.
            raise DataError(
                f"{where}: question {record['id']!r}: an answer has empty text (at answer_start {start}); give the "
                "answer's text, or no answers for an unanswerable question."
            )
        if context[start : start + len(text)] != text:
            raise DataError(
                f"{where}: question {record['id']!r}: answer {text!r} is not at answer_start {start} of the context "
                f"(found {context[start : start + len(text)]!r})."
            )
    return {
        "id": record["id"],
        "title": record.get("title") or "",
        "context": context,
        "question": record["question"],
        "answers": {"text": texts, "answer_start": starts},
    }


def _check_unique_ids(records: Sequence[dict], source: str) -> None:
    counts = collections.Counter(record["id"] for record in records)
    duplicates = [question_id for question_id, count in counts.items() if count > 1]
    if duplicates:
        raise DataError(f"{source}: {len(duplicates)} question ids occur more than once, e.g. {duplicates[0]!r}.")


def gold_answers(examples: Dataset) -> dict[str, list[str]]:
    """Question id -> reference answer texts (empty for unanswerable questions), as the metrics take them."""
    return {question_id: list(answers["text"]) for question_id, answers in zip(examples["id"], examples["answers"])}


def count_unanswerable(examples: Dataset) -> int:
    """Number of questions without any answer (SQuAD v2.0's unanswerable questions)."""
    return sum(1 for answers in examples["answers"] if not answers["text"])


# ----------------------------------------------------------------------------------------------------------------------
# Features: windows over long contexts
# ----------------------------------------------------------------------------------------------------------------------


def truncate_questions(examples: Dataset, tokenizer, max_query_length: int) -> tuple[Dataset, int]:
    """Cut questions longer than `max_query_length` tokens (the original scripts' `max_query_length`, 64).

    Returns the dataset and how many questions were cut, so that the caller can report it.
    """
    questions = list(examples["question"])
    encodings = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    cut = 0
    for index, offsets in enumerate(encodings["offset_mapping"]):
        if len(offsets) > max_query_length:
            questions[index] = questions[index][: offsets[max_query_length - 1][1]]
            cut += 1
    if cut:
        examples = examples.remove_columns("question").add_column("question", questions)
    return examples, cut


def tokenize_windows(examples: dict[str, list], tokenizer, max_seq_length: int, doc_stride: int):
    """Question + context, the context cut into windows of `max_seq_length` tokens overlapping by `doc_stride`.

    Works with any fast tokenizer. Padding is on the side the tokenizer pads (ALBERT: right), so the question comes
    first when padding is on the right, as in the original.
    """
    question_first = tokenizer.padding_side == "right"
    # Leading spaces in questions only waste window room (a few SQuAD questions have many).
    questions = [question.lstrip() for question in examples["question"]]
    contexts = examples["context"]
    return tokenizer(
        questions if question_first else contexts,
        contexts if question_first else questions,
        truncation="only_second" if question_first else "only_first",
        max_length=max_seq_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        return_token_type_ids=True,
        padding="max_length",
    )


def context_token_range(encoding, window: int, question_first: bool = True) -> tuple[int, int]:
    """First and last token index of the context inside window `window` of a batch encoding."""
    context_id = 1 if question_first else 0
    sequence_ids = encoding.sequence_ids(window)
    positions = [index for index, sequence_id in enumerate(sequence_ids) if sequence_id == context_id]
    return positions[0], positions[-1]


def char_span_to_token_span(
    offsets: Sequence[Sequence[int]], context_range: tuple[int, int], start_char: int, end_char: int
) -> tuple[int, int] | None:
    """The token span covering the characters [start_char, end_char) of the context, or None when outside the window.

    `offsets` are the (start, end) character offsets of the window's tokens, increasing along the context (true of
    SentencePiece/WordPiece tokenizers). The span starts at the last token starting at or before `start_char` and
    ends at the first token ending at or after `end_char`, so an answer boundary inside a token widens the span to
    the whole token.
    """
    first, last = context_range
    context = np.asarray(offsets)[first : last + 1]  # (context tokens, 2)
    if context[0, 0] > start_char or context[-1, 1] < end_char:
        return None
    start_token = first + int(np.searchsorted(context[:, 0], start_char, side="right")) - 1
    end_token = first + int(np.searchsorted(context[:, 1], end_char, side="left"))
    return start_token, end_token


def prepare_train_features(examples: dict[str, list], tokenizer, max_seq_length: int, doc_stride: int) -> dict:
    """Batched `Dataset.map` function: windows with `start_positions`/`end_positions` of the first answer.

    A window that does not contain the whole answer, and every window of an unanswerable question, points both
    positions at the [CLS] token (the null answer), as in the original.
    """
    question_first = tokenizer.padding_side == "right"
    encoding = tokenize_windows(examples, tokenizer, max_seq_length, doc_stride)
    example_of_window = encoding.pop("overflow_to_sample_mapping")
    offset_mapping = encoding.pop("offset_mapping")

    start_positions, end_positions = [], []
    for window, offsets in enumerate(offset_mapping):
        cls_index = encoding["input_ids"][window].index(tokenizer.cls_token_id)
        answers = examples["answers"][example_of_window[window]]
        span = None
        if answers["text"]:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            context_range = context_token_range(encoding, window, question_first)
            span = char_span_to_token_span(offsets, context_range, start_char, end_char)
        start, end = span if span is not None else (cls_index, cls_index)
        start_positions.append(start)
        end_positions.append(end)
    encoding["start_positions"] = start_positions
    encoding["end_positions"] = end_positions
    return encoding


def prepare_eval_features(examples: dict[str, list], tokenizer, max_seq_length: int, doc_stride: int) -> dict:
    """Batched `Dataset.map` function: windows with `example_id`, `cls_index` and context-only `offset_mapping`.

    Offsets of tokens outside the context are set to (-1, -1), so post-processing can only pick context tokens.
    """
    question_first = tokenizer.padding_side == "right"
    context_id = 1 if question_first else 0
    encoding = tokenize_windows(examples, tokenizer, max_seq_length, doc_stride)
    example_of_window = encoding.pop("overflow_to_sample_mapping")

    encoding["example_id"] = [examples["id"][index] for index in example_of_window]
    encoding["cls_index"] = [input_ids.index(tokenizer.cls_token_id) for input_ids in encoding["input_ids"]]
    offsets = np.array(encoding["offset_mapping"], dtype=np.int64)  # (W, T, 2)
    # sequence_ids: 0 question, 1 context (when the question comes first), None special tokens; None -> nan here.
    sequence_ids = np.array([encoding.sequence_ids(window) for window in range(len(offsets))], dtype=float)
    offsets[sequence_ids != context_id] = NOT_CONTEXT
    encoding["offset_mapping"] = offsets
    return encoding


# ----------------------------------------------------------------------------------------------------------------------
# Post-processing: window logits -> answers
# ----------------------------------------------------------------------------------------------------------------------


@dataclass
class SquadPredictions:
    """What post-processing produces for each question id.

    Attributes:
        predictions: the answer at the fixed null threshold (v2.0: "" when the null answer wins); `predictions.json`.
        best_spans: the best non-null answer, whatever the null score; the official threshold search uses these.
        nbest: up to `n_best_size` answers (v2.0: plus the null answer) with `text`, `probability`, `start_logit`,
            `end_logit`, best first; `nbest_predictions.json`.
        null_odds: v2.0 only: null score minus best span score (higher: more likely unanswerable); `null_odds.json`.
        no_valid_span: questions where no (start, end) pair among the top starts/ends formed a valid span; their
            answer is "" (counted, as the original does).
    """

    predictions: dict[str, str] = field(default_factory=dict)
    best_spans: dict[str, str] = field(default_factory=dict)
    nbest: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    null_odds: dict[str, float] = field(default_factory=dict)
    no_valid_span: list[str] = field(default_factory=list)


def top_span_candidates(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    n_best_size: int,
    max_answer_length: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Score every pair of the top-k context starts and top-k context ends of every window at once.

    Args:
        start_logits, end_logits: (W, T) logits of W windows of T tokens.
        context_mask: (W, T) True on context tokens.

    Returns:
        start_index, end_index, score: (W, k, k) arrays; score = start logit + end logit, -inf where the pair is not a
        valid answer (end before start, longer than `max_answer_length` tokens, or not in the context).
    """
    num_windows, num_tokens = start_logits.shape
    k = min(n_best_size, num_tokens)
    masked_start = np.where(context_mask, start_logits, -np.inf)
    masked_end = np.where(context_mask, end_logits, -np.inf)
    top_start = np.argsort(-masked_start, axis=1, kind="stable")[:, :k]  # (W, k)
    top_end = np.argsort(-masked_end, axis=1, kind="stable")[:, :k]  # (W, k)

    start_index = np.broadcast_to(top_start[:, :, None], (num_windows, k, k))
    end_index = np.broadcast_to(top_end[:, None, :], (num_windows, k, k))
    score = (
        np.take_along_axis(masked_start, top_start, axis=1)[:, :, None]
        + np.take_along_axis(masked_end, top_end, axis=1)[:, None, :]
    )
    length = end_index - start_index + 1
    valid = (length >= 1) & (length <= max_answer_length) & np.isfinite(score)
    return start_index, end_index, np.where(valid, score, -np.inf)


def postprocess_predictions(
    examples: Dataset,
    features: Dataset,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> SquadPredictions:
    """Turn the logits of every evaluation window into the answer of every question.

    Args:
        examples: the questions (`load_squad_examples` columns).
        features: their windows from `prepare_eval_features` (`example_id`, `cls_index`, `offset_mapping`), in the
            order of the logits.
        start_logits, end_logits: (W, T) model outputs for the W windows.
        n_best_size: starts and ends considered per window, and answers kept per question.
        max_answer_length: longest answer, in tokens.
        version_2_with_negative: compare the best span with the null answer ([CLS], [CLS]).
        null_score_diff_threshold: answer "" when null score - best span score exceeds it.
    """
    start_logits, end_logits = np.asarray(start_logits, dtype=np.float64), np.asarray(end_logits, dtype=np.float64)
    if start_logits.shape != end_logits.shape or start_logits.shape[0] != len(features):
        raise ValueError(
            f"Got start logits {start_logits.shape} and end logits {end_logits.shape} for {len(features)} windows."
        )
    offsets = window_offsets(features)  # (W, T, 2)
    if offsets.shape[:2] != start_logits.shape:
        raise ValueError(f"Logits {start_logits.shape} do not match the windows' offsets {offsets.shape[:2]}.")
    starts, ends, scores = top_span_candidates(
        start_logits, end_logits, offsets[:, :, 0] >= 0, n_best_size, max_answer_length
    )
    cls_index = np.asarray(list(features["cls_index"]))

    windows_of_example = collections.defaultdict(list)
    for window, example_id in enumerate(features["example_id"]):
        windows_of_example[example_id].append(window)

    result = SquadPredictions()
    for example_id, context in zip(examples["id"], examples["context"]):
        windows = windows_of_example.get(example_id)
        if not windows:
            raise ValueError(f"Question {example_id!r} has no window among the features: features and examples differ.")
        spans = _best_distinct_spans(
            context, windows, starts, ends, scores, offsets, start_logits, end_logits, n_best_size
        )
        if not spans:
            result.no_valid_span.append(example_id)
            spans = [{"text": "", "start_logit": 0.0, "end_logit": 0.0}]  # the original's "empty" fallback
        best_span = spans[0]["text"]
        result.best_spans[example_id] = best_span
        result.predictions[example_id] = best_span

        if version_2_with_negative:
            null_answer = _null_answer(windows, start_logits, end_logits, cls_index)
            score_diff = _score(null_answer) - _score(spans[0])
            result.null_odds[example_id] = score_diff
            if score_diff > null_score_diff_threshold:
                result.predictions[example_id] = ""
            spans = [span for span in spans if span["text"]] + [null_answer]
        result.nbest[example_id] = _with_probabilities(spans)

    if result.no_valid_span:
        logger.warning(
            "%d questions had no valid span among the top %d starts/ends of their windows; answered with ''.",
            len(result.no_valid_span),
            n_best_size,
        )
    return result


def _score(answer: dict[str, Any]) -> float:
    return answer["start_logit"] + answer["end_logit"]


def _null_answer(
    windows: list[int], start_logits: np.ndarray, end_logits: np.ndarray, cls_index: np.ndarray
) -> dict[str, Any]:
    """The null answer ([CLS], [CLS]) of a question: its lowest-scoring one over the windows, as in the original."""
    null_scores = start_logits[windows, cls_index[windows]] + end_logits[windows, cls_index[windows]]
    window = windows[int(np.argmin(null_scores))]
    return {
        "text": "",
        "start_logit": float(start_logits[window, cls_index[window]]),
        "end_logit": float(end_logits[window, cls_index[window]]),
    }


def window_offsets(features: Dataset) -> np.ndarray:
    """The (W, T, 2) character offsets of all evaluation windows, (-1, -1) outside the context.

    Read through a fixed-shape column: numpy gets it in one piece, where nested lists would be converted row by row.
    """
    column = features.cast_column("offset_mapping", Array2D(shape=(None, 2), dtype="int64"))
    return column.with_format("numpy", columns=["offset_mapping"])["offset_mapping"][:]


def _best_distinct_spans(
    context: str,
    windows: list[int],
    starts: np.ndarray,
    ends: np.ndarray,
    scores: np.ndarray,
    offsets: np.ndarray,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int,
) -> list[dict[str, Any]]:
    """The `n_best_size` best valid spans over all windows of one question, one per distinct answer text."""
    candidate_scores = scores[windows].reshape(-1)  # (len(windows) * k * k,)
    order = np.argsort(-candidate_scores, kind="stable")
    pairs_per_window = scores.shape[1] * scores.shape[2]
    spans: list[dict[str, Any]] = []
    seen_texts: set[str] = set()
    for flat in order:
        if not np.isfinite(candidate_scores[flat]) or len(spans) == n_best_size:
            break
        window = windows[flat // pairs_per_window]
        row, column = divmod(flat % pairs_per_window, scores.shape[2])
        start_token, end_token = starts[window, row, column], ends[window, row, column]
        text = context[offsets[window, start_token, 0] : offsets[window, end_token, 1]]
        # Overlapping windows propose the same answer several times: keep its best score only.
        if text in seen_texts:
            continue
        seen_texts.add(text)
        spans.append(
            {
                "text": text,
                "start_logit": float(start_logits[window, start_token]),
                "end_logit": float(end_logits[window, end_token]),
            }
        )
    return spans


def _with_probabilities(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort answers by score and add the softmax of their scores, as `nbest_predictions.json` has them."""
    entries = sorted(entries, key=_score, reverse=True)
    scores = np.array([_score(entry) for entry in entries])
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    return [
        {
            "text": entry["text"],
            "probability": float(probability),
            "start_logit": entry["start_logit"],
            "end_logit": entry["end_logit"],
        }
        for entry, probability in zip(entries, probabilities)
    ]


def write_prediction_files(output_dir: str | os.PathLike, predictions: SquadPredictions, prefix: str = "") -> list[str]:
    """Write `predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json` as the official tools read them.

    Returns the paths written (through `albert_hf.output_files`: beside a user's file of a name, never over it).
    """
    files = {"predictions.json": predictions.predictions, "nbest_predictions.json": predictions.nbest}
    if predictions.null_odds:
        files["null_odds.json"] = predictions.null_odds
    return [
        str(write_json(os.path.join(output_dir, f"{prefix}{name}"), content, indent=4, ensure_ascii=False))
        for name, content in files.items()
    ]
