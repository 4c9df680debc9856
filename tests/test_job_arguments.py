"""The one argument-parsing path of every job (`albert_hf.argument_parsing`): what the user gave wins over a preset or
recipe, and the values derived from them (the batch of --global_batch_size) are computed before TrainingArguments is
built, so that DeepSpeed's view of it holds them."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import pytest
from helpers import processes
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from transformers import TrainingArguments

from albert_hf.argument_parsing import is_given, parse_config_overrides
from albert_hf.arguments import ModelArguments
from albert_hf.errors import UserError
from albert_hf.finetuning import FineTuningArguments, parse_finetuning_args, preset_key
from albert_hf.pretraining.arguments import parse_pretraining_args

REPO_ROOT = Path(__file__).resolve().parents[1]
FINE_TUNING = (ModelArguments, FineTuningArguments, TrainingArguments)


def test_what_was_typed_is_read_as_argparse_reads_the_command_line(tmp_path):
    """`is_given` after one parse: abbreviated options, `--no_<switch>`, hyphens, and a value equal to the default."""
    argv = ["--output_dir", str(tmp_path), "--max_step", "10", "--no_remove_unused_columns", "--learning-rate", "0.1"]
    model_args, data_args, args = parse_finetuning_args(FINE_TUNING, [*argv, "--max_seq_length", "128"])
    typed = {"output_dir", "max_steps", "remove_unused_columns", "learning_rate", "max_seq_length"}
    fields = {item.name: part for part in (model_args, data_args, args) for item in dataclasses.fields(part)}
    assert {name for name, part in fields.items() if is_given(part, name)} == typed
    assert is_given(data_args, "max_seq_length") and data_args.max_seq_length == 128  # the default, typed
    assert not is_given(model_args, "config_preset") and args.remove_unused_columns is False


def test_recipe_and_preset_fill_only_what_was_not_given(tmp_path):
    _, data_args, _, args = parse_pretraining_args(
        ["--recipe", "paper", "--output_dir", str(tmp_path), "--max_step", "5000", "--learning_rate", "5e-5"]
    )
    assert (args.max_steps, args.learning_rate) == (5000, 5e-5)  # abbreviated or not, given flags win
    # Lan et al. (2020), section 4.1: 3,125 warm-up steps at length 512, batch 4096 (32 x 128 accumulation on one).
    assert (args.warmup_steps, data_args.max_seq_length, args.gradient_accumulation_steps) == (3125, 512, 128)

    argv = ["--preset", "mrpc", "--output_dir", str(tmp_path), "--max_seq", "128", "--warmup_steps", "0", "--use_cpu"]
    model_args, data_args, training_args = parse_finetuning_args(FINE_TUNING, argv)
    assert (data_args.max_seq_length, training_args.warmup_steps) == (128, 0)
    # Table 14, MRPC: lr 2e-5, batch 32, 800 steps; no dropout inside the encoder, 0.1 in the classifier.
    assert (training_args.learning_rate, training_args.max_steps) == (2e-5, 800)
    assert training_args.per_device_train_batch_size == 32
    dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "classifier_dropout_prob": 0.1}
    assert parse_config_overrides(model_args.config_overrides) == dropout


# Lan et al. (2020), Table 14: lr, batch, ALBERT dropout, classifier dropout, train steps, warmup steps, max length.
TABLE_14 = {
    "cola": (1e-5, 16, 0.0, 0.1, 5336, 320, 512),
    "stsb": (2e-5, 16, 0.0, 0.1, 3598, 214, 512),
    "sst2": (1e-5, 32, 0.0, 0.1, 20935, 1256, 512),
    "mnli": (3e-5, 128, 0.0, 0.1, 10000, 1000, 512),
    "qnli": (1e-5, 32, 0.0, 0.1, 33112, 1986, 512),
    "qqp": (5e-5, 128, 0.1, 0.1, 14000, 1000, 512),
    "rte": (3e-5, 32, 0.1, 0.1, 800, 200, 512),
    "mrpc": (2e-5, 32, 0.0, 0.1, 800, 200, 512),
    "wnli": (2e-5, 16, 0.1, 0.1, 2000, 250, 512),
    "race": (1e-5, 32, 0.1, 0.1, 12000, 1000, 512),
    "squad1.1": (5e-5, 48, 0.0, 0.1, 3649, 365, 384),
    "squad2.0": (3e-5, 48, 0.0, 0.1, 8144, 814, 512),
}


@pytest.mark.parametrize("preset", sorted(TABLE_14))
def test_every_preset_file_is_its_row_of_table_14(preset, tmp_path):
    from albert_hf.arguments import SquadArguments

    squad = preset.startswith("squad")
    types = (ModelArguments, SquadArguments, TrainingArguments) if squad else FINE_TUNING
    argv = ["--preset", preset.upper(), "--output_dir", str(tmp_path), "--use_cpu"]
    argv += (
        ["--do_train", "--train_file", "train.json"] if squad else []
    )  # SQuAD's job refuses a run with nothing to do
    model_args, data_args, training_args = parse_finetuning_args(types, argv, presets="squad" if squad else "finetune")
    lr, batch, albert_dropout, classifier_dropout, steps, warmup, length = TABLE_14[preset]
    assert (training_args.learning_rate, training_args.per_device_train_batch_size) == (lr, batch)
    assert (training_args.max_steps, training_args.warmup_steps, data_args.max_seq_length) == (steps, warmup, length)
    assert parse_config_overrides(model_args.config_overrides) == {
        "hidden_dropout_prob": albert_dropout,
        "attention_probs_dropout_prob": albert_dropout,
        "classifier_dropout_prob": classifier_dropout,
    }
    if squad:
        assert data_args.version_2_with_negative == (preset == "squad2.0")


def test_a_config_file_sets_defaults_the_command_line_overrides(tmp_path):
    """--config: the user's YAML file over the preset, the command line over both; --config_overrides merge by key."""
    config = tmp_path / "mine.yaml"
    config.write_text("preset: rte\nlearning_rate: 1.0e-4\nmax_steps: 700\nconfig_overrides: hidden_dropout_prob=0.2\n")
    argv = ["--config", str(config), "--max_steps", "900", "--output_dir", str(tmp_path), "--use_cpu"]
    model_args, data_args, training_args = parse_finetuning_args(FINE_TUNING, argv)
    assert (training_args.learning_rate, training_args.max_steps) == (1e-4, 900)  # file over preset, line over file
    assert training_args.warmup_steps == 200  # RTE's, from the preset the file names
    assert parse_config_overrides(model_args.config_overrides) == {
        "hidden_dropout_prob": 0.2,  # the file's key over the preset's
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout_prob": 0.1,
    }
    assert is_given(training_args, "learning_rate") and not is_given(training_args, "warmup_steps")
    # The command line's --config_overrides over the file's over the preset's, key by key.
    argv += ["--config_overrides", "classifier_dropout_prob=0.3"]
    assert parse_config_overrides(parse_finetuning_args(FINE_TUNING, argv)[0].config_overrides) == {
        "hidden_dropout_prob": 0.2,
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout_prob": 0.3,
    }
    # A single file argument is a --config file (transformers' scripts take one .json file of arguments the same way).
    (tmp_path / "all.json").write_text(json.dumps({"output_dir": str(tmp_path), "preset": "rte", "use_cpu": True}))
    assert parse_finetuning_args(FINE_TUNING, [str(tmp_path / "all.json")])[-1].max_steps == 800


def test_a_recipe_of_ones_own_is_a_file_and_a_mistake_in_one_is_named(tmp_path):
    recipe = tmp_path / "small.yaml"
    recipe.write_text("max_steps: 5\nlearning_rate: 0.01\nconfig_overrides: hidden_size=64,num_attention_heads=2\n")
    model_args, _, _, args = parse_pretraining_args(["--recipe", str(recipe), "--output_dir", str(tmp_path)])
    assert (args.max_steps, args.learning_rate) == (5, 0.01)
    assert parse_config_overrides(model_args.config_overrides) == {"hidden_size": 64, "num_attention_heads": 2}

    recipe.write_text("max_step: 5\n")
    with pytest.raises(UserError, match=r"max_step.*--max_steps"):
        parse_pretraining_args(["--recipe", str(recipe), "--output_dir", str(tmp_path)])
    (tmp_path / "typo.yaml").write_text("learnig_rate: 0.1\n")
    with pytest.raises(UserError, match=r"typo.yaml: .*--learnig_rate.*--learning_rate"):
        parse_finetuning_args(FINE_TUNING, ["--config", str(tmp_path / "typo.yaml"), "--output_dir", str(tmp_path)])
    (tmp_path / "my_preset.yaml").write_text("learning_rat: 0.1\n")
    with pytest.raises(UserError, match=r"my_preset.yaml: .*--learning_rat.*--learning_rate"):
        parse_finetuning_args(
            FINE_TUNING, ["--preset", str(tmp_path / "my_preset.yaml"), "--output_dir", str(tmp_path)]
        )
    with pytest.raises(UserError, match=r"--preset 'mrcp': did you mean 'mrpc'\?"):
        parse_finetuning_args(FINE_TUNING, ["--preset", "mrcp", "--output_dir", str(tmp_path)])
    with pytest.raises(UserError, match=r"--recipe 'papr': did you mean 'paper'\?"):
        parse_pretraining_args(["--recipe", "papr", "--output_dir", str(tmp_path)])


def test_a_global_batch_size_is_split_by_the_factor_not_given_and_three_given_must_agree(tmp_path):
    """One name, one rule for pretraining and fine-tuning: --global_batch_size (a preset's or recipe's, or given) sets
    whichever of the per-device batch and the accumulation steps was not given."""
    base = ["--output_dir", str(tmp_path), "--use_cpu"]
    args = parse_finetuning_args(FINE_TUNING, [*base, "--preset", "rte", "--gradient_accumulation_steps", "4"])[-1]
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (8, 4)  # RTE's 32 over 4 steps
    args = parse_finetuning_args(FINE_TUNING, [*base, "--preset", "rte", "--per_device_train_batch_size", "4"])[-1]
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 8)  # the paper's 32 kept
    args = parse_finetuning_args(
        FINE_TUNING, [*base, "--global_batch_size", "32", "--per_device_train_batch_size", "4"]
    )
    assert (args[-1].per_device_train_batch_size, args[-1].gradient_accumulation_steps) == (4, 8)
    # The paper recipe's per-device batch stays, its global batch of 4096 comes from accumulation.
    _, _, _, args = parse_pretraining_args(["--recipe", "paper", "--output_dir", str(tmp_path)])
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (32, 128)
    # Both factors given: they win over a preset's global batch, and must agree with a given one.
    both = ["--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2"]
    args = parse_finetuning_args(FINE_TUNING, [*base, "--preset", "rte", *both])[-1]
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 2)
    with pytest.raises(UserError, match=r"--global_batch_size 32 and --per_device_train_batch_size 4 x "):
        parse_finetuning_args(FINE_TUNING, [*base, "--global_batch_size", "32", *both])
    with pytest.raises(UserError, match=r"--global_batch_size 30 does not split over 1 processes x 4"):
        parse_finetuning_args(FINE_TUNING, [*base, "--global_batch_size", "30", "--gradient_accumulation_steps", "4"])


@pytest.mark.parametrize(
    ("spelling", "key"),
    [("SST-2", "sst2"), ("sts_b", "stsb"), ("RACE", "race"), ("SQuAD-v1.1", "squad1.1"), ("squad_v2.0", "squad2.0")],
)
def test_one_spelling_of_preset_names(spelling, key):
    assert preset_key(spelling) == key


def test_squad_refuses_the_data_options_it_does_not_read():
    from albert_hf.arguments import SquadArguments

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
@pytest.mark.needs("deepspeed")
def test_deepspeed_gets_the_accumulation_set_after_parsing(tmp_path):
    """--global_batch_size sets the accumulation before TrainingArguments fills DeepSpeed's "auto" values from it."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU"):
        env.pop(name, None)
    output = tmp_path / "deepspeed.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [str(REPO_ROOT / "tests" / "distributed" / "deepspeed_auto_values.py"), str(output)]
    command += ["--output_dir", str(tmp_path / "out"), "--use_cpu", "--report_to", "none"]
    command += ["--deepspeed", str(REPO_ROOT / "examples" / "accelerate_configs" / "ds_zero2.json")]
    command += ["--global_batch_size", "16", "--per_device_train_batch_size", "4"]
    result = processes.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(output.read_text()) == {
        "gradient_accumulation_steps": 2,
        "train_micro_batch_size_per_gpu": 4,
        "train_batch_size": 16,
    }


def test_the_choices_help_lists_are_those_of_the_modules_that_act_on_them():
    """The argument modules name the values of the choosing options themselves, so that `--help` loads no data
    library: each list is the one of the module that acts on the value."""
    from albert_hf import arguments
    from albert_hf.data import embedded_corpus, labels, ner
    from albert_hf.data.glue_files import GLUE_TASKS
    from albert_hf.pretraining import recipes

    assert arguments.GLUE_TASK_NAMES == tuple(name for name in GLUE_TASKS if name != "ax")  # AX: with --ax_file
    assert arguments.LABEL_KINDS == (labels.CLASSIFICATION, labels.REGRESSION)
    assert arguments.ALIGNMENTS == ner.ALIGNMENTS and arguments.ALIGNMENTS[0] == ner.ALIGN_AUTO
    assert recipes.EMBEDDED_SOURCES == embedded_corpus.EMBEDDED_SOURCES
    assert recipes.DEFAULT_EMBEDDED_SOURCES == embedded_corpus.DEFAULT_EMBEDDED_SOURCES
