"""Finished work is never overwritten: every command that writes a folder goes through one guard
(`albert_hf.training.run_folder.open_output_folder`), and `--resume_from_checkpoint latest` over a finished model without a
checkpoint is refused instead of training from step 0 over it.

Each refusal is checked through the real `albert-hf` command line (one error line, exit status 2) and by the bytes of
the folder's files, which must be those written before the command ran.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.command_line import assert_one_line_error, run_cli
from helpers.data import FIXTURES
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.training.run_folder import OutputFolderError, check_resume_target

SPIECE = FIXTURES / "spiece" / "albert-30k-clean.model"
CORPUS = FIXTURES / "corpus" / "botchan.txt"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.is_file()}


@pytest.fixture(scope="module")
def finished_model(tmp_path_factory) -> Path:
    """A finished run's folder: a tiny model saved with the 30k tokenizer, and no checkpoint (as the quickstart
    leaves it)."""
    from albert_hf import AlbertConfig, AlbertForPreTraining, AlbertHFTokenizer
    from albert_hf.argument_parsing import parse_config_overrides

    folder = tmp_path_factory.mktemp("finished")
    config = AlbertConfig.preset("base-v2", **parse_config_overrides(TINY_ONE_LAYER_OVERRIDES))
    AlbertForPreTraining(config).save_pretrained(folder)
    AlbertHFTokenizer(vocab_file=str(SPIECE)).save_pretrained(folder)
    return folder


def copy_of(folder: Path, target: Path) -> Path:
    target.mkdir()
    for path in folder.iterdir():
        (target / path.name).write_bytes(path.read_bytes())
    return target


# --------------------------------------------------------------------------------------------------------------------
# --resume_from_checkpoint latest over a finished model
# --------------------------------------------------------------------------------------------------------------------


def test_latest_without_a_checkpoint_over_a_model_is_refused_naming_what_is_there(tmp_path):
    folder = tmp_path / "done"
    folder.mkdir()
    import torch
    from safetensors.torch import save_file

    (folder / "config.json").write_text("{}")
    save_file({"weight": torch.zeros(2)}, str(folder / "model.safetensors"))  # readable: a finished model
    (folder / "checkpoint-5").mkdir()  # incomplete (no trainer_state.json): nothing to resume from
    for value in ("latest", "auto", True):
        with pytest.raises(
            OutputFolderError,
            match=r"holds a finished model \(config.json, model.safetensors\) and no complete checkpoint to resume "
            r"from \(checkpoint-5 is damaged \(.*checkpoint-5/trainer_state.json is missing",
        ):
            check_resume_target(str(folder), value)
    check_resume_target(str(folder), str(folder / "checkpoint-5"))  # a path: resumption itself names its problem
    check_resume_target(str(tmp_path / "fresh"), "latest")  # nothing there: `latest` starts the run


def test_cli_latest_over_a_finished_model_is_refused_and_the_model_kept(finished_model, tmp_path):
    folder = copy_of(finished_model, tmp_path / "done")
    before = snapshot(folder)
    result = run_cli(
        [
            "pretrain",
            "--train_files",
            str(CORPUS),
            "--tokenizer_name_or_path",
            str(SPIECE),
            "--config_overrides",
            TINY_ONE_LAYER_OVERRIDES,
            "--output_dir",
            str(folder),
            "--resume_from_checkpoint",
            "latest",
            "--report_to",
            "none",
        ]
    )
    assert_one_line_error(
        result,
        "pretrain",
        f"--resume_from_checkpoint latest: --output_dir {folder} holds a finished model (config.json, "
        "model.safetensors) and no complete checkpoint",
        "another --output_dir",
        "--overwrite_output_dir",
    )
    assert snapshot(folder) == before


# --------------------------------------------------------------------------------------------------------------------
# train-tokenizer and export: the same guard
# --------------------------------------------------------------------------------------------------------------------


def tokenizer_argv(folder: Path, *extra: str) -> list[str]:
    return ["train-tokenizer", str(CORPUS), "--output_dir", str(folder), "--vocab_size", "300", "--quiet", *extra]


@pytest.mark.slow
def test_cli_train_tokenizer_into_a_model_folder_is_refused_unless_overwrite(finished_model, tmp_path):
    folder = copy_of(finished_model, tmp_path / "model")
    before = snapshot(folder)
    refused = run_cli(tokenizer_argv(folder))
    line = assert_one_line_error(
        refused, "train-tokenizer", f"--output_dir {folder} holds another run's files (config.json, model.safetensors"
    )
    assert "--overwrite_output_dir" in line and "--resume_from_checkpoint" not in line  # nothing to resume here
    assert snapshot(folder) == before  # the model's 30k spiece.model is still the one its config describes

    overwritten = run_cli(tokenizer_argv(folder, "--overwrite_output_dir"))
    assert overwritten.returncode == 0, overwritten.stderr[-3000:]
    assert "--overwrite_output_dir: removing" in overwritten.stderr
    # The old model's files gone, the new tokenizer's there, and no lock left behind.
    written = ["spiece.model", "spiece.vocab", "tokenizer.json", "tokenizer_config.json"]
    assert sorted(os.listdir(folder)) == ["_albert_hf.files.json", *written]  # and the record of what it wrote
    assert (folder / "spiece.model").read_bytes() != before["spiece.model"]


def test_cli_train_tokenizer_over_an_earlier_tokenizer_is_refused(tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "spiece.model").write_bytes(SPIECE.read_bytes())
    (folder / "notes.txt").write_text("mine")
    result = run_cli(tokenizer_argv(folder))
    assert_one_line_error(result, "train-tokenizer", f"--output_dir {folder} holds another run's files (spiece.model)")
    assert (folder / "spiece.model").read_bytes() == SPIECE.read_bytes()


@pytest.mark.slow
def test_cli_export_never_writes_into_the_model_folder_nor_over_an_export(finished_model, tmp_path):
    model = copy_of(finished_model, tmp_path / "model")
    before = snapshot(model)
    into_model = run_cli(
        ["export", "--model_name_or_path", str(model), "--output_dir", str(model), "--overwrite_output_dir"]
    )
    assert_one_line_error(into_model, "export", f"--output_dir {model} is the folder of --model_name_or_path {model}")
    assert snapshot(model) == before

    exported = tmp_path / "onnx"
    exported.mkdir()
    (exported / "model.onnx").write_bytes(b"an earlier export")
    again = run_cli(["export", "--model_name_or_path", str(model), "--output_dir", str(exported)])
    assert_one_line_error(again, "export", f"--output_dir {exported} holds another run's files (model.onnx)")
    assert (exported / "model.onnx").read_bytes() == b"an earlier export"


def test_cli_quickstart_checks_the_folder_before_training_its_tokenizer_there(finished_model, tmp_path):
    folder = copy_of(finished_model, tmp_path / "done")
    before = snapshot(folder)
    result = run_cli(["quickstart", "--fast", "--output_dir", str(folder)])
    assert_one_line_error(result, "quickstart", f"--output_dir {folder} holds another run's files (config.json")
    assert snapshot(folder) == before
