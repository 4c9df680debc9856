"""Token classification on Japanese and Chinese: words joined as running text, tokenized once with offsets; readers
that keep tokens that are Unicode spaces. Fixtures: tests/data/ner_cjk/ (written for this project, see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datasets import Dataset
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.data.ner import (
    ALIGN_RUNNING_TEXT,
    ALIGN_WORDS,
    IGNORE_INDEX,
    build_label_list,
    join_words,
    load_ner_file,
    read_conll,
    resolve_alignment,
    running_text_positions,
    tokenize_and_align,
    word_predictions,
    write_conll_predictions,
)
from albert_hf.errors import DataError
from albert_hf.metrics.ner import ner_metrics

FIXTURES = Path(__file__).parent / "data" / "ner_cjk"
LANGUAGES = ("ja", "zh")
# Pieces of the test vocabularies: as many as each fixture's stretches of one tag give (SentencePiece's limit).
VOCAB_SIZES = {"ja": 230, "zh": 190}


def fixture(language: str, split: str) -> Dataset:
    return load_ner_file(str(FIXTURES / language / f"{split}.txt"))


def tag_stretches(tokens: list[str], tags: list[str]) -> list[str]:
    """The sentence cut where an entity starts or ends, each stretch written as running text."""
    stretches, group, kind = [], [], None
    for token, tag in zip(tokens, tags):
        if group and (tag.startswith("B-") or tag[2:] != kind):
            stretches.append(join_words(group)[0])
            group = []
        group.append(token)
        kind = tag[2:]
    return stretches + [join_words(group)[0]]


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory) -> dict:
    """Per language, a small SentencePiece vocabulary trained on the fixture's training text, one line per stretch of
    one tag (an entity, or the words between two), so that no piece spans an entity boundary and the gold round trip
    can be exact; pieces still span word boundaries inside a stretch (さんは), which the alignment must handle."""
    from albert_hf.vocabulary import train_tokenizer

    trained = {}
    for language in LANGUAGES:
        train = fixture(language, "train")
        folder = tmp_path_factory.mktemp(f"vocabulary_{language}")
        lines = [line for t, g in zip(train["tokens"], train["ner_tags"]) for line in tag_stretches(t, g)]
        (folder / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        trained[language] = train_tokenizer(
            folder / "text.txt",
            folder / "tokenizer",
            VOCAB_SIZES[language],
            character_coverage=1.0,
            show_progress=False,
        )
    return trained


@pytest.fixture(params=LANGUAGES)
def language_and_tokenizer(request, tokenizers):
    return request.param, tokenizers[request.param]


# ----------------------------------------------------------------------------------------------------------------------
# joining words


@pytest.mark.parametrize(
    "words, text",
    [
        (["東京", "の", "Google", "社"], "東京のGoogle社"),
        (["New", "York", "に", "住む"], "New Yorkに住む"),
        (["iPhone", "15", "を", "買っ", "た"], "iPhone 15を買った"),
        (["ＡＢＣ", "１２３", "の", "本"], "ＡＢＣ１２３の本"),
        (["山田", "\u3000", "太郎"], "山田\u3000太郎"),
        (["2005", "年", "7", "月"], "2005年7月"),
        (["他", "用", "Python", "写", "了", "3", "个", "程序", "。"], "他用Python写了3个程序。"),
        (["Peter", "Blackburn", "."], "Peter Blackburn ."),
    ],
)
def test_words_are_joined_as_the_script_writes_them(words, text):
    joined, spans = join_words(words)
    assert joined == text
    assert [joined[start:end] for start, end in spans] == words


def test_alignment_is_chosen_from_the_script(shared_data):
    assert resolve_alignment("auto", fixture("ja", "valid")["tokens"]) == ALIGN_RUNNING_TEXT
    assert resolve_alignment("auto", fixture("zh", "valid")["tokens"]) == ALIGN_RUNNING_TEXT
    english = read_conll(str(shared_data / "conll2003" / "valid.txt"))[:200]
    assert resolve_alignment("auto", [s["tokens"] for s in english]) == ALIGN_WORDS
    assert resolve_alignment("words", fixture("ja", "valid")["tokens"]) == ALIGN_WORDS
    with pytest.raises(ValueError, match="alignment 'spaces': expected one of auto, running_text, words"):
        resolve_alignment("spaces", [["x"]])


def test_pieces_belong_to_the_word_they_start_in_by_hand():
    # 山田 / \u3000 / 太郎 / さん / は: pieces "▁山" "田" "▁太郎" "さんは" ("▁太郎" starts at 太: the space is dropped).
    spans = join_words(["山田", "\u3000", "太郎", "さん", "は"])[1]
    offsets = [(0, 1), (1, 2), (3, 5), (5, 8)]
    piece_words, positions = running_text_positions(offsets, spans)
    assert piece_words == [0, 0, 2, 3]
    # the space is read from the piece before it ("田"), は from the piece that covers it ("さんは")
    assert positions == [0, 1, 2, 3, 3]


# ----------------------------------------------------------------------------------------------------------------------
# running text: ids, the gold round trip


def test_running_text_ids_equal_the_texts_and_gold_tags_round_trip(language_and_tokenizer):
    language, tokenizer = language_and_tokenizer
    sentences = fixture(language, "valid")
    labels = build_label_list(fixture(language, "train"), sentences)
    texts = [join_words(words)[0] for words in sentences["tokens"]]
    encoded, truncated = tokenize_and_align(sentences, tokenizer, labels, 512, alignment=ALIGN_RUNNING_TEXT)
    assert truncated == 0
    assert encoded["input_ids"] == tokenizer(texts)["input_ids"]  # 100% of the sentences
    words, _ = tokenize_and_align(sentences, tokenizer, labels, 512, alignment=ALIGN_WORDS)
    running_length = sum(map(len, encoded["input_ids"]))
    words_length = sum(map(len, words["input_ids"]))
    assert running_length < 0.8 * words_length  # one "▁" per word no more
    print(f"\n{language}: tokens per sentence {words_length / len(words):.2f} -> {running_length / len(encoded):.2f}")

    gold = sentences["ner_tags"]
    wordless = sum(word not in row for row, tags in zip(encoded["word_ids"], gold) for word in range(len(tags)))
    assert wordless > 0  # the fixture does have words inside another word's piece, and words that are a space
    for label_all_tokens in (False, True):
        if label_all_tokens:
            encoded, _ = tokenize_and_align(sentences, tokenizer, labels, 512, True, alignment=ALIGN_RUNNING_TEXT)
        recovered = []
        for row, tags in zip(encoded, gold):
            tags_back, missing = word_predictions(
                row["labels"], row["word_ids"], len(tags), labels, row["word_positions"]
            )
            assert missing == 0
            recovered.append(tags_back)
        assert recovered == gold
        assert ner_metrics(gold, recovered)["f1"] == 1.0


def test_running_text_truncation_and_padding(language_and_tokenizer):
    language, tokenizer = language_and_tokenizer
    sentences = fixture(language, "valid").select(range(20))
    labels = build_label_list(fixture(language, "train"), sentences)
    texts = [join_words(words)[0] for words in sentences["tokens"]]
    encoded, truncated = tokenize_and_align(sentences, tokenizer, labels, 10, alignment=ALIGN_RUNNING_TEXT)
    assert encoded["input_ids"] == tokenizer(texts, truncation=True, max_length=10)["input_ids"]
    full = tokenizer(texts)["input_ids"]
    assert truncated == sum(len(ids) > 10 for ids in full) > 0
    for row, ids in zip(encoded, full):
        cut = [position is None for position in row["word_positions"]]
        assert any(cut) == (len(ids) > 10)
        assert cut == sorted(cut)  # only the words at the end are cut
    padded, _ = tokenize_and_align(sentences, tokenizer, labels, 40, pad_to_max_length=True, alignment="running_text")
    unpadded, _ = tokenize_and_align(sentences, tokenizer, labels, 40, alignment="running_text")
    for row, plain in zip(padded, unpadded):
        length = len(plain["input_ids"])
        assert len(row["input_ids"]) == 40 and row["input_ids"][:length] == plain["input_ids"]
        assert set(row["labels"][length:]) == {IGNORE_INDEX} and row["word_positions"] == plain["word_positions"]


# ----------------------------------------------------------------------------------------------------------------------
# readers keep every token


def test_conll_columns_split_on_spaces_and_tabs_only(tmp_path):
    path = tmp_path / "train.txt"
    rows = ["山田 B-PER", "\u3000 I-PER", "太郎\tI-PER", "\u00a0 O", "a\u2009b O", "。 O", "", "x\u3000y B-LOC", ""]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    sentences = read_conll(str(path))
    assert sentences == [
        {
            "tokens": ["山田", "\u3000", "太郎", "\u00a0", "a\u2009b", "。"],
            "ner_tags": ["B-PER", "I-PER", "I-PER", "O", "O", "O"],
        },
        {"tokens": ["x\u3000y"], "ner_tags": ["B-LOC"]},
    ]
    out = tmp_path / "predictions.txt"
    tokens, tags = [s["tokens"] for s in sentences], [s["ner_tags"] for s in sentences]
    write_conll_predictions(str(out), tokens, tags, tags)
    assert out.read_text(encoding="utf-8").splitlines()[1] == "\u3000 I-PER I-PER"
    assert read_conll(str(out)) == sentences  # written back unchanged
    alone = tmp_path / "alone.txt"
    alone.write_text("山田 B-PER\n\u3000\n", encoding="utf-8")  # a token without its tag, not a blank line
    with pytest.raises(DataError, match=r"alone.txt:2: expected a word and a tag"):
        read_conll(str(alone))
    assert sum(tokens.count("\u3000") for tokens in fixture("ja", "train")["tokens"]) > 0


# ----------------------------------------------------------------------------------------------------------------------
# fine-tuning learns


@pytest.mark.slow  # a learning check (NER's end-to-end run stays in tests/test_ner.py)
def test_ner_on_japanese_running_text_learns(tmp_path, tokenizers):
    """A tiny ALBERT from scratch on the Japanese fixture: training loss falls and dev F1 is above the all-O
    baseline (which finds no entity: F1 0)."""
    from albert_hf.cli import main as cli_main

    tokenizer = tokenizers["ja"]
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    output_dir = tmp_path / "out"
    argv = ["ner", "--data_dir", str(FIXTURES / "ja"), "--test_file", str(FIXTURES / "ja" / "valid.txt")]
    argv += ["--do_train", "--do_eval", "--do_predict", "--tokenizer_name_or_path", str(tmp_path / "tokenizer")]
    argv += ["--config_overrides", TINY_ONE_LAYER_OVERRIDES, "--output_dir", str(output_dir), "--report_to", "none"]
    argv += ["--num_train_epochs", "2", "--learning_rate", "3e-3", "--per_device_train_batch_size", "16"]
    argv += ["--max_seq_length", "64", "--save_strategy", "no", "--logging_steps", "15", "--seed", "1"]
    argv += ["--disable_tqdm", "true", "--use_cpu", "true"]
    assert cli_main(argv) == 0
    history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    losses = [entry["loss"] for entry in history if "loss" in entry]
    print(f"\nlosses {losses}, dev F1 {json.loads((output_dir / 'eval_results.json').read_text())['eval_f1']:.3f}")
    assert losses[-1] < 0.5 * losses[0], losses
    all_o = ner_metrics(
        fixture("ja", "valid")["ner_tags"], [["O"] * len(t) for t in fixture("ja", "valid")["ner_tags"]]
    )
    eval_f1 = json.loads((output_dir / "eval_results.json").read_text())["eval_f1"]
    predict_f1 = json.loads((output_dir / "predict_results.json").read_text())["predict_f1"]
    assert all_o["f1"] == 0.0 and eval_f1 > 0.3 and predict_f1 == pytest.approx(eval_f1)
    written = read_conll(str(output_dir / "predictions_test.txt"), tag_column=1)
    assert [s["tokens"] for s in written] == fixture("ja", "valid")["tokens"]  # the user's own words, U+3000 too


@pytest.mark.parametrize("alignment", ["auto", "words"])
def test_tables_are_read_as_running_text_unless_told(alignment, tokenizers, tmp_path):
    """The table reader (--tokens_column/--tags_column) goes through the same choice: `auto` on Japanese is running
    text, `--alignment words` keeps one "▁" per word."""
    from albert_hf.finetuning import limit_samples, parse_finetuning_args, requested_splits
    from albert_hf.scripts.ner import ARGUMENTS, check_split_tags, choose_alignment, encode_sentences, load_ner_splits

    sentences = fixture("ja", "valid").select(range(30))
    table = tmp_path / "dev.jsonl"
    table.write_text(
        "".join(
            json.dumps({"words": t, "tags": g}, ensure_ascii=False) + "\n"
            for t, g in zip(sentences["tokens"], sentences["ner_tags"])
        ),
        encoding="utf-8",
    )
    argv = ["--validation_file", str(table), "--tokens_column", "words", "--tags_column", "tags", "--do_eval"]
    argv += ["--alignment", alignment, "--output_dir", str(tmp_path / "out"), "--model_name_or_path", "unused"]
    _, data_args, ner_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    raw = limit_samples(load_ner_splits(data_args, ner_args, requested_splits(training_args)), data_args)
    check_split_tags(raw, data_args, ner_args)
    assert raw["validation"].to_list() == sentences.to_list()  # U+3000 tokens included
    tokenizer = tokenizers["ja"]
    chosen = choose_alignment(raw, ner_args)
    encoded = encode_sentences(
        "validation", raw["validation"], tokenizer, build_label_list(sentences), chosen, data_args, ner_args
    )
    texts = [join_words(words)[0] for words in sentences["tokens"]]
    if alignment == "auto":
        assert chosen == ALIGN_RUNNING_TEXT and encoded["input_ids"] == tokenizer(texts)["input_ids"]
    else:
        split = tokenizer(list(sentences["tokens"]), is_split_into_words=True)["input_ids"]
        assert chosen == ALIGN_WORDS and encoded["input_ids"] == split


def test_words_that_are_spaces_get_a_tag_with_one_piece_per_word_too(tokenizer):
    """`--alignment words` on English: a word the tokenizer drops (U+3000, U+00A0) is read from the token before it,
    not counted as cut (first in its sentence: from the first token, the only one there is); the words past
    truncation are counted."""
    from albert_hf.data.ner import CONLL2003_LABELS

    data = Dataset.from_list(
        [
            {
                "tokens": ["Mr", "\u00a0", "Peter", "\u3000", "Blackburn"],
                "ner_tags": ["O", "O", "B-PER", "I-PER", "I-PER"],
            },
            {"tokens": ["\u3000", "Peter"], "ner_tags": ["O", "B-PER"]},
            {"tokens": ["word"] * 30, "ner_tags": ["O"] * 30},
        ]
    )
    labels = list(CONLL2003_LABELS)
    encoded, truncated = tokenize_and_align(data, tokenizer, labels, 12, alignment=ALIGN_WORDS)
    assert truncated == 1
    first = encoded[0]
    mr, peter, blackburn = (first["word_ids"].index(word) for word in (0, 2, 4))
    assert first["word_positions"] == [mr, peter - 1, peter, blackburn - 1, blackburn]
    tags, missing = word_predictions(first["labels"], first["word_ids"], 5, labels, first["word_positions"])
    assert (tags, missing) == (["O", "O", "B-PER", "I-PER", "I-PER"], 0)
    assert encoded[1]["word_positions"] == [1, 1]
    assert encoded[2]["word_positions"].count(None) == 30 - 10
