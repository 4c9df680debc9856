"""Extractive question answering as a transformers pipeline, for albert_hf models (and any fast-tokenizer QA model).

transformers 5 removed its "question-answering" pipeline (`pipeline("question-answering")` now raises). This module
brings the same behaviour back under the task name "extractive-question-answering":

    from transformers import pipeline
    import albert_hf.pipelines  # registers the task

    qa = pipeline("extractive-question-answering", model=model, tokenizer=tokenizer)
    qa(question="Who wrote it?", context=long_text, doc_stride=64, max_seq_len=256, handle_impossible_answer=True)
    # {"score": 0.41, "start": 120, "end": 133, "answer": "Jane Austen"}

Long contexts are cut into windows of `max_seq_len` tokens overlapping by `doc_stride` tokens; every window is scored
and the best span over all windows wins. Scores are those of the removed pipeline (transformers' own
`select_starts_ends`): per window, softmax of the start and of the end logits over the context tokens (and [CLS]),
score = p(start) * p(end) for spans of at most `max_answer_len` tokens. With `handle_impossible_answer=True` the null
answer ([CLS], [CLS]) competes with its lowest score over the windows, and wins with `{"answer": "", "start": 0,
"end": 0}`. Other pipelines (fill-mask, text-classification, token-classification) need nothing from albert_hf; a
classifier's adaptive-depth settings (`early_exit_patience`, `num_layers_at_inference`) live in its config, so
`pipeline("text-classification", model=...)` runs at the depth the config says (tests/test_early_exit.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForQuestionAnswering
from transformers.pipelines import PIPELINE_REGISTRY
from transformers.pipelines.base import ChunkPipeline
from transformers.pipelines.document_question_answering import select_starts_ends

TASK = "extractive-question-answering"


class QuestionAnsweringPipeline(ChunkPipeline):
    """Answer a question with a span of a context of any length (see the module docstring).

    Call with `question=` and `context=` (strings, or lists of equal length), or with a dict / list of dicts holding
    both. Options: `max_seq_len` (384), `doc_stride` (128), `max_question_len` (64), `max_answer_len` (15), `top_k`
    (1), `handle_impossible_answer` (False).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(
                f"{TASK} needs a tokenizer with character offsets (a fast/Rust-backed one); got "
                f"{type(self.tokenizer).__name__}."
            )

    def _sanitize_parameters(
        self,
        max_seq_len: int | None = None,
        doc_stride: int | None = None,
        max_question_len: int | None = None,
        max_answer_len: int | None = None,
        top_k: int | None = None,
        handle_impossible_answer: bool | None = None,
        **kwargs: Any,
    ) -> tuple[dict, dict, dict]:
        preprocess = _given(max_seq_len=max_seq_len, doc_stride=doc_stride, max_question_len=max_question_len)
        postprocess = _given(
            max_answer_len=max_answer_len, top_k=top_k, handle_impossible_answer=handle_impossible_answer
        )
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}.")
        if max_answer_len is not None and max_answer_len < 1:
            raise ValueError(f"max_answer_len must be at least 1, got {max_answer_len}.")
        return preprocess, {}, postprocess

    def __call__(
        self, *args: Any, question: str | list[str] | None = None, context: str | list[str] | None = None, **kwargs: Any
    ):
        if question is not None or context is not None:
            if question is None or context is None:
                raise ValueError("Pass both question= and context=.")
            if isinstance(question, str) != isinstance(context, str):
                raise ValueError("question and context must both be strings or both be lists.")
            if isinstance(question, str):
                examples: Any = {"question": question, "context": context}
            else:
                if len(question) != len(context):
                    raise ValueError(f"Got {len(question)} questions for {len(context)} contexts.")
                examples = [{"question": q, "context": c} for q, c in zip(question, context)]
            return super().__call__(examples, **kwargs)
        return super().__call__(*args, **kwargs)

    def preprocess(
        self, example: dict[str, str], max_seq_len: int = 384, doc_stride: int = 128, max_question_len: int = 64
    ) -> Iterator[dict[str, Any]]:
        question, context = _check_example(example)
        question_ids = self.tokenizer(question, add_special_tokens=False)["input_ids"]
        if len(question_ids) > max_question_len:
            raise ValueError(
                f"The question has {len(question_ids)} tokens, more than max_question_len={max_question_len}: "
                "shorten it or raise max_question_len."
            )
        # [CLS] question [SEP] ... [SEP]: the room left for context must exceed the overlap between windows.
        context_room = max_seq_len - len(question_ids) - 3
        if doc_stride >= context_room:
            raise ValueError(
                f"doc_stride={doc_stride} must be smaller than the context room of a window ({context_room} tokens "
                f"with max_seq_len={max_seq_len}): lower doc_stride or raise max_seq_len."
            )
        encoding = self.tokenizer(
            question,
            context,
            truncation="only_second",
            max_length=max_seq_len,
            stride=doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            return_token_type_ids=True,
            padding=True,
        )
        num_windows = len(encoding["input_ids"])
        for window in range(num_windows):
            input_ids = encoding["input_ids"][window]
            # Only context tokens (sequence 1) may be part of an answer; [CLS] stays selectable for the null answer.
            p_mask = np.array([sequence_id != 1 for sequence_id in encoding.sequence_ids(window)], dtype=np.int64)
            p_mask[np.asarray(input_ids) == self.tokenizer.cls_token_id] = 0
            yield {
                **{
                    name: torch.tensor([encoding[name][window]])
                    for name in ("input_ids", "attention_mask", "token_type_ids")
                },
                "p_mask": p_mask,
                "offsets": encoding["offset_mapping"][window],
                "context": context,
                "is_last": window == num_windows - 1,
            }

    def _forward(self, model_inputs: dict[str, Any]) -> dict[str, Any]:
        extras = {key: model_inputs.pop(key) for key in ("p_mask", "offsets", "context", "is_last")}
        outputs = self.model(**model_inputs)
        return {
            "start_logits": outputs.start_logits,
            "end_logits": outputs.end_logits,
            "attention_mask": model_inputs["attention_mask"],
            **extras,
        }

    def postprocess(
        self,
        model_outputs: list[dict[str, Any]],
        top_k: int = 1,
        max_answer_len: int = 15,
        handle_impossible_answer: bool = False,
    ) -> dict[str, Any] | list[dict[str, Any]]:
        min_null_score = 1_000_000.0  # select_starts_ends lowers it to the smallest null score seen
        answers: list[dict[str, Any]] = []
        context = model_outputs[0]["context"]
        for output in model_outputs:
            starts, ends, scores, min_null_score = select_starts_ends(
                output["start_logits"].float().numpy(),
                output["end_logits"].float().numpy(),
                output["p_mask"],
                output["attention_mask"].numpy(),
                min_null_score,
                top_k,
                handle_impossible_answer,
                max_answer_len,
            )
            offsets = output["offsets"]
            for start, end, score in zip(starts, ends, scores):
                start_char, end_char = offsets[start][0], offsets[end][1]
                answer = context[start_char:end_char]
                answers.append({"score": float(score), "start": start_char, "end": end_char, "answer": answer})
        if handle_impossible_answer:
            answers.append({"score": float(min_null_score), "start": 0, "end": 0, "answer": ""})
        answers = _best_distinct(answers, top_k)
        return answers[0] if top_k == 1 else answers


def _given(**options: Any) -> dict[str, Any]:
    """The options the caller set (not None), so that defaults stay those of the method signatures."""
    return {name: value for name, value in options.items() if value is not None}


def _check_example(example: Any) -> tuple[str, str]:
    if not isinstance(example, dict) or not {"question", "context"} <= example.keys():
        raise ValueError(f"Each input must be a dict with 'question' and 'context', got {example!r:.200}.")
    question, context = example["question"], example["context"]
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"The question must be a non-empty string, got {question!r:.200}.")
    if not isinstance(context, str) or not context.strip():
        raise ValueError(f"The context must be a non-empty string, got {context!r:.200}.")
    # Leading spaces only waste window room (as in the original SQuAD preprocessing).
    return question.lstrip(), context


def _best_distinct(answers: list[dict[str, Any]], top_k: int) -> list[dict[str, Any]]:
    """The `top_k` best answers, one per character span (overlapping windows propose the same span twice)."""
    best: dict[tuple[int, int], dict[str, Any]] = {}
    for answer in answers:
        key = (answer["start"], answer["end"])
        if key not in best or answer["score"] > best[key]["score"]:
            best[key] = answer
    return sorted(best.values(), key=lambda answer: answer["score"], reverse=True)[:top_k]


def register_pipelines() -> None:
    """Make `pipeline("extractive-question-answering", ...)` available (idempotent)."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=QuestionAnsweringPipeline, pt_model=AutoModelForQuestionAnswering, type="text"
        )


register_pipelines()

__all__ = ["TASK", "QuestionAnsweringPipeline", "register_pipelines"]
