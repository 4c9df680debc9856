"""The one argument-parsing path of every job (`albert_hf.tasks.common`): what the user gave wins over a preset or
recipe, and the values a preset or recipe sets after parsing reach DeepSpeed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import HfArgumentParser, TrainingArguments

from albert_hf.pretraining.arguments import RECIPES, parse_pretraining_args
from albert_hf.tasks.common import ModelArguments, given_options, parse_args
from albert_hf.tasks.finetuning import PAPER_HYPERPARAMETERS, FineTuningArguments, apply_paper_preset

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
