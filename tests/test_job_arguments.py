"""The one argument-parsing path of every job (`albert_hf.tasks.common`): what the user gave wins over a preset or
recipe, and the values a preset or recipe sets after parsing reach DeepSpeed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_ONE_LAYER_OVERRIDES
from transformers import HfArgumentParser, TrainingArguments

from albert_hf.errors import UserError
from albert_hf.pretraining.arguments import RECIPES, parse_pretraining_args
from albert_hf.tasks.common import ModelArguments, given_options, parse_args
from albert_hf.tasks.finetuning import PAPER_HYPERPARAMETERS, FineTuningArguments, apply_paper_preset, preset_key

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_given_options_reads_the_command_line_as_argparse_does(tmp_path):
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    argv = ["--output_dir", str(tmp_path), "--max_step", "10", "--no_remove_unused_columns", "--learning-rate", "0.1"]
    given = given_options(parser, argv)
    assert given == {"output_dir", "max_steps", "remove_unused_columns", "learning_rate"}
    # The parser keeps its defaults for the next parse.
    assert parser.parse_args_into_dataclasses(args=["--output_dir", str(tmp_path)])[1].max_steps == -1


def test_recipe_and_preset_fill_only_what_was_not_given(tmp_path):
    _, data_args, _, args = parse_pretraining_args(
        ["--recipe", "paper", "--output_dir", str(tmp_path), "--max_step", "10", "--learning_rate", "5e-5"]
    )
    assert (args.max_steps, args.learning_rate) == (10, 5e-5)  # abbreviated or not, given flags win
    assert (args.warmup_steps, data_args.max_seq_length) == (RECIPES["paper"]["warmup_steps"], 512)

    argv = ["--preset", "mrpc", "--output_dir", str(tmp_path), "--max_seq", "128", "--warmup_steps", "0", "--use_cpu"]
    model_args, data_args, training_args = parse_args((ModelArguments, FineTuningArguments, TrainingArguments), argv)
    apply_paper_preset(model_args, data_args, training_args)
    row = PAPER_HYPERPARAMETERS["mrpc"]
    assert (data_args.max_seq_length, training_args.warmup_steps) == (128, 0)
    assert (training_args.learning_rate, training_args.max_steps) == (row.learning_rate, row.train_steps)


@pytest.mark.parametrize(
    ("spelling", "key"),
    [("SST-2", "sst2"), ("sts_b", "stsb"), ("RACE", "race"), ("SQuAD-v1.1", "squad1.1"), ("squad_v2.0", "squad2.0")],
)
def test_one_spelling_of_preset_names(spelling, key):
    assert preset_key(spelling) == key


def test_squad_refuses_the_data_options_it_does_not_read():
    from albert_hf.tasks.squad import SquadArguments

    with pytest.raises(UserError, match=r"SQuAD does not read \['--test_file'\]"):
        SquadArguments(test_file="test.json")


# Each fine-tuning command with the real data it reads (paths under the data folder).
JOB_DATA = {
    "glue": lambda data: ["--task_name", "mrpc", "--data_dir", str(data / "glue" / "MRPC")],
    "ner": lambda data: ["--data_dir", str(data / "conll2003")],
    "multiple-choice": lambda data: ["--train_file", str(data / "hf-samples" / "swag" / "sample.json")],
    "squad": lambda data: ["--train_file", str(data / "squad" / "dev-v1.1-part-a.json"), "--doc_stride", "32"],
}


@pytest.mark.parametrize("command", sorted(JOB_DATA))
def test_every_fine_tuning_job_refuses_a_sequence_longer_than_the_model_before_training(
    command, shared_data, spiece_model, tmp_path, capsys
):
    """A model with 64 positions and --max_seq_length 128: refused with the option, both numbers and the model named,
    and nothing trained (before, GLUE trained and failed in evaluation, NER and multiple choice at the first long
    batch)."""
    from albert_hf.cli import main as cli_main

    output_dir = tmp_path / "out"
    argv = [command, *JOB_DATA[command](shared_data), "--do_train", "--max_train_samples", "16", "--max_steps", "2"]
    argv += ["--tokenizer_name_or_path", str(spiece_model)]
    argv += ["--config_overrides", TINY_ONE_LAYER_OVERRIDES + ",max_position_embeddings=64", "--max_seq_length", "128"]
    argv += ["--output_dir", str(output_dir), "--report_to", "none", "--use_cpu", "true", "--save_strategy", "no"]
    expected = r"--max_seq_length 128 exceeds max_position_embeddings 64 of the base-v2 config with --config_overrides"
    assert cli_main(argv) == 2  # a user error: one message, exit status 2
    assert re.search(f"albert-hf {command}: error: {expected}", capsys.readouterr().err)
    assert not (output_dir / "model.safetensors").exists() and not (output_dir / "train_results.json").exists()


@pytest.mark.distributed
def test_deepspeed_gets_the_accumulation_set_after_parsing(tmp_path):
    """--global_batch_size sets the accumulation after TrainingArguments filled DeepSpeed's "auto" values."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        env.pop(name, None)
    output = tmp_path / "deepspeed.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [str(REPO_ROOT / "tests" / "distributed" / "deepspeed_auto_values.py"), str(output)]
    command += ["--output_dir", str(tmp_path / "out"), "--use_cpu", "--report_to", "none"]
    command += ["--deepspeed", str(REPO_ROOT / "examples" / "accelerate_configs" / "ds_zero2.json")]
    command += ["--global_batch_size", "16", "--per_device_train_batch_size", "4"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(output.read_text()) == {
        "gradient_accumulation_steps": 2,
        "train_micro_batch_size_per_gpu": 4,
        "train_batch_size": 16,
    }
