"""train_tokenizer / `albert-hf train-tokenizer`: the ALBERT vocabulary recipe on the shared corpora and on Japanese."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sentencepiece as spm
from helpers.tokenization_reference import preprocess_text, reference_ids

from albert_hf.errors import UserError
from albert_hf.folder_commands import train_tokenizer_main
from albert_hf.tokenization import AlbertHFTokenizer
from albert_hf.vocabulary import train_tokenizer

JAPANESE_SAMPLE = Path(__file__).parent / "data" / "japanese_sample.txt"
SPECIAL_IDS = {"<pad>": 0, "<unk>": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}


@pytest.fixture(scope="module")
def english_tokenizer(shared_data, tmp_path_factory) -> tuple[AlbertHFTokenizer, Path]:
    output_dir = tmp_path_factory.mktemp("english")
    tokenizer = train_tokenizer(
        shared_data / "corpus" / "botchan.txt", output_dir, vocab_size=1000, show_progress=False
    )
    return tokenizer, output_dir


def held_out_lines(path: Path, count: int) -> list[str]:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[-count:]


def test_trained_folder_has_albert_special_ids(english_tokenizer):
    tokenizer, output_dir = english_tokenizer
    assert (output_dir / "spiece.model").is_file() and (output_dir / "tokenizer_config.json").is_file()
    sp = spm.SentencePieceProcessor(model_file=str(output_dir / "spiece.model"))
    assert sp.get_piece_size() == 1000
    for token, index in SPECIAL_IDS.items():
        assert sp.piece_to_id(token) == index
        assert tokenizer.convert_tokens_to_ids(token) == index
    assert [sp.id_to_piece(i) for i in range(5, 13)] == ["(", ")", '"', "-", ".", "–", "£", "€"]
    assert len(tokenizer) == 1000  # no added tokens: every special token is a piece


def test_trained_tokenizer_round_trips_and_matches_the_original_algorithm(english_tokenizer, shared_data):
    tokenizer, output_dir = english_tokenizer
    texts = held_out_lines(shared_data / "corpus" / "wikitext2_valid_paragraphs.txt", 200)
    ids = tokenizer(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    sp = spm.SentencePieceProcessor(model_file=str(output_dir / "spiece.model"))
    assert ids == reference_ids(sp, texts)
    for text, text_ids in zip(texts, ids):
        if tokenizer.unk_token_id not in text_ids:
            assert tokenizer.decode(text_ids) == preprocess_text(text)


def test_auto_tokenizer_loads_the_trained_folder(english_tokenizer):
    from transformers import AutoTokenizer

    from albert_hf.configuration import AlbertConfig

    AutoTokenizer.register(
        AlbertConfig, tokenizer_class=AlbertHFTokenizer, exist_ok=True
    )  # what `import albert_hf` does
    tokenizer, output_dir = english_tokenizer
    loaded = AutoTokenizer.from_pretrained(output_dir)
    assert isinstance(loaded, AlbertHFTokenizer)
    assert (
        loaded("Some text, 1,000 times.", "A pair")["input_ids"]
        == tokenizer("Some text, 1,000 times.", "A pair")["input_ids"]
    )


def test_japanese_without_lowercasing_or_accent_stripping(tmp_path):
    tokenizer = train_tokenizer(
        JAPANESE_SAMPLE, tmp_path, vocab_size=400, lowercase=False, strip_accents=False, show_progress=False
    )
    lines = [line for line in JAPANESE_SAMPLE.read_text(encoding="utf-8").splitlines() if line]
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_IDS] == list(SPECIAL_IDS.values())
    for line in lines:
        ids = tokenizer(line, add_special_tokens=False)["input_ids"]
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids) == preprocess_text(line, lower=False, keep_accents=True)
    # dakuten survive: stripping accents (NFKD) would have turned が into か
    assert "が" in tokenizer.decode(tokenizer("雨が降っている")["input_ids"])
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "spiece.model"))
    ids = tokenizer(lines, add_special_tokens=False)["input_ids"]
    assert ids == reference_ids(sp, lines, lower=False, keep_accents=True)


def test_japanese_with_accent_stripping_asked_for_is_refused(tmp_path):
    # stripping would turn が into か and merge words: refused, naming the flag; left unset, accents are kept
    with pytest.raises(ValueError, match="--keep_accents"):
        train_tokenizer(JAPANESE_SAMPLE, tmp_path, vocab_size=380, strip_accents=True, show_progress=False)


def test_english_defaults_still_strip_accents(english_tokenizer):
    tokenizer, _ = english_tokenizer
    assert tokenizer.keep_accents is False and tokenizer.do_lower_case is True


def test_train_from_a_datasets_dataset(shared_data, tmp_path):
    import datasets

    lines = held_out_lines(shared_data / "corpus" / "botchan.txt", 3000)
    dataset = datasets.Dataset.from_dict({"sentence": lines})
    tokenizer = train_tokenizer(dataset, tmp_path, vocab_size=500, text_column="sentence", show_progress=False)
    assert tokenizer.vocab_size == 500
    with pytest.raises(ValueError, match="no column 'text'"):
        train_tokenizer(dataset, tmp_path / "other", vocab_size=500, show_progress=False)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        train_tokenizer(tmp_path / "missing.txt", tmp_path / "out", vocab_size=500, show_progress=False)
    with pytest.raises(TypeError, match="datasets.Dataset"):
        train_tokenizer(42, tmp_path / "out", vocab_size=500, show_progress=False)
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(JAPANESE_SAMPLE, tmp_path / "out", vocab_size=5, show_progress=False)


def test_command_line_shows_progress_and_writes_a_loadable_folder(shared_data, tmp_path, capsys):
    output_dir = tmp_path / "cli"
    corpus = shared_data / "hf-samples" / "sample_text.txt"
    assert (
        train_tokenizer_main(
            [
                str(JAPANESE_SAMPLE),
                str(corpus),
                "--output_dir",
                str(output_dir),
                "--vocab_size",
                "500",
                "--no_lowercase",
                "--keep_accents",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "reading text" in captured.err and "wrote" in captured.out
    tokenizer = AlbertHFTokenizer.from_pretrained(output_dir)
    assert tokenizer.do_lower_case is False and tokenizer.keep_accents is True
    assert tokenizer.convert_ids_to_tokens(tokenizer("東京 Tokyo")["input_ids"])[0] == "[CLS]"


@pytest.fixture(scope="module")
def botchan_lines(shared_data) -> list[str]:
    """2,000 lines of Botchan with a few blank ones among them (a text file's paragraph breaks, a table's empty rows)."""
    lines = held_out_lines(shared_data / "corpus" / "botchan.txt", 2000)
    return [line if index % 250 else "" for index, line in enumerate(lines)]


@pytest.fixture(scope="module")
def vocabulary_of_the_text_file(botchan_lines, tmp_path_factory) -> str:
    """The vocabulary the text file gives, read by the text-file reader: the reference for every other source."""
    folder = tmp_path_factory.mktemp("from_text")
    (folder / "botchan.txt").write_text("".join(line + "\n" for line in botchan_lines), encoding="utf-8")
    train_tokenizer(folder / "botchan.txt", folder / "out", **SMALL_VOCABULARY)
    return (folder / "out" / "spiece.vocab").read_text(encoding="utf-8")


SMALL_VOCABULARY = {"vocab_size": 400, "show_progress": False, "num_threads": 1}


def write_jsonl_shards(folder: Path, lines: list[str], column: str = "text", shards: int = 3) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(lines) // shards)
    for shard in range(shards):
        rows = lines[shard * size : (shard + 1) * size]
        text = "".join(json.dumps({column: line, "id": shard}, ensure_ascii=False) + "\n" for line in rows)
        (folder / f"part-{shard:03d}.jsonl").write_text(text, encoding="utf-8")
    return folder


def test_jsonl_and_parquet_rows_give_the_vocabulary_of_the_same_text_file(
    botchan_lines, vocabulary_of_the_text_file, tmp_path
):
    write_jsonl_shards(tmp_path / "shards", botchan_lines)
    train_tokenizer([tmp_path / "shards"], tmp_path / "from_jsonl", **SMALL_VOCABULARY)
    assert (tmp_path / "from_jsonl" / "spiece.vocab").read_text(encoding="utf-8") == vocabulary_of_the_text_file
    pq.write_table(pa.table({"sentence": botchan_lines}), tmp_path / "botchan.parquet")
    train_tokenizer(str(tmp_path / "*.parquet"), tmp_path / "from_parquet", text_column="sentence", **SMALL_VOCABULARY)
    assert (tmp_path / "from_parquet" / "spiece.vocab").read_text(encoding="utf-8") == vocabulary_of_the_text_file


def test_command_line_from_a_saved_dataset_and_from_a_stream(botchan_lines, vocabulary_of_the_text_file, tmp_path):
    saved = tmp_path / "saved"
    # Rows of several lines each (articles of paragraphs): cut at their line breaks, they are the text file's lines.
    articles = ["\n".join(botchan_lines[start : start + 7]) for start in range(0, len(botchan_lines), 7)]
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"body": articles})}).save_to_disk(str(saved))
    common = ["--vocab_size", "400", "--num_threads", "1", "--quiet", "--text_column", "body"]
    assert (
        train_tokenizer_main(["--dataset_name", str(saved), "--output_dir", str(tmp_path / "saved_out"), *common]) == 0
    )
    assert (tmp_path / "saved_out" / "spiece.vocab").read_text(encoding="utf-8") == vocabulary_of_the_text_file
    write_jsonl_shards(tmp_path / "shards", botchan_lines, column="body")
    arguments = [str(tmp_path / "shards"), "--streaming", "--output_dir", str(tmp_path / "stream_out"), *common]
    assert train_tokenizer_main(arguments) == 0
    assert (tmp_path / "stream_out" / "spiece.vocab").read_text(encoding="utf-8") == vocabulary_of_the_text_file


def test_command_line_sources_are_checked(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "one"}\n{"text": null}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"rows\.jsonl:2: column 'text': empty \(None\)"):
        train_tokenizer_main([str(rows), "--output_dir", str(tmp_path / "out"), "--quiet"])
    with pytest.raises(
        UserError, match=r"rows\.jsonl has no column 'body' \(--text_column\); its columns are \['text'"
    ):
        train_tokenizer_main([str(rows), "--text_column", "body", "--output_dir", str(tmp_path / "out"), "--quiet"])
    with pytest.raises(UserError, match="either data files or a dataset name"):
        train_tokenizer_main(["--output_dir", str(tmp_path / "out"), "--quiet"])
    with pytest.raises(
        UserError, match=r"a configuration \(--dataset_config_name\) .* of a dataset \(--dataset_name\)"
    ):
        train_tokenizer_main([str(rows), "--dataset_config_name", "ja", "--output_dir", str(tmp_path / "out")])
    with pytest.raises(UserError, match=r"nowhere/\*\.parquet: the pattern matches no file"):
        train_tokenizer(str(tmp_path / "nowhere" / "*.parquet"), tmp_path / "out", **SMALL_VOCABULARY)
