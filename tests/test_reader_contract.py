"""One reader contract (`albert_hf.data.text_checks`): every data reader refuses the same bad texts (a NUL byte, a
field the task needs left empty, a value that is no text, bytes that are not UTF-8) with one message form,
`<file>:<line>: <field>: <problem>`, where the line is the file's own line number (a csv's header is line 1).

Each case writes a small file by hand with the bad value on a known line, and the expected message is written out
here from that file, not computed by the package.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from helpers.data import FIXTURES, SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.data.glue_files import get_glue_task, load_glue_files, read_glue_tsv
from albert_hf.data.labels import LabelError, infer_label_space
from albert_hf.data.multiple_choice import examples_from_rows, read_multiple_choice
from albert_hf.data.ner import load_ner_file, ner_sentences_from_rows
from albert_hf.data.sentence_order import DocumentRows, documents_from_rows, load_text_documents
from albert_hf.data.sources import load_rows, row_places
from albert_hf.data.squad_windows import load_squad_examples
from albert_hf.data.text_checks import RowPlaces, text_problem
from albert_hf.errors import DataError
from albert_hf.scripts.classify import column_texts
from albert_hf.vocabulary import train_tokenizer

NUL = "\x00"


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def csv_text(rows: list[list[str]]) -> str:
    return "".join(",".join(row) + "\n" for row in rows)


def jsonl_text(records: list[dict]) -> str:
    return "".join(json.dumps(record) + "\n" for record in records)


def squad_record(question: str = "Who?", context: str = "Ann wrote it.") -> dict:
    return {
        "id": "q1",
        "title": "t",
        "context": context,
        "question": question,
        "answers": {"text": [], "answer_start": []},
    }


# Each case: (name, write the file into the folder and read it, the message after the file's path).
CASES = [
    (
        "pretraining text",
        lambda d: load_text_documents(write(d / "c.txt", f"One.\nTwo.\n\nTh{NUL}ree.\n"), cache_dir=str(d / "cache")),
        "c.txt:4: holds a NUL byte (character 3), not text",
    ),
    (
        "pretraining text, not UTF-8",
        lambda d: load_text_documents(write_bytes(d / "c.txt", b"One.\ncaf\xe9.\n"), cache_dir=str(d / "cache")),
        "c.txt:2: not valid UTF-8 (invalid continuation byte at byte 3: b'\\xe9'); text files must be UTF-8.",
    ),
    (
        "pretraining rows",
        lambda d: documents_of_rows(write(d / "c.jsonl", jsonl_text([{"text": "A. B."}, {"text": f"C{NUL}"}]))),
        "c.jsonl:2: column 'text': holds a NUL byte (character 2), not text",
    ),
    (
        "tokenizer text",
        lambda d: train_tokenizer(
            write(d / "t.txt", f"one\ntw{NUL}o\n"), d / "out", vocab_size=50, show_progress=False
        ),
        "t.txt:2: holds a NUL byte (character 3), not text",
    ),
    (
        "tokenizer rows",
        lambda d: train_tokenizer(
            [write(d / "t.csv", csv_text([["text"], ["one"], ["two"], [f"{NUL}three"]]))],
            d / "out",
            vocab_size=50,
            show_progress=False,
        ),
        "t.csv:4: column 'text': holds a NUL byte (character 1), not text",
    ),
    (
        "GLUE tsv, empty sentence",
        lambda d: read_glue_tsv(
            str(
                write(d / "dev.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n1\tC.\t\tentailment\n")
            ),
            get_glue_task("rte"),
            labelled=True,
        ),
        "dev.tsv:3: column 3 (sentence2): empty",
    ),
    (
        "GLUE tsv, NUL",
        lambda d: read_glue_tsv(
            str(write(d / "dev.tsv", f"index\tsentence1\tsentence2\tlabel\n0\tA{NUL}.\tB.\tentailment\n")),
            get_glue_task("rte"),
            labelled=True,
        ),
        "dev.tsv:2: column 2 (sentence1): holds a NUL byte (character 2), not text",
    ),
    (
        "GLUE csv",
        lambda d: load_glue_files(
            get_glue_task("rte"),
            {
                "train": str(
                    write(
                        d / "train.csv",
                        csv_text([["sentence1", "sentence2", "label"], ["A.", "B.", "0"], [f"{NUL}C.", "D.", "1"]]),
                    )
                )
            },
        ),
        "train.csv:3: column 'sentence1': holds a NUL byte (character 1), not text",
    ),
    (
        "SQuAD, empty question",
        lambda d: load_squad_examples(
            write(
                d / "s.json",
                json.dumps(
                    {
                        "data": [
                            {
                                "title": "t",
                                "paragraphs": [
                                    {"context": "Ann.", "qas": [{"id": "q", "question": " ", "answers": []}]}
                                ],
                            }
                        ]
                    }
                ),
            )
        ),
        "s.json: data[0].paragraphs[0].qas[0]: field 'question': blank (whitespace only)",
    ),
    (
        "SQuAD lines, NUL",
        lambda d: load_squad_examples(
            write(d / "s.jsonl", jsonl_text([squad_record(), squad_record(context=f"A{NUL}")]))
        ),
        "s.jsonl:2: field 'context': holds a NUL byte (character 2), not text",
    ),
    (
        "SQuAD lines, empty question",
        lambda d: load_squad_examples(write(d / "s.jsonl", "\n" + jsonl_text([squad_record(question="")]))),
        "s.jsonl:2: field 'question': empty",
    ),
    (
        "CoNLL",
        lambda d: load_ner_file(str(write(d / "n.txt", f"EU B-ORG\n\nGer{NUL}man B-MISC\n"))),
        "n.txt:3: the word: holds a NUL byte (character 4), not text",
    ),
    (
        "NER lines",
        lambda d: load_ner_file(
            str(write(d / "n.jsonl", jsonl_text([{"tokens": ["EU", ""], "ner_tags": ["B-ORG", "O"]}])))
        ),
        "n.jsonl:1: word 2: empty",
    ),
    (
        "NER table",
        lambda d: ner_of_table(
            write(
                d / "n.jsonl", jsonl_text([{"tokens": ["a"], "ner_tags": ["O"]}, {"tokens": [None], "ner_tags": ["O"]}])
            )
        ),
        "n.jsonl:2: word 1: empty (None)",
    ),
    (
        "SWAG lines",
        lambda d: read_multiple_choice(
            str(
                write(
                    d / "m.jsonl",
                    jsonl_text(
                        [
                            {"sent1": "A", "sent2": "B", "ending0": "x", "ending1": "y", "label": 0},
                            {"sent1": "A", "sent2": "B", "ending0": "x", "ending1": "", "label": 0},
                        ]
                    ),
                )
            )
        ),
        "m.jsonl:2: field 'ending1': empty",
    ),
    (
        "multiple-choice table",
        lambda d: choices_of_table(
            write(d / "m.csv", csv_text([["q", "c0", "c1", "answer"], ["Q?", "a", "b", "0"], [" ", "a", "b", "1"]]))
        ),
        "m.csv:3: column 'q': blank (whitespace only)",
    ),
    (
        "classify table",
        lambda d: texts_of_table(write(d / "r.csv", csv_text([["review", "stars"], ["Fine.", "good"], ["", "bad"]]))),
        "r.csv:3: column 'review': empty (None)",  # an empty csv cell reads as None
    ),
]


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def documents_of_rows(path: Path):
    rows = load_rows(data_files=[str(path)])
    return documents_from_rows(DocumentRows(rows, str(path), files=(str(path),)))


def ner_of_table(path: Path):
    return ner_sentences_from_rows(load_rows(data_files=str(path)), str(path), places=row_places(str(path), str(path)))


def choices_of_table(path: Path):
    rows = load_rows(data_files=str(path))
    places = row_places(str(path), str(path))
    return examples_from_rows(rows, str(path), "q", ["c0", "c1"], label_column="answer", places=places)


def texts_of_table(path: Path):
    return column_texts(load_rows(data_files=str(path)), "review", row_places(str(path), str(path)))


@pytest.mark.parametrize("read, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_every_reader_refuses_the_same_bad_text_with_one_message_form(tmp_path, read, expected):
    with pytest.raises(DataError) as refused:
        read(tmp_path)
    assert str(refused.value) == f"{tmp_path}/{expected}"


def test_the_checks_of_a_field():
    assert text_problem("a text") is None and text_problem("", required=False) is None
    assert text_problem("") == "empty" and text_problem(" \t") == "blank (whitespace only)"
    # Other Unicode spaces are text: Japanese and Chinese data keep a field of one ideographic space as a token.
    assert text_problem("\u3000") is None and text_problem("\u00a0") is None
    assert text_problem(None) == "empty (None)" and text_problem(3) == "not a text but int 3"
    assert text_problem("ab\x00", required=False) == "holds a NUL byte (character 3), not text"


def test_row_places_are_the_lines_the_reader_of_the_format_reads(tmp_path):
    """Checked against `datasets` reading the same files: the rows it gives are those the lines name."""
    table = write(tmp_path / "t.csv", 'text,label\n"a\nb",1\n\nc,0\n')  # a field over two lines, then a blank line
    lines = write(tmp_path / "t.jsonl", '{"text": "a"}\n\n{"text": "c"}\n')
    second = write(tmp_path / "u.csv", "text,label\nd,1\n")
    assert load_rows(data_files=[str(table), str(second)])["text"] == ["a\nb", "c", "d"]
    places = RowPlaces([table, second], "tables")
    assert [places.where(index) for index in range(3)] == [f"{table}:2", f"{table}:5", f"{second}:2"]
    assert places.where(3) == "tables: row index 3"  # past the end: as a dataset's row
    assert load_rows(data_files=str(lines))["text"] == ["a", "c"]
    assert RowPlaces([lines], "x").where(1) == f"{lines}:3"
    parquet = tmp_path / "t.parquet"
    datasets.Dataset.from_dict({"text": ["a", "b"]}).to_parquet(str(parquet))
    assert RowPlaces([parquet], "x").where(1) == f"{parquet}: row index 1"
    assert RowPlaces(None, "imdb[train]").where(4) == "imdb[train]: row index 4"
    # A file whose rows cannot be counted here: it and the files after it are named by the row's index, never by
    # a line of another file.
    broken = write(tmp_path / "b.json", '[{"text": "a"},')
    assert RowPlaces([broken, second], "tables").where(1) == "tables: row index 1"
    assert RowPlaces([second, broken], "tables").where(0) == f"{second}:2"


def test_a_label_is_named_by_its_line(tmp_path):
    path = write(tmp_path / "train.csv", "text,label\na,pos\nb,\n")  # the empty label of line 3 reads as None
    rows = load_rows(data_files=str(path))
    with pytest.raises(LabelError, match=rf"^{path}:3: column 'label': the label is missing \(None\)"):
        infer_label_space(rows["label"], "label", str(path), places=row_places(str(path), str(path)))


def test_squad_trains_on_no_empty_question_the_pipeline_would_refuse(tmp_path, capsys):
    """The question-answering pipeline refuses an empty question; so does `albert-hf squad`, before any model work."""
    from albert_hf.cli import main

    train = write(tmp_path / "train.jsonl", jsonl_text([squad_record(), {**squad_record(question=""), "id": "q2"}]))
    argv = ["squad", "--train_file", str(train), "--do_train", "--tokenizer_name_or_path", str(SPIECE_MODEL)]
    argv += ["--config_overrides", TINY_ONE_LAYER_OVERRIDES, "--max_steps", "1", "--output_dir", str(tmp_path / "out")]
    assert main([*argv, "--report_to", "none"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"albert-hf squad: error: {train}:2: field 'question': empty"
    )
    assert FIXTURES.is_dir()
