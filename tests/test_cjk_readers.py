"""Readers keep every token of Japanese and Chinese text: a field that is only an ideographic space (U+3000), other
Unicode spaces, full-width digits and Latin letters; a SQuAD answer written in full-width characters comes back
exactly through windows, gold logits and post-processing (the NER reader's own checks: tests/test_ner_cjk.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_classify import job_args, loaded_data, write_table
from test_squad import gold_logits

from albert_hf.data.glue_files import GLUE_TASKS, read_glue_tsv
from albert_hf.data.squad_windows import load_squad_examples, postprocess_predictions, prepare_eval_features
from albert_hf.errors import DataError
from albert_hf.metrics.squad import squad_v1_scores

JSQUAD_FULLWIDTH = Path(__file__).parent / "data" / "jglue" / "jsquad-fullwidth" / "valid-v1.3.json"
TEXTS = ["\u3000", "ＡＢＣ\u3000１２３", "\u00a0前後に空白\u3000", "半角ｶﾀｶﾅと全角ＸＲ－２０００"]


def test_glue_tsv_keeps_fields_that_are_unicode_spaces(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\n" + "".join(f"{text}\t{i % 2}\n" for i, text in enumerate(TEXTS)), "utf-8")
    examples = read_glue_tsv(str(path), GLUE_TASKS["sst2"], labelled=True)
    assert [example["sentence1"] for example in examples] == TEXTS


@pytest.mark.parametrize("extension", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_classify_tables_keep_fields_that_are_unicode_spaces(extension, spiece_model, tmp_path):
    rows = [{"text": text, "label": "ab"[i % 2]} for i, text in enumerate(TEXTS)]
    train = write_table(tmp_path / f"train{extension}", rows)
    argv = ["--train_file", train, "--do_train", "--text_column", "text", "--label_column", "label"]
    _, raw = loaded_data(job_args(spiece_model, tmp_path / "out", *argv))
    assert raw["train"]["sentence1"] == TEXTS


@pytest.fixture(scope="module")
def jsquad_tokenizer(tmp_path_factory):
    """A vocabulary trained on the fixture's own text (so no character is unknown)."""
    from albert_hf.vocabulary import train_tokenizer

    data = json.loads(JSQUAD_FULLWIDTH.read_text(encoding="utf-8"))["data"]
    lines = [p["context"] for a in data for p in a["paragraphs"]]
    lines += [q["question"] for a in data for p in a["paragraphs"] for q in p["qas"]]
    folder = tmp_path_factory.mktemp("jsquad_vocabulary")
    (folder / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return train_tokenizer(folder / "text.txt", folder / "tokenizer", 160, character_coverage=1.0, show_progress=False)


def test_full_width_answers_come_back_exactly(jsquad_tokenizer):
    """Gold answers of full-width digits and Latin letters (ＸＲ－２０００, ｉＰｈｏｎｅ　１５　Ｐｒｏ, １２８，０００円):
    token spans -> one-hot logits -> post-processing give the answer text itself, character for character: EM 100."""
    examples = load_squad_examples(str(JSQUAD_FULLWIDTH))
    assert len(examples) == 12
    features = examples.map(
        prepare_eval_features,
        batched=True,
        remove_columns=examples.column_names,
        fn_kwargs={"tokenizer": jsquad_tokenizer, "max_seq_length": 128, "doc_stride": 32},
    )
    starts, ends, spans = gold_logits(examples, features)
    assert all(span["exact"] for span in spans.values()) and len(spans) == len(examples)
    predictions = postprocess_predictions(examples, features, starts, ends, max_answer_length=30).predictions
    gold = {row["id"]: row["answers"]["text"][0] for row in examples}
    assert predictions == gold  # the characters themselves, not a normalized form
    scores = squad_v1_scores(predictions, {key: [text] for key, text in gold.items()})
    assert scores["exact_match"] == 100.0 and scores["f1"] == 100.0


def test_an_answer_that_is_only_an_ideographic_space_is_refused(tmp_path):
    data = json.loads(JSQUAD_FULLWIDTH.read_text(encoding="utf-8"))
    paragraph = data["data"][1]["paragraphs"][0]
    space = paragraph["context"].index("\u3000")
    paragraph["qas"][0]["answers"] = [{"text": "\u3000", "answer_start": space}]
    path = tmp_path / "valid.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DataError, match="an answer has empty text"):
        load_squad_examples(str(path))
