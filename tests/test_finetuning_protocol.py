"""The paper's fine-tuning protocol: one job over several seeds and the spread of their results (`--seeds`,
albert_hf/seed_runs.py), best-dev selection (the presets' `load_best_model_at_end` by the task's own metric), and a
task started from another task's fine-tuned model (`--init_from_task_model`).

References: the summary's figures against values computed by hand from the files written here; a resumed seed
against the same seed's uninterrupted run (bit for bit); the kept model against the checkpoint of the best logged
evaluation (bit for bit); the encoder of a task-model start against the saved source model's tensors.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import processes
from helpers.command_line import CLI_ENV
from helpers.data import REPO_ROOT
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from safetensors.torch import load_file
from transformers import TrainingArguments

from albert_hf.arguments import FineTuningArguments, ModelArguments, SquadArguments
from albert_hf.errors import UserError
from albert_hf.finetuning import parse_finetuning_args, select_by_task_metric
from albert_hf.job_setup import build_config, build_model
from albert_hf.metrics import task_metric
from albert_hf.metrics.glue import glue_metric
from albert_hf.seed_runs import SEED_RUN_NAME, publish_summary, summarize_seeds
from albert_hf.training.run_folder import LOCK_NAME

FINE_TUNING = (ModelArguments, FineTuningArguments, TrainingArguments)


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def quiet(output_dir: Path, spiece_model=None, tiny: bool = True) -> list[str]:
    """Options of a tiny job in seconds: the real 30k vocabulary (unless the model brings its tokenizer), one small
    layer (unless the model brings its config)."""
    tokenizer = ["--tokenizer_name_or_path", str(spiece_model)] if spiece_model else []
    overrides = ["--config_overrides", TINY_ONE_LAYER_OVERRIDES] if tiny else []
    return [
        *tokenizer,
        *overrides,
        *("--output_dir", str(output_dir)),
        *("--report_to", "none", "--disable_tqdm", "true", "--max_seq_length", "64"),
        *("--per_device_eval_batch_size", "16", "--use_cpu"),
    ]


@pytest.fixture
def one_thread():
    """One thread while a test compares weights bit for bit across runs: with more, the BLAS may use fewer threads on
    a busy machine than on an idle one, and a reduction summed in another order is not bit for bit the same."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def same_weights(first: Path, second: Path) -> bool:
    one, other = load_file(first), load_file(second)
    return one.keys() == other.keys() and all(torch.equal(one[name], other[name]) for name in one)


# --------------------------------------------------------------------------------------------------------------------
# The summary: its figures, from the seeds' files, against hand-computed values
# --------------------------------------------------------------------------------------------------------------------

# RTE dev results of five seeds, as their jobs write them.
ACCURACY = {0: 0.60, 1: 0.70, 2: 0.65, 3: 0.55, 4: 0.80}
F1 = {0: 0.50, 1: 0.90, 2: 0.70, 3: 0.60, 4: 0.85}


def write_seed_files(output_dir: Path, seed: int, accuracy: float, f1: float) -> Path:
    """What a GLUE job writes that the summary reads: results, the kept step, the log of evaluations, the config."""
    folder = output_dir / f"seed-{seed}"
    write_json(
        folder / "eval_results.json",
        {"eval_accuracy": accuracy, "eval_f1": f1, "eval_runtime": 1.5, "eval_samples": 277, "epoch": 3.0},
    )
    write_json(folder / "train_results.json", {"best_step": 100 * (seed + 1), "train_runtime": 60.0})
    log = [
        {"eval_accuracy": 0.5, "step": 400},
        {"eval_accuracy": accuracy - 0.05, "step": 800},  # the last step's evaluation
        {"train_runtime": 60.0, "step": 800},
        {"eval_accuracy": accuracy, "step": 800},  # the kept model evaluated after training: not the last step's
    ]
    write_json(folder / "trainer_state.json", {"global_step": 800, "log_history": log})
    write_json(folder / "config.json", {"model_type": "albert_hf", "finetuning_task": "rte"})
    (folder / "RTE.tsv").write_text(f"index\tprediction\n0\tentailment from seed {seed}\n", encoding="utf-8")
    (folder / "README.md").write_text("---\nlicense: apache-2.0\n---\n# seed\n\n## Files\n\n- `RTE.tsv`\n")
    return folder


def test_summary_figures_are_computed_from_the_seeds_files(tmp_path):
    for seed in ACCURACY:
        write_seed_files(tmp_path, seed, ACCURACY[seed], F1[seed])
    summary = summarize_seeds(str(tmp_path), [0, 1, 2, 3, 4])

    # By hand: accuracy 0.55 0.60 0.65 0.70 0.80 -> median 0.65 (seed 2), mean 3.30 / 5 = 0.66; squared deviations
    # 0.0036 + 0.0016 + 0.0001 + 0.0121 + 0.0196 = 0.0370, / 4 = 0.00925, sample std 0.0961769...; range 0.25.
    # F1 0.50 0.60 0.70 0.85 0.90 -> median 0.70, mean 0.71; 0.0441 + 0.0361 + 0.0001 + 0.0121 + 0.0196 = 0.1120,
    # / 4 = 0.028, std 0.1673320...; range 0.40.
    assert summary["metric"] == "accuracy" and summary["greater_is_better"] is True  # RTE's, from config.json
    assert (summary["median_seed"], summary["median_folder"]) == (2, "seed-2")
    accuracy, f1 = summary["statistics"]["accuracy"], summary["statistics"]["f1"]
    assert accuracy == pytest.approx(
        {"median": 0.65, "mean": 0.66, "std": 0.0961769203, "min": 0.55, "max": 0.80, "range": 0.25}, abs=1e-9
    )
    assert f1 == pytest.approx(
        {"median": 0.70, "mean": 0.71, "std": 0.1673320053, "min": 0.50, "max": 0.90, "range": 0.40}, abs=1e-9
    )
    assert set(summary["statistics"]) == {"accuracy", "f1", "last_step_accuracy"}  # no runtime, samples, epoch
    # The last step's evaluation (0.05 below each kept model's): median 0.60; the kept steps as train_results says.
    assert summary["statistics"]["last_step_accuracy"]["median"] == pytest.approx(0.60, abs=1e-9)
    assert [run["best_step"] for run in summary["runs"]] == [100, 200, 300, 400, 500]
    assert [run["metrics"]["accuracy"] for run in summary["runs"]] == [ACCURACY[seed] for seed in range(5)]

    # Four seeds: the median value is between the middle two (0.60 and 0.65); the median model is the lower one.
    even = summarize_seeds(str(tmp_path), [0, 1, 2, 3])
    assert even["statistics"]["accuracy"]["median"] == pytest.approx(0.625, abs=1e-9)
    assert even["median_seed"] == 0
    # Ranked by F1 instead (as --metric_for_best_model f1 says): 0.50 0.60 0.70 0.85 0.90 -> seed 2 still; by F1 of
    # seeds 1, 3, 4 (0.90, 0.60, 0.85) -> seed 4; lower is better -> the middle is the same one.
    assert summarize_seeds(str(tmp_path), [1, 3, 4], metric="eval_f1")["median_seed"] == 4
    assert summarize_seeds(str(tmp_path), [1, 3, 4], metric="f1", greater_is_better=False)["median_seed"] == 4
    assert summarize_seeds(str(tmp_path), [0, 1], metric="f1")["median_seed"] == 0  # 0.50 < 0.90: the lower one


def test_the_median_seed_gives_the_prediction_files_and_its_card_the_spread(tmp_path, caplog):
    for seed in ACCURACY:
        write_seed_files(tmp_path, seed, ACCURACY[seed], F1[seed])
    (tmp_path / "notes.tsv").write_text("mine\n")
    publish_summary(str(tmp_path), summarize_seeds(str(tmp_path), [0, 1, 2, 3, 4]))
    assert (tmp_path / "RTE.tsv").read_text() == (tmp_path / "seed-2" / "RTE.tsv").read_text()
    assert read_json(tmp_path / "seeds_summary.json")["prediction_files"] == ["RTE.tsv"]
    table = (tmp_path / "seeds_summary.md").read_text()
    assert "| **median** | 0.6500 | 0.7000 | | 0.6000 |" in table.replace("|  |", "| |")
    assert "| 2 (median) | 0.6500 | 0.7000 | 300 | 0.6000 |" in table
    card = (tmp_path / "seed-2" / "README.md").read_text()
    assert card.index("## Results over seeds") < card.index("## Files") and "| **standard deviation** | 0.0962" in card
    assert "Results over seeds" not in (tmp_path / "seed-0" / "README.md").read_text()

    # Published again (a rerun of the set) with the median elsewhere: the copy is the new median's, the card section
    # is replaced rather than repeated, and a file of the folder that no set wrote is never replaced.
    write_seed_files(tmp_path, 2, 0.50, 0.50)
    (tmp_path / "RTE.tsv").write_text("index\tprediction\n")  # as the last set wrote it
    (tmp_path / "seed-0" / "notes.tsv").write_text("seed 0's\n")
    write_seed_files(tmp_path, 0, 0.66, 0.66)
    (tmp_path / "seed-0" / "notes.tsv").write_text("seed 0's\n")
    with caplog.at_level("WARNING", logger="albert_hf"):
        publish_summary(str(tmp_path), summarize_seeds(str(tmp_path), [0, 1, 2, 3, 4]))
    assert read_json(tmp_path / "seeds_summary.json")["median_seed"] == 0  # 0.50 0.55 0.66 0.70 0.80
    assert (tmp_path / "RTE.tsv").read_text() == (tmp_path / "seed-0" / "RTE.tsv").read_text()
    assert (tmp_path / "notes.tsv").read_text() == "mine\n"
    assert "notes.tsv was not written by a set of seeds: left as it is" in caplog.text
    assert (tmp_path / "seed-0" / "README.md").read_text().count("## Results over seeds") == 1


# --------------------------------------------------------------------------------------------------------------------
# The runner: a half-finished set resumed
# --------------------------------------------------------------------------------------------------------------------


def mrpc_argv(shared_data: Path, spiece_model: Path, output_dir: Path, *extra: str) -> list[str]:
    return [
        *("--task_name", "mrpc", "--data_dir", str(shared_data / "glue" / "MRPC")),
        *("--do_train", "--do_eval", "--do_predict", "--max_train_samples", "32", "--max_eval_samples", "24"),
        *("--max_predict_samples", "6", "--max_steps", "6", "--save_strategy", "steps", "--save_steps", "3"),
        *("--learning_rate", "1e-3", "--per_device_train_batch_size", "8"),
        *quiet(output_dir, spiece_model),
        *extra,
    ]


def mark_started(folder: Path) -> None:
    """The record of a seed whose job was started and never returned."""
    record = read_json(folder / SEED_RUN_NAME)
    write_json(folder / SEED_RUN_NAME, {**record, "status": "started"})


def test_a_half_finished_set_skips_finished_seeds_and_resumes_the_others(
    shared_data, spiece_model, tmp_path, caplog, one_thread
):
    from albert_hf.scripts.glue import main

    output_dir, kept = tmp_path / "mrpc", tmp_path / "kept"
    assert main(mrpc_argv(shared_data, spiece_model, output_dir, "--seeds", "0,1,2")) == 0
    kept.mkdir()
    for seed in (1, 2):  # the uninterrupted runs of the seeds made half-finished below
        shutil.copy(output_dir / f"seed-{seed}" / "model.safetensors", kept / f"seed-{seed}.safetensors")
    finished_at = os.stat(output_dir / "seed-0" / "eval_results.json").st_mtime_ns

    # Seed 1 stopped after its checkpoint of step 3; seed 2 stopped while evaluating, its model saved and no complete
    # checkpoint left.
    seed_1, seed_2 = output_dir / "seed-1", output_dir / "seed-2"
    for path in seed_1.iterdir():
        if path.name not in ("checkpoint-3", SEED_RUN_NAME):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for path in seed_2.iterdir():
        if path.name.startswith("checkpoint-") or path.name.endswith((".json", ".tsv", ".md")):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    mark_started(seed_1)
    write_json(seed_2 / SEED_RUN_NAME, {**read_json(seed_1 / SEED_RUN_NAME), "seed": 2})
    assert (seed_2 / "model.safetensors").exists() and not (seed_2 / "eval_results.json").exists()

    with caplog.at_level("INFO", logger="albert_hf"):
        assert main(mrpc_argv(shared_data, spiece_model, output_dir, "--seeds", "0,1,2,3")) == 0
    assert os.stat(output_dir / "seed-0" / "eval_results.json").st_mtime_ns == finished_at, "seed 0 ran again"
    assert f"Resuming from {seed_1 / 'checkpoint-3'} (step 3)" in caplog.text
    assert f"--overwrite_output_dir: removing {seed_2 / 'model.safetensors'}" in caplog.text
    assert same_weights(kept / "seed-1.safetensors", seed_1 / "model.safetensors"), "the resume is not exact"
    assert same_weights(kept / "seed-2.safetensors", seed_2 / "model.safetensors")
    assert not same_weights(kept / "seed-1.safetensors", seed_2 / "model.safetensors")  # the seed matters

    summary = read_json(output_dir / "seeds_summary.json")
    seeds = [0, 1, 2, 3]
    accuracy = {seed: read_json(output_dir / f"seed-{seed}" / "eval_results.json")["eval_accuracy"] for seed in seeds}
    assert {run["seed"]: run["metrics"]["accuracy"] for run in summary["runs"]} == accuracy
    ordered = sorted(seeds, key=lambda seed: (accuracy[seed], seed))
    assert summary["median_seed"] == ordered[1]  # the lower middle of four
    middle = (accuracy[ordered[1]] + accuracy[ordered[2]]) / 2
    assert summary["statistics"]["accuracy"]["median"] == pytest.approx(middle, abs=1e-12)
    median_folder = output_dir / f"seed-{summary['median_seed']}"
    assert (output_dir / "MRPC.tsv").read_bytes() == (median_folder / "MRPC.tsv").read_bytes()
    assert all(read_json(output_dir / f"seed-{seed}" / SEED_RUN_NAME)["status"] == "finished" for seed in seeds)
    assert not list(output_dir.rglob(LOCK_NAME)), "every lock released"

    # Another learning rate into the same folder: refused before any work, naming the option.
    with pytest.raises(UserError, match=r"seed-0 holds seed 0 of a run with other options \(--learning_rate 0\.001"):
        main(mrpc_argv(shared_data, spiece_model, output_dir, "--seeds", "0,1,2,3", "--learning_rate", "2e-3"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "0,1", "--seed", "7"], r"--seed 7 and --seeds 0,1: each run takes its seed from --seeds"),
        (["--seeds", "0,1", "--resume_from_checkpoint", "latest"], r"resumes from its own newest complete checkpoint"),
        (["--seeds", "0,1", "--push_to_hub"], r"push the median seed's folder"),
        (["--seeds", "0,x"], r"--seeds '0,x': expected seeds as whole numbers >= 0"),
        (["--seeds", "3,1,3"], r"--seeds '3,1,3': seed 3 is given twice"),
    ],
)
def test_seed_options_refused_before_any_work(extra, message, spiece_model, tmp_path):
    from albert_hf.scripts.glue import main

    argv = ["--task_name", "rte", "--data_dir", str(tmp_path / "none"), "--do_train", "--do_eval"]
    with pytest.raises(UserError, match=message):
        main([*argv, *quiet(tmp_path / "out", spiece_model), *extra])
    assert not (tmp_path / "out").exists()


def test_a_seed_folder_is_taken_up_only_when_a_set_started_it(tmp_path):
    from albert_hf.seed_runs import FRESH, RESTART, SKIP, seed_start, write_seed_run

    folder, options = tmp_path / "seed-3", {"learning_rate": 3e-5, "task_name": "rte"}
    assert seed_start(str(folder), 3, options) == FRESH
    write_json(folder / "config.json", {"model_type": "albert_hf"})  # a model no set wrote: never overwritten
    with pytest.raises(UserError, match=r"seed-3 holds another run's files \(config\.json\), not a seed that"):
        seed_start(str(folder), 3, options)
    assert seed_start(str(folder), 3, options, overwrite=True) == FRESH  # the job removes them, as asked
    write_seed_run(str(folder), 3, options, "started")
    assert seed_start(str(folder), 3, options) == RESTART  # started by a set, no complete checkpoint: again
    write_seed_run(str(folder), 3, options, "finished")
    assert seed_start(str(folder), 3, options) == SKIP
    assert seed_start(str(folder), 3, options, overwrite=True) == RESTART
    with pytest.raises(UserError, match=r"--learning_rate 3e-05 then, 0\.0001 now"):
        seed_start(str(folder), 3, {**options, "learning_rate": 1e-4})


def test_seeds_without_evaluation_are_refused(spiece_model, tmp_path):
    from albert_hf.scripts.ner import main

    with pytest.raises(UserError, match=r"--seeds 0,1 compares the seeds' trained models .* pass --do_train and"):
        main(
            [
                "--do_train",
                "--train_file",
                str(tmp_path / "train.txt"),
                "--seeds",
                "0,1",
                *quiet(tmp_path / "out", spiece_model),
            ]
        )


# --------------------------------------------------------------------------------------------------------------------
# Best-dev selection
# --------------------------------------------------------------------------------------------------------------------


def write_rte_files(folder: Path) -> tuple[Path, Path]:
    """RTE-layout files on which the dev accuracy of a run that reads the training file in order rises, then falls:
    the second sentence of each pair starts with "yes" (entailment) or "no" (not entailment); the training file
    holds 128 pairs labelled by that rule, then the same 128 with their labels flipped, and the dev file 32 pairs
    labelled by the rule. A model learns the rule in the first half of the run, and unlearns it in the second."""
    words = "the a cat dog runs sleeps house tree river city red blue small large quickly slowly green old new happy"
    words = words.split()

    def rows(flipped: bool) -> list[str]:
        lines = []
        for i in range(128):
            key = "yes" if i % 2 == 0 else "no"
            first = " ".join(random.Random(i).sample(words, 5))
            second = f"{key} " + " ".join(random.Random(1000 + i).sample(words, 3))
            entailed = (key == "yes") != flipped
            lines.append(f"{first}\t{second}\t{'entailment' if entailed else 'not_entailment'}")
        return lines

    def write(path: Path, lines: list[str]) -> Path:
        header = "index\tsentence1\tsentence2\tlabel"
        path.write_text("\n".join([header, *(f"{i}\t{line}" for i, line in enumerate(lines))]) + "\n")
        return path

    folder.mkdir(parents=True, exist_ok=True)
    return write(folder / "train.tsv", rows(False) + rows(True)), write(folder / "dev.tsv", rows(False)[:32])


def test_best_dev_selection_keeps_the_checkpoint_of_the_best_logged_evaluation(spiece_model, tmp_path):
    from albert_hf.scripts.glue import main

    train, dev = write_rte_files(tmp_path / "data")
    output_dir = tmp_path / "rte"
    argv = [
        *("--task_name", "rte", "--train_file", str(train), "--validation_file", str(dev), "--do_train", "--do_eval"),
        *("--preset", "rte", "--max_steps", "32", "--eval_steps", "4", "--learning_rate", "1e-2"),
        *("--warmup_steps", "0", "--lr_scheduler_type", "constant", "--global_batch_size", "8"),
        *("--train_sampling_strategy", "sequential"),  # the file's order: the rule first, its contrary after
        *quiet(output_dir, spiece_model),
        # No dropout (the preset's RTE row has 0.1 inside the encoder): the rule is learned in fewer steps.
        *("--config_overrides", f"{TINY_ONE_LAYER_OVERRIDES},hidden_dropout_prob=0,attention_probs_dropout_prob=0"),
    ]
    assert main(argv) == 0

    state = read_json(output_dir / "trainer_state.json")
    logged = [(entry["step"], entry["eval_accuracy"]) for entry in state["log_history"] if "eval_accuracy" in entry]
    assert [step for step, _ in logged] == list(range(4, 33, 4))  # every 4 steps, the preset's metric
    best_step, best = max(logged, key=lambda item: (item[1], -item[0]))  # the first of the best
    assert logged[0][0] < best_step < logged[-1][0] and logged[-1][1] < best, f"no best inside the run: {logged}"

    results = read_json(output_dir / "train_results.json")
    assert (results["best_step"], results["best_eval_accuracy"], results["best_of_evaluations"]) == (best_step, best, 8)
    assert read_json(output_dir / "eval_results.json")["eval_accuracy"] == best  # the model evaluated is the best one
    assert same_weights(output_dir / f"checkpoint-{best_step}" / "model.safetensors", output_dir / "model.safetensors")
    card = (output_dir / "README.md").read_text()
    assert f"| model_kept | step {best_step}: the best eval_accuracy ({best:.4f}) of 8 evaluations" in card


# The metric of each preset's best-dev selection, as each task's own metric function names it.
SAMPLE = ([0, 1, 1, 0], [0, 1, 0, 0])


@pytest.mark.parametrize("preset", ["cola", "stsb", "sst2", "mnli", "qnli", "qqp", "rte", "mrpc", "wnli", "race"])
def test_each_preset_selects_the_best_dev_checkpoint_by_its_tasks_metric(preset, tmp_path):
    argv = ["--preset", preset, "--output_dir", str(tmp_path), "--use_cpu"]
    assert not parse_finetuning_args(FINE_TUNING, argv)[-1].load_best_model_at_end  # no --do_eval: the last step
    args = parse_finetuning_args(FINE_TUNING, [*argv, "--do_eval"])[-1]
    assert args.load_best_model_at_end and args.eval_strategy == "steps" and args.save_strategy == "steps"
    assert args.save_steps == args.eval_steps  # a checkpoint at each evaluation, so any kill resumes from the last
    moved = parse_finetuning_args(FINE_TUNING, [*argv, "--do_eval", "--eval_steps", "30"])[-1]
    assert moved.eval_steps == moved.save_steps == 30
    assert args.greater_is_better is True
    if preset == "race":
        assert args.metric_for_best_model == "accuracy" == task_metric("multiple_choice")
        return
    predictions, references = ([0.5, 1.0, 2.0, 4.0], [1.0, 1.5, 2.0, 3.5]) if preset == "stsb" else SAMPLE
    assert args.metric_for_best_model in glue_metric(preset, predictions, references)
    assert args.metric_for_best_model == task_metric(preset)
    assert args.eval_steps == (100 if preset in ("cola", "stsb", "rte", "mrpc", "wnli") else 1000)


def test_squad_presets_select_by_f1_and_a_run_that_does_not_evaluate_keeps_the_last_step(tmp_path):
    from albert_hf.metrics.squad import squad_v1_scores

    types = (ModelArguments, SquadArguments, TrainingArguments)
    argv = ["--preset", "squad2.0", "--do_eval", "--validation_file", "dev.json", "--output_dir", str(tmp_path)]
    args = parse_finetuning_args(types, argv, presets="squad")[-1]
    assert args.load_best_model_at_end and args.metric_for_best_model == "f1" == task_metric("squad")
    assert "f1" in squad_v1_scores({"q": "a"}, {"q": ["a"]})
    base = ["--preset", "rte", "--do_train", "--do_eval", "--output_dir", str(tmp_path), "--use_cpu"]
    for off in (["--save_strategy", "no"], ["--eval_strategy", "no"], ["--load_best_model_at_end", "false"]):
        args = parse_finetuning_args(FINE_TUNING, [*base, *off])[-1]
        assert not args.load_best_model_at_end, off
    args = parse_finetuning_args(FINE_TUNING, [*base, "--save_strategy", "no"])[-1]
    assert (args.eval_strategy, args.save_strategy) == ("no", "no")  # as without the preset
    args = parse_finetuning_args(FINE_TUNING, [*base, "--eval_steps", "30"])[-1]
    assert args.load_best_model_at_end and args.eval_steps == 30  # any grid: checkpoints are saved at each best
    config = tmp_path / "mine.yaml"  # --do_eval in a --config file counts as given
    config.write_text("preset: rte\ndo_eval: true\n")
    args = parse_finetuning_args(FINE_TUNING, ["--config", str(config), "--output_dir", str(tmp_path)])[-1]
    assert args.load_best_model_at_end


@pytest.mark.parametrize(
    ("task", "problem_type", "expected"),
    [
        ("ner", None, "f1"),
        ("squad", None, "f1"),
        ("classify", "regression", "pearson"),
        ("cola", None, "matthews_correlation"),
    ],
)
def test_load_best_model_at_end_without_a_metric_takes_the_tasks_metric(task, problem_type, expected, tmp_path):
    argv = ["--load_best_model_at_end", "--eval_strategy", "steps", "--save_strategy", "steps"]
    argv += ["--output_dir", str(tmp_path), "--use_cpu"]

    def trainer_of(args):
        model = SimpleNamespace(config=SimpleNamespace(finetuning_task=task, problem_type=problem_type))
        return SimpleNamespace(args=args, model=model, accelerator=SimpleNamespace(unwrap_model=lambda model: model))

    args = parse_finetuning_args(FINE_TUNING, argv)[-1]
    assert (args.metric_for_best_model, args.greater_is_better) == ("loss", False)  # Trainer's default
    select_by_task_metric(trainer_of(args))
    assert (args.metric_for_best_model, args.greater_is_better) == (expected, True)
    args = parse_finetuning_args(FINE_TUNING, [*argv, "--metric_for_best_model", "loss"])[-1]
    select_by_task_metric(trainer_of(args))
    assert args.metric_for_best_model == "loss"  # the user's choice stays


# --------------------------------------------------------------------------------------------------------------------
# A task started from another task's model
# --------------------------------------------------------------------------------------------------------------------

MNLI_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


@pytest.fixture(scope="module")
def mnli_model(tmp_path_factory, spiece_model):
    """A saved three-class sequence classifier with its tokenizer, its head set to 7 so that a loaded head shows."""
    from albert_hf import AlbertConfig
    from albert_hf.argument_parsing import parse_config_overrides
    from albert_hf.modeling import AlbertForSequenceClassification
    from albert_hf.tokenization import AlbertHFTokenizer

    folder = tmp_path_factory.mktemp("mnli-model")
    overrides = parse_config_overrides(TINY_ONE_LAYER_OVERRIDES)
    config = AlbertConfig.preset(
        "base-v2", **overrides, num_labels=3, id2label=MNLI_LABELS, label2id={v: k for k, v in MNLI_LABELS.items()}
    )
    torch.manual_seed(3)
    model = AlbertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.fill_(7.0)
        model.classifier.bias.fill_(7.0)
    model.save_pretrained(folder)
    AlbertHFTokenizer(vocab_file=str(spiece_model)).save_pretrained(folder)
    return folder


def encoder_and_head(weights: dict[str, torch.Tensor]) -> tuple[dict, dict]:
    encoder = {name: tensor for name, tensor in weights.items() if name.startswith("albert.")}
    return encoder, {name: tensor for name, tensor in weights.items() if not name.startswith("albert.")}


def test_rte_from_a_task_model_keeps_its_encoder_and_trains_a_new_head(shared_data, mnli_model, tmp_path):
    from albert_hf.scripts.glue import main

    output_dir = tmp_path / "rte"
    argv = [
        *("--task_name", "rte", "--data_dir", str(shared_data / "glue" / "RTE"), "--do_train", "--do_eval"),
        *("--init_from_task_model", str(mnli_model), "--max_train_samples", "8", "--max_eval_samples", "8"),
        # One step at learning rate 0: the weights the job started from are the ones it saves.
        *("--max_steps", "1", "--learning_rate", "0", "--save_strategy", "no"),
        *quiet(output_dir, tiny=False),  # the task model's config and tokenizer
    ]
    assert main(argv) == 0  # no --tokenizer_name_or_path: the task model's tokenizer
    source_encoder, source_head = encoder_and_head(load_file(mnli_model / "model.safetensors"))
    encoder, head = encoder_and_head(load_file(output_dir / "model.safetensors"))
    assert encoder.keys() == source_encoder.keys()
    assert all(torch.equal(encoder[name], source_encoder[name]) for name in encoder), "the encoder is the task model's"
    assert head["classifier.weight"].shape == (2, 32) and source_head["classifier.weight"].shape == (3, 32)
    assert head["classifier.weight"].abs().max() < 1 and torch.equal(head["classifier.bias"], torch.zeros(2))
    config = read_json(output_dir / "config.json")
    assert config["id2label"] == {"0": "entailment", "1": "not_entailment"} and config["finetuning_task"] == "rte"
    assert "fine-tuned from a local checkpoint (`mnli-model" in (output_dir / "README.md").read_text()


def test_a_head_that_would_fit_starts_fresh_too(mnli_model, tmp_path):
    from albert_hf.modeling import AlbertForSequenceClassification

    argv = ["--init_from_task_model", str(mnli_model), "--output_dir", str(tmp_path)]
    model_args, _, _ = parse_finetuning_args(FINE_TUNING, argv)
    assert model_args.model_name_or_path == str(mnli_model)
    labels = {0: "a", 1: "b", 2: "c"}  # another three-class task: MNLI's head has its size
    config = build_config(model_args, num_labels=3, id2label=labels, label2id={v: k for k, v in labels.items()})
    model = build_model(AlbertForSequenceClassification, model_args, config)
    source = load_file(mnli_model / "model.safetensors")
    weights = model.state_dict()
    assert all(torch.equal(weights[name], source[name]) for name in source if name.startswith("albert."))
    assert not torch.equal(weights["classifier.weight"], source["classifier.weight"])
    assert torch.equal(weights["classifier.bias"], torch.zeros(3))
    # --model_name_or_path of the same folder loads everything, the head included: the two options differ.
    plain = ModelArguments(model_name_or_path=str(mnli_model))
    assert torch.equal(
        build_model(AlbertForSequenceClassification, plain, config).classifier.bias, torch.full((3,), 7.0)
    )


def test_task_model_options_that_cannot_start_a_job(mnli_model, spiece_model, tmp_path):
    def parse(*argv):
        return parse_finetuning_args(FINE_TUNING, [*argv, "--output_dir", str(tmp_path / "out")])

    tokenizer_only = tmp_path / "tokenizer"
    shutil.copytree(mnli_model, tokenizer_only, ignore=shutil.ignore_patterns("*.safetensors"))
    no_config = tmp_path / "no-config"
    shutil.copytree(mnli_model, no_config, ignore=shutil.ignore_patterns("config.json"))
    seed_set = tmp_path / "set"
    shutil.copytree(mnli_model, seed_set / "seed-1")
    write_json(seed_set / "seeds_summary.json", {"median_folder": "seed-1"})
    bert = tmp_path / "bert"
    shutil.copytree(mnli_model, bert)
    write_json(bert / "config.json", {**read_json(mnli_model / "config.json"), "model_type": "bert"})
    cases = [
        (
            ("--init_from_task_model", str(mnli_model), "--model_name_or_path", str(mnli_model)),
            "the job starts from one",
        ),
        (("--init_from_task_model", str(spiece_model)), r"a file, not a model folder"),
        (("--init_from_task_model", str(tmp_path / "missing")), r"--init_from_task_model .*missing: no such folder"),
        (("--init_from_task_model", str(tokenizer_only)), r"Cannot load --init_from_task_model .*no weights file"),
        (("--init_from_task_model", str(no_config)), r"--init_from_task_model .*no-config: no config\.json"),
        (("--init_from_task_model", str(bert)), r"a 'bert' model, not an ALBERT"),
        (("--init_from_task_model", str(seed_set)), r"a set of seeds, .* the median seed's .*set/seed-1\."),
    ]
    for argv, message in cases:
        with pytest.raises(UserError, match=message):
            parse(*argv)


# --------------------------------------------------------------------------------------------------------------------
# A set stopped by a signal, and resumed
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.slow  # a set of three tiny GLUE runs in a subprocess, stopped in seed 1, then resumed here: about 40 s
def test_a_set_stopped_by_sigterm_in_a_seed_resumes_it_exactly(shared_data, spiece_model, tmp_path, one_thread):
    from albert_hf.scripts.glue import main

    output_dir, reference = tmp_path / "set", tmp_path / "reference"
    extra = ["--max_steps", "40", "--save_steps", "100", "--logging_steps", "1", "--max_train_samples", "64"]
    child = processes.start(
        [sys.executable, "-m", "albert_hf.cli", "glue", *mrpc_argv(shared_data, spiece_model, output_dir, *extra)]
        + ["--seeds", "0,1,2"],
        env={**CLI_ENV, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(torch.get_num_threads())},
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:  # SIGTERM at seed 1's first logged step
        in_seed_1 = False
        for line in child.stdout:
            lines.append(line)
            in_seed_1 = in_seed_1 or "Seed 1: to run" in line
            if in_seed_1 and "{'loss'" in line:
                os.kill(child.pid, signal.SIGTERM)
                in_seed_1 = False

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # Meanwhile, seed 1 uninterrupted, alone.
    assert main([*mrpc_argv(shared_data, spiece_model, reference, *extra), "--seed", "1"]) == 0
    reader.join(timeout=600)
    status, output = child.wait(timeout=60), "".join(lines)
    assert status == 128 + signal.SIGTERM, output[-3000:]
    stopped = re.search(r"stopped by SIGTERM at step (\d+): (\S+) written", output)
    assert stopped and stopped.group(2) == str(output_dir / "seed-1" / f"checkpoint-{stopped.group(1)}"), output[-3000:]
    assert read_json(output_dir / "seed-0" / SEED_RUN_NAME)["status"] == "finished"
    assert read_json(output_dir / "seed-1" / SEED_RUN_NAME)["status"] == "started"
    assert not (output_dir / "seed-2").exists() and not (output_dir / "seeds_summary.json").exists()

    assert main([*mrpc_argv(shared_data, spiece_model, output_dir, *extra), "--seeds", "0,1,2"]) == 0
    assert same_weights(reference / "model.safetensors", output_dir / "seed-1" / "model.safetensors")
    summary = read_json(output_dir / "seeds_summary.json")
    assert [run["seed"] for run in summary["runs"]] == [0, 1, 2] and not math.isnan(
        summary["statistics"]["accuracy"]["mean"]
    )
