"""GLUE: tsv/csv/json/Hub layouts, tokenization, leaderboard files, Table 14 presets, gold round trips, end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value
from helpers.data import is_full
from helpers.metric_references import reference_f1, reference_matthews, reference_pearson
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from transformers import EvalPrediction, TrainingArguments

from albert_hf.argument_parsing import parse_config_overrides
from albert_hf.arguments import ModelArguments
from albert_hf.data.glue_files import (
    GLUE_TASKS,
    from_hub_layout,
    get_glue_task,
    load_glue_files,
    load_glue_tsv,
    read_glue_tsv,
    submission_filename,
    write_glue_predictions,
)
from albert_hf.data.text_pairs import tokenize_text_pairs
from albert_hf.errors import UserError
from albert_hf.finetuning import FineTuningArguments, parse_finetuning_args
from albert_hf.metrics.glue import glue_compute_metrics, glue_metric, logits_to_predictions

LOCAL_TASKS = ("cola", "sst2", "mrpc", "stsb", "rte", "wnli")
# Official GLUE row counts (train, dev, test).
OFFICIAL_SIZES = {
    "cola": (8551, 1043, 1063),
    "sst2": (67349, 872, 1821),
    "mrpc": (3668, 408, 1725),
    "stsb": (5749, 1500, 1379),
    "rte": (2490, 277, 3000),
    "wnli": (635, 71, 146),
}


def glue_dir(shared_data, task_name):
    return str(shared_data / "glue" / GLUE_TASKS[task_name].folder)


def write_tsv(path, header, rows):
    lines = (["\t".join(header)] if header else []) + ["\t".join(map(str, row)) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


# ----------------------------------------------------------------------------------------------------------------------
# reading


@pytest.mark.parametrize("task_name", LOCAL_TASKS)
def test_real_tsv_files_parse_with_official_row_counts(shared_data, task_name):
    task = get_glue_task(task_name)
    data = load_glue_tsv(glue_dir(shared_data, task_name), task, ["train", "validation", "test"])
    sizes = tuple(len(data[split]) for split in ("train", "validation", "test"))
    if is_full(shared_data):
        assert sizes == OFFICIAL_SIZES[task_name]
    else:  # the excerpts: the first 300 / 200 / 20 rows (WNLI's dev has 71 in all)
        assert sizes == (300, min(200, OFFICIAL_SIZES[task_name][1]), 20)
    expected_texts = {"sentence1"} if len(task.tsv_text_columns) == 1 else {"sentence1", "sentence2"}
    assert set(data["validation"].column_names) == expected_texts | {"label", "idx"}
    assert set(data["test"].column_names) == expected_texts | {"idx"}
    assert all(text.strip() for text in data["validation"]["sentence1"])
    if task.is_regression:
        assert 0.0 <= min(data["validation"]["label"]) and max(data["validation"]["label"]) <= 5.0
    else:
        assert set(data["validation"]["label"]) == set(range(task.num_labels))


def test_cola_dev_labels_and_headerless_layout(shared_data):
    dev = load_glue_tsv(glue_dir(shared_data, "cola"), GLUE_TASKS["cola"], ["validation"])["validation"]
    # provenance: labels 1:721 0:322; the first 200 rows (the excerpt) hold 130 ones and 70 zeros
    assert np.bincount(dev["label"]).tolist() == ([322, 721] if is_full(shared_data) else [70, 130])
    assert dev[0]["sentence1"] == "The sailors rode the breeze clear of the rocks."


def test_mnli_layouts_matched_mismatched_test_and_ax(tmp_path):
    task = GLUE_TASKS["mnli"]
    train_header = [
        "index",
        "promptID",
        "pairID",
        "genre",
        "sentence1_binary_parse",
        "sentence2_binary_parse",
        "sentence1_parse",
        "sentence2_parse",
        "sentence1",
        "sentence2",
        "label1",
        "gold_label",
    ]
    dev_header = train_header[:-1] + ["label2", "label3", "label4", "label5", "gold_label"]
    parses = ["p", "p", "(ROOT)", "(ROOT)"]
    write_tsv(
        tmp_path / "train.tsv",
        train_header,
        [
            [0, 1, "1e", "fiction", *parses, "A man sleeps.", "A person rests.", "entailment", "entailment"],
            [1, 2, "2c", "slate", *parses, "It rains.", "It is dry.", "contradiction", "contradiction"],
        ],
    )
    write_tsv(
        tmp_path / "dev_matched.tsv",
        dev_header,
        [
            [
                0,
                5,
                "5n",
                "govt",
                *parses,
                "He left.",
                "He was sad.",
                "neutral",
                "neutral",
                "neutral",
                "entailment",
                "neutral",
                "neutral",
            ]
        ],
    )
    write_tsv(
        tmp_path / "dev_mismatched.tsv",
        dev_header,
        [
            [
                0,
                6,
                "6e",
                "letters",
                *parses,
                "Dear Sir,",
                "A letter.",
                "entailment",
                "entailment",
                "entailment",
                "entailment",
                "entailment",
                "entailment",
            ]
        ],
    )
    test_header = train_header[:-2]
    write_tsv(tmp_path / "test_matched.tsv", test_header, [[7, 8, "8", "govt", *parses, "Yes.", "No."]])
    write_tsv(tmp_path / "test_mismatched.tsv", test_header, [[9, 9, "9", "letters", *parses, "Hi.", "Bye."]])
    data = load_glue_tsv(str(tmp_path), task, ["train", *task.eval_splits, *task.test_splits])
    assert data["train"]["label"] == [task.label_names.index("entailment"), task.label_names.index("contradiction")]
    assert data["validation_matched"][0] == {
        "sentence1": "He left.",
        "sentence2": "He was sad.",
        "label": task.label_names.index("neutral"),
        "idx": 0,
    }
    assert data["validation_mismatched"][0]["sentence1"] == "Dear Sir,"
    assert data["test_matched"][0] == {"sentence1": "Yes.", "sentence2": "No.", "idx": 7}
    assert data["test_mismatched"]["idx"] == [9]

    ax = read_glue_tsv(
        write_tsv(
            tmp_path / "diagnostic.tsv",
            ["index", "sentence1", "sentence2"],
            [[0, "The cat sat.", "A cat sat."], [1, "x", "y"]],
        ),
        GLUE_TASKS["ax"],
        labelled=False,
    )
    assert ax == [
        {"sentence1": "The cat sat.", "sentence2": "A cat sat.", "idx": 0},
        {"sentence1": "x", "sentence2": "y", "idx": 1},
    ]
    assert submission_filename(task, "test_matched") == "MNLI-m.tsv"
    assert submission_filename(task, "test_mismatched") == "MNLI-mm.tsv"
    assert submission_filename(GLUE_TASKS["ax"], "ax") == "AX.tsv"


def test_qqp_and_qnli_layouts(tmp_path):
    qqp = GLUE_TASKS["qqp"]
    write_tsv(
        tmp_path / "train.tsv",
        ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
        [[133273, 213221, 213222, "How is the life?", "How is life?", 1]],
    )
    write_tsv(tmp_path / "test.tsv", ["id", "question1", "question2"], [[5, "Why?", "Why not?"]])
    data = load_glue_tsv(str(tmp_path), qqp, ["train", "test"])
    assert data["train"][0] == {"sentence1": "How is the life?", "sentence2": "How is life?", "label": 1, "idx": 0}
    assert data["test"][0] == {"sentence1": "Why?", "sentence2": "Why not?", "idx": 5}
    assert submission_filename(qqp, "test") == "QQP.tsv"

    qnli = GLUE_TASKS["qnli"]
    path = write_tsv(
        tmp_path / "dev.tsv",
        ["index", "question", "sentence", "label"],
        [[0, "What is it?", "It is a test.", "entailment"], [1, "Who?", "Nobody.", "not_entailment"]],
    )
    rows = read_glue_tsv(path, qnli, labelled=True)
    assert [row["label"] for row in rows] == [0, 1] and rows[1]["sentence1"] == "Who?"


def test_bad_rows_name_file_and_line(tmp_path):
    rte = GLUE_TASKS["rte"]
    header = ["index", "sentence1", "sentence2", "label"]
    short = write_tsv(tmp_path / "short.tsv", header, [[0, "a", "b", "entailment"], [1, "only two"]])
    with pytest.raises(ValueError, match=r"short\.tsv:3: expected 4 tab-separated columns, found 2"):
        read_glue_tsv(short, rte, labelled=True)
    unknown = write_tsv(tmp_path / "unknown.tsv", header, [[0, "a", "b", "maybe"]])
    with pytest.raises(ValueError, match=r"unknown\.tsv:2: label 'maybe' is not one of \['entailment'"):
        read_glue_tsv(unknown, rte, labelled=True)
    score = write_tsv(tmp_path / "score.tsv", ["index", "sentence1", "sentence2", "score"], [[0, "a", "b", "high"]])
    with pytest.raises(ValueError, match=r"score\.tsv:2: label 'high' is not a number"):
        read_glue_tsv(score, GLUE_TASKS["stsb"], labelled=True)
    with pytest.raises(ValueError, match=r"no column 'label'"):
        read_glue_tsv(write_tsv(tmp_path / "h.tsv", ["index", "sentence1", "sentence2"], [[0, "a", "b"]]), rte, True)
    with pytest.raises(FileNotFoundError, match="RTE: split 'train' needs"):
        load_glue_tsv(str(tmp_path), rte, ["train"])


def test_skip_malformed_rows_counts_and_keeps_the_rest(tmp_path, caplog):
    header = ["index", "sentence1", "sentence2", "label"]
    path = write_tsv(
        tmp_path / "dev.tsv", header, [[0, "a", "b", "1"], [1, "broken"], [2, "c", "d", "7"], [3, "e", "f", "0"]]
    )
    rows = read_glue_tsv(path, GLUE_TASKS["wnli"], labelled=True, skip_malformed_rows=True)
    assert [row["sentence1"] for row in rows] == ["a", "e"]
    assert "skipped 2 malformed rows (lines 3, 4)" in caplog.text


def test_csv_and_json_files_with_hub_columns(tmp_path):
    task = GLUE_TASKS["mnli"]
    csv_path = tmp_path / "train.csv"
    csv_path.write_text(
        "premise,hypothesis,label\nA dog runs.,An animal moves.,entailment\nIt is day.,It is night.,2\n"
    )
    json_path = tmp_path / "test.jsonl"
    json_path.write_text(json.dumps({"premise": "p", "hypothesis": "h", "idx": 41}) + "\n")
    data = load_glue_files(task, {"train": str(csv_path), "test_matched": str(json_path)})
    assert data["train"]["label"] == [0, 2]  # by name, or an id of the Hub order
    assert data["train"][0]["sentence2"] == "An animal moves." and data["train"]["idx"] == [0, 1]
    assert data["test_matched"][0] == {"sentence1": "p", "sentence2": "h", "idx": 41}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"premise": "p", "label": 0}) + "\n")
    with pytest.raises(ValueError, match=r"bad\.json: the train split lacks columns \['hypothesis'\]"):
        load_glue_files(task, {"train": str(bad)})


def test_hub_layout_is_renamed_and_test_labels_dropped():
    task = GLUE_TASKS["qnli"]
    features = Features(
        {
            "question": Value("string"),
            "sentence": Value("string"),
            "label": ClassLabel(names=["entailment", "not_entailment"]),
            "idx": Value("int32"),
        }
    )
    hub = DatasetDict(
        {
            "validation": Dataset.from_dict(
                {"question": ["Q?"], "sentence": ["S."], "label": [1], "idx": [3]}, features
            ),
            "test": Dataset.from_dict({"question": ["T?"], "sentence": ["U."], "label": [-1], "idx": [0]}, features),
        }
    )
    data = from_hub_layout(hub, task, ["validation", "test"], source="nyu-mll/glue")
    assert data["validation"][0] == {"sentence1": "Q?", "sentence2": "S.", "label": 1, "idx": 3}
    assert "label" not in data["test"].column_names
    with pytest.raises(ValueError, match=r"has no split \['train'\]"):
        from_hub_layout(hub, task, ["train"], source="nyu-mll/glue")


# ----------------------------------------------------------------------------------------------------------------------
# gold round trip: gold labels through the metric give the perfect score on the real dev sets


@pytest.mark.parametrize("task_name", LOCAL_TASKS)
def test_gold_labels_give_the_perfect_score_on_real_dev(shared_data, task_name):
    task = GLUE_TASKS[task_name]
    dev = load_glue_tsv(glue_dir(shared_data, task_name), task, ["validation"])["validation"]
    labels = np.asarray(dev["label"])
    # What the model would output if it were always right: the score itself, or a one-hot row of logits.
    logits = labels[:, None].astype(np.float32) if task.is_regression else np.eye(task.num_labels)[labels]
    metrics = glue_compute_metrics(task_name)(EvalPrediction(logits, labels))
    assert metrics and all(value == pytest.approx(1.0) for value in metrics.values()), metrics


def average_ranks(values) -> np.ndarray:
    """Ranks with ties given their mean rank (STS-B gold scores repeat), as Spearman's rho defines them."""
    values = np.asarray(values)
    ranks = np.empty(len(values))
    ranks[np.argsort(values, kind="stable")] = np.arange(len(values))
    for value in np.unique(values):
        ranks[values == value] = ranks[values == value].mean()
    return ranks


@pytest.mark.parametrize("task_name", LOCAL_TASKS)
def test_wrong_predictions_on_real_dev_score_as_the_formulas_say(shared_data, task_name):
    """About a third of the real dev labels made wrong (STS-B: gold plus noise): the metric from the logits equals the
    textbook formulas of tests/test_metrics.py, computed without scikit-learn or scipy."""
    task = GLUE_TASKS[task_name]
    dev = load_glue_tsv(glue_dir(shared_data, task_name), task, ["validation"])["validation"]
    labels = np.asarray(dev["label"])
    rng = np.random.default_rng(0)
    if task.is_regression:
        predicted = labels + rng.normal(0.0, 1.5, len(labels))
        logits = predicted[:, None].astype(np.float32)
        predicted = logits[:, 0].astype(np.float64)
    else:
        wrong = rng.random(len(labels)) < 0.35
        predicted = np.where(wrong, (labels + 1) % task.num_labels, labels)
        logits = np.eye(task.num_labels)[predicted] + rng.uniform(0.0, 0.5, (len(labels), task.num_labels))
    # The metric itself (the `evaluate` module stores STS-B scores through Arrow as float32, ~1e-9 off: its equality
    # with this function is tested in test_metric_modules.py).
    metrics = glue_metric(task_name, logits_to_predictions(task_name, logits), labels)
    expected = {"accuracy": float(np.mean(predicted == labels))}
    if task_name == "cola":
        expected = {"matthews_correlation": reference_matthews(labels, predicted)}
    elif task_name == "mrpc":
        expected["f1"] = reference_f1(labels, predicted)
    elif task_name == "stsb":
        expected = {
            "pearson": reference_pearson(predicted, labels),
            "spearmanr": reference_pearson(average_ranks(predicted), average_ranks(labels)),
        }
    assert metrics == pytest.approx(expected, abs=1e-12)
    assert all(value < 0.9 for value in metrics.values()), metrics  # the predictions are really wrong


# ----------------------------------------------------------------------------------------------------------------------
# tokenization and prediction files


def test_tokenize_pairs_with_segments_and_count_truncation(tokenizer):
    dataset = Dataset.from_list(
        [
            {"sentence1": "A short one.", "sentence2": "Another.", "label": 1, "idx": 0},
            {"sentence1": "word " * 40, "sentence2": "tail", "label": 0, "idx": 1},
        ]
    )
    encoded, num_truncated = tokenize_text_pairs(dataset, tokenizer, max_seq_length=16)
    assert num_truncated == 1
    assert set(encoded.column_names) == {"input_ids", "token_type_ids", "attention_mask", "label", "idx"}
    first = encoded[0]
    sep = first["input_ids"].index(tokenizer.sep_token_id)
    assert first["input_ids"][0] == tokenizer.cls_token_id and first["input_ids"][-1] == tokenizer.sep_token_id
    assert first["token_type_ids"] == [0] * (sep + 1) + [1] * (len(first["input_ids"]) - sep - 1)
    assert len(encoded[1]["input_ids"]) == 16  # no padding here: the collator pads per batch
    assert len(first["input_ids"]) < 16


def test_leaderboard_prediction_files(tmp_path):
    rte = tmp_path / "RTE.tsv"
    write_glue_predictions(str(rte), GLUE_TASKS["rte"], [0, 1, 2], np.array([1, 0, 0]))
    assert rte.read_text() == "index\tprediction\n0\tnot_entailment\n1\tentailment\n2\tentailment\n"
    stsb = tmp_path / "STS-B.tsv"
    write_glue_predictions(str(stsb), GLUE_TASKS["stsb"], [0, 1], np.array([4.12345, 0.5]))
    assert stsb.read_text() == "index\tprediction\n0\t4.123\n1\t0.500\n"
    with pytest.raises(ValueError, match="2 predictions for 3 test examples"):
        write_glue_predictions(str(rte), GLUE_TASKS["rte"], [0, 1, 2], [0, 1])


# ----------------------------------------------------------------------------------------------------------------------
# Table 14 presets


def preset_args(tmp_path, *options: str):
    argv = [*options, "--output_dir", str(tmp_path), "--use_cpu"]
    return parse_finetuning_args((ModelArguments, FineTuningArguments, TrainingArguments), argv)


def test_paper_preset_fills_defaults_and_keeps_explicit_flags(tmp_path):
    model_args, data_args, training_args = preset_args(
        tmp_path,
        *("--preset", "RTE", "--max_steps", "400", "--gradient_accumulation_steps", "2"),
        *("--config_overrides", "classifier_dropout_prob=0.3"),
    )
    # Table 14, RTE: lr 3e-5, batch 32, 800 steps, 200 warm-up, length 512, dropout 0.1 inside and in the classifier.
    assert (training_args.learning_rate, training_args.warmup_steps) == (3e-5, 200)
    assert training_args.per_device_train_batch_size == 16  # 32 = 16 x 2 accumulation steps x 1 process
    assert training_args.max_steps == 400  # given explicitly: kept (at least the warm-up, which fewer would refuse)
    assert data_args.max_seq_length == 512
    assert parse_config_overrides(model_args.config_overrides) == {
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout_prob": 0.3,  # given
    }


def test_paper_preset_keeps_flags_given_with_their_default_value(tmp_path):
    """`--preset rte --per_device_train_batch_size 8`: 8 is TrainingArguments' default, but the user typed it."""
    argv = ["--preset", "rte", "--per_device_train_batch_size", "8", "--max_seq_length", "128"]
    _, data_args, training_args = preset_args(tmp_path, *argv)
    assert training_args.per_device_train_batch_size == 8 and data_args.max_seq_length == 128
    assert training_args.learning_rate == 3e-5  # not given: RTE's row


def test_paper_preset_errors(tmp_path):
    with pytest.raises(UserError, match=r"--preset 'squad': .*choose one of \['cola'"):
        preset_args(tmp_path, "--preset", "squad")
    with pytest.raises(UserError, match="--global_batch_size 16 does not split over 1 processes x 3"):
        preset_args(tmp_path, "--preset", "cola", "--gradient_accumulation_steps", "3")
    model_args, _, training_args = preset_args(tmp_path)
    assert model_args.config_overrides is None and training_args.per_device_train_batch_size == 8


# ----------------------------------------------------------------------------------------------------------------------
# end to end


def common_args(spiece_model, output_dir):
    return [
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
        "--per_device_eval_batch_size",
        "16",
        "--max_seq_length",
        "64",
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
    ]


def test_run_glue_mrpc_end_to_end_through_the_cli(shared_data, spiece_model, tmp_path):
    from albert_hf.cli import main as cli_main

    output_dir = tmp_path / "mrpc"
    argv = [
        "glue",
        "--task_name",
        "mrpc",
        "--data_dir",
        glue_dir(shared_data, "mrpc"),
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--max_train_samples",
        "32",
        "--max_eval_samples",
        "24",
        "--max_predict_samples",
        "10",
        "--train_sampling_strategy",
        "group_by_length",
        *common_args(spiece_model, output_dir),
    ]
    assert cli_main(argv) == 0
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["eval_samples"] == 24 and 0.0 <= results["eval_accuracy"] <= 1.0 and "eval_f1" in results
    lines = (output_dir / "MRPC.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 11
    assert all(line.split("\t")[1] in ("0", "1") for line in lines[1:])
    config = json.loads((output_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "0", "1": "1"}


def test_run_glue_mnli_matched_mismatched_and_ax(tmp_path, spiece_model):
    from albert_hf.scripts.glue import main

    data_dir = tmp_path / "MNLI"
    data_dir.mkdir()
    header = ["index", "sentence1", "sentence2", "gold_label"]  # the loader reads columns by header name
    labels = ["entailment", "neutral", "contradiction"]
    rows = [[i, f"premise number {i}", f"hypothesis {i}", labels[i % 3]] for i in range(12)]
    for name in ("train", "dev_matched", "dev_mismatched"):
        write_tsv(data_dir / f"{name}.tsv", header, rows)
    for name in ("test_matched", "test_mismatched"):
        write_tsv(data_dir / f"{name}.tsv", ["index", "sentence1", "sentence2"], [row[:3] for row in rows[:5]])
    ax_file = write_tsv(tmp_path / "diagnostic.tsv", ["index", "sentence1", "sentence2"], [row[:3] for row in rows[:7]])
    output_dir = tmp_path / "out"
    argv = [
        "--task_name",
        "mnli",
        "--data_dir",
        str(data_dir),
        "--ax_file",
        ax_file,
        "--do_train",
        "--do_eval",
        "--do_predict",
        *common_args(spiece_model, output_dir),
    ]
    assert main(argv) == 0
    assert "eval_accuracy" in json.loads((output_dir / "eval_results.json").read_text())
    assert "eval_mismatched_accuracy" in json.loads((output_dir / "eval_mismatched_results.json").read_text())
    for name, count in (("MNLI-m.tsv", 5), ("MNLI-mm.tsv", 5), ("AX.tsv", 7)):
        lines = (output_dir / name).read_text().splitlines()
        assert len(lines) == count + 1 and all(line.split("\t")[1] in labels for line in lines[1:])


def test_run_glue_stsb_regression(shared_data, spiece_model, tmp_path):
    from albert_hf.scripts.glue import main

    output_dir = tmp_path / "stsb"
    argv = [
        "--task_name",
        "stsb",
        "--data_dir",
        glue_dir(shared_data, "stsb"),
        "--do_train",
        "--do_eval",
        "--max_train_samples",
        "32",
        "--max_eval_samples",
        "32",
        *common_args(spiece_model, output_dir),
    ]
    assert main(argv) == 0
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert {"eval_pearson", "eval_spearmanr"} <= set(results)
    assert json.loads((output_dir / "config.json").read_text())["problem_type"] == "regression"


def test_file_arguments_choose_splits(tmp_path):
    from albert_hf.arguments import GlueArguments
    from albert_hf.scripts.glue import load_glue_splits

    task = GLUE_TASKS["mnli"]
    dev = tmp_path / "dev.jsonl"
    dev.write_text(json.dumps({"premise": "p", "hypothesis": "h", "label": "neutral"}) + "\n")
    data_args = FineTuningArguments(validation_file=str(dev))
    glue_args = GlueArguments(task_name="mnli")
    # One evaluation file: MNLI's matched set; the mismatched one needs --data_dir.
    data = load_glue_splits(task, data_args, glue_args, ["validation_matched", "validation_mismatched"])
    assert list(data) == ["validation_matched"] and data["validation_matched"]["label"] == [1]
    with pytest.raises(ValueError, match=r"no file for the \['train'\] split"):
        load_glue_splits(task, data_args, glue_args, ["train", "validation_matched"])


def _group_by_length_arguments(tmp_path) -> TrainingArguments:
    """Evaluation batches of 4 on the CPU, training length-grouped: what transformers also applies to evaluation."""
    return TrainingArguments(
        output_dir=str(tmp_path),
        per_device_eval_batch_size=4,
        report_to="none",
        train_sampling_strategy="group_by_length",
        use_cpu=True,
    )


def _tiny_classifier(num_labels: int):
    import torch

    from albert_hf.configuration import AlbertConfig
    from albert_hf.modeling import AlbertForSequenceClassification

    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=64, embedding_size=8, hidden_size=16, num_attention_heads=2, intermediate_size=16,
        num_hidden_layers=1, num_labels=num_labels,
    )  # fmt: skip
    return AlbertForSequenceClassification(config)


def test_evaluation_keeps_dataset_order_under_group_by_length(tmp_path):
    """transformers also length-groups (and shuffles) evaluation with group_by_length; prediction files need order."""
    from albert_hf.training.trainer import AlbertTrainer

    lengths = [3, 9, 2, 7, 5, 8, 4, 6, 10, 1] * 3
    dataset = Dataset.from_list([{"input_ids": [i] * n, "label": 0} for i, n in enumerate(lengths)])
    args = _group_by_length_arguments(tmp_path)
    trainer = AlbertTrainer(model=_tiny_classifier(2), args=args, data_collator=lambda rows: rows)
    order = [row["input_ids"][0] for batch in trainer.get_eval_dataloader(dataset) for row in batch]
    assert order == list(range(len(lengths)))


def test_predictions_line_up_with_their_examples_under_group_by_length(tmp_path):
    """`predict` (the leaderboard files' path) returns row i for example i; a plain Trainer with the same arguments
    length-groups the rows, which is what the fine-tuning Trainer prevents."""
    import torch
    from transformers import Trainer

    from albert_hf.training.trainer import AlbertTrainer

    lengths = [3, 9, 2, 7, 5, 8, 4, 6, 10, 1] * 2
    # Each example's label is its index, and its tokens make its logits its own.
    dataset = Dataset.from_list(
        [{"input_ids": [(5 * i + j) % 60 + 4 for j in range(n)], "label": i} for i, n in enumerate(lengths)]
    )
    args = _group_by_length_arguments(tmp_path)
    model = _tiny_classifier(len(lengths)).eval()
    collator = _pad
    output = AlbertTrainer(model=model, args=args, data_collator=collator).predict(dataset)
    assert output.label_ids.tolist() == list(range(len(lengths)))
    with torch.no_grad():  # each example alone, without padding: the row predict returned for it
        alone = [model(input_ids=torch.tensor([row["input_ids"]])).logits[0].numpy() for row in dataset]
    np.testing.assert_allclose(output.predictions, np.stack(alone), rtol=0, atol=1e-5)
    assert args.train_sampling_strategy == "group_by_length"  # restored after the loader was built
    plain = Trainer(model=model, args=args, data_collator=collator).predict(dataset)
    assert plain.label_ids.tolist() != list(range(len(lengths)))


def _pad(rows: list[dict]) -> dict:
    """Right-padding with 0 and an attention mask: the batch each example shares with others of other lengths."""
    import torch

    width = max(len(row["input_ids"]) for row in rows)
    return {
        "input_ids": torch.tensor([row["input_ids"] + [0] * (width - len(row["input_ids"])) for row in rows]),
        "attention_mask": torch.tensor(
            [[1] * len(row["input_ids"]) + [0] * (width - len(row["input_ids"])) for row in rows]
        ),
        "labels": torch.tensor([row["label"] for row in rows]),
    }
