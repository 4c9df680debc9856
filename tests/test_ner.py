"""CoNLL-2003 NER: readers, IOB1 -> IOB2, label alignment, the gold round trip on CoNLL valid, end to end."""

from __future__ import annotations

import json

import pytest
from datasets import ClassLabel, Dataset, Features, Sequence, Value
from helpers.data import is_full
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.data.ner import (
    CONLL2003_LABELS,
    IGNORE_INDEX,
    align_labels,
    build_label_list,
    continuation_label_ids,
    from_hub_layout,
    iob1_to_iob2,
    load_ner_file,
    read_conll,
    read_ner_json,
    tokenize_and_align,
    word_predictions,
    write_conll_predictions,
)
from albert_hf.metrics.ner import ner_metrics


@pytest.fixture(scope="module")
def conll_valid(shared_data):
    return load_ner_file(str(shared_data / "conll2003" / "valid.txt"))


# ----------------------------------------------------------------------------------------------------------------------
# reading


def test_real_conll_files_have_the_documented_sizes(shared_data, conll_valid):
    train = read_conll(str(shared_data / "conll2003" / "train.txt"))
    sizes = [(len(train), sum(len(s["tokens"]) for s in train))]
    sizes.append((len(conll_valid), sum(len(tokens) for tokens in conll_valid["tokens"])))
    if is_full(shared_data):  # CoNLL-2003 English
        assert sizes == [(14041, 203621), (3250, 51362)]
        assert train[0] == {
            "tokens": ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
            "ner_tags": ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"],
        }
        assert build_label_list(conll_valid) == list(CONLL2003_LABELS)
    else:  # transformers' 10-sentence sample, the same sentences in both files
        assert sizes == [(10, 195), (10, 195)]
        assert train[0]["tokens"][:5] == ["He", "was", "the", "27th", "pitcher"]
        assert set(build_label_list(conll_valid)) <= set(CONLL2003_LABELS)


def test_iob1_is_converted_to_iob2_and_iob2_is_unchanged():
    assert iob1_to_iob2(["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG"]) == [
        "B-PER",
        "I-PER",
        "O",
        "B-LOC",
        "B-LOC",
        "B-ORG",
    ]
    iob2 = ["B-PER", "I-PER", "B-PER", "O", "B-MISC", "I-MISC"]
    assert iob1_to_iob2(iob2) == iob2


def test_read_conll_iob1_file_with_docstart(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text(
        "-DOCSTART- -X- O O\n\nJohn NNP I-NP I-PER\nSmith NNP I-NP I-PER\nsaw VBD I-VP O\n"
        "Paris NNP I-NP I-LOC\n\n-DOCSTART- -X- O O\n\nHi UH O O\n"
    )
    assert read_conll(str(path)) == [
        {"tokens": ["John", "Smith", "saw", "Paris"], "ner_tags": ["B-PER", "I-PER", "O", "B-LOC"]},
        {"tokens": ["Hi"], "ner_tags": ["O"]},
    ]


def test_read_conll_errors_name_file_and_line(tmp_path):
    bad_tag = tmp_path / "bad_tag.txt"
    bad_tag.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP X-ORG\n")
    with pytest.raises(ValueError, match=r"bad_tag\.txt:2: 'X-ORG' is not an IOB tag"):
        read_conll(str(bad_tag))
    one_column = tmp_path / "one_column.txt"
    one_column.write_text("EU B-ORG\n\nlonely\n")
    with pytest.raises(ValueError, match=r"one_column\.txt:3: expected a word and a tag"):
        read_conll(str(one_column))
    with pytest.raises(ValueError, match=r"one_column\.txt:1: no column 3"):
        read_conll(str(one_column), tag_column=3)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_ner_file(str(tmp_path / "missing.txt"))


def test_hub_layout_json_with_strings_or_ids(shared_data, tmp_path):
    sample = read_ner_json(str(shared_data / "hf-samples" / "conll" / "sample.json"))
    assert len(sample) == 10
    assert sample[1] == {"tokens": ["CHICAGO", "AT", "ATLANTA"], "ner_tags": ["B-ORG", "O", "B-LOC"]}
    ids = tmp_path / "ids.jsonl"
    ids.write_text(
        json.dumps({"tokens": ["Bill", "Clinton"], "ner_tags": [1, 2]})
        + "\n"
        + json.dumps({"tokens": ["x"], "ner_tags": [9]})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"ids\.jsonl:2: tag id 9 is outside the label list"):
        read_ner_json(str(ids))
    mismatch = tmp_path / "mismatch.json"
    mismatch.write_text(json.dumps({"words": ["a", "b"], "ner": ["O"]}) + "\n")
    with pytest.raises(ValueError, match=r"mismatch\.json:1: 2 tokens but 1 tags"):
        read_ner_json(str(mismatch))


def test_hub_dataset_class_labels_become_tags():
    features = Features(
        {"tokens": Sequence(Value("string")), "ner_tags": Sequence(ClassLabel(names=["O", "B-X", "I-X"]))}
    )
    hub = Dataset.from_dict({"tokens": [["a", "b", "c"]], "ner_tags": [[1, 2, 0]]}, features=features)
    assert from_hub_layout(hub, "some/ner")[0] == {"tokens": ["a", "b", "c"], "ner_tags": ["B-X", "I-X", "O"]}


def test_label_list_for_other_tag_sets():
    data = Dataset.from_list(
        [{"tokens": ["a", "b"], "ner_tags": ["B-GENE", "I-GENE"]}, {"tokens": ["c"], "ner_tags": ["B-ANIMAL"]}]
    )
    assert build_label_list(data) == ["O", "B-ANIMAL", "B-GENE", "I-GENE"]


# ----------------------------------------------------------------------------------------------------------------------
# alignment


def test_align_labels_first_sub_token_or_all():
    word_ids = [None, 0, 0, 1, 2, 2, 2, None]
    word_labels = [1, 0, 3]  # B-PER, O, B-ORG
    assert align_labels(word_ids, word_labels) == [
        IGNORE_INDEX,
        1,
        IGNORE_INDEX,
        0,
        3,
        IGNORE_INDEX,
        IGNORE_INDEX,
        IGNORE_INDEX,
    ]
    continuation = continuation_label_ids(CONLL2003_LABELS)
    assert [CONLL2003_LABELS[i] for i in continuation] == [
        "O",
        "I-PER",
        "I-PER",
        "I-ORG",
        "I-ORG",
        "I-LOC",
        "I-LOC",
        "I-MISC",
        "I-MISC",
    ]
    assert align_labels(word_ids, word_labels, label_all_tokens=True, continuation_ids=continuation) == [
        IGNORE_INDEX,
        1,
        2,
        0,
        3,
        4,
        4,
        IGNORE_INDEX,
    ]


def test_word_predictions_read_first_sub_tokens_and_count_cut_words():
    label_list = ["O", "B-PER", "I-PER"]
    # Word 2 lost its sub-tokens to truncation: it is predicted "O" and counted.
    tags, missing = word_predictions([0, 1, 0, 2, 0], [None, 0, 0, 1, None], 3, label_list)
    assert (tags, missing) == (["B-PER", "I-PER", "O"], 1)


def test_gold_tags_round_trip_through_alignment_on_conll_valid(tokenizer, conll_valid, shared_data):
    """Gold word tags -> sub-token labels -> back to words through the first sub-token: entity F1 = 100, both for
    first-sub-token labels and for labels on every sub-token."""
    label_list = build_label_list(conll_valid)
    encoded, num_truncated = tokenize_and_align(conll_valid, tokenizer, label_list, 512)
    assert num_truncated == 0
    gold = list(conll_valid["ner_tags"])
    continuation = continuation_label_ids(label_list)
    for label_all_tokens in (False, True):
        recovered = []
        for labels, word_ids, tags in zip(encoded["labels"], encoded["word_ids"], gold):
            if label_all_tokens:
                labels = align_labels(word_ids, [label_list.index(tag) for tag in tags], True, continuation)
            words, missing = word_predictions(labels, word_ids, len(tags), label_list)
            assert missing == 0
            recovered.append(words)
        assert recovered == gold
        metrics = ner_metrics(gold, recovered)
        assert metrics["f1"] == 1.0 and metrics["precision"] == 1.0 and metrics["recall"] == 1.0
    # Entities in the gold tags: CoNLL-2003 dev's documented 5,942; the 10-sentence sample's 25.
    assert sum(value for key, value in metrics.items() if key.endswith("_number")) == (
        5942 if is_full(shared_data) else 25
    )


def test_tokenize_and_align_counts_truncated_sentences(tokenizer):
    data = Dataset.from_list(
        [
            {"tokens": ["Peter", "Blackburn"], "ner_tags": ["B-PER", "I-PER"]},
            {"tokens": ["word"] * 30, "ner_tags": ["O"] * 30},
        ]
    )
    encoded, num_truncated = tokenize_and_align(data, tokenizer, list(CONLL2003_LABELS), 12)
    assert num_truncated == 1
    first = encoded[0]
    assert len(first["labels"]) == len(first["input_ids"]) and first["labels"][0] == IGNORE_INDEX
    assert [label for label in first["labels"] if label != IGNORE_INDEX] == [1, 2]
    with pytest.raises(ValueError, match=r"tags \['B-GENE'\] are not in the label list"):
        tokenize_and_align(Dataset.from_list([{"tokens": ["x"], "ner_tags": ["B-GENE"]}]), tokenizer, ["O"], 12)


def test_conll_prediction_file_reads_back(tmp_path):
    path = tmp_path / "predictions.txt"
    tokens, gold, predicted = [["EU", "rejects"], ["Peter"]], [["B-ORG", "O"], ["B-PER"]], [["B-ORG", "O"], ["O"]]
    write_conll_predictions(str(path), tokens, gold, predicted)
    assert path.read_text() == "EU B-ORG B-ORG\nrejects O O\n\nPeter B-PER O\n\n"
    assert [s["ner_tags"] for s in read_conll(str(path))] == predicted
    assert [s["ner_tags"] for s in read_conll(str(path), tag_column=1)] == gold


# ----------------------------------------------------------------------------------------------------------------------
# end to end


def test_run_ner_end_to_end_through_the_cli(shared_data, spiece_model, tmp_path):
    from albert_hf.cli import main as cli_main

    conll = shared_data / "conll2003"
    output_dir = tmp_path / "ner"
    argv = [
        "ner",
        "--data_dir",
        str(conll),
        "--test_file",
        str(conll / "valid.txt"),
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--label_all_tokens",
        "--max_train_samples",
        "48",
        "--max_eval_samples",
        "24",
        "--max_predict_samples",
        "12",
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--output_dir",
        str(output_dir),
        "--report_to",
        "none",
        "--max_steps",
        "4",
        "--per_device_train_batch_size",
        "8",
        "--max_seq_length",
        "128",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
    ]
    assert cli_main(argv) == 0
    eval_results = json.loads((output_dir / "eval_results.json").read_text())
    assert eval_results["eval_samples"] == min(24, len(read_conll(str(conll / "valid.txt")))) and {
        "eval_f1",
        "eval_precision",
        "eval_recall",
    } <= set(eval_results)
    written = read_conll(str(output_dir / "predictions_test.txt"), tag_column=1)  # word gold predicted
    expected = read_conll(str(conll / "valid.txt"))[:12]
    assert [s["tokens"] for s in written] == [s["tokens"] for s in expected]
    assert [s["ner_tags"] for s in written] == [s["ner_tags"] for s in expected]
    predict_results = json.loads((output_dir / "predict_results.json").read_text())
    assert (
        predict_results["predict_samples"] == len(expected)
        and predict_results["predict_words_beyond_max_seq_length"] == 0
    )
    assert json.loads((output_dir / "config.json").read_text())["id2label"]["1"] == "B-PER"


def test_ner_from_tables_with_named_columns(conll_valid, spiece_model, tmp_path):
    """Parquet with tags as names, and json lines with tags as ids named by --tag_names, read as the CoNLL file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from albert_hf.cli import main as cli_main
    from albert_hf.finetuning import limit_samples, parse_finetuning_args, requested_splits
    from albert_hf.scripts.ner import ARGUMENTS, check_split_tags, load_ner_splits

    sentences = conll_valid.select(range(min(40, len(conll_valid))))  # the excerpt holds 10
    parquet = tmp_path / "train.parquet"
    pq.write_table(pa.table({"words": sentences["tokens"], "tags": sentences["ner_tags"]}), parquet)
    names = sorted({tag for tags in sentences["ner_tags"] for tag in tags})
    ids = tmp_path / "dev.jsonl"
    ids.write_text(
        "".join(
            json.dumps({"words": tokens, "tags": [names.index(tag) for tag in tags]}) + "\n"
            for tokens, tags in zip(sentences["tokens"], sentences["ner_tags"])
        )
    )
    output_dir = tmp_path / "out"
    argv = ["--train_file", str(parquet), "--validation_file", str(ids), "--test_file", str(ids)]
    argv += ["--tokens_column", "words", "--tags_column", "tags", "--tag_names", ",".join(names)]
    argv += ["--do_train", "--do_eval", "--do_predict", "--tokenizer_name_or_path", str(spiece_model)]
    argv += ["--config_overrides", TINY_ONE_LAYER_OVERRIDES, "--output_dir", str(output_dir), "--report_to", "none"]
    argv += ["--max_steps", "2", "--max_seq_length", "128", "--save_strategy", "no", "--use_cpu", "true"]

    _, data_args, ner_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    raw = limit_samples(load_ner_splits(data_args, ner_args, requested_splits(training_args)), data_args)
    check_split_tags(raw, data_args, ner_args)
    for split in ("train", "validation", "test"):
        assert raw[split].to_list() == sentences.to_list()

    assert cli_main(["ner", *argv]) == 0
    written = read_conll(str(output_dir / "predictions_test.txt"), tag_column=1)  # word gold predicted
    assert [s["tokens"] for s in written] == sentences["tokens"] and [s["ner_tags"] for s in written] == sentences[
        "ner_tags"
    ]
    assert {"eval_f1", "eval_precision", "eval_recall"} <= set(
        json.loads((output_dir / "eval_results.json").read_text())
    )


def test_a_data_dir_without_the_split_file_names_the_names_looked_for(tmp_path):
    from albert_hf.errors import UserError
    from albert_hf.finetuning import FineTuningArguments
    from albert_hf.scripts.ner import find_split_files

    with pytest.raises(UserError, match=r"No validation file: none of \[.*valid\.txt.*eng\.testa'\] exists"):
        find_split_files(FineTuningArguments(data_dir=str(tmp_path)), ["validation"])
