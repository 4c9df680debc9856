"""albert_hf.AlbertTokenizer: exact original ALBERT tokenization, offsets, transformers API, loading and saving.

"Exact" is checked against `tokenization_reference.reference_ids`, the original algorithm written again on top of the
`sentencepiece` package. On the real data, every source is checked on all texts that take the tokenizer's special
paths (a digit followed by a comma, control-token strings) plus every 25th other text; the full-data figures come
from `benchmarks/tokenizer_agreement.py` and from the `slow` test below.
"""

from __future__ import annotations

import copy
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
from conftest import is_full
from tokenization_reference import TEXT_SOURCES, preprocess_text, reference_ids, reference_pieces

from albert_hf.tokenization import AlbertTokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
CONTROL_STRINGS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")


@pytest.fixture(scope="module")
def tokenizer(spiece_model) -> AlbertTokenizer:
    return AlbertTokenizer(vocab_file=str(spiece_model))


@pytest.fixture(scope="module")
def sp(spiece_model) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(spiece_model))


def piece_score_total(sp: spm.SentencePieceProcessor, pieces: list[str]) -> float:
    return sum(sp.get_score(sp.piece_to_id(piece)) for piece in pieces)


def assert_same_as_reference(tokenizer, sp, texts: list[str], **preprocess) -> int:
    """Ids identical to the original's, except near-ties of SentencePiece's float32 Viterbi; returns the tie count.

    SentencePiece adds piece scores in float32 along the whole text, so in a paragraph of thousands of characters
    (a running sum of 10^3-10^4) it cannot separate two segmentations of a word whose scores differ by less than
    ~10^-3, nor order two equal-score ones ("66" "6" or "6" "66") the same way as per word. A difference is accepted
    only if our pieces score at least as high as the reference's in exact arithmetic and within 10^-3.
    """
    ours = tokenizer(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    expected = reference_ids(sp, texts, **preprocess)
    ties = 0
    for text, our_ids, reference in zip(texts, ours, expected):
        if our_ids == reference:
            continue
        our_score = piece_score_total(sp, tokenizer.convert_ids_to_tokens(our_ids))
        reference_score = piece_score_total(sp, [sp.id_to_piece(i) for i in reference])
        assert reference_score - 1e-9 <= our_score <= reference_score + 1e-3, (
            f"ids differ from the original on {text[:200]!r}:\n"
            f"  ours      {tokenizer.convert_ids_to_tokens(our_ids)[:60]}\n"
            f"  reference {[sp.id_to_piece(i) for i in reference][:60]}"
        )
        ties += 1
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


def test_reference_reproduces_the_published_albert_example(sp):
    # transformers' ALBERT integration test, a tokenization made by the original implementation.
    pieces = reference_pieces(sp, ["I was born in 92000, and this is falsé."])[0]
    assert pieces == ["▁i", "▁was", "▁born", "▁in", "▁9", "2000", ",", "▁and", "▁this", "▁is", "▁false", "."]


@pytest.mark.parametrize(
    "text",
    [
        "I was born in 92000, and this is falsé.",
        "In 1990, 2,000 people; 4,666 of them: 12,3,4, x1,y 1,",  # digit-comma pieces, with and without "▁"
        "``Quoted'' text\tand\u00a0non-breaking\u3000spaces\x1c here  ",  # quotes, Python's whitespace set
        "Crème brûlée, Ångström, naïve façade, İstanbul, ǅ, ﬁve ½ ²",  # NFKD, ligatures, fractions
        "ภาษาไทย हिन्दी עִבְרִית",  # combining class 0 marks kept, others dropped (not the same set as "Mn")
        '(brackets) "quotes" - dash. £5 €3 – en dash',  # user-defined symbols
        "<unk> <pad> [CLS] [sep] <UNK> literal control strings",
        "日本語のテキスト and emoji 😀😀 unknown characters",
        "",
        "   ",
    ],
)
def test_ids_equal_the_original_algorithm(tokenizer, sp, text):
    assert_same_as_reference(tokenizer, sp, [text]) == 0


@pytest.mark.parametrize("do_lower_case,keep_accents", [(False, False), (True, True), (False, True)])
def test_options_equal_the_original_algorithm(spiece_model, sp, do_lower_case, keep_accents):
    tokenizer = AlbertTokenizer(vocab_file=str(spiece_model), do_lower_case=do_lower_case, keep_accents=keep_accents)
    texts = ["Crème Brûlée in 1990, ÅNGSTRÖM", "İstanbul ǅemal naïve", "Hello World, 3,500 x"]
    assert assert_same_as_reference(tokenizer, sp, texts, lower=do_lower_case, keep_accents=keep_accents) == 0


@pytest.mark.parametrize("source", sorted(TEXT_SOURCES))
def test_real_data_equals_the_original_algorithm(tokenizer, sp, shared_data, source):
    texts = list(TEXT_SOURCES[source](shared_data))
    # The full data: special-path texts plus a sample of the rest; the repository's excerpts: every text.
    texts = special_path_sample(texts) if is_full(shared_data) else texts
    assert len(texts) > (500 if is_full(shared_data) else 5)
    ties = assert_same_as_reference(tokenizer, sp, texts)
    assert ties <= 5  # near-ties of float32 sums are rare: 10 in 262k texts on all the shared data


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(TEXT_SOURCES))
def test_all_real_data_equals_the_original_algorithm(tokenizer, sp, shared_data, source):
    texts = list(TEXT_SOURCES[source](shared_data))
    assert assert_same_as_reference(tokenizer, sp, texts) <= 10


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
    assert 0 < sum(map(backend.needs_python_step, MIXED_TEXTS)) < len(MIXED_TEXTS)  # a mixed batch
    screened = tokenizer(*arguments, **options)
    screened_one_by_one = [backend.encode(text).ids for text in MIXED_TEXTS]  # `encode` screens too
    monkeypatch.setattr(type(backend), "needs_python_step", lambda self, item: True)
    everywhere = tokenizer(*arguments, **options)
    assert screened_one_by_one == [backend.encode(text).ids for text in MIXED_TEXTS]
    assert screened.keys() == everywhere.keys()
    for key in screened:
        assert screened[key] == everywhere[key], key
    for index in range(len(screened["input_ids"])):
        assert screened.word_ids(index) == everywhere.word_ids(index)


def test_decode_gives_the_normalized_text(tokenizer):
    text = "  Crème  brûlée costs 1,500 euros, ``ok''. "
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
    reloaded = AlbertTokenizer.from_pretrained(tmp_path)
    assert reloaded(TEXTS + ["a brandnewtoken"])["input_ids"] == tokenizer(TEXTS + ["a brandnewtoken"])["input_ids"]
    assert len(reloaded) == len(tokenizer)


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
    loaded = AlbertTokenizer.from_pretrained(tmp_path)
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
    loaded = AlbertTokenizer.from_pretrained(tmp_path / "saved")
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
    result = subprocess.run(
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
        AlbertTokenizer(vocab_file=str(tmp_path / "spiece.model"))
    with pytest.raises((OSError, ValueError), match="spiece.model|SentencePiece"):
        AlbertTokenizer.from_pretrained(tmp_path)


def test_corrupt_model_file_is_a_clear_error(spiece_model, tmp_path):
    (tmp_path / "garbage.model").write_bytes(b"this is not a sentencepiece model")
    with pytest.raises(ValueError, match="garbage.model is not a valid SentencePiece model"):
        AlbertTokenizer(vocab_file=str(tmp_path / "garbage.model"))
    (tmp_path / "truncated.model").write_bytes(Path(spiece_model).read_bytes()[:5000])
    with pytest.raises(ValueError, match="truncated.model is not a valid SentencePiece model"):
        AlbertTokenizer(vocab_file=str(tmp_path / "truncated.model"))
