"""Multiple choice: SWAG and RACE layouts, choice encoding, accuracy, end to end on the SWAG sample."""

from __future__ import annotations

import json

import numpy as np
import pytest
from datasets import Dataset
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from transformers import EvalPrediction

from albert_hf.data.multiple_choice import (
    from_hub_layout,
    load_multiple_choice,
    race_choice,
    read_multiple_choice,
    tokenize_multiple_choice,
)
from albert_hf.scripts.multiple_choice import accuracy_compute_metrics

ARTICLE = "Tom went to the market. He bought three apples and a pear."


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return str(path)


def test_swag_sample(shared_data):
    examples = read_multiple_choice(str(shared_data / "hf-samples" / "swag" / "sample.json"))
    assert len(examples) == 10
    first = examples[0]
    assert first["context"] == "Members of the procession walk down the street holding small horn brass instruments."
    assert first["choices"][0] == "A drum line passes by walking down the street playing their instruments."
    assert len(first["choices"]) == 4 and first["label"] == 0
    assert [example["label"] for example in examples[:4]] == [0, 3, 1, 3]


def test_race_flat_original_and_folder_layouts(tmp_path):
    flat = write_jsonl(
        tmp_path / "race.jsonl",
        [
            {
                "article": ARTICLE,
                "question": "What did Tom buy?",
                "options": ["apples", "pears", "a car", "milk"],
                "answer": "A",
            },
            {
                "article": ARTICLE,
                "question": "Tom bought _ apples.",
                "options": ["two", "three", "four", "five"],
                "answer": "B",
            },
        ],
    )
    examples = read_multiple_choice(flat)
    assert examples[0] == {
        "context": ARTICLE,
        "label": 0,
        "choices": [
            "What did Tom buy? apples",
            "What did Tom buy? pears",
            "What did Tom buy? a car",
            "What did Tom buy? milk",
        ],
    }
    assert examples[1]["choices"][1] == "Tom bought three apples." and examples[1]["label"] == 1

    folder = tmp_path / "race_dev"
    folder.mkdir()
    (folder / "1.txt").write_text(
        json.dumps(
            {
                "id": "1.txt",
                "article": ARTICLE,
                "questions": ["Who went?", "Where?"],
                "options": [["Tom", "Ann", "Bob", "Sue"], ["home", "market", "school", "park"]],
                "answers": ["A", "B"],
            }
        )
    )
    (folder / "2.txt").write_text(
        json.dumps({"article": "Short.", "questions": ["Q?"], "options": [["a", "b", "c", "d"]], "answers": ["D"]})
    )
    dataset = load_multiple_choice(str(folder))
    assert dataset["label"] == [0, 1, 3] and dataset[1]["choices"][1] == "Where? market"


def test_race_cloze_and_answer_forms():
    assert race_choice("The boy _ to school.", "walks") == "The boy walks to school."
    assert race_choice("Why did he go?", "To learn.") == "Why did he go? To learn."


@pytest.mark.parametrize(
    "record, message",
    [
        ({"article": "a", "question": "q", "options": ["x", "y"], "answer": "C"}, "answer 'C' is not one of the 2"),
        ({"article": "a", "question": "q", "options": ["x", "y"], "answer": "?"}, "neither a choice index nor"),
        ({"article": "a", "question": "q", "options": "x"}, r"missing fields \['answer'\]"),
        ({"article": "a", "question": "q", "options": ["x"], "answer": 0}, "at least two answers"),
        ({"sent1": "a", "sent2": "b", "ending0": "c", "ending2": "d", "label": 0}, "expected ending0..endingN"),
        ({"text": "nothing known"}, "neither SWAG"),
    ],
)
def test_bad_records_name_the_file_and_line(tmp_path, record, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [record, record])
    with pytest.raises(ValueError, match=message) as error:
        read_multiple_choice(path)
    assert "bad.jsonl:1" in str(error.value)


def test_mixed_choice_counts_are_refused(tmp_path):
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"article": "a", "question": "q", "options": ["x", "y"], "answer": 0},
            {"article": "a", "question": "q", "options": ["x", "y", "z"], "answer": 0},
        ],
    )
    with pytest.raises(ValueError, match=r"different numbers of choices \[2, 3\]"):
        read_multiple_choice(path)


def test_hub_layout_records():
    hub = Dataset.from_list(
        [
            {
                "example_id": "x",
                "article": ARTICLE,
                "question": "Who?",
                "options": ["Tom", "Ann", "Bob", "Sue"],
                "answer": "A",
            }
        ]
    )
    assert from_hub_layout(hub, "ehovy/race")[0]["choices"][0] == "Who? Tom"


def test_tokenize_choices_as_pairs(tokenizer):
    dataset = Dataset.from_list(
        [
            {"context": "Short context.", "choices": ["one", "two", "three"], "label": 2},
            {"context": "long " * 50, "choices": ["a", "b", "c"], "label": 0},
        ]
    )
    encoded, num_truncated = tokenize_multiple_choice(dataset, tokenizer, max_seq_length=20)
    assert num_truncated == 1
    assert set(encoded.column_names) == {"input_ids", "token_type_ids", "attention_mask", "label"}
    first = encoded[0]
    assert len(first["input_ids"]) == 3  # [num_choices][seq_len]
    choice = first["input_ids"][1]
    assert choice[0] == tokenizer.cls_token_id and choice.count(tokenizer.sep_token_id) == 2
    assert first["token_type_ids"][1][-1] == 1 and first["token_type_ids"][1][0] == 0
    assert tokenizer.decode(choice[choice.index(tokenizer.sep_token_id) + 1 : -1]) == "two"
    assert all(len(ids) == 20 for ids in encoded[1]["input_ids"])  # the article was cut, not the choice
    assert tokenizer.decode(encoded[1]["input_ids"][2][-2:-1]) == "c"


def test_accuracy_metric():
    logits = np.array([[0.1, 0.9, 0.0, 0.0], [2.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    assert accuracy_compute_metrics(EvalPrediction(logits, np.array([1, 1, 3]))) == {"accuracy": pytest.approx(2 / 3)}


def test_run_swag_end_to_end_through_the_cli(shared_data, spiece_model, tmp_path):
    from albert_hf.cli import main as cli_main

    sample = str(shared_data / "hf-samples" / "swag" / "sample.json")
    output_dir = tmp_path / "swag"
    argv = [
        "multiple-choice",
        "--train_file",
        sample,
        "--validation_file",
        sample,
        "--test_file",
        sample,
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--max_predict_samples",
        "6",
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--output_dir",
        str(output_dir),
        "--report_to",
        "none",
        "--max_steps",
        "3",
        "--per_device_train_batch_size",
        "4",
        "--max_seq_length",
        "64",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
    ]
    assert cli_main(argv) == 0
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["eval_samples"] == 10 and 0.0 <= results["eval_accuracy"] <= 1.0
    predictions = [json.loads(line) for line in (output_dir / "predictions_test.jsonl").read_text().splitlines()]
    assert len(predictions) == 6
    assert all(len(row["scores"]) == 4 and row["prediction"] == int(np.argmax(row["scores"])) for row in predictions)


def test_multiple_choice_from_a_table_by_column(shared_data, spiece_model, tmp_path):
    """The SWAG sample as a parquet table (a column per choice, the answer as a letter) reads as the SWAG reader reads
    the json file, and trains, evaluates and predicts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from albert_hf.cli import main as cli_main
    from albert_hf.finetuning import limit_samples, parse_finetuning_args, requested_splits
    from albert_hf.scripts.multiple_choice import ARGUMENTS, load_splits

    examples = read_multiple_choice(str(shared_data / "hf-samples" / "swag" / "sample.json"))
    table = {"scene": [example["context"] for example in examples]}
    table.update({f"ending{i}": [example["choices"][i] for example in examples] for i in range(4)})
    table["answer"] = ["ABCD"[example["label"]] for example in examples]
    path = tmp_path / "swag.parquet"
    pq.write_table(pa.table(table), path)
    output_dir = tmp_path / "out"
    argv = ["--train_file", str(path), "--validation_file", str(path), "--test_file", str(path)]
    argv += ["--context_column", "scene", "--choice_columns", "ending0", "ending1", "ending2", "ending3"]
    argv += ["--label_column", "answer", "--do_train", "--do_eval", "--do_predict"]
    argv += ["--tokenizer_name_or_path", str(spiece_model), "--config_overrides", TINY_ONE_LAYER_OVERRIDES]
    argv += ["--output_dir", str(output_dir), "--report_to", "none", "--max_steps", "2", "--max_seq_length", "64"]
    argv += ["--save_strategy", "no", "--use_cpu", "true"]

    _, data_args, mc_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    raw = limit_samples(load_splits(data_args, mc_args, requested_splits(training_args)), data_args)
    for split in ("train", "validation", "test"):
        assert raw[split].to_list() == examples

    assert cli_main(["multiple-choice", *argv]) == 0
    assert json.loads((output_dir / "eval_results.json").read_text())["eval_samples"] == len(examples)
    assert len((output_dir / "predictions_test.jsonl").read_text().splitlines()) == len(examples)


def test_jcommonsenseqa_as_published(spiece_model, tmp_path):
    """The JCommonsenseQA-layout files (made up, tests/data/jglue): the question and its five choices, the label the
    index of the answer, every row of both files."""
    from pathlib import Path

    from albert_hf.finetuning import limit_samples, parse_finetuning_args, requested_splits
    from albert_hf.scripts.multiple_choice import ARGUMENTS, load_splits

    folder = Path(__file__).resolve().parent / "data" / "jglue" / "jcommonsenseqa-v1.3"
    files = {split: folder / f"{split}-v1.3.json" for split in ("train", "valid")}
    argv = ["--train_file", str(files["train"]), "--validation_file", str(files["valid"]), "--do_train", "--do_eval"]
    argv += ["--context_column", "question", "--choice_columns", *(f"choice{i}" for i in range(5))]
    argv += ["--tokenizer_name_or_path", str(spiece_model), "--output_dir", str(tmp_path), "--use_cpu", "true"]
    _, data_args, mc_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    raw = limit_samples(load_splits(data_args, mc_args, requested_splits(training_args)), data_args)
    for split, name in (("train", "train"), ("validation", "valid")):
        records = [json.loads(line) for line in files[name].read_text(encoding="utf-8").splitlines()]
        assert raw[split].to_list() == [
            {"context": r["question"], "choices": [r[f"choice{i}"] for i in range(5)], "label": r["label"]}
            for r in records
        ]
