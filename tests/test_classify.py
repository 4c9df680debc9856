"""`albert-hf classify`: any labelled table (csv, tsv, json lines, parquet) read into the same examples, labels and
their errors, the metrics by hand, and the job end to end: learning on a separable table, a regression of pairs,
prediction files with label names, and evaluation of the saved model."""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from helpers import processes
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from safetensors import safe_open
from transformers import EvalPrediction

from albert_hf.cli import main as cli_main
from albert_hf.errors import UserError
from albert_hf.finetuning import limit_samples, parse_finetuning_args, requested_splits
from albert_hf.scripts.classify import (
    ARGUMENTS,
    classification_metrics,
    load_table_split,
    prepare_table,
    regression_metrics,
    table_label_space,
)
from albert_hf.scripts.classify import main as classify_main

ROWS = [
    {"review": "A fine film.", "stars": "good"},
    {"review": "Dull and long.", "stars": "bad"},
    {"review": "Not bad at all.", "stars": "good"},
    {"review": "Just average.", "stars": "meh"},
]


def write_table(path, rows):
    """`rows` (dicts) as the file format of `path`'s extension, written without albert_hf or `datasets`."""
    columns = list(rows[0])
    if path.suffix in (".csv", ".tsv"):
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, columns, delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        pq.write_table(pa.table({name: [row[name] for row in rows] for name in columns}), path)
    return str(path)


def job_args(spiece_model, output_dir, *extra):
    return [
        "--tokenizer_name_or_path",
        str(spiece_model),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--output_dir",
        str(output_dir),
        "--report_to",
        "none",
        "--use_cpu",
        "true",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--max_seq_length",
        "32",
        *extra,
    ]


def loaded_data(argv):
    """The label space and the prepared splits of `argv`: the data steps of albert_hf/scripts/classify.py, the
    steps before the model."""
    model_args, data_args, task_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    splits = requested_splits(training_args)
    tables = limit_samples({split: load_table_split(split, data_args, task_args) for split in splits}, data_args)
    label_space = table_label_space(tables, model_args, data_args, task_args)
    raw = {split: prepare_table(split, rows, label_space, data_args, task_args) for split, rows in tables.items()}
    return label_space, raw


# ----------------------------------------------------------------------------------------------------------------------
# reading any table


@pytest.mark.parametrize("extension", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_format_gives_the_same_examples_and_sorted_label_names(extension, spiece_model, tmp_path):
    train = write_table(tmp_path / f"train{extension}", ROWS)
    dev = write_table(tmp_path / f"dev{extension}", ROWS[:2])
    argv = ["--train_file", train, "--validation_file", dev, "--do_train", "--do_eval"]
    argv += ["--text_column", "review", "--label_column", "stars"]
    label_space, raw = loaded_data(job_args(spiece_model, tmp_path / "out", *argv))
    assert label_space.names == ("bad", "good", "meh")
    assert raw["train"].to_list() == [
        {"sentence1": "A fine film.", "label": 1, "idx": 0},
        {"sentence1": "Dull and long.", "label": 0, "idx": 1},
        {"sentence1": "Not bad at all.", "label": 1, "idx": 2},
        {"sentence1": "Just average.", "label": 2, "idx": 3},
    ]
    assert raw["validation"]["label"] == [1, 0]
    assert label_space.config_kwargs()["id2label"] == {0: "bad", 1: "good", 2: "meh"}


def test_pairs_and_scores_make_a_regression(spiece_model, tmp_path):
    rows = [{"a": "One.", "b": "Two.", "score": 0.5}, {"a": "Three.", "b": "Four.", "score": 4.25}]
    train = write_table(tmp_path / "train.parquet", rows)
    argv = ["--train_file", train, "--do_train", "--text_column", "a", "--text_pair_column", "b"]
    label_space, raw = loaded_data(job_args(spiece_model, tmp_path / "out", *argv, "--label_column", "score"))
    assert label_space.kind == "regression"
    assert raw["train"].to_list() == [
        {"sentence1": "One.", "sentence2": "Two.", "label": 0.5, "idx": 0},
        {"sentence1": "Three.", "sentence2": "Four.", "label": 4.25, "idx": 1},
    ]
    config_fields = label_space.config_kwargs()
    assert config_fields["problem_type"] == "regression" and config_fields["num_labels"] == 1


def test_integer_scores_as_a_regression_with_label_kind(spiece_model, tmp_path):
    rows = [{"text": "one", "label": 1}, {"text": "five", "label": 5}, {"text": "three", "label": 3}]
    train = write_table(tmp_path / "train.jsonl", rows)
    argv = job_args(spiece_model, tmp_path / "out", "--train_file", train, "--do_train")
    assert loaded_data(argv)[0].names == ("1", "3", "5")  # integers: classes by default
    label_space, raw = loaded_data([*argv, "--label_kind", "regression"])
    assert label_space.kind == "regression" and raw["train"]["label"] == [1.0, 5.0, 3.0]
    with pytest.raises(UserError, match="--label_kind must be classification or regression, got 'score'"):
        parse_finetuning_args(ARGUMENTS, [*argv, "--label_kind", "score"])


JGLUE = Path(__file__).resolve().parent / "data" / "jglue"


@pytest.mark.parametrize(
    ("folder", "version", "columns", "expected"),
    [
        ("marc_ja", "1.1", ["--text_column", "sentence"], ("negative", "positive")),
        (
            "jnli",
            "1.3",
            ["--text_column", "sentence1", "--text_pair_column", "sentence2"],
            ("contradiction", "entailment", "neutral"),
        ),
        ("jsts", "1.3", ["--text_column", "sentence1", "--text_pair_column", "sentence2"], "regression"),
    ],
)
def test_jglue_tables_as_published(folder, version, columns, expected, spiece_model, tmp_path):
    """The JGLUE-layout files (made up, tests/data/jglue): MARC-ja's two classes, JNLI's three, JSTS's string scores
    as a regression; every row of both files read, the labels as the json lines write them."""
    files = {split: JGLUE / f"{folder}-v{version}" / f"{split}-v{version}.json" for split in ("train", "valid")}
    argv = ["--train_file", str(files["train"]), "--validation_file", str(files["valid"]), *columns]
    label_space, raw = loaded_data(job_args(spiece_model, tmp_path / "out", *argv, "--do_train", "--do_eval"))
    for split, name in (("train", "train"), ("validation", "valid")):
        records = [json.loads(line) for line in files[name].read_text(encoding="utf-8").splitlines()]
        text_column = columns[1]
        assert raw[split]["sentence1"] == [record[text_column] for record in records]
        if expected == "regression":
            assert raw[split]["label"] == [float(record["label"]) for record in records]
        else:
            names = label_space.names
            assert [names[label] for label in raw[split]["label"]] == [record["label"] for record in records]
    assert (label_space.kind if expected == "regression" else label_space.names) == expected


def test_unknown_column_names_the_columns_there_are(spiece_model, tmp_path):
    train = write_table(tmp_path / "train.csv", ROWS)
    argv = job_args(spiece_model, tmp_path / "out", "--train_file", train, "--do_train", "--label_column", "stars")
    with pytest.raises(UserError, match=r"no column 'text' \(--text_column\); its columns are \['review', 'stars'\]"):
        classify_main(argv)


def test_a_label_the_training_split_lacks_is_refused(spiece_model, tmp_path):
    train = write_table(tmp_path / "train.jsonl", ROWS[:2])
    dev = write_table(tmp_path / "dev.jsonl", ROWS)
    argv = ["--train_file", train, "--validation_file", dev, "--do_train", "--do_eval"]
    argv += ["--text_column", "review", "--label_column", "stars"]
    # The fourth row of dev.jsonl, its line 4 (counted by hand from ROWS).
    with pytest.raises(UserError, match=r"dev\.jsonl:4: column 'stars': label 'meh' is not one of"):
        classify_main(job_args(spiece_model, tmp_path / "out", *argv))


def test_mixed_label_kinds_are_refused(spiece_model, tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text(json.dumps({"text": "a", "label": "pos"}) + "\n" + json.dumps({"text": "b", "label": 3}) + "\n")
    argv = job_args(spiece_model, tmp_path / "out", "--train_file", str(train), "--do_train")
    with pytest.raises(UserError, match="mixes kinds of labels"):
        classify_main(argv)


def test_files_and_a_dataset_name_together_are_refused(spiece_model, tmp_path):
    train = write_table(tmp_path / "train.csv", ROWS)
    argv = job_args(spiece_model, tmp_path / "out", "--train_file", train, "--dataset_name", "x/y", "--do_train")
    with pytest.raises(UserError, match="either --train_file.* or --dataset_name"):
        classify_main(argv)


# ----------------------------------------------------------------------------------------------------------------------
# metrics, against values computed by hand


def test_classification_metrics_by_hand():
    # gold 0 0 1 2, predicted 0 1 1 2: accuracy 3/4; F1 per class 2/3, 2/3, 1 -> macro 7/9
    logits = np.eye(3)[[0, 1, 1, 2]]
    metrics = classification_metrics(EvalPrediction(logits, np.array([0, 0, 1, 2])))
    assert metrics == pytest.approx({"accuracy": 0.75, "macro_f1": 7 / 9}, abs=1e-12)


def test_regression_metrics_by_hand():
    # scores 1 2 3 against gold 1 2 4: covariance sum 3, squares 2 and 42/9 -> r = 9 / sqrt(84); same ranks -> rho 1
    metrics = regression_metrics(EvalPrediction(np.array([[1.0], [2.0], [3.0]]), np.array([1.0, 2.0, 4.0])))
    assert metrics == pytest.approx({"pearson": 9 / math.sqrt(84), "spearmanr": 1.0}, abs=1e-12)


# ----------------------------------------------------------------------------------------------------------------------
# end to end

WORDS = {
    "sport": ["football", "tennis", "goal", "match", "team"],
    "food": ["bread", "cheese", "soup", "apple", "dinner"],
    "weather": ["rain", "snow", "wind", "storm", "sunny"],
}


def separable_rows(seed: int, count: int) -> list[dict]:
    """Texts of two words of one topic: the topic is the label (three classes, as many rows each)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        topic = sorted(WORDS)[i % 3]
        first, second = rng.choice(WORDS[topic], size=2, replace=False)
        rows.append({"text": f"{first} and {second}", "label": topic})
    return rows


def test_learns_a_separable_table_and_predicts_label_names(spiece_model, tmp_path):
    train = write_table(tmp_path / "train.csv", separable_rows(0, 96))
    dev = write_table(tmp_path / "dev.csv", separable_rows(1, 30))
    test = write_table(tmp_path / "test.csv", [{"text": row["text"]} for row in separable_rows(2, 9)])
    output_dir = tmp_path / "out"
    argv = ["--train_file", train, "--validation_file", dev, "--test_file", test]
    argv += ["--do_train", "--do_eval", "--do_predict", "--num_train_epochs", "20", "--learning_rate", "1e-3"]
    argv += ["--per_device_train_batch_size", "8", "--warmup_steps", "10", "--seed", "0"]
    argv = job_args(spiece_model, output_dir, *argv)
    argv[argv.index("--config_overrides") + 1] += ",classifier_dropout_prob=0.0"
    assert cli_main(["classify", *argv]) == 0

    results = json.loads((output_dir / "eval_results.json").read_text())
    # Three balanced classes: the majority baseline is 1/3.
    assert results["eval_accuracy"] >= 0.9 and results["eval_macro_f1"] >= 0.9, results
    config = json.loads((output_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "food", "1": "sport", "2": "weather"}
    assert config["finetuning_task"] == "classify"
    lines = (output_dir / "predictions_test.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(9)]
    assert all(line.split("\t")[1] in WORDS for line in lines[1:])
    assert (output_dir / "README.md").exists()

    # The saved model evaluates again without a training split: its labels come from its config.
    again = tmp_path / "again"
    argv = ["--model_name_or_path", str(output_dir), "--validation_file", dev, "--do_eval"]
    assert cli_main(["classify", *job_args(spiece_model, again, *argv)]) == 0
    assert json.loads((again / "eval_results.json").read_text())["eval_accuracy"] == results["eval_accuracy"]


def test_regression_of_pairs_end_to_end(spiece_model, tmp_path):
    rows = [{"a": f"sentence {i}", "b": f"other {i % 5}", "score": (i % 5) + 0.5} for i in range(24)]
    train = write_table(tmp_path / "train.jsonl", rows)
    output_dir = tmp_path / "out"
    argv = ["--train_file", train, "--validation_file", train, "--test_file", train, "--do_train", "--do_eval"]
    argv += ["--do_predict", "--text_column", "a", "--text_pair_column", "b", "--label_column", "score"]
    argv += ["--max_steps", "3", "--per_device_train_batch_size", "8"]
    assert cli_main(["classify", *job_args(spiece_model, output_dir, *argv)]) == 0
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert {"eval_pearson", "eval_spearmanr"} <= set(results) and results["eval_samples"] == 24
    assert json.loads((output_dir / "config.json").read_text())["problem_type"] == "regression"
    predictions = [line.split("\t") for line in (output_dir / "predictions_test.tsv").read_text().splitlines()[1:]]
    assert len(predictions) == 24 and all(math.isfinite(float(score)) for _, score in predictions)
    assert "predict_pearson" in json.loads((output_dir / "predict_results.json").read_text())


@pytest.mark.slow  # an interrupted run resumed beside the whole run
def test_resumes_from_the_latest_checkpoint_as_if_never_stopped(spiece_model, tmp_path):
    """A run stopped after its checkpoint at step 3 (its folder holds only that checkpoint) and restarted with
    --resume_from_checkpoint latest ends with the weights of the run that was never stopped."""
    import shutil

    from safetensors.torch import load_file

    train = write_table(tmp_path / "train.csv", separable_rows(0, 48))
    argv = ["--train_file", train, "--do_train", "--max_steps", "6", "--per_device_train_batch_size", "8"]
    argv += ["--save_steps", "3", "--seed", "0"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"

    def args(output_dir, *extra):
        command = job_args(spiece_model, output_dir, *argv, *extra)
        command[command.index("--save_strategy") + 1] = "steps"
        return ["classify", *command]

    assert cli_main(args(whole)) == 0
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-3", resumed / "checkpoint-3")
    # A run that trained steps 1-3 again would save checkpoint-3 again, in place of this folder and its mark.
    (resumed / "checkpoint-3" / "mark").write_text("not written again")
    assert cli_main(args(resumed, "--resume_from_checkpoint", "latest")) == 0
    assert (resumed / "checkpoint-3" / "mark").exists() and (resumed / "checkpoint-6").is_dir()
    assert json.loads((resumed / "trainer_state.json").read_text())["global_step"] == 6
    expected, actual = load_file(whole / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[name], actual[name]) for name in expected)


@pytest.mark.distributed
def test_two_processes_predict_what_one_does(spiece_model, tmp_path):
    """torchrun, 2 CPU processes, uneven last batches: the same evaluation and the same prediction file, in order."""
    import os
    import sys

    repo_root = Path(__file__).resolve().parents[1]
    train = write_table(tmp_path / "train.csv", separable_rows(0, 24))
    test = write_table(tmp_path / "test.csv", separable_rows(2, 11))
    trained = tmp_path / "trained"
    first = ["--train_file", train, "--do_train", "--max_steps", "2", "--per_device_train_batch_size", "8"]
    assert cli_main(["classify", *job_args(spiece_model, trained, *first)]) == 0

    argv = ["--model_name_or_path", str(trained), "--validation_file", test, "--test_file", test]
    argv += ["--do_eval", "--do_predict", "--per_device_eval_batch_size", "3"]
    assert cli_main(["classify", *job_args(spiece_model, tmp_path / "one", *argv)]) == 0
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [str(repo_root / "examples" / "classify" / "run_classify.py")]
    command += job_args(spiece_model, tmp_path / "two", *argv)
    python_path = os.pathsep.join(filter(None, [str(repo_root), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": python_path, "OMP_NUM_THREADS": "1"}
    done = processes.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    one, two = ((tmp_path / run / "predictions_test.tsv").read_text() for run in ("one", "two"))
    assert two == one and len(one.splitlines()) == 12
    scores = [json.loads((tmp_path / run / "eval_results.json").read_text()) for run in ("one", "two")]
    assert scores[1]["eval_accuracy"] == scores[0]["eval_accuracy"] and scores[1]["eval_samples"] == 11


# ----------------------------------------------------------------------------------------------------------------------
# the script a user forks

# What a user who wants another head writes into their copy of albert_hf/scripts/classify.py.
OWN_HEAD = '''

class AlbertWithMlpHead(AlbertForSequenceClassification):
    """The pooled output through a two-layer perceptron instead of one linear layer."""

    def __init__(self, config):
        super().__init__(config)
        self.classifier = torch.nn.Sequential(
            torch.nn.Linear(config.hidden_size, 32), torch.nn.Tanh(), torch.nn.Linear(32, config.num_labels)
        )
        self.post_init()
'''


def forked_classify_script(folder: Path) -> Path:
    """A copy of the classify script outside the package, its model head changed as a user would change it."""
    source = (Path(__file__).parents[1] / "albert_hf" / "scripts" / "classify.py").read_text(encoding="utf-8")
    imports_end = source.index("\nARGUMENTS = ")
    edited = source[:imports_end] + "\nimport torch\n" + OWN_HEAD + source[imports_end:]
    assert "build_model(AlbertForSequenceClassification, " in edited
    edited = edited.replace("build_model(AlbertForSequenceClassification, ", "build_model(AlbertWithMlpHead, ")
    path = folder / "my_classify.py"
    path.write_text(edited, encoding="utf-8")
    return path


def run_script(script: Path, argv: list[str]) -> processes.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    command = [sys.executable, str(script), *argv]
    return processes.run(command, cwd=script.parent, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow  # a copied job script run in subprocesses
def test_a_copied_script_with_its_own_head_trains_and_gives_the_commands_errors(spiece_model, tmp_path):
    """What users fork scripts for: a copy of the classify script, run with python from another folder, with a
    two-layer head instead of the linear one, learns the separable table and saves the new head; a mistake in its
    options is the one line `albert-hf classify` gives."""
    script = forked_classify_script(tmp_path)
    train = write_table(tmp_path / "train.csv", separable_rows(0, 96))
    dev = write_table(tmp_path / "dev.csv", separable_rows(1, 30))
    output_dir = tmp_path / "out"
    argv = ["--train_file", train, "--validation_file", dev, "--do_train", "--do_eval", "--num_train_epochs", "20"]
    argv += ["--learning_rate", "1e-3", "--per_device_train_batch_size", "8", "--warmup_steps", "10", "--seed", "0"]
    argv = job_args(spiece_model, output_dir, *argv)
    argv[argv.index("--config_overrides") + 1] += ",classifier_dropout_prob=0.0"
    result = run_script(script, argv)
    assert result.returncode == 0, result.stderr[-3000:]

    results = json.loads((output_dir / "eval_results.json").read_text())
    # Three balanced classes: guessing gives accuracy 1/3 and a loss of ln 3 = 1.10; the new head learns well beyond
    # both (it separates two of the three topics in this budget).
    assert results["eval_accuracy"] > 0.5 and results["eval_loss"] < 0.7, results
    with safe_open(str(output_dir / "model.safetensors"), "pt") as weights:
        head = sorted(name for name in weights.keys() if name.startswith("classifier."))
    assert head == ["classifier.0.bias", "classifier.0.weight", "classifier.2.bias", "classifier.2.weight"]

    result = run_script(script, [*argv, "--learnig_rate", "1e-3"])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "albert-hf classify: error: unknown option --learnig_rate (did you mean --learning_rate?)"
    ]
