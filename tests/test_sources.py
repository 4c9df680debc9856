"""albert_hf.data.sources: every format, folder, glob, saved dataset and dataset name gives the rows written, and each
way a source can be wrong is an error naming it.

The files are written here by independent writers (the csv and json modules, pyarrow), and the rows read back are
compared with the rows written.
"""

from __future__ import annotations

import csv
import gzip
import json
import logging
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from albert_hf.data.sources import (
    TextRows,
    data_format,
    expand_data_files,
    load_rows,
    require_columns,
)
from albert_hf.errors import DataError, MissingFileError, UserError

# Texts with the characters each format must carry through: commas and quotes (csv), a tab-free tsv, Japanese.
ROWS = [
    {"text": "A first sentence, with a comma.", "label": "pos"},
    {"text": 'She said "no" twice.', "label": "neg"},
    {"text": "吾輩は猫である。名前はまだ無い。", "label": "pos"},
]


@pytest.fixture(autouse=True)
def private_datasets_cache(tmp_path, monkeypatch):
    """Each test's own `datasets` cache: rows come from the files written here, never from an earlier test's cache."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict], delimiter: str = ",") -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def as_list(rows) -> list[dict]:
    return [dict(row) for row in rows]


@pytest.mark.parametrize(
    "name, writer, expected_format",
    [
        ("rows.jsonl", write_jsonl, "json"),
        ("rows.json", lambda path, rows: path.write_text(json.dumps(rows), encoding="utf-8") and path, "json"),
        ("rows.csv", write_csv, "csv"),
        ("rows.tsv", lambda path, rows: write_csv(path, rows, delimiter="\t"), "csv"),
        ("rows.parquet", write_parquet, "parquet"),
    ],
)
def test_each_table_format_gives_the_rows_written(tmp_path, name, writer, expected_format):
    path = tmp_path / name
    writer(path, ROWS)
    assert data_format([str(path)]) == expected_format
    rows = load_rows(data_files=[str(path)])
    assert isinstance(rows, datasets.Dataset)
    assert as_list(rows) == ROWS


def test_text_files_give_one_row_per_line(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(row["text"] + "\n" for row in ROWS), encoding="utf-8")
    assert data_format([path]) == "text"
    assert load_rows(data_files=str(path))["text"] == [row["text"] for row in ROWS]


def test_compressed_files_are_read_by_their_inner_extension(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(write_jsonl(tmp_path / "plain.jsonl", ROWS).read_bytes()))
    assert data_format([path]) == "json"
    assert as_list(load_rows(data_files=[str(path)])) == ROWS


def test_a_folder_gives_its_data_files_sorted_and_skips_other_files(tmp_path, caplog):
    shards = tmp_path / "shards"
    (shards / "nested").mkdir(parents=True)
    write_jsonl(shards / "part-1.jsonl", ROWS[1:2])
    write_jsonl(shards / "part-0.jsonl", ROWS[:1])
    write_jsonl(shards / "nested" / "part-2.jsonl", ROWS[2:])
    (shards / "README.md").write_text("not data", encoding="utf-8")
    (shards / ".hidden.jsonl").write_text("not json", encoding="utf-8")
    assert expand_data_files([shards]) == [
        str(shards / "nested" / "part-2.jsonl"),
        str(shards / "part-0.jsonl"),
        str(shards / "part-1.jsonl"),
    ]
    assert as_list(load_rows(data_files=[str(shards)])) == [ROWS[2], ROWS[0], ROWS[1]]
    assert f"{shards}: 1 file(s) of other formats not read ({shards / 'README.md'})" in caplog.text


def test_globs_and_several_shards_keep_the_order_given(tmp_path):
    for index, row in enumerate(ROWS):
        write_parquet(tmp_path / f"train-{index:05d}.parquet", [row])
    write_parquet(tmp_path / "extra.parquet", ROWS[:1])
    pattern = str(tmp_path / "train-*.parquet")
    assert expand_data_files([pattern]) == [str(tmp_path / f"train-{i:05d}.parquet") for i in range(3)]
    rows = load_rows(data_files=[str(tmp_path / "extra.parquet"), pattern])
    assert as_list(rows) == [ROWS[0], *ROWS]


def test_streaming_gives_the_same_rows_lazily(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    rows = load_rows(data_files=[str(path)], streaming=True)
    assert isinstance(rows, datasets.IterableDataset)
    assert as_list(rows) == ROWS


def test_a_saved_dataset_dict_gives_the_split_asked_for(tmp_path):
    saved = tmp_path / "saved"
    splits = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS[:2]), "validation": datasets.Dataset.from_list(ROWS[2:])}
    )
    splits.save_to_disk(str(saved))
    assert as_list(load_rows(dataset_name=str(saved), split="validation")) == ROWS[2:]
    assert as_list(load_rows(data_files=[str(saved)])) == ROWS[:2]  # a saved folder given as the data files
    streamed = load_rows(dataset_name=str(saved), split="train", streaming=True)
    assert isinstance(streamed, datasets.IterableDataset) and as_list(streamed) == ROWS[:2]
    with pytest.raises(DataError, match=r"saved has no split 'test'; its splits are \['train', 'validation'\]"):
        load_rows(dataset_name=str(saved), split="test")
    with pytest.raises(DataError, match=r"saved is a dataset saved with save_to_disk.*pass it alone"):
        expand_data_files([saved, tmp_path / "other.jsonl"])


def test_a_saved_dataset_is_its_own_split(tmp_path):
    saved = tmp_path / "one"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(saved))
    assert as_list(load_rows(dataset_name=str(saved), split="validation")) == ROWS


def test_a_local_dataset_folder_is_read_by_its_split_files(tmp_path):
    folder = tmp_path / "my_dataset"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", ROWS[:2])
    write_jsonl(folder / "validation.jsonl", ROWS[2:])
    assert as_list(load_rows(dataset_name=str(folder), split="validation")) == ROWS[2:]
    assert as_list(load_rows(dataset_name=str(folder))) == ROWS[:2]
    with pytest.raises(DataError, match=r"my_dataset has no split 'test'; its splits are \['train', 'valid"):
        load_rows(dataset_name=str(folder), split="test")


def test_a_folder_in_the_hub_layout_of_parquet_shards(tmp_path):
    # What `huggingface-cli download` leaves: README.md, data/<split>-NNNNN-of-NNNNN.parquet
    folder = tmp_path / "corpus"
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text("---\nlicense: cc0-1.0\n---\n", encoding="utf-8")
    write_parquet(folder / "data" / "train-00000-of-00002.parquet", ROWS[:1])
    write_parquet(folder / "data" / "train-00001-of-00002.parquet", ROWS[1:])
    write_parquet(folder / "data" / "test-00000-of-00001.parquet", ROWS[:1])
    assert as_list(load_rows(dataset_name=str(folder))) == ROWS
    assert as_list(load_rows(dataset_name=str(folder), split="test", streaming=True)) == ROWS[:1]


def test_a_hub_name_goes_to_load_dataset_with_its_configuration(monkeypatch):
    calls = []

    def fake_load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        return datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    rows = load_rows(
        dataset_name="wikimedia/wikipedia", dataset_config_name="20231101.ja", data_dir="ja", streaming=True
    )
    assert as_list(rows) == ROWS
    assert calls == [(("wikimedia/wikipedia", "20231101.ja"), {"data_dir": "ja", "streaming": True})]


def test_a_hub_name_that_cannot_be_reached_is_a_user_error(monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match=r"someone/absent-dataset: the dataset is not cached here.*local data files"):
        load_rows(dataset_name="someone/absent-dataset")


def test_a_dataset_folder_that_does_not_exist_is_named_without_asking_the_hub(tmp_path):
    with pytest.raises(MissingFileError, match=r"nowhere: no such dataset folder"):
        load_rows(dataset_name=str(tmp_path / "nowhere"))


def test_files_and_names_are_asked_for_alone(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    with pytest.raises(DataError, match="either data files or a dataset name"):
        load_rows(data_files=[str(path)], dataset_name="glue")
    with pytest.raises(DataError, match="either data files or a dataset name"):
        load_rows()


def test_a_configuration_selects_part_of_a_dataset_not_of_files(tmp_path):
    path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    with pytest.raises(DataError, match=r"a configuration \(--dataset_config_name\) or data_dir selects part"):
        load_rows(data_files=[str(path)], dataset_config_name="ja")
    saved = tmp_path / "saved"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(saved))
    with pytest.raises(DataError, match=r"saved is a dataset saved with save_to_disk: it has no configurations"):
        load_rows(dataset_name=str(saved), dataset_config_name="ja")


def test_missing_paths_and_empty_matches_are_named(tmp_path):
    with pytest.raises(MissingFileError, match=r"absent\.jsonl: no such file or folder"):
        expand_data_files([tmp_path / "absent.jsonl"])
    assert issubclass(MissingFileError, FileNotFoundError) and issubclass(MissingFileError, UserError)
    with pytest.raises(DataError, match=r"\*\.parquet: the pattern matches no file"):
        expand_data_files([str(tmp_path / "*.parquet")])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty: the folder holds no data file \(known extensions: .csv"):
        expand_data_files([tmp_path / "empty"])


def test_unknown_and_mixed_formats_are_named(tmp_path):
    with pytest.raises(DataError, match=r"unknown data file format: .*rows\.xlsx"):
        data_format([tmp_path / "rows.xlsx"])
    with pytest.raises(DataError, match=r"different formats.*\.csv: .*a\.csv; \.parquet: .*b\.parquet"):
        data_format([tmp_path / "a.csv", tmp_path / "b.parquet"])
    with pytest.raises(DataError, match=r"different formats.*\.csv: .*a\.csv; \.tsv: .*b\.tsv"):
        data_format([tmp_path / "a.csv", tmp_path / "b.tsv"])  # the same loader, not the same delimiter
    assert data_format([tmp_path / "a.json", tmp_path / "b.jsonl"]) == "json"


def test_a_source_without_rows_is_named(tmp_path):
    path = tmp_path / "header_only.csv"
    path.write_text("text,label\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"header_only\.csv: no rows"):
        load_rows(data_files=[str(path)])
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.jsonl: the data files are empty"):
        load_rows(data_files=[str(tmp_path / "empty.jsonl")])


def test_unreadable_data_names_the_file(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.jsonl: the data cannot be read"):
        load_rows(data_files=[str(path)])


def test_require_columns_names_the_option_the_column_and_the_columns_there_are(tmp_path):
    rows = load_rows(data_files=[str(write_jsonl(tmp_path / "rows.jsonl", ROWS))])
    require_columns(rows, {"--text_column": "text", "--label_column": "label"}, "rows.jsonl")
    message = r"rows\.jsonl has no column 'sentence' \(--text_column\); its columns are \['text', 'label'\]"
    with pytest.raises(DataError, match=message):
        require_columns(rows, {"--text_column": "sentence"}, "rows.jsonl")


def test_require_columns_of_a_stream_without_known_features(tmp_path):
    rows = load_rows(data_files=[str(write_jsonl(tmp_path / "rows.jsonl", ROWS))], streaming=True)
    rows = rows.map(lambda row: {"extra": 1})  # a map leaves a stream's features unknown
    assert rows.column_names is None
    with pytest.raises(DataError, match=r"its columns are \['text', 'label', 'extra'\]"):
        require_columns(rows, {"--text_column": "body"}, "rows.jsonl")


def test_text_rows_skip_and_count_empty_texts(tmp_path, caplog):
    written = [{"text": "one"}, {"text": ""}, {"text": "  "}, {"text": "two"}]
    for streaming in (False, True):
        rows = load_rows(data_files=[str(write_jsonl(tmp_path / "rows.jsonl", written))], streaming=streaming)
        texts = TextRows(rows, "text", "rows.jsonl")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="albert_hf.data.sources"):
            assert list(texts) == ["one", "two"]
            assert list(texts) == ["one", "two"]  # a second pass (tokenizer training reads twice) reads them again
        assert (texts.read, texts.empty) == (4, 2)
        assert caplog.text.count("rows.jsonl: skipped 2 empty texts of 4 rows (column 'text')") == 1


@pytest.mark.parametrize(
    "written, message",
    [
        ([{"text": "fine"}, {"text": None}], r"row index 1: column 'text': empty \(None\)"),
        ([{"text": 7}, {"text": 8}], r"row index 0: column 'text': not a text but int 7"),
        ([{"text": "a\x00b"}], r"row index 0: column 'text': holds a NUL byte \(character 2\), not text"),
        (
            [{"text": ["a long list"] * 20}],
            r"row index 0: column 'text': not a text but list \['a long list', .*\.\.\.$",
        ),
    ],
)
def test_text_rows_that_are_not_strings_are_named(written, message):
    rows = datasets.Dataset.from_list(written)
    with pytest.raises(DataError, match=rf"corpus: {message}"):
        list(TextRows(rows, "text", "corpus"))


def test_text_rows_with_no_text_at_all_are_an_error():
    rows = datasets.Dataset.from_list([{"body": ""}, {"body": " "}])
    with pytest.raises(DataError, match=r"corpus: no text in column 'body' \(2 rows, all empty\)"):
        list(TextRows(rows, "body", "corpus"))
    with pytest.raises(DataError, match=r"corpus has no column 'text' \(--text_column\)"):
        TextRows(rows, "text", "corpus")
