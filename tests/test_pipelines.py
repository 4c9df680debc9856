"""transformers pipelines with albert_hf models and tokenizer: outputs have the documented structure and agree with a
direct forward pass. Tiny random models on the real ALBERT vocabulary and real text (CoNLL-2003, SQuAD v2.0)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.tiny import TINY_CONFIG
from transformers import pipeline

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.pipelines import TASK as QA_TASK

# The real ALBERT vocabulary (the real tokenizer's ids fit) and room for question-answering windows.
TINY = dict(TINY_CONFIG, vocab_size=30000, num_hidden_layers=2, max_position_embeddings=128)
NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def tiny_model(class_name: str, seed: int = 0, **overrides):
    torch.manual_seed(seed)
    return getattr(albert_hf, class_name)(AlbertConfig(**{**TINY, **overrides})).eval()


@pytest.fixture(scope="module")
def conll_sentence(shared_data) -> str:
    """The first sentence of CoNLL-2003 valid with more than 10 tokens, as plain text."""
    sentence: list[str] = []
    with open(shared_data / "conll2003" / "valid.txt", encoding="utf-8") as file:
        for line in file:
            if line.strip() and not line.startswith("-DOCSTART-"):
                sentence.append(line.split()[0])
            elif len(sentence) > 10:
                return " ".join(sentence)
            else:
                sentence = []
    raise AssertionError("no sentence found")


@pytest.fixture(scope="module")
def squad_v2(shared_data) -> list[dict]:
    """(question, context, is_impossible) of the SQuAD v2.0-layout sample."""
    data = json.loads((shared_data / "squad" / "dev-v2.0.json").read_text())
    return [
        {"question": qa["question"], "context": paragraph["context"], "is_impossible": qa.get("is_impossible", False)}
        for article in data["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def forward(model, tokenizer, *texts):
    inputs = tokenizer(*texts, return_tensors="pt")
    with torch.no_grad():
        return inputs, model(**inputs).logits[0]


# --------------------------------------------------------------------------------------------------------------------
# fill-mask
# --------------------------------------------------------------------------------------------------------------------


def test_fill_mask_matches_forward_pass(tokenizer):
    model = tiny_model("AlbertForMaskedLM")
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=5)
    text = "The capital of France is [MASK]."
    predictions = fill(text)

    inputs, logits = forward(model, tokenizer, text)
    mask_position = int((inputs["input_ids"][0] == tokenizer.mask_token_id).nonzero())
    probabilities, token_ids = logits[mask_position].softmax(-1).topk(5)
    assert [p["token"] for p in predictions] == token_ids.tolist()
    assert np.allclose([p["score"] for p in predictions], probabilities.tolist(), atol=1e-6)
    for prediction in predictions:
        assert set(prediction) == {"score", "token", "token_str", "sequence"}
        assert prediction["token_str"] == tokenizer.decode([prediction["token"]])
        assert prediction["sequence"].startswith("the capital of france is")  # uncased, like ALBERT

    batched = fill([text, "I like [MASK] tea."])
    assert len(batched) == 2 and batched[0] == predictions


# --------------------------------------------------------------------------------------------------------------------
# text-classification
# --------------------------------------------------------------------------------------------------------------------


def test_text_classification_single_and_pair_match_forward_pass(tokenizer):
    model = tiny_model(
        "AlbertForSequenceClassification", num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"}
    )
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer)

    scores = classify("A man is playing a guitar.", top_k=None)
    _, logits = forward(model, tokenizer, "A man is playing a guitar.")
    expected = dict(zip(["entailment", "neutral", "contradiction"], logits.softmax(-1).tolist()))
    assert {s["label"]: pytest.approx(s["score"], abs=1e-6) for s in scores} == expected
    assert [s["score"] for s in scores] == sorted((s["score"] for s in scores), reverse=True)

    premise, hypothesis = "A man is playing a guitar.", "Someone makes music."
    best = classify({"text": premise, "text_pair": hypothesis})
    pair_inputs, pair_logits = forward(model, tokenizer, premise, hypothesis)
    assert pair_inputs["token_type_ids"].max() == 1  # segment B reaches the model
    assert best["label"] == model.config.id2label[int(pair_logits.argmax())]
    assert best["score"] == pytest.approx(float(pair_logits.softmax(-1).max()), abs=1e-6)
    assert classify.preprocess({"text": premise, "text_pair": hypothesis})["token_type_ids"].max() == 1


# --------------------------------------------------------------------------------------------------------------------
# token-classification
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ner_model():
    model = tiny_model(
        "AlbertForTokenClassification", seed=3, num_labels=len(NER_LABELS), id2label=dict(enumerate(NER_LABELS))
    )
    with torch.no_grad():
        model.classifier.weight.mul_(30.0)  # confident, token-dependent labels: a mix of O and entities
    return model


def token_predictions(model, tokenizer, text):
    inputs = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    offsets = inputs.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        probabilities = model(**inputs).logits[0].softmax(-1)
    return inputs, offsets, probabilities


def test_token_classification_without_aggregation_matches_forward_pass(ner_model, tokenizer, conll_sentence):
    ner = pipeline("token-classification", model=ner_model, tokenizer=tokenizer, aggregation_strategy="none")
    entities = ner(conll_sentence)
    inputs, offsets, probabilities = token_predictions(ner_model, tokenizer, conll_sentence)
    special = set(tokenizer.all_special_ids)
    expected = [
        index
        for index, token in enumerate(inputs["input_ids"][0].tolist())
        if token not in special and NER_LABELS[int(probabilities[index].argmax())] != "O"
    ]
    assert expected, "the fixture model should tag some tokens"
    assert [entity["index"] for entity in entities] == expected
    for entity in entities:
        index = entity["index"]
        assert entity["entity"] == NER_LABELS[int(probabilities[index].argmax())]
        assert entity["score"] == pytest.approx(float(probabilities[index].max()), abs=1e-6)
        assert (entity["start"], entity["end"]) == tuple(offsets[index])


@pytest.mark.filterwarnings("ignore:Tokenizer does not support real words")
@pytest.mark.parametrize("strategy", ["simple", "first", "max", "average"])
def test_token_classification_aggregation_groups_words(ner_model, tokenizer, conll_sentence, strategy):
    ner = pipeline("token-classification", model=ner_model, tokenizer=tokenizer, aggregation_strategy=strategy)
    groups = ner(conll_sentence)
    assert groups
    for group in groups:
        assert set(group) == {"entity_group", "score", "word", "start", "end"}
        assert group["entity_group"] in {"PER", "LOC"} and 0.0 < group["score"] <= 1.0
        # Offsets point into the original (cased) text; the word is its uncased decoding. One exception: where the
        # vocabulary has no "▁" + symbol piece, ALBERT's SentencePiece emits a bare "▁" before the symbol
        # (" ," -> "▁", ","; likewise . ; : ' ( ) and others); a group of that piece alone decodes to "" while its
        # offsets cover the symbol.
        # Word strategies ("first", "max", "average") decode each word alone and join the words without spaces
        # (transformers' behaviour for tokenizers without a subword prefix), so compare without spaces.
        span = conll_sentence[group["start"] : group["end"]].lower()
        word = group["word"]
        if strategy != "simple":
            span, word = span.replace(" ", ""), word.replace(" ", "")
        assert word == span or (word == "" and tokenizer.tokenize(f"a {span}")[1:] == ["▁", span])
    starts = [group["start"] for group in groups]
    assert starts == sorted(starts)

    if strategy == "first":
        # Every word takes the label of its first token: the words covered by entities are exactly the words whose
        # first token is tagged as an entity.
        inputs, offsets, probabilities = token_predictions(ner_model, tokenizer, conll_sentence)
        word_ids = inputs.word_ids(0)
        first_tokens = {word: index for index, word in reversed(list(enumerate(word_ids))) if word is not None}
        tagged_words = {
            word for word, index in first_tokens.items() if NER_LABELS[int(probabilities[index].argmax())] != "O"
        }
        covered_words = {
            word
            for word, index in first_tokens.items()
            if any(group["start"] <= offsets[index][0] < group["end"] for group in groups)
        }
        assert covered_words == tagged_words


# --------------------------------------------------------------------------------------------------------------------
# question answering (transformers 5 removed its pipeline; albert_hf.pipelines provides it)
# --------------------------------------------------------------------------------------------------------------------

MAX_SEQ_LEN, DOC_STRIDE, MAX_ANSWER_LEN = 64, 16, 15


def reference_answer(model, tokenizer, question, context):
    """Best span over all windows and the null score, computed directly from the model's logits."""
    encoding = tokenizer(
        question,
        context,
        truncation="only_second",
        max_length=MAX_SEQ_LEN,
        stride=DOC_STRIDE,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=True,
        return_tensors="pt",
    )
    offsets = encoding.pop("offset_mapping").tolist()
    encoding.pop("overflow_to_sample_mapping")
    with torch.no_grad():
        outputs = model(**encoding)
    best, null_score = {"score": -1.0}, float("inf")
    for window in range(len(offsets)):
        context_tokens = [i for i, sequence in enumerate(encoding.sequence_ids(window)) if sequence == 1]
        allowed = torch.full((encoding["input_ids"].shape[1],), float("-inf"))
        allowed[[0, *context_tokens]] = 0.0  # context tokens and [CLS]
        start = (outputs.start_logits[window] + allowed).softmax(-1)
        end = (outputs.end_logits[window] + allowed).softmax(-1)
        null_score = min(null_score, float(start[0] * end[0]))
        # score[i, j] = p(start=i) p(end=j) for context spans i <= j < i + MAX_ANSWER_LEN
        scores = start[:, None] * end[None, :]
        is_context = torch.zeros_like(start, dtype=torch.bool)
        is_context[context_tokens] = True
        valid = is_context[:, None] & is_context[None, :]
        valid &= torch.triu(torch.ones_like(valid), 0) & ~torch.triu(torch.ones_like(valid), MAX_ANSWER_LEN)
        scores = torch.where(valid, scores, torch.zeros_like(scores))
        i, j = divmod(int(scores.argmax()), scores.shape[1])
        if float(scores[i, j]) > best["score"]:
            best = {"score": float(scores[i, j]), "start": offsets[window][i][0], "end": offsets[window][j][1]}
    return best, null_score, len(offsets)


@pytest.fixture(scope="module")
def qa_model():
    return tiny_model("AlbertForQuestionAnswering", seed=1)


def test_question_answering_long_context_matches_forward_pass(qa_model, tokenizer, squad_v2):
    qa = pipeline(QA_TASK, model=qa_model, tokenizer=tokenizer)
    example = max(squad_v2, key=lambda e: len(e["context"]))
    answer = qa(
        question=example["question"],
        context=example["context"],
        max_seq_len=MAX_SEQ_LEN,
        doc_stride=DOC_STRIDE,
        max_answer_len=MAX_ANSWER_LEN,
    )

    best, _, num_windows = reference_answer(qa_model, tokenizer, example["question"], example["context"])
    assert num_windows > 3  # the context really is cut into overlapping windows
    assert set(answer) == {"score", "start", "end", "answer"}
    assert (answer["start"], answer["end"]) == (best["start"], best["end"])
    assert answer["score"] == pytest.approx(best["score"], rel=1e-5)
    assert answer["answer"] == example["context"][answer["start"] : answer["end"]] != ""

    top = qa(
        question=example["question"],
        context=example["context"],
        max_seq_len=MAX_SEQ_LEN,
        doc_stride=DOC_STRIDE,
        top_k=3,
    )
    assert len(top) == 3 and top[0] == answer
    assert len({(a["start"], a["end"]) for a in top}) == 3
    assert [a["score"] for a in top] == sorted((a["score"] for a in top), reverse=True)

    # Batched over questions, the answers are the same.
    questions = squad_v2[:3]
    one_by_one = [
        qa(question=e["question"], context=e["context"], max_seq_len=MAX_SEQ_LEN, doc_stride=DOC_STRIDE)
        for e in questions
    ]
    batched = qa(
        question=[e["question"] for e in questions],
        context=[e["context"] for e in questions],
        max_seq_len=MAX_SEQ_LEN,
        doc_stride=DOC_STRIDE,
        batch_size=2,
    )
    assert [(a["start"], a["end"]) for a in batched] == [(a["start"], a["end"]) for a in one_by_one]


def test_question_answering_unanswerable(qa_model, tokenizer, squad_v2):
    qa = pipeline(QA_TASK, model=qa_model, tokenizer=tokenizer)
    example = next(e for e in squad_v2 if e["is_impossible"])
    kwargs = dict(
        question=example["question"], context=example["context"], max_seq_len=MAX_SEQ_LEN, doc_stride=DOC_STRIDE
    )

    # A model confident that there is no answer: high start and end logits on [CLS].
    def favour_cls(module, inputs, output):
        output = output.clone()
        output[:, 0, :] += 12.0
        return output

    handle = qa_model.qa_outputs.register_forward_hook(favour_cls)
    try:
        best, null_score, _ = reference_answer(qa_model, tokenizer, example["question"], example["context"])
        assert null_score > best["score"]
        no_answer = qa(**kwargs, handle_impossible_answer=True)
        assert no_answer == {"score": pytest.approx(null_score, rel=1e-5), "start": 0, "end": 0, "answer": ""}
        forced = qa(**kwargs)  # without handle_impossible_answer the best span is returned
        assert (forced["start"], forced["end"]) == (best["start"], best["end"]) and forced["answer"]
    finally:
        handle.remove()

    # The untouched model prefers a span here, and says so even with handle_impossible_answer.
    best, null_score, _ = reference_answer(qa_model, tokenizer, example["question"], example["context"])
    answer = qa(**kwargs, handle_impossible_answer=True)
    if best["score"] > null_score:
        assert (answer["start"], answer["end"]) == (best["start"], best["end"])
    else:
        assert answer["answer"] == ""


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(question="Who?", context="   "), "context must be a non-empty string"),
        (dict(question="Who?"), "Pass both question= and context="),
        (dict(question="Who?", context="Jane wrote it.", doc_stride=60), "doc_stride=60 must be smaller"),
        (dict(question="Who?", context="Jane wrote it.", top_k=0), "top_k must be at least 1"),
    ],
)
def test_question_answering_bad_input(qa_model, tokenizer, kwargs, message):
    qa = pipeline(QA_TASK, model=qa_model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match=message):
        qa(max_seq_len=MAX_SEQ_LEN, **kwargs)
