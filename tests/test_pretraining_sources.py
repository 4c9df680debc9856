"""Pretraining from any source (`--train_files` of every format, folders, globs, `--dataset_name`): each gives the
very instances of the same text written as a .txt file of paragraphs (`--lines_are_paragraphs`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Dataset
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES

from albert_hf.data.instance_stream import ResumableInstanceStream
from albert_hf.data.sentence_order import DocumentRows
from albert_hf.data.sources import load_rows
from albert_hf.errors import DataError
from albert_hf.pretraining.arguments import PretrainingDataArguments
from albert_hf.pretraining.corpus import prepare_datasets
from albert_hf.scripts.pretrain import main


@pytest.fixture(scope="module")
def articles(wikitext_articles) -> list[list[str]]:
    """Real documents: WikiText-2 articles, each a list of paragraphs."""
    text = wikitext_articles(5).read_text(encoding="utf-8")
    return [[line for line in article.splitlines() if line.strip()] for article in text.split("\n\n")]


def instances_of(tokenizer, tmp_path: Path, **source) -> tuple[list[dict], list[dict] | None]:
    data_args = PretrainingDataArguments(max_seq_length=64, cache_dir=str(tmp_path / "cache"), **source)
    train, evaluation, _ = prepare_datasets(data_args, tokenizer, seed=0)
    return train.to_list(), None if evaluation is None else evaluation.to_list()


@pytest.fixture(scope="module")
def reference(articles, tokenizer, tmp_path_factory) -> list[dict]:
    """The instances of the articles as a .txt file: one paragraph per line, a blank line between articles."""
    folder = tmp_path_factory.mktemp("txt")
    path = folder / "corpus.txt"
    path.write_text("\n\n".join("\n".join(article) for article in articles) + "\n", encoding="utf-8")
    train, _ = instances_of(tokenizer, folder, train_files=[str(path)], lines_are_paragraphs=True)
    assert len(train) > 50
    return train


def documents_as_rows(articles) -> list[dict]:
    return [{"id": index, "text": "\n".join(article)} for index, article in enumerate(articles)]


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".jsonl", ".json"):
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    elif path.suffix in (".csv", ".tsv"):
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.json", "corpus.csv", "corpus.tsv", "corpus.parquet"])
def test_every_file_format_gives_the_instances_of_the_text_file(name, articles, reference, tokenizer, tmp_path):
    path = write_rows(tmp_path / name, documents_as_rows(articles))
    train, _ = instances_of(tokenizer, tmp_path, train_files=[str(path)])
    assert train == reference


def test_a_folder_and_a_glob_of_shards_give_the_same_instances(articles, reference, tokenizer, tmp_path):
    rows = documents_as_rows(articles)
    for shard in range(3):  # in name order, the rows in their order
        write_rows(tmp_path / "shards" / f"part-{shard}.parquet", rows[shard * 2 : shard * 2 + 2])
    assert instances_of(tokenizer, tmp_path, train_files=[str(tmp_path / "shards")])[0] == reference
    assert instances_of(tokenizer, tmp_path, train_files=[str(tmp_path / "shards" / "part-*.parquet")])[0] == reference


def test_a_saved_dataset_and_a_dataset_folder_give_the_same_instances(articles, reference, tokenizer, tmp_path):
    rows = documents_as_rows(articles)
    Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    assert instances_of(tokenizer, tmp_path, dataset_name=str(tmp_path / "saved"))[0] == reference
    assert instances_of(tokenizer, tmp_path, train_files=[str(tmp_path / "saved")])[0] == reference
    # A folder in a layout `datasets.load_dataset` reads (the path a Hub name takes, without the network).
    write_rows(tmp_path / "hub_layout" / "train.jsonl", rows)
    write_rows(tmp_path / "hub_layout" / "validation.jsonl", rows[:2])
    train, evaluation = instances_of(
        tokenizer, tmp_path, dataset_name=str(tmp_path / "hub_layout"), validation_split_name="validation"
    )
    assert train == reference
    txt = tmp_path / "held_out.txt"
    txt.write_text("\n\n".join("\n".join(article) for article in articles[:2]) + "\n", encoding="utf-8")
    _, expected = instances_of(
        tokenizer, tmp_path, train_files=[str(txt)], validation_files=[str(txt)], lines_are_paragraphs=True
    )
    assert evaluation == expected


def test_a_document_column_groups_consecutive_rows(articles, reference, tokenizer, tmp_path):
    rows = [{"doc": f"article-{i}", "text": paragraph} for i, article in enumerate(articles) for paragraph in article]
    path = write_rows(tmp_path / "paragraphs.jsonl", rows)
    train, _ = instances_of(tokenizer, tmp_path, train_files=[str(path)], document_column="doc")
    assert train == reference


def test_held_out_documents_of_rows_are_those_of_the_text_file(articles, tokenizer, tmp_path):
    path = write_rows(tmp_path / "corpus.parquet", documents_as_rows(articles))
    txt = tmp_path / "corpus.txt"
    txt.write_text("\n\n".join("\n".join(article) for article in articles) + "\n", encoding="utf-8")
    from_rows = instances_of(tokenizer, tmp_path, train_files=[str(path)], validation_documents=2)
    from_text = instances_of(
        tokenizer, tmp_path, train_files=[str(txt)], validation_documents=2, lines_are_paragraphs=True
    )
    assert from_rows == from_text


# ---- errors ----------------------------------------------------------------------------------------------------------


def test_a_missing_text_column_names_the_columns_there_are(articles, tokenizer, tmp_path):
    path = write_rows(tmp_path / "corpus.jsonl", documents_as_rows(articles))
    with pytest.raises(DataError, match=r"no column 'body' \(--text_column\); its columns are \['id', 'text'\]"):
        instances_of(tokenizer, tmp_path, train_files=[str(path)], text_column="body")
    with pytest.raises(DataError, match=r"no column 'article' \(--document_column\)"):
        instances_of(tokenizer, tmp_path, train_files=[str(path)], document_column="article")


@pytest.mark.parametrize("document_column", [None, "id"])
def test_a_text_that_is_not_a_string_names_its_row(document_column, tokenizer, tmp_path):
    rows = [{"id": 0, "text": "One. Two."}, {"id": 1, "text": None}, {"id": 2, "text": "Three. Four."}]
    path = write_rows(tmp_path / "corpus.jsonl", rows)
    with pytest.raises(DataError, match=r"corpus.jsonl:2: column 'text': empty \(None\)"):
        instances_of(tokenizer, tmp_path, train_files=[str(path)], document_column=document_column)


def test_a_source_without_rows_is_refused(tokenizer, tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("id,text\n", encoding="utf-8")
    with pytest.raises(DataError, match="no rows"):
        instances_of(tokenizer, tmp_path, train_files=[str(path)])


# ---- the command -----------------------------------------------------------------------------------------------------


def job_argv(spiece_model: Path, output_dir: Path, *source: str) -> list[str]:
    return [
        *source, "--tokenizer_name_or_path", str(spiece_model), "--config_overrides", TINY_TWO_LAYER_OVERRIDES,
        "--max_seq_length", "64", "--max_steps", "1", "--per_device_train_batch_size", "4",
        "--output_dir", str(output_dir), "--report_to", "none", "--use_cpu", "--disable_tqdm", "true",
        "--save_strategy", "no",
    ]  # fmt: skip


def test_the_command_reads_a_table_by_the_old_option_spelling(articles, spiece_model, tmp_path):
    rows = [{"body": row["text"]} for row in documents_as_rows(articles)]
    path = write_rows(tmp_path / "corpus.parquet", rows)
    argv = job_argv(spiece_model, tmp_path / "out", "--train_file", str(path), "--text_column", "body")
    assert main([*argv, "--validation_documents", "1"]) == 0
    assert (tmp_path / "out" / "eval_results.json").is_file()


def test_the_command_streams_a_table(articles, spiece_model, tmp_path):
    path = write_rows(tmp_path / "corpus.parquet", documents_as_rows(articles))
    argv = job_argv(spiece_model, tmp_path / "out", "--train_files", str(path), "--streaming")
    assert main([*argv, "--validation_files", str(path), "--max_eval_instances", "8"]) == 0
    assert (tmp_path / "out" / "eval_results.json").is_file()


def test_a_stream_of_rows_is_the_stream_of_the_text_file_and_resumes_exactly(articles, tokenizer, tmp_path):
    txt = tmp_path / "corpus.txt"
    txt.write_text("\n\n".join("\n".join(article) for article in articles) + "\n", encoding="utf-8")
    table = write_rows(tmp_path / "corpus.parquet", documents_as_rows(articles))
    options = dict(window_size=16, seed=3, max_seq_length=64, documents_per_batch=2)

    def rows_stream() -> ResumableInstanceStream:
        return ResumableInstanceStream(DocumentRows(load_rows(data_files=[str(table)]), "corpus"), tokenizer, **options)

    from_text = list(ResumableInstanceStream([txt], tokenizer, split_lines=True, **options))
    stream = rows_stream()
    from_rows = list(stream)
    assert from_rows == from_text and len(from_rows) > 3 * options["window_size"]
    for consumed in (0, 17, len(from_rows) // 2, len(from_rows) - 1):
        state = stream.position_state(0, consumed)
        resumed = rows_stream()
        assert resumed.resume_from_state(state, 0, consumed) is None
        assert list(resumed) == from_rows[consumed:], consumed
        assert resumed.documents_read <= len(articles) - state["window"]["document"], consumed
