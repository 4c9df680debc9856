"""Word-bounded vocabularies of Japanese and Chinese: pieces that never cross the words of fugashi/unidic-lite or jieba,
a tokenizer that carries its segmenter wherever it is loaded, and every job on it.

The references are SentencePiece itself, encoding the segmenter's words one by one (`sentencepiece_word_by_word`,
written here from SentencePiece and the segmenter alone), google-research's tokenization (a segmenter that cuts only
at spaces must give its ids exactly), and the segmenters' own words."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import sys
import unicodedata
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
from datasets import Dataset
from helpers import processes
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES, TINY_TWO_LAYER_OVERRIDES
from helpers.tokenization_reference import reference_ids
from test_squad import gold_logits
from transformers import AutoTokenizer, pipeline

from albert_hf.cli import main as cli_main
from albert_hf.data.ner import build_label_list, join_words, load_ner_file, tokenize_and_align, word_predictions
from albert_hf.data.squad_windows import load_squad_examples, postprocess_predictions, prepare_eval_features
from albert_hf.data.word_segmentation import is_start_piece, resolve_word_segmenter
from albert_hf.formats import load_tokenizer
from albert_hf.metrics.ner import ner_metrics
from albert_hf.options import WORD_BOUNDED_CHOICES
from albert_hf.scripts.ner import log_entity_edges
from albert_hf.scripts.squad import log_answer_edges
from albert_hf.tokenization import (
    WORD_SEGMENTERS,
    AlbertHFTokenizer,
    segment_chinese,
    segment_japanese,
)
from albert_hf.vocabulary import choose_word_segmenter, train_tokenizer

DATA = Path(__file__).parent / "data"
JGLUE = DATA / "jglue"
NER_CJK = DATA / "ner_cjk"
LU_XUN = DATA / "chinese_lu_xun_nahan.txt"
NOVEL = Path("corpus") / "ja" / "wagahai_wa_neko_de_aru.txt"
REPO_ROOT = Path(__file__).resolve().parents[1]


def lines_of(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def jglue_texts() -> list[str]:
    """Every text of the JGLUE-layout fixtures and of the Japanese NER fixture (all made up for this project)."""
    texts = lines_of(DATA / "japanese_sample.txt")
    for path in sorted(JGLUE.glob("*/*.json")):
        if path.parent.name.startswith("jsquad"):
            data = json.loads(path.read_text(encoding="utf-8"))["data"]
            paragraphs = [paragraph for article in data for paragraph in article["paragraphs"]]
            texts += [paragraph["context"] for paragraph in paragraphs]
            texts += [question["question"] for paragraph in paragraphs for question in paragraph["qas"]]
        else:
            for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
                texts += [value for key, value in row.items() if isinstance(value, str) and key != "label"]
    ner = load_ner_file(str(NER_CJK / "ja" / "train.txt"))
    return texts + ["".join(words) for words in ner["tokens"]]


@pytest.fixture(scope="module")
def novel(shared_data, tmp_path_factory) -> tuple[AlbertHFTokenizer, list[str]]:
    """A word-bounded vocabulary of the Japanese novel (train_tokenizer's defaults; 4,000 pieces, 1,500 on the
    repository's excerpt), and a third of the novel's lines."""
    path = shared_data / NOVEL
    vocab_size = 4000 if path.stat().st_size > 500_000 else 1500
    folder = tmp_path_factory.mktemp("novel-tokenizer")
    tokenizer = train_tokenizer(path, folder, vocab_size=vocab_size, character_coverage=0.9995, show_progress=False)
    return tokenizer, lines_of(path)[::3]  # every third line: enough text, a third of the time


@pytest.fixture(scope="module")
def japanese(tmp_path_factory) -> AlbertHFTokenizer:
    """A word-bounded vocabulary of the repository's Japanese fixtures: the one the job tests run on."""
    folder = tmp_path_factory.mktemp("ja-fixtures")
    (folder / "text.txt").write_text("\n".join(jglue_texts()) + "\n", encoding="utf-8")
    return train_tokenizer(folder / "text.txt", folder / "tokenizer", 800, character_coverage=1.0, show_progress=False)


@pytest.fixture(scope="module")
def chinese(tmp_path_factory) -> AlbertHFTokenizer:
    """A word-bounded vocabulary of Lu Xun's stories (tests/data), chosen from the script: jieba."""
    folder = tmp_path_factory.mktemp("zh-tokenizer")
    return train_tokenizer(LU_XUN, folder, 900, character_coverage=0.9995, show_progress=False)


def sentencepiece_word_by_word(tokenizer: AlbertHFTokenizer, segment, texts: list[str]) -> list[list[int]]:
    """The reference: each text as this tokenizer prepares it (lower-casing as configured), normalized by
    SentencePiece with the model's own rule, cut into the segmenter's words, and each word encoded by SentencePiece
    alone: with "▁" in front where a space or the start of the text comes before it, without one otherwise."""
    proto = tokenizer.sp_model_proto
    normalizer = spm.SentencePieceNormalizer(
        model_proto=proto, add_dummy_prefix=False, escape_whitespaces=False, remove_extra_whitespaces=True
    )
    word_by_word = spm.SentencePieceProcessor(model_proto=proto)
    model = word_by_word.serialized_model_proto()
    from sentencepiece import sentencepiece_model_pb2

    edited = sentencepiece_model_pb2.ModelProto.FromString(model)
    edited.normalizer_spec.add_dummy_prefix = edited.normalizer_spec.remove_extra_whitespaces = False
    word_by_word = spm.SentencePieceProcessor(model_proto=edited.SerializeToString())
    results = []
    for text in texts:
        text = " ".join(text.split())
        if not tokenizer.keep_accents:
            text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
        text = normalizer.normalize(text.lower() if tokenizer.do_lower_case else text)
        ids, position = [], 0
        for word in segment(text):
            if not word.strip():
                continue
            found = text.index(word, position)
            spaced = found == 0 or text[found - 1] == " "
            ids += word_by_word.encode((" " if spaced else "") + word)
            position = found + len(word)
        results.append(ids)
    return results


def sentencepiece_word_by_word_pair(tokenizer: AlbertHFTokenizer, first: str, second: str) -> list[int]:
    """[CLS] first [SEP] second [SEP], each text by `sentencepiece_word_by_word` ("[SEP]" written in the text is the
    token, as JSQuAD's contexts mean it)."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    parts = [sentencepiece_word_by_word(tokenizer, segment_japanese, [part])[0] for part in second.split("[SEP]")]
    second_ids = [id_ for index, part in enumerate(parts) for id_ in ([sep] if index else []) + part]
    return [cls, *sentencepiece_word_by_word(tokenizer, segment_japanese, [first])[0], sep, *second_ids, sep]


# ---- the vocabulary -------------------------------------------------------------------------------------------------


def test_the_segmenter_is_chosen_from_the_script(caplog, monkeypatch):
    assert WORD_BOUNDED_CHOICES == ("auto", "none", *WORD_SEGMENTERS)  # --help reads the names without importing them
    japanese, chinese = lines_of(DATA / "japanese_sample.txt"), lines_of(LU_XUN)
    assert choose_word_segmenter(japanese, "auto") == "fugashi"
    assert choose_word_segmenter(chinese, "auto") == "jieba"
    assert choose_word_segmenter(["The cat sat on the mat.", "It was happy."], "auto") is None
    assert choose_word_segmenter(japanese, "none") is None
    assert choose_word_segmenter(japanese, "jieba") == "jieba"  # asked for, whatever the text
    # Where the segmenter is missing, "auto" trains as before and says what it costs and what to install.
    monkeypatch.setitem(sys.modules, "fugashi", None)
    with caplog.at_level(logging.WARNING, logger="albert_hf.vocabulary"):
        assert choose_word_segmenter(japanese, "auto") is None
    assert 'pip install "albert_hf[ja]"' in caplog.text and "run across words" in caplog.text
    with pytest.raises(ImportError, match=r'--word_segmenter fugashi needs .*pip install "albert_hf\[ja\]"'):
        choose_word_segmenter(japanese, "fugashi")


def test_pieces_stop_at_the_words_with_a_prefix_only_after_spaces(novel, chinese):
    """Every word of the segmenter (run on the text the tokenizer read) starts a piece; a piece starts with "▁" only
    at the start of the text and after a space."""
    for tokenizer, segment, texts in ((novel[0], segment_japanese, novel[1]), (chinese, segment_chinese, None)):
        texts = texts or lines_of(LU_XUN)
        words = pieces = 0
        for text, ids, starts in tokenizer.encode_plain_texts_with_starts(texts):
            word_starts, position = [], 0
            for word in segment(text):
                if word.strip():
                    position = text.index(word, position)
                    word_starts.append(position - (position > 0 and text[position - 1] == " "))
                    position += len(word)
            assert set(word_starts) <= set(starts), text
            tokens = tokenizer.convert_ids_to_tokens(ids)
            assert sum(token.startswith("▁") for token in tokens) == 1 + text.count(" "), text
            words, pieces = words + len(word_starts), pieces + len(ids)
        assert pieces >= words > 0


def test_ids_equal_sentencepiece_word_by_word(novel, chinese):
    """The Rust pipeline (every route of `__call__`) and `encode_plain_texts` (pretraining data) both give the ids
    of SentencePiece encoding each word alone."""
    for tokenizer, segment, texts in ((novel[0], segment_japanese, novel[1]), (chinese, segment_chinese, None)):
        texts = texts or lines_of(LU_XUN)
        expected = sentencepiece_word_by_word(tokenizer, segment, texts)
        assert tokenizer(texts, add_special_tokens=False)["input_ids"] == expected
        assert tokenizer.encode_plain_texts(texts) == expected
    assert novel[0].tokenize("吾輩は猫である。") == ["▁吾輩", "は", "猫", "で", "ある", "。"]


def test_offsets_slice_out_the_raw_characters_of_each_piece(novel):
    tokenizer, lines = novel
    sp = spm.SentencePieceProcessor(model_proto=tokenizer.sp_model_proto)
    encoding = tokenizer(lines, add_special_tokens=False, return_offsets_mapping=True)
    checked = partial = 0
    for line, ids, offsets in zip(lines, encoding["input_ids"], encoding["offset_mapping"]):
        for token, (start, end) in zip(tokenizer.convert_ids_to_tokens(ids), offsets):
            assert 0 <= start < end <= len(line), (line, token)
            if token in ("▁", "<unk>"):
                continue
            normalized = sp.normalize(line[start:end].lower()).lstrip("▁")
            checked += 1
            if normalized != token.lstrip("▁"):  # one raw character normalized into several pieces ("…" -> "...")
                assert end - start == 1 and token.lstrip("▁") in normalized, (line, token, line[start:end])
                partial += 1
    assert checked > 1500 and partial < checked / 100


# What no segmenter of a tokenizer leaves inside one word, with the original's re-split ("1990," -> "1990" ",") and
# SentencePiece's control pieces never matched in text.
ORIGINAL_CASES = [
    "In 1990, 4,666 people came; in 2,000, more.",
    "a <unk> b [CLS] c <pad>d",
    "prices: 1,2,3, and 10,000,000, not 5 ,6",
    "Ｆｕｌｌ　ｗｉｄｔｈ ｎｕｍｂｅｒｓ １，０００， too",
]


def test_a_segmenter_that_cuts_only_at_spaces_gives_the_original_ids(spiece_model, monkeypatch, tmp_path):
    """With a segmenter whose words are the text's space-separated words, a word-bounded tokenizer is the original
    tokenization: google-research's ids on ALBERT's own vocabulary, digit-comma re-splits and text holding control
    pieces included (the words a word-bounded tokenizer checks itself, which fugashi and jieba never produce)."""
    monkeypatch.setattr(WORD_SEGMENTERS["jieba"], "segment", str.split)
    tokenizer = AlbertHFTokenizer(vocab_file=str(spiece_model), word_segmenter="jieba")
    sp = spm.SentencePieceProcessor(model_file=str(spiece_model))
    expected = reference_ids(sp, ORIGINAL_CASES)
    encoded = tokenizer(ORIGINAL_CASES, add_special_tokens=False, split_special_tokens=True)  # as the original reads
    assert encoded["input_ids"] == expected
    assert tokenizer.encode_plain_texts(ORIGINAL_CASES) == expected
    for segment in (segment_japanese, segment_chinese):  # the real segmenters cut every such word apart
        for text in ORIGINAL_CASES:
            words = segment(sp.normalize(text.lower()).replace("▁", " "))
            assert not any(re.search(r"\d,|<unk>|<pad>|\[cls\]", word) for word in words), words


# ---- the tokenizer carries its segmenter ----------------------------------------------------------------------------


REMOTE_CODE = """
import sys
sys.path = [p for p in sys.path if p not in ("", {repo_root!r})]
sys.modules["albert_hf"] = None  # as on a machine without albert_hf
from transformers import AutoTokenizer, pipeline
tokenizer = AutoTokenizer.from_pretrained({folder!r}, trust_remote_code=True)
assert type(tokenizer).__module__.startswith("transformers_modules"), type(tokenizer).__module__
print(tokenizer({texts!r}, add_special_tokens=False)["input_ids"])
"""


def test_the_saved_tokenizer_names_its_segmenter_and_segments_wherever_it_is_loaded(japanese, tmp_path, caplog):
    texts = ["青葉図書館は市役所の隣にあり、約十万冊の本を所蔵している。", "毎週月曜日は休館日である。"]
    expected = sentencepiece_word_by_word(japanese, segment_japanese, texts)
    japanese.save_pretrained(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["word_segmenter"] == "fugashi"
    assert config["word_segmenter_dictionary"] == f"unidic-lite {metadata.version('unidic-lite')}"
    loaded = {
        "AutoTokenizer": AutoTokenizer.from_pretrained(tmp_path / "saved"),
        "the model file and the options": AlbertHFTokenizer(
            vocab_file=str(tmp_path / "saved" / "spiece.model"), keep_accents=True, word_segmenter="fugashi"
        ),
        "pickle": pickle.loads(pickle.dumps(japanese)),
    }
    for way, tokenizer in loaded.items():
        assert tokenizer(texts, add_special_tokens=False)["input_ids"] == expected, way
    # Every job's loader, given the saved model file itself, reads the settings saved beside it.
    from_file = load_tokenizer(tmp_path / "saved" / "spiece.model")
    assert from_file.word_segmenter == "fugashi"
    assert from_file(texts, add_special_tokens=False)["input_ids"] == expected
    # Remote code: the folder's own tokenization.py, in a process where albert_hf cannot be imported.
    script = REMOTE_CODE.format(repo_root=str(REPO_ROOT), folder=str(tmp_path / "saved"), texts=texts)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    result = processes.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
    # Another dictionary than the one it was trained with: a warning, since some words (and ids) may differ.
    config["word_segmenter_dictionary"] = "unidic-lite 0.0.1"
    (tmp_path / "saved" / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert "unidic-lite 0.0.1" in caplog.text and f"unidic-lite {metadata.version('unidic-lite')} is installed" in (
        caplog.text
    )


def test_a_missing_segmenter_is_one_line_with_its_install_command(japanese, tmp_path, monkeypatch, capsys):
    japanese.save_pretrained(tmp_path / "saved")
    monkeypatch.setitem(sys.modules, "fugashi", None)  # what an environment without the package gives
    with pytest.raises(
        ImportError, match=r'needs the word segmenter fugashi/unidic-lite.*pip install "albert_hf\[ja\]"'
    ):
        AlbertHFTokenizer.from_pretrained(tmp_path / "saved")
    table = JGLUE / "marc_ja-v1.1" / "train-v1.1.json"
    argv = ["classify", "--tokenizer_name_or_path", str(tmp_path / "saved"), "--train_file", str(table)]
    argv += ["--text_column", "sentence", "--do_train", "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"]
    assert cli_main(argv) == 4
    assert cli_main(["train-tokenizer", str(DATA / "japanese_sample.txt"), "--output_dir", str(tmp_path / "tok")]
                    + ["--vocab_size", "300", "--word_segmenter", "fugashi"]) == 4  # fmt: skip
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert len(errors) == 2 and all('pip install "albert_hf[ja]"' in line for line in errors), errors
    assert errors[0].startswith("albert-hf classify: error: the tokenizer ") and "Traceback" not in errors[0]


# ---- every job on it --------------------------------------------------------------------------------------------------


def test_whole_word_masking_reads_the_tokenizer_words(novel):
    """Pretraining data: a piece starts a word for whole-word masking exactly where it is the first piece of one of
    the segmenter's words, or the original rule says so (a punctuation piece of "......"): the segmenter is the
    tokenizer's, whatever the script of the text says."""
    tokenizer, lines = novel
    segmenter = resolve_word_segmenter("auto", [], tokenizer)  # no text to read the script of
    assert segmenter.segment is segment_japanese
    texts = lines[:400]
    ids, starts = segmenter.encode(tokenizer, texts)
    assert ids == tokenizer.encode_plain_texts(texts)
    ruled = 0
    for (text, text_ids, piece_starts), word_starts in zip(tokenizer.encode_plain_texts_with_starts(texts), starts):
        firsts, position = set(), 0
        for word in segment_japanese(text):
            if word.strip():
                position = text.index(word, position)
                firsts.add(position - (position > 0 and text[position - 1] == " "))
                position += len(word)
        # The first piece at a word's start (a lone "▁" and the word's first piece start at the same place).
        first_pieces = [
            start in firsts and start not in piece_starts[:index] for index, start in enumerate(piece_starts)
        ]
        assert sum(first_pieces) == len(firsts)
        by_rule = [is_start_piece(token) for token in tokenizer.convert_ids_to_tokens(text_ids)]
        assert word_starts == [int(first or rule) for first, rule in zip(first_pieces, by_rule)]
        ruled += sum(rule and not first for first, rule in zip(first_pieces, by_rule))
    assert ruled > 0  # the rule's own starts do occur (and are the only starts inside a word)


def test_pretraining_runs_on_it_and_keeps_the_segmenter(japanese, tmp_path, caplog):
    japanese.save_pretrained(tmp_path / "tokenizer")
    output_dir = tmp_path / "pretrained"
    argv = ["pretrain", "--train_files", str(DATA / "japanese_sample.txt"), "--lines_are_paragraphs"]
    argv += ["--tokenizer_name_or_path", str(tmp_path / "tokenizer")]
    argv += ["--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--max_seq_length", "32", "--max_steps", "2"]
    argv += ["--per_device_train_batch_size", "4", "--output_dir", str(output_dir), "--report_to", "none"]
    argv += ["--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true"]
    with caplog.at_level(logging.INFO):
        assert cli_main(argv) == 0
    assert "word boundaries from fugashi/unidic-lite (the tokenizer's: its pieces stop at them)" in caplog.text
    assert AutoTokenizer.from_pretrained(output_dir).word_segmenter == "fugashi"
    # transformers' tokenizer format has no place for a segmenter: the folder keeps albert_hf's format and code, and
    # the job says why (a stock folder would tokenize without the segmenter, quietly giving other ids).
    assert json.loads((output_dir / "config.json").read_text(encoding="utf-8"))["model_type"] == "albert_hf"
    assert (output_dir / "tokenization.py").is_file()
    assert "fugashi word segmenter" in caplog.text
    card = (output_dir / "README.md").read_text(encoding="utf-8")
    assert "| Word segmenter | pieces stop at the words of fugashi/unidic-lite (unidic-lite " in card
    assert "`pip install fugashi unidic-lite`" in card


def entity_questions(language: str) -> Dataset:
    """Questions in the SQuAD layout whose answers are the entities of the NER fixture's dev split, in their
    sentences written as running text: answers at word boundaries, as extractive QA's mostly are."""
    sentences = load_ner_file(str(NER_CJK / language / "valid.txt"))
    rows = []
    for index, (words, tags) in enumerate(zip(sentences["tokens"], sentences["ner_tags"])):
        text, spans = join_words(words)
        for first, tag in enumerate(tags):
            if tag.startswith("B-"):
                last = first
                while last + 1 < len(tags) and tags[last + 1] == f"I-{tag[2:]}":
                    last += 1
                start, end = spans[first][0], spans[last][1]
                answers = {"text": [text[start:end]], "answer_start": [start]}
                rows.append(
                    {"id": f"{index}-{first}", "title": "", "context": text, "question": "何？", "answers": answers}
                )
    return Dataset.from_list(rows)


def test_squad_answers_at_word_boundaries_come_back_exactly(japanese, tmp_path, caplog):
    """Every gold answer -> token span -> one-hot logits -> post-processing is the answer itself (JSQuAD's files, and
    the entities of the NER fixture as answers), and the job logs that no answer edge falls inside a piece. A
    vocabulary of the same text whose pieces run across words loses answers, and the job says how many edges fall
    inside its pieces and what to do."""
    jsquad = [load_squad_examples(str(path)) for path in sorted(JGLUE.glob("jsquad-*/*.json"))]
    for examples in [*jsquad, entity_questions("ja")]:
        features = examples.map(
            prepare_eval_features,
            batched=True,
            remove_columns=examples.column_names,
            fn_kwargs={"tokenizer": japanese, "max_seq_length": 96, "doc_stride": 32},
        )
        starts, ends, spans = gold_logits(examples, features)
        assert len(spans) == len(examples) and all(span["exact"] for span in spans.values())
        predictions = postprocess_predictions(examples, features, starts, ends).predictions
        assert predictions == {row["id"]: row["answers"]["text"][0] for row in examples}
        assert log_answer_edges("validation", examples, japanese) == (0, 2 * len(examples))

    folder = tmp_path / "unbounded"
    folder.mkdir()
    train = load_ner_file(str(NER_CJK / "ja" / "train.txt"))
    (folder / "text.txt").write_text("".join(join_words(words)[0] + "\n" for words in train["tokens"]), "utf-8")
    unbounded = train_tokenizer(folder / "text.txt", folder, 450, character_coverage=1.0, word_segmenter="none")
    with caplog.at_level(logging.WARNING):
        inside, total = log_answer_edges("validation", entity_questions("ja"), unbounded)
    assert inside > 0 and f"{inside} of the {total} answer edges" in caplog.text and "word-bounded" in caplog.text

    argv = ["squad", "--tokenizer_name_or_path", str(tmp_path / "tok")]
    japanese.save_pretrained(tmp_path / "tok")
    argv += ["--train_file", str(JGLUE / "jsquad-v1.3" / "train-v1.3.json")]
    argv += ["--validation_file", str(JGLUE / "jsquad-v1.3" / "valid-v1.3.json"), "--do_train", "--do_eval"]
    run_job(argv, tmp_path / "squad", "--max_seq_length", "96", "--doc_stride", "16", "--max_query_length", "32")
    # The pipeline loads the saved folder's tokenizer, segmenter included: the ids of its windows are the job's.
    import albert_hf.pipelines  # noqa: F401  (registers the task)

    qa = pipeline("extractive-question-answering", model=str(tmp_path / "squad"))
    context = load_squad_examples(str(JGLUE / "jsquad-v1.3" / "valid-v1.3.json"))[0]["context"]
    answer = qa(question="休館日は何曜日か。", context=context)
    assert qa.tokenizer.word_segmenter == "fugashi" and answer["answer"] == context[answer["start"] : answer["end"]]
    question_ids = qa.tokenizer("休館日は何曜日か。", context)["input_ids"]
    assert question_ids == sentencepiece_word_by_word_pair(japanese, "休館日は何曜日か。", context)


def test_ner_gold_tags_round_trip_exactly(japanese, tmp_path):
    """Running text on a word-bounded vocabulary: no piece spans two of the fixture's entities' words, so gold tags
    -> piece labels -> tags is F1 1.0."""
    sentences = load_ner_file(str(NER_CJK / "ja" / "valid.txt"))
    labels = build_label_list(load_ner_file(str(NER_CJK / "ja" / "train.txt")), sentences)
    encoded, _ = tokenize_and_align(sentences, japanese, labels, 512, alignment="running_text")
    recovered = [
        word_predictions(row["labels"], row["word_ids"], len(row["word_positions"]), labels, row["word_positions"])[0]
        for row in encoded
    ]
    assert ner_metrics(sentences["ner_tags"], recovered)["f1"] == 1.0
    entities = sum(tag.startswith("B-") for tags in sentences["ner_tags"] for tag in tags)
    assert log_entity_edges("validation", sentences, japanese) == (0, 2 * entities)  # what the job logs
    japanese.save_pretrained(tmp_path / "tok")
    argv = ["ner", "--tokenizer_name_or_path", str(tmp_path / "tok"), "--data_dir", str(NER_CJK / "ja")]
    run_job([*argv, "--do_train", "--do_eval", "--max_train_samples", "32"], tmp_path / "ner", "--max_seq_length", "64")


@pytest.mark.parametrize(
    "job,files",
    [
        ("classify", ["marc_ja-v1.1", "--text_column", "sentence", "--label_column", "label"]),
        ("multiple-choice", ["jcommonsenseqa-v1.3", "--context_column", "question", "--choice_columns", "choice0",
                             "choice1", "choice2", "choice3", "choice4", "--label_column", "label"]),
    ],
)  # fmt: skip
def test_classify_and_multiple_choice_run_on_it(job, files, japanese, tmp_path):
    japanese.save_pretrained(tmp_path / "tok")
    folder, *options = files
    train, valid = sorted((JGLUE / folder).glob("*.json"))
    argv = [job, "--tokenizer_name_or_path", str(tmp_path / "tok"), "--train_file", str(train)]
    run_job([*argv, "--validation_file", str(valid), *options, "--do_train", "--do_eval"], tmp_path / job)


def run_job(argv: list[str], output_dir: Path, *options: str) -> None:
    """A job of two steps on a tiny model; its saved tokenizer still carries the segmenter and gives the same ids."""
    argv += ["--config_overrides", TINY_ONE_LAYER_OVERRIDES, "--output_dir", str(output_dir), "--max_steps", "2"]
    argv += ["--per_device_train_batch_size", "2", "--report_to", "none", "--use_cpu", "true", *options]
    argv += ["--save_strategy", "no", "--disable_tqdm", "true"]
    assert cli_main(argv) == 0
    assert json.loads((output_dir / "eval_results.json").read_text())
    saved = AutoTokenizer.from_pretrained(output_dir)
    source = AutoTokenizer.from_pretrained(argv[argv.index("--tokenizer_name_or_path") + 1])
    texts = jglue_texts()[:50]
    assert saved.word_segmenter == "fugashi" and saved(texts)["input_ids"] == source(texts)["input_ids"]
    assert np.mean([len(ids) for ids in saved(texts)["input_ids"]]) > 2  # the texts are not all unknown
