"""Property-based tests (hypothesis) on arbitrary input: tokenizer, SOP instances, masking collator, SQuAD answers.

Each property holds for every input, so hypothesis searches for a counterexample among arbitrary Unicode text,
random documents and random logits. `max_examples` is kept small so the whole file runs in well under a minute;
`HYPOTHESIS_PROFILE=thorough` runs 10x more examples.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import sentencepiece as spm
import torch
from datasets import Dataset
from helpers.tokenization_reference import preprocess_text  # tests/ has no __init__.py: pytest puts it on sys.path
from hypothesis import assume, example, given
from hypothesis import strategies as st

from albert_hf.data.collator import DataCollatorForSOP
from albert_hf.data.sentence_order import (
    create_sentence_order_instances,
    sentence_pairs_from_document,
    truncate_seq_pair,
)
from albert_hf.data.squad_windows import postprocess_predictions, prepare_eval_features, truncate_questions

# Profiles (fixed-seed by default, `HYPOTHESIS_PROFILE=thorough` for 10x more fresh examples): tests/conftest.py.

# Arbitrary Unicode (every category but surrogates), and text dense in what the tokenizer treats specially:
# whitespace of every kind, accents and combining marks, digit-comma runs (ALBERT's re-split), compatibility forms.
ANY_TEXT = st.text(max_size=60)
TRICKY_TEXT = st.text(
    alphabet=st.sampled_from(list("09 ,.aZé\u0301\u00a0\u3000\t\n\u2028ﬁ①''``\"İßΣ日本\U0001f600[MASK]<unk>")),
    max_size=40,
)
TEXTS = st.one_of(ANY_TEXT, TRICKY_TEXT)


@pytest.fixture(scope="module")
def sentencepiece(spiece_model) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(spiece_model))


# --------------------------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------------------------


def normalized(text: str, sentencepiece: spm.SentencePieceProcessor) -> str:
    """The text as ALBERT sees it: the original preprocessing, then SentencePiece's own normalization rule."""
    return sentencepiece.normalize(preprocess_text(text)).replace("\u2581", " ").strip()


ASCII_TEXT = st.text(alphabet=st.characters(max_codepoint=127), max_size=40)
ASCII_TRICKY = st.text(alphabet=st.sampled_from(list("019 ,aZ\x00\x01\x1c\x7f\t\n<>[]unkpadMASKCLS")), max_size=30)


# Added tokens and control-piece strings run into each other and into text, in other cases and forms.
TOKEN_TRICKY = st.lists(
    st.sampled_from(["<unk>", "<UNK>", "[MASK]", "[mask]", "<pad>", "<", ">", "k", "un", " ", "1", ",", "é", "\u0301"]),
    max_size=12,
).map("".join)


@given(text=st.one_of(ASCII_TEXT, ASCII_TRICKY, TOKEN_TRICKY, TEXTS))
@example(text="In 1990, 3\x00,5 <unk>")
@example(text="a <unk> <UNK> b <un<unk>k>")
def test_screening_never_skips_a_text_the_python_step_would_change(tokenizer, text):
    """Texts skip the Python step on screens over the raw text; those must be conservative. With
    split_special_tokens the whole text reaches the normalizer; otherwise only what lies between the added tokens
    that Rust takes out first, so there a text that skips the step must get the step's tokens."""
    backend = tokenizer._tokenizer
    backend.encode_special_tokens = True
    try:
        if backend._marks.changes(backend._rust_normalizer.normalize_str(text)):  # without the step itself
            assert backend.needs_python_step(text), repr(text)
    finally:
        backend.encode_special_tokens = False
    if not backend.needs_python_step(text):
        exact = backend.routes["exact"].encode(text)
        screened = backend.encode(text)
        assert (screened.ids, screened.offsets) == (exact.ids, exact.offsets), repr(text)


PRINTABLE_ASCII = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60)


@given(text=st.one_of(PRINTABLE_ASCII, st.text(alphabet=st.sampled_from(list("aA1, .-()\"'`[]<>")), max_size=40)))
def test_the_printable_ascii_pipeline_equals_the_full_one(tokenizer, text):
    """The "ascii" pipeline leaves out the normalizer steps that cannot change printable ASCII text: the same ids,
    offsets and words as the full Rust pipeline, for pairs too."""
    backend = tokenizer._tokenizer
    results = {}
    for name in ("ascii", "rust"):
        encoding = backend.routes[name].encode(text, "Pair " + text)
        results[name] = (encoding.ids, encoding.offsets, encoding.word_ids, encoding.type_ids)
    assert results["ascii"] == results["rust"], repr(text)


@given(texts=st.lists(st.one_of(ASCII_TEXT, ASCII_TRICKY, TOKEN_TRICKY, TEXTS), max_size=12))
def test_the_batch_screen_routes_every_text_as_the_text_alone_would(tokenizer, texts):
    """One regex over the joined batch decides which texts to look at alone; every text must take the pipeline it
    takes on its own ("\n" inside a text, texts run together at the join)."""
    backend = tokenizer._tokenizer
    assert backend.pipelines_of(texts) == [backend.pipeline_of(text) for text in texts], texts


PIECES = st.one_of(ASCII_TEXT, ASCII_TRICKY, TOKEN_TRICKY, TEXTS)
WORDS = st.lists(PIECES, min_size=1, max_size=6)
BATCH_ITEMS = st.one_of(PIECES, st.tuples(PIECES, PIECES), WORDS, st.tuples(WORDS, WORDS))


@given(items=st.lists(BATCH_ITEMS, max_size=10))
def test_the_batch_screen_routes_pairs_and_words_as_each_item_alone_would(tokenizer, items):
    """The screen looks at an item's texts joined by spaces (a pair, pre-tokenized words, a pair of word lists):
    every item still takes the pipeline it takes alone, where words like "1" "," must not read as "1,"."""
    backend = tokenizer._tokenizer
    assert backend.pipelines_of(items) == [backend.pipeline_of(item) for item in items], items
    words = [["1", ","], ["1,"], ("2", ","), (["a", "3"], [",", "b"])]
    assert backend.pipelines_of(words) == ["ascii", "marks", "ascii", "ascii"]


@given(text=TEXTS)
def test_offsets_always_lie_inside_the_text(tokenizer, text):
    encoding = tokenizer(text, return_offsets_mapping=True)
    special = set(tokenizer.all_special_ids)
    previous_start = 0
    for token_id, (start, end) in zip(encoding["input_ids"], encoding["offset_mapping"]):
        assert 0 <= start <= end <= len(text), (text, start, end)
        if token_id in (tokenizer.cls_token_id, tokenizer.sep_token_id):
            assert (start, end) == (0, 0)
        elif token_id not in special:
            assert start >= previous_start, "offsets go backwards"
            previous_start = start


@given(first=TEXTS, second=TEXTS)
def test_pairs_keep_their_segments(tokenizer, first, second):
    # Batched, as datasets.map calls it. (A single call with text_pair="" drops the pair: transformers' __call__
    # treats an empty string as "no pair", for every tokenizer.)
    encoding = tokenizer([first], [second])
    ids, types = encoding["input_ids"][0], encoding["token_type_ids"][0]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert ids.count(tokenizer.sep_token_id) >= 2 and len(types) == len(ids)
    first_sep = ids.index(tokenizer.sep_token_id)
    assert set(types[: first_sep + 1]) == {0} and set(types[first_sep + 1 :]) <= {1}


@given(text=TEXTS)
def test_decode_of_encode_is_the_normalized_text(tokenizer, sentencepiece, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    # Characters outside the vocabulary become <unk>, which decodes to nothing of the text: out of scope here.
    assume(tokenizer.unk_token_id not in ids)
    # Special tokens written out ("[MASK]") are matched as tokens before normalization: out of scope here too.
    assume(not any(token in text for token in tokenizer.all_special_tokens))
    expected = normalized(text, sentencepiece)
    decoded = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    assert decoded == expected


@given(text=TEXTS)
def test_encoding_is_deterministic_and_batch_independent(tokenizer, text):
    alone = tokenizer(text)["input_ids"]
    assert tokenizer([text, "padding partner text"])["input_ids"][0] == alone


# --------------------------------------------------------------------------------------------------------------------
# SOP / NSP instance builder
# --------------------------------------------------------------------------------------------------------------------

FIRST_TOKEN = 10  # token ids count up from here through each document, so order and contiguity can be checked


def documents(max_documents: int = 4) -> st.SearchStrategy[list[list[list[int]]]]:
    """Documents of sentences of consecutive token ids; some sentences longer than any sequence length."""
    sentence_lengths = st.lists(st.integers(1, 90), min_size=1, max_size=12)

    def build(all_lengths: list[list[int]]) -> list[list[list[int]]]:
        next_token, pool = FIRST_TOKEN, []
        for lengths in all_lengths:
            document = []
            for length in lengths:
                document.append(list(range(next_token, next_token + length)))
                next_token += length
            pool.append(document)
        return pool

    return st.lists(sentence_lengths, min_size=1, max_size=max_documents).map(build)


def is_run(tokens: list[int]) -> bool:
    return all(b == a + 1 for a, b in zip(tokens, tokens[1:]))


@given(
    pool=documents(),
    max_num_tokens=st.integers(2, 64),
    short_seq_prob=st.sampled_from([0.0, 0.1, 1.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sop_pairs_are_adjacent_runs_of_the_document_within_the_length(pool, max_num_tokens, short_seq_prob, seed):
    for index, document in enumerate(pool):
        tokens = [token for sentence in document for token in sentence]
        pairs = list(sentence_pairs_from_document(pool, index, random.Random(seed), max_num_tokens, short_seq_prob))
        if len(document) < 2:
            assert pairs == []  # no sentence order in a one-sentence document
            continue
        assert pairs, "a multi-sentence document gave no instance"
        for tokens_a, tokens_b, label in pairs:
            assert label in (0, 1)
            assert tokens_a and tokens_b and len(tokens_a) + len(tokens_b) <= max_num_tokens
            assert is_run(tokens_a) and is_run(tokens_b)  # truncation only trims the ends of a segment
            assert tokens[0] <= min(tokens_a + tokens_b) and max(tokens_a + tokens_b) <= tokens[-1]
            first, second = (tokens_a, tokens_b) if label == 0 else (tokens_b, tokens_a)
            assert first[-1] < second[0], "label 0 must be document order, label 1 the swap"


@given(pool=documents(), max_num_tokens=st.integers(2, 64), seed=st.integers(0, 2**32 - 1))
def test_nsp_pairs_within_the_length_and_random_b_from_elsewhere(pool, max_num_tokens, seed):
    for index, document in enumerate(pool):
        own = {token for sentence in document for token in sentence}
        for tokens_a, tokens_b, label in sentence_pairs_from_document(
            pool, index, random.Random(seed), max_num_tokens, 0.1, objective="nsp"
        ):
            assert label in (0, 1) and tokens_a and len(tokens_a) + len(tokens_b) <= max_num_tokens
            assert set(tokens_a) <= own
            if label == 0:
                assert set(tokens_b) <= own and tokens_a[-1] < tokens_b[0]


@given(pool=documents(), max_num_tokens=st.integers(2, 64), seed=st.integers(0, 2**32 - 1))
def test_instances_are_a_function_of_the_seed(pool, max_num_tokens, seed):
    def run() -> list:
        return [
            list(sentence_pairs_from_document(pool, i, random.Random(seed), max_num_tokens, 0.1))
            for i in range(len(pool))
        ]

    assert run() == run()


@given(
    pool=documents(),
    max_seq_length=st.integers(5, 48),
    objective=st.sampled_from(["sop", "nsp"]),
    seed=st.integers(0, 2**31 - 1),
)
def test_instances_are_well_formed_and_reproducible(pool, max_seq_length, objective, seed):
    cls, sep = 2, 3
    tokenized = Dataset.from_dict({"sentence_ids": pool})

    def build() -> Dataset:
        return create_sentence_order_instances(
            tokenized, cls, sep, max_seq_length=max_seq_length, objective=objective, seed=seed, documents_per_batch=2
        )

    instances = build()
    for ids, types, label in zip(
        instances["input_ids"], instances["token_type_ids"], instances["sentence_order_label"]
    ):
        assert len(ids) <= max_seq_length and len(types) == len(ids) and label in (0, 1)
        assert ids[0] == cls and ids[-1] == sep and ids.count(sep) == 2
        first_sep = ids.index(sep)
        assert 1 < first_sep < len(ids) - 2  # both segments non-empty
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    assert build()[:] == instances[:]


@given(a=st.integers(0, 80), b=st.integers(0, 80), max_num_tokens=st.integers(0, 64), seed=st.integers(0, 1000))
def test_truncate_seq_pair_keeps_runs_and_the_bound(a, b, max_num_tokens, seed):
    tokens_a, tokens_b = list(range(a)), list(range(1000, 1000 + b))
    truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, random.Random(seed))
    assert len(tokens_a) + len(tokens_b) <= max(max_num_tokens, 0)
    assert is_run(tokens_a) and is_run(tokens_b)
    # The longer segment is cut first: the shorter keeps everything it can.
    assert min(len(tokens_a), len(tokens_b)) >= min(a, b, max_num_tokens // 2)


# --------------------------------------------------------------------------------------------------------------------
# Masking collator
# --------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collator(tokenizer) -> DataCollatorForSOP:
    return DataCollatorForSOP(tokenizer, max_predictions_per_seq=12, seed=3)


@st.composite
def sop_features(draw, tokenizer) -> list[dict]:
    """A batch of [CLS] A [SEP] B [SEP] features with random (non-special) token ids of the real vocabulary."""
    special = set(tokenizer.all_special_ids)
    token = st.integers(5, len(tokenizer) - 1).filter(lambda t: t not in special)
    features = []
    for _ in range(draw(st.integers(1, 4))):
        a = draw(st.lists(token, min_size=1, max_size=30))
        b = draw(st.lists(token, min_size=1, max_size=30))
        features.append(
            {
                "input_ids": [tokenizer.cls_token_id, *a, tokenizer.sep_token_id, *b, tokenizer.sep_token_id],
                "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                "sentence_order_label": draw(st.integers(0, 1)),
            }
        )
    return features


@given(data=st.data(), pad_to_multiple_of=st.sampled_from([None, 8]))
def test_masking_invariants(tokenizer, collator, data, pad_to_multiple_of):
    collator = DataCollatorForSOP(tokenizer, max_predictions_per_seq=12, seed=3, pad_to_multiple_of=pad_to_multiple_of)
    features = data.draw(sop_features(tokenizer))
    batch = collator(features)
    longest = max(len(f["input_ids"]) for f in features)
    batch_size, length = batch["input_ids"].shape
    assert batch_size == len(features)
    assert length == (longest if pad_to_multiple_of is None else -(-longest // 8) * 8)
    special = set(tokenizer.all_special_ids)
    for row, feature in enumerate(features):
        original = np.asarray(feature["input_ids"])
        n = len(original)
        ids, labels = batch["input_ids"][row].numpy(), batch["labels"][row].numpy()
        assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (length - n)
        assert batch["token_type_ids"][row, :n].tolist() == feature["token_type_ids"]
        assert (ids[n:] == tokenizer.pad_token_id).all() and (labels[n:] == -100).all()
        predicted = np.flatnonzero(labels != -100)
        # Budget: 15% of the sequence, at least 1, at most max_predictions_per_seq.
        assert len(predicted) <= min(12, max(1, round(n * 0.15)))
        assert (labels[predicted] == original[predicted]).all()  # labels are the original ids
        assert not np.isin(original[predicted], [tokenizer.cls_token_id, tokenizer.sep_token_id]).any()
        unchanged = np.setdiff1d(np.arange(n), predicted)
        assert (ids[unchanged] == original[unchanged]).all()  # only predicted positions may change
        replaced = predicted[ids[predicted] != original[predicted]]
        assert all(t == tokenizer.mask_token_id or t not in special for t in ids[replaced].tolist())
        # Whole words: a word is either entirely predicted or not at all.
        starts, lengths, _ = collator.words(original)
        for start, size in zip(starts, lengths):
            chosen = np.isin(np.arange(start, start + size), predicted)
            assert chosen.all() or not chosen.any()
    assert batch["sentence_order_label"].tolist() == [f["sentence_order_label"] for f in features]


@given(data=st.data())
def test_masking_is_a_function_of_the_seed_and_the_batch(tokenizer, collator, data):
    features = data.draw(sop_features(tokenizer))
    first, again = collator(features), collator(features)
    other_instance = DataCollatorForSOP(tokenizer, max_predictions_per_seq=12, seed=3)(features)
    for key in first:
        assert torch.equal(first[key], again[key]) and torch.equal(first[key], other_instance[key])


# --------------------------------------------------------------------------------------------------------------------
# SQuAD post-processing
# --------------------------------------------------------------------------------------------------------------------

CONTEXTS = st.one_of(
    st.text(min_size=1, max_size=120),
    st.text(alphabet=st.sampled_from(list("ab1, é\u0301日 ")), min_size=1, max_size=120),
)


@given(
    contexts=st.lists(CONTEXTS, min_size=1, max_size=3),
    questions=st.lists(TEXTS, min_size=3, max_size=3),
    seed=st.integers(0, 2**32 - 1),
    version_2=st.booleans(),
)
def test_squad_answers_are_always_substrings_of_their_context(tokenizer, contexts, questions, seed, version_2):
    examples = Dataset.from_dict(
        {"id": [f"q{i}" for i in range(len(contexts))], "question": questions[: len(contexts)], "context": contexts}
    )
    # As the SQuAD task does: questions cut to max_query_length, then short windows with overlap, so that long
    # contexts are cut into several windows.
    examples, _ = truncate_questions(examples, tokenizer, max_query_length=8)
    features = Dataset.from_dict(dict(prepare_eval_features(examples[:], tokenizer, max_seq_length=24, doc_stride=6)))
    shape = (len(features), 24)
    generator = np.random.default_rng(seed)
    result = postprocess_predictions(
        examples,
        features,
        generator.normal(size=shape),
        generator.normal(size=shape),
        n_best_size=5,
        max_answer_length=8,
        version_2_with_negative=version_2,
    )
    for question_id, context in zip(examples["id"], contexts):
        assert result.predictions[question_id] in context
        assert result.best_spans[question_id] in context
        texts = [entry["text"] for entry in result.nbest[question_id]]
        assert texts and all(text in context for text in texts)
        assert abs(sum(entry["probability"] for entry in result.nbest[question_id]) - 1.0) < 1e-6
