"""Pretraining data: text files -> documents -> tokens -> SOP/NSP instances (albert_hf.data.sentence_order)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from datasets import Dataset

from albert_hf.data.sentence_order import (
    build_pretraining_dataset,
    count_single_sentence_documents,
    create_sentence_order_instances,
    documents_from_texts,
    load_text_documents,
    sentence_pairs_from_document,
    tokenize_documents,
    truncate_seq_pair,
)
from albert_hf.data.sentences import split_sentences

CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def wikitext_file(shared_data, tmp_path_factory) -> Path:
    """The first 8 WikiText-2 validation articles (one paragraph per line, blank line between articles)."""
    lines, articles = [], 0
    with open(shared_data / "corpus" / "wikitext2_valid_paragraphs.txt", encoding="utf-8") as handle:
        for line in handle:
            lines.append(line)
            articles += not line.strip()
            if articles == 8:
                break
    path = tmp_path_factory.mktemp("corpus") / "wikitext_head.txt"
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def wikitext_documents(wikitext_file):
    return load_text_documents(wikitext_file, split_lines=True)


@pytest.fixture(scope="module")
def wikitext_tokenized(wikitext_documents, tokenizer):
    return tokenize_documents(wikitext_documents, tokenizer)


def numbered_document(sentence_lengths: list[int], document_id: int = 0) -> list[list[int]]:
    """Sentence k of document d holds distinct ids d*10^6 + k*1000 + t, so every token says where it came from."""
    return [[document_id * 10**6 + k * 1000 + t for t in range(length)] for k, length in enumerate(sentence_lengths)]


def origin(token: int) -> tuple[int, int, int]:
    return token // 10**6, token % 10**6 // 1000, token % 1000


# ---- reading text -------------------------------------------------------------------------------------------------


def test_split_sentences_keeps_abbreviations_and_quotes():
    text = 'Mr. Knightley came in. "Is it true?" she asked. It was 3 p.m.\n\nA new paragraph, e.g. this one!'
    assert split_sentences(text) == [
        "Mr. Knightley came in.",
        '"Is it true?" she asked.',  # a lower-case word after "?" continues the sentence
        "It was 3 p.m.",
        "A new paragraph, e.g. this one!",
    ]


def test_text_files_give_one_document_per_blank_line_block(tmp_path):
    first = tmp_path / "a.txt"
    first.write_text("One.\nTwo.\n\n\nThree.\n  \nFour. Five.\n", encoding="utf-8")
    second = tmp_path / "b.txt"
    second.write_text("Six.\n", encoding="utf-8")
    documents = load_text_documents([first, second])
    assert documents["sentences"] == [["One.", "Two."], ["Three."], ["Four. Five."], ["Six."]]
    split = load_text_documents([first], split_lines=True)
    assert split["sentences"][2] == ["Four.", "Five."]


def test_streaming_reads_the_same_documents(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("One.\nTwo.\n\nThree.\n", encoding="utf-8")
    streamed = [row["sentences"] for row in load_text_documents(path, streaming=True)]
    assert streamed == load_text_documents(path)["sentences"]


def test_bad_text_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_text_documents(tmp_path / "missing.txt")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("fine\nalso fine\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt:3: not valid UTF-8"):
        load_text_documents(latin1)
    with pytest.raises(ValueError, match=r"latin1.txt:3: not valid UTF-8"):
        list(load_text_documents(latin1, streaming=True))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty.txt: no text found"):
        load_text_documents(empty)


def test_documents_from_a_text_column():
    dataset = Dataset.from_dict({"text": ["First one. Second one.", "Alone"], "id": [1, 2]})
    assert documents_from_texts(dataset)["sentences"] == [["First one.", "Second one."], ["Alone"]]
    with pytest.raises(ValueError, match="no column 'body'"):
        documents_from_texts(dataset, text_column="body")


# ---- instance creation on numbered documents -----------------------------------------------------------------------


def check_sop_pair(tokens_a, tokens_b, label, document):
    """A and B are consecutive runs of one document, in order when label 0, swapped when label 1; untruncated
    segments start and end on sentence boundaries."""
    first, second = (tokens_a, tokens_b) if label == 0 else (tokens_b, tokens_a)
    flat = [token for sentence in document for token in sentence]
    start_first, start_second = flat.index(first[0]), flat.index(second[0])
    assert flat[start_first : start_first + len(first)] == first
    assert flat[start_second : start_second + len(second)] == second
    assert start_first + len(first) <= start_second  # first precedes second (a gap only if truncated)
    return start_first, start_second


def test_sop_pairs_are_consecutive_sentences_of_one_document():
    rng = random.Random(0)
    document = numbered_document([rng.randint(1, 40) for _ in range(300)])
    labels = []
    for tokens_a, tokens_b, label in sentence_pairs_from_document([document], 0, rng, max_num_tokens=61):
        assert len(tokens_a) + len(tokens_b) <= 61 and tokens_a and tokens_b
        check_sop_pair(tokens_a, tokens_b, label, document)
        if len(tokens_a) + len(tokens_b) < 61:  # not truncated: A|B is exactly a run of whole sentences
            first, second = (tokens_a, tokens_b) if label == 0 else (tokens_b, tokens_a)
            assert origin(first[0])[2] == 0 and origin(second[0])[2] == 0
            assert origin(second[0])[1] == origin(first[-1])[1] + 1
        labels.append(label)
    assert 0.3 < np.mean(labels) < 0.7


def test_every_sentence_is_used_and_documents_do_not_mix():
    rng = random.Random(1)
    pool = [numbered_document([rng.randint(1, 9) for _ in range(50)], document_id=d) for d in range(3)]
    seen = set()
    for tokens_a, tokens_b, _ in sentence_pairs_from_document(pool, 1, rng, max_num_tokens=509):
        assert {origin(t)[0] for t in tokens_a + tokens_b} == {1}
        seen |= {origin(t)[1] for t in tokens_a + tokens_b}
    assert seen == set(range(50))  # short sentences, long target: nothing truncated, nothing left over


def test_short_target_probability():
    # One-token sentences: a chunk is exactly as long as its target, so the share of instances shorter than
    # max_num_tokens is short_seq_prob * P(randint(2, 61) < 61) = 0.1 * 59/60.
    rng = random.Random(2)
    document = numbered_document([1] * 200_000)
    lengths = np.array(
        [len(a) + len(b) for a, b, _ in sentence_pairs_from_document([document], 0, rng, max_num_tokens=61)]
    )[:-1]  # the document's last chunk ends where the document ends
    short = lengths < 61
    assert abs(short.mean() - 0.1 * 59 / 60) < 4 * np.sqrt(0.1 * 0.9 / len(lengths))
    assert lengths[short].min() >= 2
    # Short targets are uniform on [2, 60]: their mean is 31.
    assert abs(lengths[short].mean() - 31) < 4 * 17 / np.sqrt(short.sum())


def test_sop_skips_single_sentence_documents_and_never_leaves_a_sentence_alone():
    rng = random.Random(3)
    assert list(sentence_pairs_from_document([numbered_document([30])], 0, rng, max_num_tokens=61)) == []
    # A long first sentence fills the target alone: the chunk still takes the next sentence as B.
    pairs = list(sentence_pairs_from_document([numbered_document([80, 5, 5])], 0, rng, max_num_tokens=61))
    assert len(pairs) == 1
    assert {origin(t)[1] for t in pairs[0][0] + pairs[0][1]} >= {0, 2}


def test_nsp_takes_random_next_segments_from_other_documents():
    rng = random.Random(4)
    pool = [numbered_document([rng.randint(3, 20) for _ in range(200)], document_id=d) for d in range(5)]
    labels = []
    for tokens_a, tokens_b, label in sentence_pairs_from_document(pool, 2, rng, 125, objective="nsp"):
        assert {origin(t)[0] for t in tokens_a} == {2}
        b_documents = {origin(t)[0] for t in tokens_b}
        if label == 1:
            assert len(b_documents) == 1 and b_documents != {2}
        else:
            assert b_documents == {2}
            check_sop_pair(tokens_a, tokens_b, 0, pool[2])
        labels.append(label)
    assert 0.35 < np.mean(labels) < 0.65


def test_truncation_trims_the_longer_side_from_both_ends():
    rng = random.Random(5)
    trimmed_front = trimmed_back = 0
    for _ in range(200):
        tokens_a, tokens_b = list(range(100)), list(range(1000, 1030))
        truncate_seq_pair(tokens_a, tokens_b, 100, rng)
        assert len(tokens_a) == 70 and tokens_b == list(range(1000, 1030))
        trimmed_front += tokens_a[0] > 0
        trimmed_back += tokens_a[-1] < 99
    assert trimmed_front > 150 and trimmed_back > 150


# ---- datasets pipeline on real text --------------------------------------------------------------------------------


def test_instances_on_real_text(wikitext_tokenized, tokenizer):
    instances = create_sentence_order_instances(
        wikitext_tokenized, tokenizer.cls_token_id, tokenizer.sep_token_id, max_seq_length=128, dupe_factor=4
    )
    labels = np.array(instances["sentence_order_label"])
    assert len(labels) > 700
    assert abs(labels.mean() - 0.5) < 4 * 0.5 / np.sqrt(len(labels))
    documents = wikitext_tokenized["sentence_ids"]
    for row in instances.select(range(0, len(instances), 11)):
        ids, types = row["input_ids"], row["token_type_ids"]
        assert len(ids) <= 128 and len(ids) == len(types)
        first_sep = ids.index(tokenizer.sep_token_id)
        assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        tokens_a, tokens_b = ids[1:first_sep], ids[first_sep + 1 : -1]
        # Both segments occur, as consecutive runs, in one document (rows come out grouped by document).
        assert any(
            _contains_in_order(document, tokens_a, tokens_b, row["sentence_order_label"]) for document in documents
        )


def _contains_in_order(document, tokens_a, tokens_b, label) -> bool:
    flat = [token for sentence in document for token in sentence]
    first, second = (tokens_a, tokens_b) if label == 0 else (tokens_b, tokens_a)
    text = " ".join(map(str, flat))
    start = text.find(" ".join(map(str, first)))
    return start >= 0 and text.find(" ".join(map(str, second)), start) >= 0


def test_dupe_factor_makes_fresh_passes(wikitext_tokenized, tokenizer):
    one = create_sentence_order_instances(wikitext_tokenized, CLS, SEP, max_seq_length=64, dupe_factor=1)
    three = create_sentence_order_instances(wikitext_tokenized, CLS, SEP, max_seq_length=64, dupe_factor=3)
    assert 2.7 * len(one) < len(three) < 3.3 * len(one)
    first_pass = set(map(tuple, one["input_ids"]))
    assert first_pass <= set(map(tuple, three["input_ids"]))  # pass 0 is the same with any dupe_factor
    assert len(set(map(tuple, three["input_ids"]))) > 2 * len(first_pass)


def test_deterministic_across_num_proc_and_streaming(wikitext_file, wikitext_documents, tokenizer):
    kwargs = dict(max_seq_length=96, seed=7, documents_per_batch=4)
    serial = build_pretraining_dataset(wikitext_documents, tokenizer, **kwargs)
    parallel = build_pretraining_dataset(wikitext_documents, tokenizer, num_proc=2, **kwargs)
    assert parallel["input_ids"] == serial["input_ids"]
    assert parallel["sentence_order_label"] == serial["sentence_order_label"]
    streamed = build_pretraining_dataset(
        load_text_documents(wikitext_file, split_lines=True, streaming=True), tokenizer, **kwargs
    )
    assert [row["input_ids"] for row in streamed] == serial["input_ids"]
    other_seed = build_pretraining_dataset(wikitext_documents, tokenizer, **{**kwargs, "seed": 8})
    assert other_seed["input_ids"] != serial["input_ids"]


def test_nsp_dataset_labels_balanced(wikitext_tokenized):
    instances = create_sentence_order_instances(wikitext_tokenized, CLS, SEP, max_seq_length=128, objective="nsp")
    labels = np.array(instances["sentence_order_label"])
    assert abs(labels.mean() - 0.5) < 0.08  # label 1 also for one-sentence chunks (as the original)


def test_single_sentence_documents_are_counted(tokenizer):
    documents = Dataset.from_dict({"sentences": [["Only one sentence."], ["First.", "Second."], []]})
    tokenized = tokenize_documents(documents, tokenizer)
    assert count_single_sentence_documents(tokenized) == 2
    instances = create_sentence_order_instances(tokenized, CLS, SEP, max_seq_length=32)
    assert len(instances) == 1


def test_counts_read_arrow_offsets_of_the_selected_rows():
    """The counts (read from Arrow list offsets) agree with counting the Python lists, on a shuffled selection."""
    from albert_hf.data.sentence_order import count_long_sentences

    generator = random.Random(5)
    documents = [
        [[7] * generator.choice([1, 3, 30, 61, 62, 200]) for _ in range(generator.randint(0, 4))] for _ in range(300)
    ]
    tokenized = Dataset.from_dict({"sentence_ids": documents}).shuffle(seed=1).select(range(0, 300, 3))
    rows = tokenized["sentence_ids"]
    assert count_single_sentence_documents(tokenized) == sum(len(document) < 2 for document in rows)
    assert count_long_sentences(tokenized, 64) == sum(len(s) > 61 for document in rows for s in document) > 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(objective="mlm"), "objective"),
        (dict(max_seq_length=4), "max_seq_length"),
        (dict(short_seq_prob=1.5), "short_seq_prob"),
        (dict(dupe_factor=0), "dupe_factor"),
    ],
)
def test_invalid_options_are_refused(kwargs, message):
    tokenized = Dataset.from_dict({"sentence_ids": [[[5, 6], [7, 8]]]})
    with pytest.raises(ValueError, match=message):
        create_sentence_order_instances(tokenized, CLS, SEP, **kwargs)


# ---- the span/Arrow implementation equals the token-list algorithm it replaced ---------------------------------------


def test_spans_reproduce_the_token_list_algorithm_on_random_pools():
    """Random pools (empty documents, one-sentence documents, over-long sentences): the same pairs, labels and
    truncation as the former implementation kept in tests/helpers/pretraining_reference.py, draw for draw."""
    from helpers import pretraining_reference as reference

    generator = random.Random(0)
    for case in range(400):
        pool = [
            numbered_document([generator.randint(1, 90) for _ in range(generator.choice([0, 1, 2, 3, 8, 20]))], d)
            for d in range(generator.randint(1, 4))
        ]
        objective = generator.choice(["sop", "nsp"])
        max_num_tokens, short = generator.choice([2, 7, 61, 125]), generator.choice([0.0, 0.1, 0.9])
        for index in range(len(pool)):
            if not pool[index]:
                continue  # the batch function is never asked for an empty document's pairs... but the pool holds it
            seed = case * 100 + index
            expected = list(
                reference.sentence_pairs_from_document(
                    pool, index, random.Random(seed), max_num_tokens, short, objective
                )
            )
            actual = list(
                sentence_pairs_from_document(pool, index, random.Random(seed), max_num_tokens, short, objective)
            )
            assert actual == expected, (case, index, objective, max_num_tokens, short)


@pytest.mark.parametrize("objective", ["sop", "nsp"])
def test_dataset_instances_equal_the_token_list_algorithm(wikitext_tokenized, objective):
    """create_sentence_order_instances (Arrow batches, token spans) == the former per-document Python loop over
    token lists, batch by batch, with dupe_factor 2 and short targets: every instance, segment and label."""
    from helpers import pretraining_reference as reference

    from albert_hf.data.sentence_order import _document_rng

    options = dict(max_seq_length=64, short_seq_prob=0.3, dupe_factor=2, objective=objective)
    actual = create_sentence_order_instances(wikitext_tokenized, CLS, SEP, seed=3, documents_per_batch=3, **options)
    expected = {"input_ids": [], "token_type_ids": [], "sentence_order_label": []}
    documents = wikitext_tokenized["sentence_ids"]
    for start in range(0, len(documents), 3):
        batch = reference.instances(
            documents[start : start + 3],
            list(range(start, min(start + 3, len(documents)))),
            lambda dupe, index: _document_rng(3, dupe, index),
            cls=CLS,
            sep=SEP,
            **options,
        )
        for key, values in batch.items():
            expected[key] += values
    assert len(expected["input_ids"]) > 50
    assert actual["input_ids"] == expected["input_ids"]
    assert actual["token_type_ids"] == expected["token_type_ids"]
    assert actual["sentence_order_label"] == expected["sentence_order_label"]
