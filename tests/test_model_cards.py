"""The model cards of real runs say what happened: each field is checked against the run's own records
(training_args.bin, trainer_state.json, eval_results.json, the folder's files), not against the card code's inputs.

One chain of tiny runs: the quickstart's smoke recipe (LAMB, ALBERT's schedule), a GLUE job and a classify job that
both start from its output folder (a local start, not a Hub id)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
from helpers.data import FIXTURES
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from huggingface_hub import ModelCard

# The optimizer class each option of the runs builds (`--optim` of TrainingArguments, `--optimizer` of pretraining).
OPTIMIZER_CLASSES = {"lamb": "Lamb", "adamw_torch": "AdamW", "adamw_torch_fused": "AdamW"}


def card_rows(card: ModelCard) -> dict[str, str]:
    """The `| name | value |` rows of the card's tables."""
    rows = {}
    for line in card.text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2:
            rows[cells[0]] = cells[1]
    return rows


def listed_files(card: ModelCard) -> set[str]:
    files = card.text.split("## Files", 1)[1].split("##", 1)[0]
    return {line.strip()[3:-1] for line in files.splitlines() if line.strip().startswith("- `")}


def run_records(folder: Path) -> dict:
    args = torch.load(folder / "training_args.bin", weights_only=False)
    state = json.loads((folder / "trainer_state.json").read_text())
    results = json.loads((folder / "eval_results.json").read_text())
    return {"args": args, "state": state, "results": results}


def check_card_against_records(folder: Path, schedule: str) -> tuple[ModelCard, dict[str, str]]:
    """The checks every card passes: recipe, results and files as the run's records have them."""
    card = ModelCard.load(folder / "README.md")
    rows, records = card_rows(card), run_records(folder)
    args, state = records["args"], records["state"]
    chosen = getattr(args, "optimizer", None) or str(getattr(args.optim, "value", args.optim))
    assert rows["optimizer"] == OPTIMIZER_CLASSES[chosen]
    assert float(rows["learning_rate"]) == args.learning_rate
    assert rows["global_train_batch_size"] == str(
        args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
    )
    assert rows["steps_trained"] == str(state["global_step"])
    warmup = args.get_warmup_steps(state["max_steps"])
    assert rows["lr_schedule"].startswith(
        f"{schedule} (num_warmup_steps={warmup}, num_training_steps={state['max_steps']}"
    )
    metrics = {key.removeprefix("eval_"): value for key, value in records["results"].items()}
    metrics = {key: value for key, value in metrics.items() if key not in ("runtime", "samples", "epoch")}
    metrics = {key: value for key, value in metrics.items() if not key.endswith("per_second")}
    assert metrics and {name: rows.get(name) for name in metrics} == {
        name: f"{value:.4f}" for name, value in metrics.items()
    }
    assert "No evaluation results were recorded" not in card.text
    present = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
    # The job's lock (held until its command ends: a run in process keeps it) and the record of the files the job
    # wrote are never files of the model.
    private = {"_albert_hf.lock", "_albert_hf.files.json"}
    assert listed_files(card) == present - private and not any(name in card.text for name in private)
    return card, rows


@pytest.fixture(scope="module")
def quickstart_folder(tmp_path_factory) -> Path:
    from albert_hf.scripts.quickstart import main as quickstart_main

    folder = tmp_path_factory.mktemp("runs") / "quickstart-output"
    assert quickstart_main(["--fast", "--output_dir", str(folder), "--disable_tqdm", "true"]) == 0
    return folder


def finetuning_args(start: Path, output_dir: Path) -> list[str]:
    return [
        *["--model_name_or_path", str(start), "--output_dir", str(output_dir), "--report_to", "none"],
        *["--do_train", "--do_eval", "--max_steps", "3", "--per_device_train_batch_size", "4"],
        *["--gradient_accumulation_steps", "2", "--warmup_steps", "1", "--learning_rate", "2e-4"],
        *["--max_seq_length", "64", "--save_strategy", "no", "--disable_tqdm", "true", "--use_cpu", "true"],
    ]


def test_quickstart_card_names_lamb_the_albert_schedule_its_results_and_curves(quickstart_folder):
    card, rows = check_card_against_records(quickstart_folder, "albert_polynomial_decay_schedule")
    args = run_records(quickstart_folder)["args"]
    assert args.optimizer == "lamb" and rows["optimizer"] == "Lamb"  # not --optim's adamw_torch_fused
    assert str(getattr(args.optim, "value", args.optim)) not in card.text
    assert "learning_curves.png" in listed_files(card)
    assert card.data.base_model is None


def test_glue_card_from_a_local_start_names_no_base_model_id(quickstart_folder, tmp_path):
    from albert_hf.cli import main as cli_main

    output_dir = tmp_path / "mrpc"
    argv = ["glue", "--task_name", "mrpc", "--data_dir", str(FIXTURES / "glue" / "MRPC")]
    argv += ["--max_train_samples", "16", "--max_eval_samples", "8", *finetuning_args(quickstart_folder, output_dir)]
    assert cli_main(argv) == 0
    card, rows = check_card_against_records(output_dir, "linear_schedule_with_warmup")
    assert card.data.base_model is None and card.data.datasets == ["nyu-mll/glue"]
    assert "fine-tuned from a local checkpoint (`quickstart-output`, not on the Hub)" in card.text
    assert str(quickstart_folder.parent) not in card.text
    results = run_records(output_dir)["results"]
    reported = {result.metric_type: result.metric_value for result in card.data.eval_results}
    assert reported["accuracy"] == round(results["eval_accuracy"], 4)


def test_classify_card_names_its_tables_without_their_folders(quickstart_folder, tmp_path):
    from albert_hf.cli import main as cli_main

    data = tmp_path / "data"
    data.mkdir()
    for split, count in (("train", 16), ("dev", 8)):
        with open(data / f"{split}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["review", "stars"])
            writer.writerows([f"review number {i} of the {split} table", ("good", "bad")[i % 2]] for i in range(count))
    output_dir = tmp_path / "out"
    argv = ["classify", "--train_file", str(data / "train.csv"), "--validation_file", str(data / "dev.csv")]
    argv += ["--text_column", "review", "--label_column", "stars", *finetuning_args(quickstart_folder, output_dir)]
    assert cli_main(argv) == 0
    card, rows = check_card_against_records(output_dir, "linear_schedule_with_warmup")
    assert card.data.base_model is None and card.data.datasets is None and card.data.eval_results is None
    assert "on train.csv, dev.csv." in card.text and str(data) not in card.text
    assert TINY_ONE_LAYER_OVERRIDES  # the tiny model of these runs is the quickstart's own
