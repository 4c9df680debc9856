"""The weights and the tokenizer are checked at load, before any training or export, each refusal one error line
naming the file (and the tensor): a model folder without weights, weights holding NaN or inf, a tokenizer whose
vocabulary does not fit the model's embeddings (fine-tuning, as pretraining), and a corpus the vocabulary mostly does
not cover (the share of <unk>, warned above 1%, refused above --max_unknown_share).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from helpers.command_line import assert_one_line_error, run_cli
from helpers.data import FIXTURES
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.pretraining.run import check_unknown_share, unknown_share
from albert_hf.tokenizer_fit import PretrainingSetupError

SPIECE = FIXTURES / "spiece" / "albert-30k-clean.model"
JAPANESE = Path(__file__).parent / "data" / "japanese_sample.txt"


def tiny_model(folder: Path, poison: str | None = None, **config_fields) -> Path:
    """A tiny pretrained ALBERT saved in `folder`; with `poison`, that parameter's first value NaN and last inf."""
    from albert_hf import AlbertConfig, AlbertForPreTraining
    from albert_hf.argument_parsing import parse_config_overrides

    fields = {**parse_config_overrides(TINY_ONE_LAYER_OVERRIDES), **config_fields}
    model = AlbertForPreTraining(AlbertConfig.preset("base-v2", **fields))
    if poison is not None:
        with torch.no_grad():
            parameter = dict(model.named_parameters())[poison].view(-1)
            parameter[0], parameter[-1] = math.nan, math.inf
    model.save_pretrained(folder)
    return folder


def glue_argv(output_dir: Path, model: Path, *extra: str) -> list[str]:
    return [
        "glue",
        "--task_name",
        "rte",
        "--data_dir",
        str(FIXTURES / "glue" / "RTE"),
        "--model_name_or_path",
        str(model),
        "--do_train",
        "--max_train_samples",
        "8",
        "--max_steps",
        "1",
        "--max_seq_length",
        "32",
        "--report_to",
        "none",
        "--output_dir",
        str(output_dir),
        *extra,
    ]


def test_cli_a_model_folder_without_weights_is_named_with_what_it_holds(tmp_path):
    model = tiny_model(tmp_path / "model")
    (model / "model.safetensors").unlink()  # a save that did not finish: config.json alone
    result = run_cli(glue_argv(tmp_path / "out", model, "--tokenizer_name_or_path", str(SPIECE)))
    assert_one_line_error(
        result,
        "glue",
        f"Cannot load --model_name_or_path {model}: the folder holds no weights file",
        "only config.json",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cli_non_finite_weights_are_named_before_fine_tuning_and_export(tmp_path):
    poisoned = "albert.encoder.embedding_hidden_mapping_in.weight"
    model = tiny_model(tmp_path / "model", poison=poisoned)
    expected = f"{model / 'model.safetensors'} holds NaN or inf in 1 tensor(s): {poisoned}."
    fine_tuned = run_cli(glue_argv(tmp_path / "out", model, "--tokenizer_name_or_path", str(SPIECE)))
    assert_one_line_error(fine_tuned, "glue", f"Cannot use --model_name_or_path {model}: ", expected)
    exported = run_cli(["export", "--model_name_or_path", str(model), "--output_dir", str(tmp_path / "onnx")])
    assert_one_line_error(exported, "export", expected)
    assert not (tmp_path / "onnx").exists()


def test_cli_fine_tuning_refuses_a_tokenizer_that_does_not_fit_the_embeddings(tmp_path):
    model = tiny_model(tmp_path / "model", vocab_size=1000)  # trained with a 1,000-piece vocabulary
    result = run_cli(glue_argv(tmp_path / "out", model, "--tokenizer_name_or_path", str(SPIECE)))
    assert_one_line_error(
        result,
        "glue",
        f"has 30000 pieces but the config of {model} has vocab_size 1000: ids 1000 to 29999 have no embedding row",
    )
    assert not (tmp_path / "out").exists()  # refused after the folder was locked: the empty folder goes too


class Pieces:
    """A stand-in tokenizer for the share: id 1 is <unk>, 0/2/3 other special ids."""

    unk_token_id = 1
    all_special_ids = [0, 1, 2, 3]
    name_or_path = "stand-in"


def test_the_unknown_share_counts_unk_among_the_non_special_tokens():
    # [CLS] a <unk> b [SEP] c <unk> [SEP] [PAD]: 2 <unk> of 5 non-special tokens (by hand).
    features = [{"input_ids": [2, 10, 1, 11, 3, 12, 1, 3, 0]}]
    assert unknown_share(features, Pieces()) == pytest.approx(2 / 5, abs=0)
    warnings = []
    assert check_unknown_share(features, Pieces(), limit=0.5, warn=warnings.append) == 2 / 5
    assert len(warnings) == 1 and "<unk> is 40.0% of the tokens of the first 1 training instances" in warnings[0]
    with pytest.raises(PretrainingSetupError, match=r"<unk> is 40.0% .* above --max_unknown_share 0.3"):
        check_unknown_share(features, Pieces(), limit=0.3)
    covered = []
    check_unknown_share([{"input_ids": [2, 10, 11, 3]}], Pieces(), limit=0.2, warn=covered.append)
    assert covered == []


def test_cli_pretraining_on_text_the_vocabulary_does_not_cover_is_refused_with_the_share(tmp_path):
    result = run_cli(
        [
            "pretrain",
            "--train_files",
            str(JAPANESE),
            "--tokenizer_name_or_path",
            str(SPIECE),
            "--config_overrides",
            TINY_ONE_LAYER_OVERRIDES,
            "--max_seq_length",
            "32",
            "--max_steps",
            "1",
            "--report_to",
            "none",
            "--output_dir",
            str(tmp_path / "out"),
        ]
    )
    line = assert_one_line_error(result, "pretrain", "training instances: the vocabulary of the tokenizer")
    assert "above --max_unknown_share 0.2" in line and "--max_unknown_share (1 allows any share)" in line
    share = float(line.split("<unk> is ")[1].split("%")[0]) / 100
    assert share > 0.2
    assert not (tmp_path / "out").exists()


def test_non_finite_tensors_of_a_bin_file_are_named_and_a_code_pickle_is_refused(tmp_path):
    from albert_hf.errors import UnreadableFileError
    from albert_hf.training.checkpoints import check_finite_weights

    folder = tmp_path / "model"
    folder.mkdir()
    weights = {"a.weight": torch.ones(3), "b.bias": torch.tensor([0.0, -math.inf]), "steps": torch.tensor([7])}
    torch.save(weights, folder / "pytorch_model.bin")
    with pytest.raises(UnreadableFileError, match=r"pytorch_model.bin holds NaN or inf in 1 tensor\(s\): b.bias\."):
        check_finite_weights(folder, option="--model_name_or_path")

    class RunsCode:
        def __reduce__(self):
            return (print, ("code ran",))

    torch.save({"a.weight": RunsCode()}, folder / "pytorch_model.bin", _use_new_zipfile_serialization=True)
    with pytest.raises(UnreadableFileError, match="cannot be loaded as plain weights"):
        check_finite_weights(folder)
