"""The resumable stream of `--streaming` pretraining: the same instances as the `datasets` pipeline, shuffled by
windows in an order keyed by (seed, pass, window), and a saved position from which a fresh stream continues exactly
while reading only the window it stopped in (counted: documents read, not time)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pyarrow as pa
import pytest

from albert_hf.data.instance_stream import ResumableInstanceStream
from albert_hf.data.sentence_order import (
    create_sentence_order_instances,
    load_text_documents,
    read_documents,
    tokenize_documents,
)

OPTIONS = dict(window_size=24, seed=3, split_lines=True, max_seq_length=64, documents_per_batch=2)


@pytest.fixture(scope="module")
def stream_files(shared_data, tmp_path_factory) -> list[Path]:
    """The first 10 WikiText-2 validation articles (a paragraph per line; all the repository's excerpt holds) in three
    files of 4, 4 and 2: an even count per file keeps NSP's batches of 2 documents aligned in every file."""
    text = (shared_data / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8")
    articles = [article.strip() for article in text.split("\n\n") if article.strip()][:10]
    assert len(articles) == 10
    folder = tmp_path_factory.mktemp("stream")
    files = []
    for index, (start, end) in enumerate([(0, 4), (4, 8), (8, 10)]):
        path = folder / f"part-{index}.txt"
        path.write_text("\n\n".join(articles[start:end]) + "\n", encoding="utf-8")
        files.append(path)
    return files


def rows_key(rows: list[dict]) -> list[tuple]:
    return [(tuple(row["input_ids"]), tuple(row["token_type_ids"]), row["sentence_order_label"]) for row in rows]


def read_pass(stream: ResumableInstanceStream, epoch: int) -> list[dict]:
    stream.set_epoch(epoch)
    return list(stream)


@pytest.fixture(scope="module", params=["sop", "nsp"])
def options(request) -> dict:
    """The stream's options, for each objective: NSP's windows end with batches of documents, SOP's anywhere."""
    return {**OPTIONS, "objective": request.param}


@pytest.fixture(scope="module")
def reference(stream_files, tokenizer, options) -> tuple[ResumableInstanceStream, list[dict]]:
    """A stream read through pass 0 and then pass 1 (which it keeps the windows of), and pass 1's rows."""
    stream = ResumableInstanceStream(stream_files, tokenizer, **options)
    read_pass(stream, 0)
    return stream, read_pass(stream, 1)


def test_a_pass_holds_the_instances_of_the_datasets_pipeline(stream_files, tokenizer, options, reference):
    stream, rows = reference
    for epoch, pass_rows in ((0, read_pass(stream, 0)), (1, rows)):
        documents = load_text_documents(stream.file_order(epoch), split_lines=True, streaming=True)
        instances = create_sentence_order_instances(
            tokenize_documents(documents, tokenizer, documents_per_batch=2),
            tokenizer.cls_token_id,
            tokenizer.sep_token_id,
            max_seq_length=64,
            seed=3,
            objective=options["objective"],
            documents_per_batch=2,
        )
        assert sorted(rows_key(pass_rows)) == sorted(rows_key(list(instances)))
    read_pass(stream, 1)  # the fixture's stream keeps pass 1's windows for the tests below


def test_windows_are_shuffled_by_seed_pass_and_window(stream_files, tokenizer, options, reference):
    stream, rows = reference
    assert len(stream._windows) >= 4, "the test needs several windows in a pass"
    again = ResumableInstanceStream(stream_files, tokenizer, **options)
    assert rows_key(read_pass(again, 1)) == rows_key(rows)  # a function of the seed and the pass
    assert rows_key(read_pass(again, 0)) != rows_key(rows)
    # Within a window only: the first window of pass 1 holds the instances of its documents, in another order.
    first, second = stream._windows[0], stream._windows[1]
    instances = itertools.islice(stream._document_instances(first.start), second.start.document)
    unshuffled = pa.concat_tables([table for _, _, table in instances]).to_pylist()
    assert sorted(rows_key(unshuffled)) == sorted(rows_key(rows[: first.size]))
    assert rows_key(unshuffled) != rows_key(rows[: first.size])


def resume_cases(stream: ResumableInstanceStream) -> list[int]:
    starts = [window.start.instance for window in stream._windows]
    total = starts[-1] + stream._windows[-1].size
    return sorted({0, 1, starts[1] - 1, starts[1], starts[2] + 5, starts[-1], total - 1, total, total + 3})


def test_a_fresh_stream_resumes_exactly_reading_only_its_window(stream_files, tokenizer, options, reference):
    """For positions at the start, inside windows, at window boundaries, at and past the end of pass 1: the rows
    after the position, bit for bit; before the first of them, only the documents of the window it lies in."""
    stream, rows = reference
    windows, total_documents = stream._windows, stream._next.document
    ends = [window.start.document for window in windows[1:]] + [total_documents]
    for consumed in resume_cases(stream):
        state = stream.position_state(1, consumed)
        assert state is not None, consumed
        resumed = ResumableInstanceStream(stream_files, tokenizer, **options)
        assert resumed.resume_from_state(state, 1, consumed) is None
        resumed.set_epoch(1)
        iterator = iter(resumed)
        first = next(iterator, None)
        read_before_first_row = resumed.documents_read
        resumed_rows = ([first] if first is not None else []) + list(iterator)
        assert rows_key(resumed_rows) == rows_key(rows[consumed:]), consumed
        if options["objective"] == "nsp":  # NSP's windows start with a batch of documents
            assert state["window"]["document"] % options["documents_per_batch"] == 0, consumed
        holding = [i for i, w in enumerate(windows) if w.start.instance <= consumed < w.start.instance + w.size]
        if holding:
            (index,) = holding
            assert state["window"] == dataclasses.asdict(windows[index].start), consumed
            # The window's documents, and at most the rest of the batch of documents its last one was read in.
            window_documents = ends[index] - windows[index].start.document
            assert window_documents <= read_before_first_row < window_documents + OPTIONS["documents_per_batch"]
        else:  # at or past the end of the pass: nothing left to read
            assert read_before_first_row == 0 and not resumed_rows, consumed
        # Nothing before the window was read, in the whole pass.
        assert resumed.documents_read == total_documents - state["window"]["document"], consumed


def test_a_position_is_only_taken_for_the_same_data_and_count(stream_files, tokenizer, options, reference):
    stream, _ = reference
    state = stream.position_state(1, 30)
    other_seed = ResumableInstanceStream(stream_files, tokenizer, **{**options, "seed": 4})
    assert "differ from the run that saved it" in other_seed.resume_from_state(state, 1, 30)
    other_window = ResumableInstanceStream(stream_files, tokenizer, **{**options, "window_size": 25})
    assert "differ from the run that saved it" in other_window.resume_from_state(state, 1, 30)
    same = ResumableInstanceStream(stream_files, tokenizer, **options)
    assert "not 31 of pass 1" in same.resume_from_state(state, 1, 31)
    assert "malformed" in same.resume_from_state({"window": {}}, 1, 30)
    assert same._resume is None
    assert stream.position_state(0, 30) is None  # pass 0 is no longer the pass being read: position unknown


def test_reading_resumes_at_a_saved_position_with_the_right_line_numbers(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_bytes(b"A one.\nA two.\n\n\nB one.\nB two.")  # the last document ends the file, no blank line
    second.write_bytes(b"C one.\n\nD one.\n")
    paths = [str(first), str(second)]
    documents = list(read_documents(paths, False))
    assert [sentences for sentences, _ in documents] == [
        ["A one.", "A two."],
        ["B one.", "B two."],
        ["C one."],
        ["D one."],
    ]
    for index, (_, position) in enumerate(documents):
        rest = list(read_documents(paths, False, start=position))
        assert [sentences for sentences, _ in rest] == [sentences for sentences, _ in documents[index + 1 :]]
    second.write_bytes(b"C one.\n\nD one.\n\xe9t\xe9\n")
    with pytest.raises(ValueError, match=rf"{second}:4: not valid UTF-8"):
        list(read_documents(paths, False, start=documents[2][1]))


def test_invalid_options_are_refused(stream_files, tokenizer):
    with pytest.raises(ValueError, match="--shuffle_buffer_size"):
        ResumableInstanceStream(stream_files, tokenizer, window_size=0)
    with pytest.raises(ValueError, match="documents_per_batch"):
        ResumableInstanceStream(stream_files, tokenizer, documents_per_batch=0)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        ResumableInstanceStream([stream_files[0].parent / "missing.txt"], tokenizer)
