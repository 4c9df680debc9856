"""Checks between options, the recipe and the data, asked once before any work by every job
(`albert_hf.options.check_combinations`, `albert_hf.argument_parsing.check_model_arguments`).

Each refusal is run as a user runs it, through `albert-hf <job>` in this process (`albert_hf.cli.main`), and checked
to the letter: exit status 2, one `albert-hf <job>: error:` line naming both options and where each value came from
(the command line, `--recipe`, `--preset`, a `--config` file), no traceback, and no output folder (nothing was
started). The expected texts are written out by hand.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf import cli
from albert_hf.options import DataSplits, OptionValues, check_combinations, combination_problems

FIXTURES = Path(__file__).parent / "fixtures"
SPIECE = str(FIXTURES / "spiece" / "albert-30k-clean.model")
RTE = FIXTURES / "glue" / "RTE"
CONLL = FIXTURES / "conll2003"
SWAG = FIXTURES / "hf-samples" / "swag" / "sample.json"
SQUAD = FIXTURES / "squad" / "sample.json"
CORPUS = FIXTURES / "corpus" / "botchan.txt"
QUIET = ["--report_to", "none", "--disable_tqdm", "true", "--use_cpu"]


def run(argv: list[str]) -> tuple[int, str]:
    """(exit status, stderr) of `albert-hf <argv>` in this process."""
    stderr = io.StringIO()
    with redirect_stderr(stderr), redirect_stdout(io.StringIO()):
        status = cli.main(argv)
    return status, stderr.getvalue()


def refused(argv: list[str], output_dir: Path) -> str:
    """The one error line of a refused `albert-hf <argv>`, checked: status 2, no traceback, no output folder."""
    status, stderr = run(argv)
    assert status == 2, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith(f"albert-hf {argv[0]}: error: ")]
    assert len(errors) == 1, stderr[-3000:]
    assert not output_dir.exists(), sorted(output_dir.rglob("*"))
    return errors[0].removeprefix(f"albert-hf {argv[0]}: error: ")


def fine_tuning(job: str, output_dir: Path, *options: str) -> list[str]:
    return [
        job,
        "--tokenizer_name_or_path",
        SPIECE,
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--output_dir",
        str(output_dir),
        *QUIET,
        *options,
    ]


def pretrain(output_dir: Path, *options: str) -> list[str]:
    common = ["--train_files", str(CORPUS), "--tokenizer_name_or_path", SPIECE, "--output_dir", str(output_dir)]
    return ["pretrain", *common, *QUIET, *options]


# ---- a warm-up longer than the run --------------------------------------------------------------------------------


def test_a_recipes_warmup_longer_than_the_given_steps_is_refused_naming_both_and_their_layers(tmp_path):
    out = tmp_path / "out"
    message = refused(pretrain(out, "--recipe", "tiny", "--max_steps", "6"), out)
    assert message == (
        "--warmup_steps 30 (from --recipe tiny) is more than --max_steps 6 (on the command line): the run would end "
        "during its warm-up, before the learning rate reaches --learning_rate. Pass a --warmup_steps of at most the "
        "run's steps (below 1: a share of them), or more steps."
    )
    # Where both come from the user: a --config file's warm-up, the preset's steps.
    config = tmp_path / "mine.yaml"
    config.write_text("warmup_steps: 900\n", encoding="utf-8")
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--preset", "rte")
    message = refused([*argv, "--config", str(config)], out)
    assert message.startswith(
        f"--warmup_steps 900 (from --config {config}) is more than --max_steps 800 (from --preset rte)"
    )


def test_a_warmup_of_the_runs_steps_or_a_share_of_them_is_accepted():
    for warmup, steps in ((6, 6), (0.5, 6), (30, -1)):  # -1: counted in epochs, known once the data is
        assert combination_problems(OptionValues({"warmup_steps": warmup, "max_steps": steps})) == []


def test_a_warmup_longer_than_a_run_counted_in_epochs_stops_at_the_schedule_before_any_step(tmp_path):
    """16 examples, batch 8: 2 steps in one epoch, against the preset's 200 warm-up steps."""
    out = tmp_path / "out"
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--preset", "rte")
    argv += ["--max_steps", "-1", "--num_train_epochs", "1", "--max_train_samples", "16"]
    argv += ["--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1", "--max_seq_length", "32"]
    status, stderr = run(argv)
    assert status == 2 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.splitlines()[-1] == (
        "albert-hf glue: error: --warmup_steps 200 (from --preset rte) is more than the 2 optimizer steps of the run "
        "(--num_train_epochs 1.0 (on the command line) of the data): the run would end during its warm-up, before "
        "the learning rate reaches --learning_rate. Pass a --warmup_steps of at most the run's steps (below 1: a "
        "share of them), or more steps."
    )
    assert not list(out.glob("checkpoint-*")) and not (out / "model.safetensors").exists()


# ---- data a run asks for ------------------------------------------------------------------------------------------

EVAL_DATA = "asks for evaluation data, but none is given: pass "


@pytest.mark.parametrize(
    ("job", "options", "expected"),
    [
        (
            "glue",
            ["--task_name", "rte", "--train_file", f"{RTE}/train.tsv", "--do_train", "--eval_strategy", "steps"],
            "--eval_strategy steps (on the command line), which evaluates during training, "
            + EVAL_DATA
            + "--validation_file, --data_dir or no file at all, to read --dataset_name.",
        ),
        (
            "classify",
            ["--train_file", f"{RTE}/train.tsv", "--text_column", "sentence1", "--do_train", "--do_eval"],
            "--do_eval (on the command line) " + EVAL_DATA + "--validation_file or no file at all, to read "
            "--dataset_name.",
        ),
        (
            "ner",
            [
                "--train_file",
                f"{CONLL}/train.txt",
                "--do_train",
                "--load_best_model_at_end",
                "--eval_strategy",
                "steps",
            ],
            "--eval_strategy steps (on the command line), which evaluates during training, and "
            "--load_best_model_at_end (on the command line), which selects by evaluation, "
            + EVAL_DATA
            + "--validation_file, --data_dir or --dataset_name.",
        ),
        (
            "multiple-choice",
            ["--train_file", str(SWAG), "--do_train", "--do_eval"],
            "--do_eval (on the command line) " + EVAL_DATA + "--validation_file or --dataset_name.",
        ),
        (
            "squad",
            ["--train_file", str(SQUAD), "--do_train", "--do_eval"],
            "--do_eval (on the command line) " + EVAL_DATA + "--validation_file or --dataset_name.",
        ),
    ],
)
def test_evaluation_without_evaluation_data_is_refused_before_the_training_data_is_read(
    job, options, expected, tmp_path
):
    out = tmp_path / "out"
    assert refused(fine_tuning(job, out, *options), out) == expected


def test_pretraining_evaluation_without_held_out_text_is_refused_where_trainer_raised_after_the_data(tmp_path):
    out = tmp_path / "out"
    message = refused(pretrain(out, "--max_steps", "2", "--eval_strategy", "steps"), out)
    assert message == (
        "--eval_strategy steps (on the command line), which evaluates during training, "
        + EVAL_DATA
        + "--validation_files, "
        "--validation_documents or --dataset_name with --validation_split_name."
    )
    # The quickstart always holds documents out: the same option is accepted there (the parse alone).
    from albert_hf.pretraining.arguments import parse_quickstart_args

    assert parse_quickstart_args(["--fast", "--eval_strategy", "steps", "--output_dir", str(out)]).training.do_eval


@pytest.mark.parametrize(
    ("job", "options", "expected"),
    [
        (
            "glue",
            ["--task_name", "rte", "--train_file", f"{RTE}/train.tsv", "--do_train", "--do_predict"],
            "--do_predict (on the command line) asks for test data, but none is given: pass --test_file, --data_dir "
            "or no file at all, to read --dataset_name.",
        ),
        (
            "classify",
            ["--train_file", f"{RTE}/train.tsv", "--text_column", "sentence1", "--do_train", "--do_predict"],
            "--do_predict (on the command line) asks for test data, but none is given: pass --test_file or no file at "
            "all, to read --dataset_name.",
        ),
        (
            "multiple-choice",
            ["--train_file", str(SWAG), "--do_train", "--do_predict"],
            "--do_predict (on the command line) asks for test data, but none is given: pass --test_file or "
            "--dataset_name.",
        ),
    ],
)
def test_prediction_without_test_data_is_refused(job, options, expected, tmp_path):
    out = tmp_path / "out"
    assert refused(fine_tuning(job, out, *options), out) == expected


def test_a_fine_tuning_run_with_nothing_to_do_is_refused(tmp_path):
    """Without --do_train, --do_eval or --do_predict the job wrote a model card for an untrained model, exit 0."""
    out = tmp_path / "out"
    message = refused(fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE)), out)
    assert message == "nothing to do: pass --do_train, --do_eval and/or --do_predict."
    message = refused(fine_tuning("squad", out, "--train_file", str(SQUAD)), out)
    assert message == "nothing to do: pass --do_train and/or --do_eval."


def test_options_of_which_the_job_would_read_one_only_are_refused_together(tmp_path):
    out = tmp_path / "out"
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--train_file", "mine.tsv")
    assert refused([*argv, "--do_train"], out) == (
        f"--data_dir {RTE} (on the command line) and --train_file mine.tsv (on the command line) both give data, and "
        "the job would read one of them only: pass one."
    )
    message = refused(pretrain(out, "--dataset_name", "wikitext", "--max_steps", "2"), out)
    assert message.startswith(f"--train_files {CORPUS} (on the command line) and --dataset_name wikitext")
    argv = fine_tuning("multiple-choice", out, "--train_file", str(SWAG), "--do_train", "--data_dir", "swag")
    assert refused(argv, out) == "--data_dir swag (on the command line) is not read by this job: leave it out."


def test_every_problem_of_a_command_line_is_named_in_one_line():
    splits = DataSplits(given_by={"train": ("train_file",), "validation": ("validation_file",)})
    values = {"do_train": True, "do_eval": True, "warmup_steps": 10, "max_steps": 5, "train_file": "t.csv"}
    sources = {"do_eval": "from --preset x", "warmup_steps": "from --config c.yaml", "max_steps": "on the command line"}
    with pytest.raises(Exception) as raised:
        check_combinations(OptionValues(values, sources), splits)
    assert str(raised.value) == (
        "--warmup_steps 10 (from --config c.yaml) is more than --max_steps 5 (on the command line): the run would end "
        "during its warm-up, before the learning rate reaches --learning_rate. Pass a --warmup_steps of at most the "
        "run's steps (below 1: a share of them), or more steps; --do_eval (from --preset x) asks for evaluation data, "
        "but none is given: pass --validation_file."
    )


# ---- the model's shape, as soon as its config is known ------------------------------------------------------------


def test_a_shape_the_config_refuses_is_named_before_the_corpus_is_read(tmp_path):
    out = tmp_path / "out"
    message = refused(pretrain(out, "--config_overrides", "hidden_size=30,num_attention_heads=4"), out)
    assert message == (
        "--config_overrides hidden_size=30,num_attention_heads=4 (on the command line) on --config_preset base-v2: "
        "AlbertConfig.hidden_size (30) must be divisible by num_attention_heads (4): each head gets hidden_size / "
        "num_attention_heads dimensions."
    )
    message = refused(pretrain(out, "--config_overrides", "num_hidden_layers=2,num_hidden_groups=3"), out)
    assert message.endswith(
        "AlbertConfig.num_hidden_groups (3) cannot exceed num_hidden_layers (2): every group must be used by at least "
        "one layer."
    )
    message = refused(pretrain(out, "--config_overrides", "intermediate_size=0"), out)
    assert message.endswith("AlbertConfig.intermediate_size must be a positive integer, got 0.")


def test_a_checkpoints_config_is_checked_with_the_overrides_and_the_jobs_config_options(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    saved = {"model_type": "albert", "hidden_size": 32, "num_attention_heads": 5, "embedding_size": 16}
    (model / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    (model / "model.safetensors").write_bytes(b"")  # never read: the config is refused first
    out = tmp_path / "out"
    argv = ["glue", "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--model_name_or_path", str(model)]
    message = refused([*argv, "--tokenizer_name_or_path", SPIECE, "--output_dir", str(out), *QUIET], out)
    assert message == (
        f"the config of --model_name_or_path {model} ({model / 'config.json'}): AlbertConfig.hidden_size (32) must be "
        "divisible by num_attention_heads (5): each head gets hidden_size / num_attention_heads dimensions."
    )
    # The job's own options that set config fields (adaptive depth), with the preset and its overrides.
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--do_train")
    message = refused([*argv, "--num_layers_at_inference", "3"], out)
    assert message == (
        f"--num_layers_at_inference 3 (on the command line) on --config_preset base-v2 with --config_overrides "
        f"'{TINY_ONE_LAYER_OVERRIDES}': AlbertConfig.num_layers_at_inference must be None or an integer in [1, 1] "
        "(num_hidden_layers * inner_group_num), got 3."
    )


def test_a_sequence_longer_than_the_positions_is_refused_before_the_corpus_is_cut(tmp_path):
    out = tmp_path / "out"
    overrides = "hidden_size=32,num_attention_heads=2,embedding_size=16,max_position_embeddings=64"
    message = refused(pretrain(out, "--config_overrides", overrides, "--max_seq_length", "128"), out)
    assert message == (
        f"--max_seq_length 128 exceeds max_position_embeddings 64 of the base-v2 config with --config_overrides "
        f"'{overrides}': positions past it have no embedding. Pass --max_seq_length 64 or less, or a model with more "
        "positions."
    )


# ---- Hub ids, resumption, Trainer's own preemption handling ------------------------------------------------------


def test_a_hub_id_that_is_none_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--push_to_hub")
    message = refused([*argv, "--hub_model_id", "me/my model"], out)
    assert message.startswith(
        "--hub_model_id 'me/my model' (on the command line) is no Hub repository id ('name' or 'namespace/name'): "
    )
    spaced = tmp_path / "my run"
    argv = fine_tuning("glue", spaced, "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--push_to_hub")
    message = refused(argv, spaced)
    assert message.startswith(
        "--push_to_hub (on the command line) without --hub_model_id names the repository after --output_dir, and "
        "'my run' is no Hub repository name ("
    )
    assert message.endswith("): pass --hub_model_id.")
    # Neither a local folder nor a repository id: named as a missing folder, before the output folder is made.
    argv = ["glue", "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--model_name_or_path", "my model"]
    message = refused([*argv, "--output_dir", str(out), *QUIET], out)
    assert message.startswith("--model_name_or_path my model: no such folder")


def test_resumption_that_cannot_be_is_refused_before_any_work(tmp_path):
    out = tmp_path / "out"
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--do_train")
    message = refused([*argv, "--resume_from_checkpoint", str(tmp_path / "checkpoint-4")], out)
    assert message == (
        f"--resume_from_checkpoint {tmp_path / 'checkpoint-4'} (on the command line): no such folder; pass a "
        "checkpoint-N folder, or latest for the newest complete checkpoint of --output_dir."
    )
    message = refused([*argv, "--resume_from_checkpoint", "latest", "--overwrite_output_dir"], out)
    assert message == (
        "--overwrite_output_dir (on the command line) removes the run that --resume_from_checkpoint latest (on the "
        "command line) would continue: pass one of them."
    )
    message = refused([*argv, "--enable_jit_checkpoint"], out)
    assert message.startswith("--enable_jit_checkpoint (on the command line) handles SIGTERM too")


@pytest.mark.slow  # trains a step and evaluates
def test_a_selection_metric_the_evaluation_does_not_report_stops_at_the_first_evaluation(tmp_path):
    """Trainer raised a KeyError there (a traceback); the figures GLUE's RTE reports are accuracy and the loss."""
    out = tmp_path / "out"
    argv = fine_tuning("glue", out, "--task_name", "rte", "--data_dir", str(RTE), "--do_train", "--do_eval")
    argv += ["--max_steps", "2", "--eval_strategy", "steps", "--eval_steps", "1", "--save_steps", "1"]
    argv += ["--load_best_model_at_end", "--metric_for_best_model", "f1_score", "--max_seq_length", "32"]
    argv += ["--max_train_samples", "8", "--max_eval_samples", "4", "--per_device_train_batch_size", "4"]
    status, stderr = run(argv)
    assert status == 2 and "Traceback" not in stderr, stderr[-3000:]
    assert stderr.splitlines()[-1] == (
        "albert-hf glue: error: --metric_for_best_model f1_score (on the command line): the evaluation reports no "
        "'f1_score'; it reports accuracy, loss."
    )
