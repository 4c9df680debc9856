"""albert_hf.AlbertHFTokenizer: exact original ALBERT tokenization, offsets, transformers API, loading and saving.

"Exact" is checked against google-research's own `tokenization.py` (`tokenization_reference`, the albert-tensorflow
wheel run with a tensorflow stand-in). On the real data, every source is checked on all texts that take the
tokenizer's special paths (a digit followed by a comma, control-token strings) plus every 25th other text; the
`slow` test checks every text, and `benchmarks/tokenizer_agreement.py` prints the table.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import sentencepiece as spm
import transformers
from helpers import processes
from helpers.data import is_full
from helpers.tokenization_reference import (
    ENTRY_POINTS,
    TEXT_SOURCES,
    assert_original_ids,
    draw_and_encode,
    google,
    preprocess_text,
    reference_ids,
    reference_pieces,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken

import albert_hf
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.vocabulary import train_tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tokenizer"
CONTROL_STRINGS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")


@pytest.fixture(scope="module")
def sp(spiece_model) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(spiece_model))


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# Texts where SentencePiece's Viterbi and ours pick different segmentations of equal score: SentencePiece adds
# piece scores in float32 along the whole text, so the rounding of the running sum decides between "66" "6" and
# "6" "66". Each entry records both segmentations; nothing else is accepted as a tie.
KNOWN_TIES = {entry["key"]: entry for entry in json.loads((FIXTURES / "known_ties.json").read_text("utf-8"))}


def assert_same_as_reference(tokenizer, sp, texts: list[str], **preprocess) -> set[str]:
    """Ids identical to google-research's, except the listed ties (checked piece by piece); returns their keys.

    `encode_plain_texts`, which runs SentencePiece itself, must give google-research's ids exactly, ties included."""
    ours = tokenizer(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    expected = reference_ids(sp, texts, **preprocess)
    plain = tokenizer.encode_plain_texts(texts)
    assert plain == expected, next(text for text, a, b in zip(texts, plain, expected) if a != b)
    ties = set()
    for text, our_ids, reference in zip(texts, ours, expected):
        if our_ids == reference:
            continue
        our_pieces, reference_pieces_ = tokenizer.convert_ids_to_tokens(our_ids), [sp.id_to_piece(i) for i in reference]
        tie = KNOWN_TIES.get(text_key(text))
        assert tie is not None and not preprocess, (
            f"ids differ from the original on {text[:200]!r}:\n"
            f"  ours      {our_pieces[:60]}\n"
            f"  reference {reference_pieces_[:60]}"
        )
        start, ours_cut, reference_cut = tie["start"], tie["ours"], tie["reference"]
        assert our_pieces[start : start + len(ours_cut)] == ours_cut
        assert reference_pieces_[start : start + len(reference_cut)] == reference_cut
        assert "".join(ours_cut) == "".join(reference_cut)  # the same text, cut differently
        # Everything outside the recorded cut is identical.
        assert our_pieces[:start] == reference_pieces_[:start]
        assert our_pieces[start + len(ours_cut) :] == reference_pieces_[start + len(reference_cut) :]
        ties.add(tie["key"])
    return ties


def special_path_sample(texts: list[str], every: int = 25) -> list[str]:
    """All texts with a digit followed by a comma or a control-token string, and every `every`-th other text."""

    def special(text: str) -> bool:
        return any(c == "," and i and text[i - 1].isdigit() for i, c in enumerate(text)) or any(
            s.lower() in text.lower() for s in CONTROL_STRINGS
        )

    return [text for index, text in enumerate(texts) if index % every == 0 or special(text)]


# ----------------------------------------------------------------------------------------------------------------------
# Exactness
# ----------------------------------------------------------------------------------------------------------------------


def test_reference_is_run_classifier_s_full_tokenizer(spiece_model, sp):
    """The reference is exactly what run_classifier.py does: preprocess_text(lower=True), FullTokenizer.tokenize."""
    full_tokenizer = google.FullTokenizer(None, spm_model_file=str(spiece_model))
    texts = ["I was born in 92000, and this is falsé.", "``Quoted'' 4,666 (x) x1,y", "Crème brûlée\tİstanbul"]
    for text, pieces in zip(texts, reference_pieces(sp, texts)):
        processed = google.preprocess_text(text, lower=True)
        assert full_tokenizer.tokenize(processed) == pieces
        assert full_tokenizer.convert_tokens_to_ids(pieces) == reference_ids(sp, [text])[0]
    # transformers' ALBERT integration test, a tokenization made by the original implementation.
    assert reference_pieces(sp, texts[:1])[0] == [
        "▁i", "▁was", "▁born", "▁in", "▁9", "2000", ",", "▁and", "▁this", "▁is", "▁false", ".",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "I was born in 92000, and this is falsé.",
        "In 1990, 2,000 people; 4,666 of them: 12,3,4, x1,y 1,",  # digit-comma pieces, with and without "▁"
        "``Quoted'' text\tand\u00a0non-breaking\u3000spaces\x1c here  ",  # quotes kept, Python's whitespace set
        "Crème brûlée, Ångström, naïve façade, İstanbul, ǅ, ﬁve ½ ²",  # NFKD, ligatures, fractions
        "ภาษาไทย हिन्दी עִבְרִית",  # combining class 0 marks kept, others dropped (not the same set as "Mn")
        "ΟΔΟΣ ΣΑΣ, ΑΣ' Σ.",  # Python lowercases a word-final capital sigma to "ς"
        '(brackets) "quotes" - dash. £5 €3 – en dash',  # user-defined symbols
        "<unk> <pad> [CLS] [sep] <UNK> literal control strings",
        "日本語のテキスト and emoji 😀😀 unknown characters",
        "",
        "   ",
    ],
)
def test_ids_equal_the_original_algorithm(tokenizer, sp, text):
    assert not assert_same_as_reference(tokenizer, sp, [text])


def test_quotes_are_kept_by_default_and_replaced_on_request(spiece_model, sp, tokenizer):
    """google-research's preprocess_text keeps `` and ''; replace_quotes=True gives transformers v4's "."""
    text = "He said ``yes'' and ''no``."
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == reference_ids(sp, [text])[0]
    assert tokenizer.unk_token_id in tokenizer(text)["input_ids"]  # "``" is not a piece of the released vocabulary
    replacing = AlbertHFTokenizer(vocab_file=str(spiece_model), replace_quotes=True)
    assert replacing.tokenize(text) == reference_pieces(sp, [text], replace_quotes=True)[0]
    assert tokenizer.unk_token_id not in replacing(text)["input_ids"]
    assert replacing.tokenize(text).count('"') == 4
    assert not assert_same_as_reference(replacing, sp, [text, "a ``b'' c"], replace_quotes=True)


@pytest.mark.parametrize("do_lower_case,keep_accents", [(False, False), (True, True), (False, True)])
def test_options_equal_the_original_algorithm(spiece_model, sp, do_lower_case, keep_accents):
    tokenizer = AlbertHFTokenizer(vocab_file=str(spiece_model), do_lower_case=do_lower_case, keep_accents=keep_accents)
    texts = ["Crème Brûlée in 1990, ÅNGSTRÖM", "İstanbul ǅemal naïve ΟΔΟΣ", "Hello World, 3,500 x\x1c\u00a0\u0301y"]
    assert not assert_same_as_reference(tokenizer, sp, texts, lower=do_lower_case, keep_accents=keep_accents)


@pytest.mark.parametrize("do_lower_case,keep_accents", [(True, False), (False, False), (True, True), (False, True)])
def test_normalizer_equals_preprocess_text_then_sentencepiece(spiece_model, sp, do_lower_case, keep_accents):
    """Every whitespace character of Python's str.split() next to combining marks, letters and other spaces: the
    Rust normalizer gives exactly google-research's preprocess_text followed by SentencePiece's normalization."""
    tokenizer = AlbertHFTokenizer(vocab_file=str(spiece_model), do_lower_case=do_lower_case, keep_accents=keep_accents)
    normalizer = tokenizer._tokenizer._rust_normalizer  # the exact path's differs only in keeping a leading space
    spaces = [chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()]
    marks = [chr(code) for code in range(sys.maxunicode + 1) if unicodedata.combining(chr(code))][::5]
    others = marks + list("aZ,.Σ日ﬁ①\u00a0")
    for space in spaces:
        for other in others:
            for text in (f"a{space}{other}b", f"a {space}{other}b", f"{space}{other}", f"{other}{space}", space * 2):
                processed = preprocess_text(text, lower=do_lower_case, keep_accents=keep_accents)
                expected = sp.normalize(processed).replace("▁", " ").strip()
                assert normalizer.normalize_str(text) == expected, repr(text)


@pytest.mark.parametrize("source", sorted(TEXT_SOURCES))
def test_real_data_equals_the_original_algorithm(tokenizer, sp, shared_data, source):
    texts = list(TEXT_SOURCES[source](shared_data))
    # The full data: special-path texts plus a sample of the rest; the repository's excerpts: every text.
    texts = special_path_sample(texts) if is_full(shared_data) else texts
    assert len(texts) > (500 if is_full(shared_data) else 5)
    assert_same_as_reference(tokenizer, sp, texts)


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(TEXT_SOURCES))
def test_all_real_data_equals_the_original_algorithm(tokenizer, sp, shared_data, source):
    texts = list(TEXT_SOURCES[source](shared_data))
    ties = assert_same_as_reference(tokenizer, sp, texts)
    known = {key for key, entry in KNOWN_TIES.items() if entry["source"] == source}
    if not is_full(shared_data):  # the excerpts hold only some of the texts with a known tie
        known &= {text_key(text) for text in texts}
    assert ties == known  # the list is current


# Arbitrary Unicode, and text dense in what the pipeline treats specially: every kind of whitespace, accents and
# combining marks, digit-comma runs, quotes, capital sigma, compatibility forms, user-defined symbols.
FUZZ_TEXT = st.one_of(
    st.text(max_size=60),
    st.text(
        alphabet=st.sampled_from(list("0196 ,.aZé\u0301\u00a0\u3000\t\n\x1c\x85\u2028ﬁ①''``\"()-£ΣΑİß日本\U0001f600")),
        max_size=40,
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=FUZZ_TEXT)
@example(text="In 1990, x1,y 12,3,4 a,")
@example(text="ΟΔΟΣ\u00adΣ a'Σ")
def test_fuzz_ids_equal_the_original(tokenizer, sp, text):
    ours = tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert ours == reference_ids(sp, [text])[0]
    assert tokenizer.encode_plain_texts([text]) == [ours]


def test_default_recognizes_special_token_strings(tokenizer):
    ids = tokenizer("the [MASK] sat", add_special_tokens=False)["input_ids"]
    assert tokenizer.mask_token_id in ids
    ids = tokenizer("the [MASK] sat", add_special_tokens=False, split_special_tokens=True)["input_ids"]
    assert tokenizer.mask_token_id not in ids


# ----------------------------------------------------------------------------------------------------------------------
# Offsets
# ----------------------------------------------------------------------------------------------------------------------


def squad_examples(shared_data: Path) -> list[tuple[str, list[dict]]]:
    data = json.loads((shared_data / "squad" / "dev-v1.1-part-a.json").read_text(encoding="utf-8"))["data"]
    return [
        (paragraph["context"], [answer for qa in paragraph["qas"] for answer in qa["answers"]])
        for article in data
        for paragraph in article["paragraphs"]
    ]


def test_offsets_slice_each_token_out_of_the_raw_text(tokenizer, sp, shared_data):
    """On every SQuAD context: the raw characters under a token, normalized as the original does, are its piece."""
    contexts = [context for context, _ in squad_examples(shared_data)]
    encoding = tokenizer(contexts, add_special_tokens=False, return_offsets_mapping=True)
    checked = partial = 0
    for context, ids, offsets in zip(contexts, encoding["input_ids"], encoding["offset_mapping"]):
        for token, (start, end) in zip(tokenizer.convert_ids_to_tokens(ids), offsets):
            assert 0 <= start < end <= len(context)
            if token in (tokenizer.unk_token, "▁"):  # a lone "▁" (before "(" etc.) shares the next character
                continue
            normalized = sp.normalize(preprocess_text(context[start:end])).lstrip("▁")
            checked += 1
            if normalized != token.lstrip("▁"):
                # One raw character normalized into several tokens ("½" -> "1⁄2"): each token spans all of it.
                assert token.lstrip("▁") in normalized, (context[start - 20 : end + 20], token)
                partial += 1
    assert checked > (100_000 if is_full(shared_data) else 10_000) and partial < checked / 1000


def test_offsets_of_answer_tokens_reproduce_squad_answers(tokenizer, shared_data):
    """The text sliced from an answer's first to last token is the answer, where the answer is whole tokens."""
    examples = squad_examples(shared_data)
    encoding = tokenizer([context for context, _ in examples], return_offsets_mapping=True)
    exact = inside_token = 0
    for index, (context, answers) in enumerate(examples):
        offsets = [
            span
            for span, type_id in zip(encoding["offset_mapping"][index], encoding["input_ids"][index])
            if span[1] > span[0]
        ]
        for answer in answers:
            start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
            tokens = [(a, b) for a, b in offsets if a < end and b > start]
            sliced = context[tokens[0][0] : tokens[-1][1]]
            assert answer["text"] in sliced  # the tokens always cover the answer
            if sliced == answer["text"]:
                exact += 1
            else:  # the answer starts or ends inside a piece ("Denver" in "Denver's" is whole; "ville" is not)
                assert tokens[0][0] < start or tokens[-1][1] > end
                inside_token += 1
    assert exact > 0.97 * (exact + inside_token)


def test_char_to_token_and_word_ids_on_pretokenized_words(tokenizer):
    words = ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]
    encoding = tokenizer(words, is_split_into_words=True)
    word_ids = encoding.word_ids()
    assert word_ids[0] is None and word_ids[-1] is None
    assert sorted(set(word_ids[1:-1])) == list(range(len(words)))
    # every word's first token starts the word
    firsts = [i for i, w in enumerate(word_ids) if w is not None and word_ids[i - 1] != w]
    assert len(firsts) == len(words)
    text = "Crème brûlée costs 1,500 euros."
    encoding = tokenizer(text)
    assert encoding.char_to_token(text.index("brûlée") + 2) == encoding.char_to_token(text.index("brûlée"))


# ----------------------------------------------------------------------------------------------------------------------
# The transformers tokenizer API
# ----------------------------------------------------------------------------------------------------------------------


def test_pairs_have_segment_ids_by_default(tokenizer):
    encoding = tokenizer("How old are you?", "I am 6 years old.")
    tokens = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    assert tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2 and tokens[-1] == "[SEP]"
    first_sep = tokens.index("[SEP]")
    assert encoding["token_type_ids"] == [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)
    assert encoding["attention_mask"] == [1] * len(tokens)


def test_batch_padding_and_truncation(tokenizer):
    batch = tokenizer(
        ["short", "a much longer sentence with many words in it"],
        ["pair", "b"],
        padding=True,
        truncation="only_first",
        max_length=10,
        return_tensors="pt",
    )
    assert batch["input_ids"].shape == batch["token_type_ids"].shape == batch["attention_mask"].shape
    assert batch["input_ids"].shape[1] == 10
    assert batch["input_ids"][0, -1].item() == tokenizer.pad_token_id
    assert batch["attention_mask"][0].sum().item() < 10
    second = tokenizer.convert_ids_to_tokens(batch["input_ids"][1])
    assert second[-3:] == ["[SEP]", "▁b", "[SEP]"]  # only the first sequence was cut


def test_overflowing_windows_with_stride_keep_offsets(tokenizer):
    question, context = "When?", "In 1990, the team won. " * 20
    encoding = tokenizer(
        question,
        context,
        truncation="only_second",
        max_length=32,
        stride=8,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    assert len(encoding["input_ids"]) > 2
    assert set(encoding["overflow_to_sample_mapping"]) == {0}
    for index, ids in enumerate(encoding["input_ids"]):
        assert len(ids) <= 32
        sequence_ids = encoding.sequence_ids(index)
        for token, span, sequence in zip(
            tokenizer.convert_ids_to_tokens(ids), encoding["offset_mapping"][index], sequence_ids
        ):
            if sequence == 1:
                assert context[span[0] : span[1]].lower() == token.lstrip("▁")


# ----------------------------------------------------------------------------------------------------------------------
# The Python step runs only where it can act: the same encodings as running it on every text
# ----------------------------------------------------------------------------------------------------------------------

MIXED_TEXTS = [
    "In 1990, the team won 3,000 games.",  # digit-comma: the Python step
    "a plain sentence without any of that",
    "Café au lait, 1²,5 and ﬁne print",  # non-ASCII: normalized, then screened
    "the <unk> and [MASK] strings",  # control-piece strings
    "short",
    "commas, but no digit before them, here",
    "tab\tseparated  words",  # ASCII, not printable: the full Rust pipeline
    "un[MASK]able, at 1,000",  # text right after an added token: both Python steps
]


@pytest.mark.parametrize(
    "options",
    [
        dict(padding=True),
        dict(padding=True, pad_to_multiple_of=8, padding_side="left"),
        dict(padding="max_length", max_length=40, truncation=True),
        dict(truncation=True, max_length=12, stride=4, return_overflowing_tokens=True, padding=True),
        dict(return_offsets_mapping=True, return_special_tokens_mask=True, padding=True),
    ],
    ids=["longest", "multiple-of-8-left", "max-length", "overflow-stride", "offsets"],
)
@pytest.mark.parametrize("form", ["texts", "pairs", "words"])
def test_screened_batches_equal_the_python_step_on_every_text(tokenizer, monkeypatch, options, form):
    if form == "texts":
        arguments = (MIXED_TEXTS,)
    elif form == "pairs":
        arguments = (MIXED_TEXTS, MIXED_TEXTS[::-1])
    else:
        arguments = ([text.split() for text in MIXED_TEXTS],)
        options = dict(options, is_split_into_words=True)
    if form == "pairs" and options.get("return_overflowing_tokens"):
        # Pairs: windows over the second text, long enough for the longest first text.
        options = dict(options, truncation="only_second", max_length=24) if form == "pairs" else options
    backend = tokenizer._tokenizer
    assert set(backend.pipelines_of(MIXED_TEXTS)) == {"ascii", "rust", "marks", "exact"}  # a batch through all four
    screened = tokenizer(*arguments, **options)
    screened_one_by_one = [backend.encode(text).ids for text in MIXED_TEXTS]  # `encode` screens too
    force_the_exact_route(monkeypatch, backend)
    everywhere = tokenizer(*arguments, **options)
    assert screened_one_by_one == [backend.encode(text).ids for text in MIXED_TEXTS]
    assert screened.keys() == everywhere.keys()
    for key in screened:
        assert screened[key] == everywhere[key], key
    for index in range(len(screened["input_ids"])):
        assert screened.word_ids(index) == everywhere.word_ids(index)


def force_the_exact_route(patch, backend) -> None:
    """Every text of every call through the exact route (both Python steps), for comparison."""
    patch.setattr(type(backend), "pipelines_of", lambda self, inputs: ["exact"] * len(inputs))
    patch.setattr(type(backend), "pipeline_of", lambda self, item, screens=None: "exact")


def encodings_everywhere_exact(tokenizer, monkeypatch, texts: list[str], **options):
    """`tokenizer(texts)` with every text through the exact route, for comparison."""
    with monkeypatch.context() as patch:
        force_the_exact_route(patch, tokenizer._tokenizer)
        return tokenizer(texts, **options)


def test_wikitext_paragraphs_with_unk_take_the_fast_pipelines(tokenizer, shared_data, monkeypatch):
    """WikiText-2 writes rare words as "<unk>", which Rust takes out as the added token before normalizing, so the
    paragraphs holding it need no Python step: the same ids, offsets and words as through the Python steps."""
    paragraphs = [line for line in (shared_data / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(
        encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
    with_unk = [text for text in paragraphs if "<unk>" in text]
    assert len(with_unk) > 5
    assert set(tokenizer._tokenizer.pipelines_of(with_unk)) <= {"ascii", "rust"}
    options = dict(truncation=True, max_length=512, return_offsets_mapping=True)
    screened = tokenizer(paragraphs, **options)
    everywhere = encodings_everywhere_exact(tokenizer, monkeypatch, paragraphs, **options)
    assert screened.keys() == everywhere.keys()
    for key in screened:
        assert screened[key] == everywhere[key], key
    assert all(screened.word_ids(i) == everywhere.word_ids(i) for i in range(len(paragraphs)))


@pytest.mark.parametrize(
    "added",
    [
        [],
        [AddedToken("<unk", normalized=False)],  # overlaps "<unk>": Rust may leave part of it in the text
        [AddedToken("[MASK]", lstrip=True, normalized=False)],  # strips a space: the text is not cut
        [AddedToken("Unk>", normalized=True)],  # matched after normalizing: never cut out
    ],
    ids=["special-tokens", "overlapping", "lstrip", "normalized"],
)
@pytest.mark.parametrize("split_special_tokens", [False, True])
def test_control_strings_between_added_tokens_are_routed_exactly(
    spiece_model, monkeypatch, added, split_special_tokens
):
    """A control-piece string takes the Python step only where it reaches the normalizer: not as an added token
    Rust takes out first, but written in another case, run into another token, or with split_special_tokens."""
    tokenizer = AlbertHFTokenizer(vocab_file=str(spiece_model))
    tokenizer.add_tokens(added)
    texts = [
        "a <unk> b <pad> c", "a <UNK> b", "<unk><unk>>", "x<unk>", "<un<unk>k>", "<Unk<unk>>", "[MASK] <pad> 1,2",
        "née <unk> b", "née <UNK> b", "née <un<unk>k>", "<unk\u0301> b", "<ｕｎｋ> b", "[cls] [sep] <mask>",
    ]  # fmt: skip
    options = dict(return_offsets_mapping=True, split_special_tokens=split_special_tokens)
    screened = tokenizer(texts, **options)
    everywhere = encodings_everywhere_exact(tokenizer, monkeypatch, texts, **options)
    for key in screened:
        assert screened[key] == everywhere[key], key
    one_by_one = [tokenizer(text, **options)["input_ids"] for text in texts]
    assert one_by_one == everywhere["input_ids"]


def test_a_charsmap_that_changes_ascii_stays_on_the_ascii_pipeline(tmp_path):
    """The "ascii" pipeline leaves the charsmap out only where it maps every printable ASCII character to itself.
    A model whose normalization rule rewrites "~" as "-" keeps it, and its ids equal the original algorithm's."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"line {i} with some words - and more words, {i % 7}" for i in range(300)), "utf-8")
    rules = tmp_path / "rules.tsv"
    rules.write_text("7E\t2D\n", "utf-8")  # "~" -> "-"
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "sp"), vocab_size=60, model_type="unigram",
        normalization_rule_tsv=str(rules), bos_id=-1, eos_id=-1, minloglevel=2,
    )  # fmt: skip
    tokenizer = AlbertHFTokenizer(vocab_file=str(tmp_path / "sp.model"))
    assert "Precompiled" in repr(tokenizer._tokenizer.routes["ascii"].normalizer)
    texts = ["words~and~more", "Some Words - and ~ more", "line 3 with ~~ words"]
    assert tokenizer._tokenizer.pipelines_of(texts) == ["ascii"] * 3
    assert_same_as_reference(tokenizer, spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model")), texts)


def test_albert_s_charsmap_leaves_printable_ascii_alone(tokenizer):
    assert repr(tokenizer._tokenizer.routes["ascii"].normalizer) == "Sequence(normalizers=[Lowercase()])"


THREADS_SCRIPT = """
import sys, threading
from albert_hf.tokenization import AlbertHFTokenizer
texts = %r
tokenizer = AlbertHFTokenizer(vocab_file=sys.argv[1])
batches = [texts[i:] + texts[:i] for i in range(len(texts))] * 20
expected = [tokenizer(batch)["input_ids"] for batch in batches]
results = {}
def encode(first):
    for index in range(first, len(batches), 4):
        results[index] = tokenizer(batches[index])["input_ids"]
threads = [threading.Thread(target=encode, args=(first,)) for first in range(4)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
assert [results[index] for index in range(len(batches))] == expected, "threads got other ids"
print("threads ok")
"""


def test_threads_sharing_one_tokenizer_get_the_sequential_ids(spiece_model):
    """datasets' streaming tokenizes several files from a thread pool with one tokenizer. The exact path swaps the
    Rust pipeline's normalizer during a call: unguarded, threads encoding at once deadlocked with the GIL held (a
    streamed pretraining run over several files hung forever). Each thread must get what a sequential call gives, and
    finish; in a subprocess, because such a deadlock stops every thread of the process, a test's timeout included."""
    import sys

    command = [sys.executable, "-c", THREADS_SCRIPT % (MIXED_TEXTS,), str(spiece_model)]
    try:
        result = processes.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("threads encoding with one tokenizer deadlocked (no answer in 120 s)")
    assert result.returncode == 0 and "threads ok" in result.stdout, result.stderr[-3000:]


def test_decode_gives_the_normalized_text(tokenizer):
    text = '  Crème  brûlée costs 1,500 euros, "ok". '
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == preprocess_text(text)


def test_pickle_and_deepcopy_keep_behaviour(tokenizer):
    tokenizer.add_tokens(["newword"])
    for clone in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer)):
        text = "In 1990, a newword <unk> appeared"
        assert (
            clone(text, split_special_tokens=True)["input_ids"]
            == tokenizer(text, split_special_tokens=True)["input_ids"]
        )
        assert clone("4,666 x")["input_ids"] == tokenizer("4,666 x")["input_ids"]


# ----------------------------------------------------------------------------------------------------------------------
# Loading and saving
# ----------------------------------------------------------------------------------------------------------------------

TEXTS = ["In 1990, 4,000 (British) people said ``hello''.", "Crème brûlée", "[MASK] is here"]


def test_save_and_reload_round_trip(tokenizer, tmp_path):
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.add_tokens(["brandnewtoken"])
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "spiece.model").is_file() and (tmp_path / "tokenizer_config.json").is_file()
    reloaded = AlbertHFTokenizer.from_pretrained(tmp_path)
    assert reloaded(TEXTS + ["a brandnewtoken"])["input_ids"] == tokenizer(TEXTS + ["a brandnewtoken"])["input_ids"]
    assert len(reloaded) == len(tokenizer)


def albert_hf_model_config(folder) -> None:
    """The config.json of a model saved with albert_hf's code (sharing "attention"), as a model is saved before its
    tokenizer: a tokenizer saved beside it keeps its code too."""
    albert_hf.AlbertConfig(
        vocab_size=30000, hidden_size=32, num_attention_heads=2, sharing="attention"
    ).save_pretrained(folder)


def test_save_beside_an_albert_hf_model_writes_spiece_model_the_added_tokens_and_no_tokenizer_json(
    tokenizer, spiece_model, tmp_path
):
    """The files a save beside a model with albert_hf's code writes and returns: the SentencePiece model byte for byte,
    and tokenizer_config.json with every added token (normal and special, with their flags), read back into the same
    tokenizer; no tokenizer.json, which could hold only the Rust steps of the pipeline."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.add_tokens(["brandnewtoken", AddedToken("[LSTRIP]", lstrip=True, normalized=False)])
    tokenizer.add_special_tokens({"additional_special_tokens": ["[EXTRA]"]})
    albert_hf_model_config(tmp_path)
    returned = tokenizer.save_pretrained(tmp_path)
    assert returned == (str(tmp_path / "tokenizer_config.json"), str(tmp_path / "spiece.model"))
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "config.json",
        "configuration.py",
        "spiece.model",
        "tokenization.py",
        "tokenizer_config.json",
    ]
    assert (tmp_path / "spiece.model").read_bytes() == spiece_model.read_bytes()
    saved = json.loads((tmp_path / "tokenizer_config.json").read_text())["added_tokens_decoder"]
    expected = {str(index): token.__getstate__() for index, token in tokenizer.added_tokens_decoder.items()}
    assert saved == expected and {"brandnewtoken", "[LSTRIP]", "[EXTRA]"} <= {t["content"] for t in saved.values()}
    reloaded = AlbertHFTokenizer.from_pretrained(tmp_path)
    texts = [*TEXTS, "a brandnewtoken b", "x [LSTRIP] y [EXTRA]"]
    assert reloaded(texts)["input_ids"] == tokenizer(texts)["input_ids"]
    assert reloaded.added_tokens_decoder == tokenizer.added_tokens_decoder

    albert_hf_model_config(tmp_path / "prefixed")
    tokenizer.save_pretrained(tmp_path / "prefixed", filename_prefix="mine")
    assert sorted(path.name for path in (tmp_path / "prefixed").iterdir()) == [
        "config.json", "configuration.py", "mine-spiece.model", "mine-tokenizer_config.json", "tokenization.py"
    ]  # fmt: skip


@pytest.mark.parametrize("beside", [None, "albert"])
def test_save_in_transformers_format_keeps_the_added_tokens_for_both_readers(tokenizer, spiece_model, tmp_path, beside):
    """Alone or beside transformers' own ALBERT, a save is in transformers' tokenizer format: tokenizer.json (read by
    transformers without albert_hf) and spiece.model with the settings and every added token (read back by
    albert_hf into the same exact tokenizer); no code. The config names AlbertHFTokenizer: albert_hf's class where
    albert_hf is imported, TokenizersBackend on tokenizer.json where it is not (tests/test_stock_format.py)."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.add_tokens(["brandnewtoken", AddedToken("[LSTRIP]", lstrip=True, normalized=False)])
    tokenizer.add_special_tokens({"additional_special_tokens": ["[EXTRA]"]})
    if beside == "albert":
        transformers.AlbertConfig(vocab_size=30000).save_pretrained(tmp_path)
    returned = tokenizer.save_pretrained(tmp_path)
    written = {"spiece.model", "tokenizer.json", "tokenizer_config.json"}
    assert {Path(path).name for path in returned} == written
    assert {path.name for path in tmp_path.iterdir()} == written | ({"config.json"} if beside else set())
    assert (tmp_path / "spiece.model").read_bytes() == spiece_model.read_bytes()
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert "auto_map" not in config
    assert config["tokenizer_class"] == "AlbertHFTokenizer"
    assert type(transformers.AutoTokenizer.from_pretrained(tmp_path)) is AlbertHFTokenizer
    texts = [*TEXTS, "a brandnewtoken b", "x [LSTRIP] y [EXTRA]"]
    reloaded = AlbertHFTokenizer.from_pretrained(tmp_path)
    assert reloaded(texts)["input_ids"] == tokenizer(texts)["input_ids"]
    assert reloaded.added_tokens_decoder == tokenizer.added_tokens_decoder
    stock = transformers.TokenizersBackend.from_pretrained(tmp_path)
    assert stock.added_tokens_decoder == tokenizer.added_tokens_decoder
    plain = ["In 1990, 4,000 (British) people said hello.", "Crème brûlée", "[MASK] is here", "a brandnewtoken b"]
    assert stock(plain)["input_ids"] == tokenizer(plain)["input_ids"]


def test_save_with_push_to_hub_uploads_the_complete_folder(tokenizer, tmp_path, monkeypatch):
    """The upload starts once spiece.model is written (transformers' own upload would start before it)."""
    uploaded = {}

    def push_to_hub(self, repo_id, **options):  # what the folder holds when the upload starts
        files = sorted(path.name for path in (tmp_path / "local").iterdir())
        uploaded.update(repo_id=repo_id, options=options, files=files)

    monkeypatch.setattr(AlbertHFTokenizer, "push_to_hub", push_to_hub)
    tokenizer.save_pretrained(tmp_path / "local", push_to_hub=True, repo_id="me/albert", commit_message="m", token="t")
    assert uploaded == {
        "repo_id": "me/albert",
        "options": {"commit_message": "m", "token": "t"},
        "files": ["spiece.model", "tokenizer.json", "tokenizer_config.json"],
    }
    albert_hf_model_config(tmp_path / "beside")
    tokenizer.save_pretrained(tmp_path / "beside", push_to_hub=True, repo_id="me/albert")
    assert (tmp_path / "beside" / "tokenization.py").is_file()


def test_hub_style_folder(spiece_model, tokenizer, tmp_path):
    """spiece.model with the tokenizer_config.json the official ALBERT repos publish (mask token with lstrip)."""
    shutil.copy(spiece_model, tmp_path / "spiece.model")
    config = {
        "do_lower_case": True,
        "remove_space": True,
        "keep_accents": False,
        "bos_token": "[CLS]",
        "eos_token": "[SEP]",
        "unk_token": "<unk>",
        "sep_token": "[SEP]",
        "pad_token": "<pad>",
        "cls_token": "[CLS]",
        "mask_token": {
            "content": "[MASK]",
            "single_word": False,
            "lstrip": True,
            "rstrip": False,
            "normalized": False,
            "__type": "AddedToken",
        },
        "model_max_length": 512,
        "tokenizer_class": "AlbertTokenizer",
    }
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    loaded = AlbertHFTokenizer.from_pretrained(tmp_path)
    assert loaded.model_max_length == 512
    assert loaded(TEXTS)["input_ids"][:2] == tokenizer(TEXTS)["input_ids"][:2]
    assert loaded.convert_ids_to_tokens(loaded("a [MASK]")["input_ids"]) == ["[CLS]", "▁a", "[MASK]", "[SEP]"]


def test_folder_saved_by_transformers_albert_tokenizer(spiece_model, tokenizer, tmp_path):
    """transformers 5 saves tokenizer.json only (no spiece.model); we rebuild the SentencePiece model from it."""
    from transformers import AlbertTokenizer as TransformersAlbertTokenizer

    pytest.importorskip("google.protobuf", reason="transformers needs protobuf to read spiece.model")
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(spiece_model, source / "spiece.model")
    TransformersAlbertTokenizer.from_pretrained(source).save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved" / "spiece.model").exists()
    loaded = AlbertHFTokenizer.from_pretrained(tmp_path / "saved")
    assert loaded(TEXTS)["input_ids"] == tokenizer(TEXTS)["input_ids"]
    assert "token_type_ids" in loaded("a", "b")


def test_auto_tokenizer_after_import_albert_hf(tokenizer, tmp_path):
    """A fresh process that only imported albert_hf loads a saved folder with AutoTokenizer, as our class."""
    tokenizer.save_pretrained(tmp_path)
    code = (
        "import sys, albert_hf; from transformers import AutoTokenizer; "
        f"t = AutoTokenizer.from_pretrained({str(tmp_path)!r}); "
        "print(type(t).__module__, t('In 1990, x', 'y')['token_type_ids'])"
    )
    result = processes.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[0] == "albert_hf.tokenization"
    assert "1" in result.stdout.split(" ", 1)[1]


def test_missing_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="spiece.model"):
        AlbertHFTokenizer(vocab_file=str(tmp_path / "spiece.model"))
    with pytest.raises((OSError, ValueError), match="spiece.model|SentencePiece"):
        AlbertHFTokenizer.from_pretrained(tmp_path)


def test_corrupt_model_file_is_a_clear_error(spiece_model, tmp_path):
    (tmp_path / "garbage.model").write_bytes(b"this is not a sentencepiece model")
    with pytest.raises(ValueError, match="garbage.model is not a valid SentencePiece model"):
        AlbertHFTokenizer(vocab_file=str(tmp_path / "garbage.model"))
    (tmp_path / "truncated.model").write_bytes(Path(spiece_model).read_bytes()[:5000])
    with pytest.raises(ValueError, match="truncated.model is not a valid SentencePiece model"):
        AlbertHFTokenizer(vocab_file=str(tmp_path / "truncated.model"))


# ----------------------------------------------------------------------------------------------------------------------
# Text without spaces: Japanese, and [MASK] in fill-mask input
# ----------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def japanese_corpus(shared_data) -> Path:
    return shared_data / "corpus" / "ja" / "wagahai_wa_neko_de_aru.txt"


@pytest.fixture(scope="module")
def japanese_tokenizer(shared_data, japanese_corpus, tmp_path_factory) -> AlbertHFTokenizer:
    """Trained on the Japanese novel with the normalization Japanese needs: no accent stripping, no lower-casing; as
    SentencePiece trains on text without spaces (pieces across words), to hold it to the original tokenization
    (the word-bounded vocabularies have tests/test_word_bounded_vocabulary.py)."""
    folder = tmp_path_factory.mktemp("ja_tokenizer")
    vocab_size = 8000 if is_full(shared_data) else 2000  # the excerpt has room for at most 2,816 pieces
    return train_tokenizer(
        japanese_corpus,
        folder,
        vocab_size=vocab_size,
        lowercase=False,
        strip_accents=False,
        show_progress=False,
        word_segmenter="none",
    )


def test_japanese_ids_and_offsets_equal_sentencepiece(japanese_tokenizer, japanese_corpus, shared_data):
    """Every line of the novel: ids equal SentencePiece's (google-research's pieces, same normalization options),
    and each token's offsets slice out exactly the raw characters SentencePiece normalized into that piece."""
    sp = spm.SentencePieceProcessor(model_proto=japanese_tokenizer.sp_model_proto)
    lines = [line for line in japanese_corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    full = is_full(shared_data)
    assert len(lines) > (9000 if full else 500)
    encoding = japanese_tokenizer(lines, add_special_tokens=False, return_offsets_mapping=True)
    assert encoding["input_ids"] == reference_ids(sp, lines, lower=False, keep_accents=True)
    plain = sp.encode([" ".join(line.split()) for line in lines])  # no digit-comma re-split in this novel's pieces
    assert encoding["input_ids"] == plain
    checked = partial = 0
    for line, ids, offsets in zip(lines, encoding["input_ids"], encoding["offset_mapping"]):
        tokens = japanese_tokenizer.convert_ids_to_tokens(ids)
        assert [start for start, _ in offsets] == sorted(start for start, _ in offsets)
        for token, (start, end) in zip(tokens, offsets):
            assert 0 <= start < end <= len(line), (line, token)
            if token in ("▁", "<unk>"):  # a lone "▁" shares the next character's span
                continue
            normalized = sp.normalize(line[start:end]).lstrip("▁")
            checked += 1
            if normalized != token.lstrip("▁"):
                # One raw character normalized into several pieces ("…" -> "..."): each piece spans all of it.
                assert end - start == 1 and token.lstrip("▁") in normalized, (line, token, line[start:end])
                partial += 1
    assert checked > (100_000 if full else 10_000) and partial < checked / 100


@pytest.mark.parametrize(
    "text,expected",
    [
        ("吾輩は[MASK]である。", ["[CLS]", "▁吾輩は", "[MASK]", "である", "。", "[SEP]"]),
        ("[MASK]である。", ["[CLS]", "[MASK]", "である", "。", "[SEP]"]),
        ("吾輩は猫[MASK]。", ["[CLS]", "▁吾輩は", "猫", "[MASK]", "。", "[SEP]"]),
        ("吾輩は [MASK] である。", ["[CLS]", "▁吾輩は", "[MASK]", "▁", "である", "。", "[SEP]"]),  # spaces are words
    ],
)
def test_japanese_fill_mask_input_has_no_stray_prefix(japanese_tokenizer, text, expected):
    encoding = japanese_tokenizer(text, return_offsets_mapping=True)
    assert japanese_tokenizer.convert_ids_to_tokens(encoding["input_ids"]) == expected
    mask = encoding["input_ids"].index(japanese_tokenizer.mask_token_id)
    start, end = encoding["offset_mapping"][mask]
    assert text[start:end] == "[MASK]"
    # The same in a batch next to text that takes the pure-Rust path, and after a save and reload.
    assert japanese_tokenizer([text, "吾輩は猫である。"])["input_ids"][0] == encoding["input_ids"]


def test_english_fill_mask_input_is_unchanged(tokenizer):
    """With spaces around [MASK] the words keep their "▁"; text glued to [MASK] continues the masked word."""
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("The [MASK] is here.")["input_ids"])
    assert tokens == ["[CLS]", "▁the", "[MASK]", "▁is", "▁here", ".", "[SEP]"]
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("Paris is the [MASK].")["input_ids"])
    assert tokens == ["[CLS]", "▁paris", "▁is", "▁the", "[MASK]", ".", "[SEP]"]
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("un[MASK]able, [MASK]s")["input_ids"])
    assert tokens == ["[CLS]", "▁un", "[MASK]", "able", ",", "[MASK]", "s", "[SEP]"]
    # Official ALBERT configs give [MASK] lstrip=True: "the [MASK]" eats the space before, nothing else changes.
    assert tokenizer("a [MASK] b")["input_ids"] == [
        tokenizer.cls_token_id, *tokenizer("a", add_special_tokens=False)["input_ids"], tokenizer.mask_token_id,
        *tokenizer("b", add_special_tokens=False)["input_ids"], tokenizer.sep_token_id,
    ]  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# Exact through every entry point: generated text through every public way transformers offers to encode
# ----------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def entry_tokenizers(spiece_model) -> dict:
    """The tokenizer as built, and pickled and reloaded."""
    built = AlbertHFTokenizer(vocab_file=str(spiece_model))
    return {"built": built, "pickled": pickle.loads(pickle.dumps(built))}


@pytest.mark.parametrize("loaded", ["built", "pickled"])
@pytest.mark.parametrize("way", ENTRY_POINTS)
@given(data=st.data())
def test_every_entry_point_gives_the_original_ids(entry_tokenizers, sp, loaded, way, data):
    """Generated text through every public way transformers offers to encode (`ENTRY_POINTS`), on the tokenizer as
    built and as pickled and reloaded: ids equal google-research's algorithm (`reference_ids`), ties of equal score
    aside (`assert_original_ids`). The texts take every route of the backend (printable ASCII, other text, the Python
    steps), often in the same batch."""
    ours, original = draw_and_encode(entry_tokenizers[loaded], sp, way, data)
    assert_original_ids(sp, ours, original)


def test_entry_points_cover_every_encoding_method(tokenizer):
    """transformers 5 removed `encode_plus` and `batch_encode_plus` (`__call__` does what they did). Should a release
    bring them (or another encoding method) back, this fails, so that `ENTRY_POINTS` takes them in."""
    cls = type(tokenizer)
    methods = {
        name for name in dir(cls) if "encode" in name and not name.startswith("_") and callable(getattr(cls, name))
    }
    # Beside `encode`: our own two (checked against the original above) and the chat-template helper, which encodes
    # through `__call__`.
    assert methods == {
        "encode",
        "encode_plain_texts",
        "encode_plain_texts_with_starts",
        "encode_message_with_chat_template",
    }


def test_the_backend_s_pipeline_is_the_exact_one_and_unrouted_attributes_fail(tokenizer, sp):
    """What transformers reads from the backend is the exact route: its normalizer, pre-tokenizer and model, run
    step by step as transformers' chat-template encoding does, give the original's ids. An attribute the backend does
    not route raises, naming it, instead of reaching a pipeline without the original's steps."""
    backend = tokenizer.backend_tokenizer
    text = "In 1990, 4,666 <UNK> naïve x1,y"
    normalized = backend.normalizer.normalize_str(text)
    splits = [split for split, _ in backend.pre_tokenizer.pre_tokenize_str(normalized)]
    ids = [token.id for split in splits for token in backend.model.tokenize(split)]
    assert ids == reference_ids(sp, [text])[0]
    for name in ("encode_batch_fast", "to_str", "save", "train_from_iterator"):
        with pytest.raises(AttributeError, match=f"does not route `{name}`"):
            getattr(backend, name)
    with pytest.raises(AttributeError, match="does not route setting `model`"):
        backend.model = None
    with pytest.raises(AttributeError, match="cannot be set"):
        backend.normalizer = None


REMOTE_ENTRY_POINTS = """
import sys
sys.path = [p for p in sys.path if p not in ("", {repo_root!r})] + [{tests!r}]
sys.modules["albert_hf"] = None  # as on a machine without albert_hf (an editable install imports through a finder)
import sentencepiece as spm
from hypothesis import given, settings, strategies as st
from transformers import AutoTokenizer
from helpers.tokenization_reference import ENTRY_POINTS, assert_original_ids, draw_and_encode

tokenizer = AutoTokenizer.from_pretrained({folder!r}, trust_remote_code=True)
assert type(tokenizer).__module__.startswith("transformers_modules"), type(tokenizer).__module__
sp = spm.SentencePieceProcessor(model_file={model!r})
for way in ENTRY_POINTS:
    @settings(max_examples={max_examples}, derandomize=True, deadline=None, database=None)
    @given(data=st.data())
    def check(data):
        assert_original_ids(sp, *draw_and_encode(tokenizer, sp, way, data))
    check()
    print("ok", way, flush=True)
"""


def test_every_entry_point_of_the_remote_code_gives_the_original_ids(entry_tokenizers, spiece_model, tmp_path):
    """The same through AutoTokenizer with trust_remote_code=True, from a saved folder, in a process where albert_hf
    cannot be imported (so the folder's own tokenization.py is what runs)."""
    from hypothesis import settings as current_settings

    # Beside a model with albert_hf's code, the tokenizer keeps its code too (`import albert_hf` registered the class:
    # tokenization.py travels), and that code is what trust_remote_code runs.
    albert_hf_model_config(tmp_path / "saved")
    entry_tokenizers["built"].save_pretrained(tmp_path / "saved")
    assert (tmp_path / "saved" / "tokenization.py").is_file()
    script = REMOTE_ENTRY_POINTS.format(
        repo_root=str(REPO_ROOT), tests=str(REPO_ROOT / "tests"), folder=str(tmp_path / "saved"),
        model=str(spiece_model), max_examples=current_settings().max_examples,
    )  # fmt: skip
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"), OMP_NUM_THREADS="1")
    result = processes.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert result.stdout.split("\n")[:-1] == [f"ok {way}" for way in ENTRY_POINTS]
