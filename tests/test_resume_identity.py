"""A resume is the same run: what decides what the next step trains on is in the checkpoint's fingerprint, and a
checkpoint whose files disagree about its step is refused, naming them.

Real jobs in this process (the slow tier: they train) (`albert_hf.cli.main`): a tiny pretraining run and a tiny GLUE run save a checkpoint at
each of their 2 steps; each case resumes a copy of the run with one thing changed and must be refused with exit
status 2 and the line written out here by hand (the option, the value in the checkpoint, the value now), before any
step, and where the option is one of the training arguments, before the data is read. The same command unchanged
resumes and trains on (so the fingerprint of a run is stable from one start to the next).
"""

from __future__ import annotations

import io
import json
import re
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES

from albert_hf import cli
from albert_hf.training.reliability import (
    FINGERPRINT_NAME,
    CheckpointError,
    check_fingerprint,
    checkpoint_consistency_problem,
    fingerprint_of,
)

FIXTURES = Path(__file__).parent / "fixtures"
SPIECE = FIXTURES / "spiece" / "albert-30k-clean.model"
RTE = FIXTURES / "glue" / "RTE"
QUIET = ["--report_to", "none", "--disable_tqdm", "true", "--use_cpu"]
CHANGE = "Resume with the same options, or start a new run in another --output_dir."


def run(argv: list[str]) -> tuple[int, str]:
    stderr = io.StringIO()
    with redirect_stderr(stderr), redirect_stdout(io.StringIO()):
        status = cli.main(argv)
    return status, stderr.getvalue()


def error_line(argv: list[str]) -> str:
    """The one error line of a refused `albert-hf <argv>`: exit status 2, no traceback."""
    status, stderr = run(argv)
    assert status == 2, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith(f"albert-hf {argv[0]}: error: ")]
    assert len(errors) == 1, stderr[-3000:]
    return errors[0].removeprefix(f"albert-hf {argv[0]}: error: ")


def pretrain_argv(output_dir: Path, tokenizer: Path, max_steps: int, *options: str) -> list[str]:
    return [
        "pretrain",
        *("--train_files", str(FIXTURES / "corpus" / "botchan.txt"), "--tokenizer_name_or_path", str(tokenizer)),
        *("--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--max_seq_length", "32"),
        *("--per_device_train_batch_size", "4", "--max_steps", str(max_steps), "--save_steps", "1"),
        *("--output_dir", str(output_dir), "--resume_from_checkpoint", "latest", *QUIET, *options),
    ]


def glue_argv(output_dir: Path, max_steps: int, *options: str) -> list[str]:
    return [
        "glue",
        *("--task_name", "rte", "--data_dir", str(RTE), "--tokenizer_name_or_path", str(SPIECE), "--do_train"),
        *("--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--max_seq_length", "32", "--max_train_samples", "16"),
        *("--per_device_train_batch_size", "4", "--max_steps", str(max_steps), "--save_steps", "1"),
        *("--output_dir", str(output_dir), "--resume_from_checkpoint", "latest", *QUIET, *options),
    ]


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory) -> Path:
    """The 30k tokenizer saved as a folder: a case changes its settings in place."""
    from albert_hf.formats import load_tokenizer

    folder = tmp_path_factory.mktemp("tokenizer")
    load_tokenizer(str(SPIECE)).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def pretraining_run(tmp_path_factory, tokenizer_folder) -> Path:
    """A finished 2-step pretraining run with checkpoint-1 and checkpoint-2 (a few seconds)."""
    folder = tmp_path_factory.mktemp("pretraining") / "run"
    status, stderr = run(pretrain_argv(folder, tokenizer_folder, 2))
    assert status == 0, stderr[-3000:]
    assert (folder / "checkpoint-2" / FINGERPRINT_NAME).is_file()
    return folder


@pytest.fixture(scope="module")
def glue_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("glue") / "run"
    status, stderr = run(glue_argv(folder, 2))
    assert status == 0, stderr[-3000:]
    return folder


def copy_of(run_folder: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_folder, tmp_path / "run"))


@pytest.fixture
def data_reads(monkeypatch):
    """How many times the pretraining job started reading its data."""
    from albert_hf.scripts import pretrain

    calls = []
    prepare = pretrain.prepare_datasets
    monkeypatch.setattr(pretrain, "prepare_datasets", lambda *a, **k: calls.append(1) or prepare(*a, **k))
    return calls


def changed(checkpoint: Path, *differences: str) -> str:
    return (
        f"Cannot resume from {checkpoint}: the run would change {len(differences)} of the options it was trained with "
        f"({checkpoint / FINGERPRINT_NAME}): " + "; ".join(differences) + f". {CHANGE}"
    )


# ---- the fingerprint holds what decides the next step's data ----------------------------------------------------


@pytest.mark.slow  # the run it resumes trains 2 steps (the module's fixture)
def test_another_seed_is_refused_before_the_data_is_read(pretraining_run, tokenizer_folder, tmp_path, data_reads):
    """The seed draws the masks of every batch (and the order of every epoch): another one trains another run."""
    folder = copy_of(pretraining_run, tmp_path)
    message = error_line(pretrain_argv(folder, tokenizer_folder, 4, "--seed", "7"))
    assert message == changed(folder / "checkpoint-2", "--seed: 42 in the checkpoint, 7 now")
    assert data_reads == []  # refused from the training arguments alone
    assert not (folder / "checkpoint-3").exists()


@pytest.mark.slow  # a refused resume of a trained run
def test_another_masking_option_is_refused_before_any_step(pretraining_run, tokenizer_folder, tmp_path):
    folder = copy_of(pretraining_run, tmp_path)
    message = error_line(pretrain_argv(folder, tokenizer_folder, 4, "--masked_lm_prob", "0.3"))
    assert message == changed(folder / "checkpoint-2", "--masked_lm_prob: 0.15 in the checkpoint, 0.3 now")
    assert not (folder / "checkpoint-3").exists()


@pytest.mark.slow  # resumes and trains a step
def test_the_same_command_resumes_and_trains_on(pretraining_run, tokenizer_folder, tmp_path):
    folder = copy_of(pretraining_run, tmp_path)
    status, stderr = run(pretrain_argv(folder, tokenizer_folder, 3))
    assert status == 0, stderr[-3000:]
    saved = json.loads((folder / "checkpoint-3" / FINGERPRINT_NAME).read_text())
    before = json.loads((folder / "checkpoint-2" / FINGERPRINT_NAME).read_text())
    assert {key: value for key, value in saved.items() if not key.startswith("checkpoint.")} == {
        key: value for key, value in before.items() if not key.startswith("checkpoint.")
    }
    assert (saved["checkpoint.global_step"], saved["checkpoint.scheduler_steps"]) == (3, 3)
    assert saved["checkpoint.optimizer_steps"] == 3


@pytest.mark.slow  # a GLUE run of 2 steps, then a refused resume: about 10 s
def test_fine_tuning_with_another_seed_is_refused(glue_run, tmp_path):
    """Trainer's sampler draws each epoch's order from the seed (or --data_seed)."""
    folder = copy_of(glue_run, tmp_path)
    message = error_line(glue_argv(folder, 4, "--seed", "7"))
    assert message == changed(folder / "checkpoint-2", "--seed: 42 in the checkpoint, 7 now")


@pytest.mark.slow  # one refused resume each, a few seconds: the data and model are made before the job's own options
@pytest.mark.parametrize(
    ("options", "difference"),
    [
        (["--data_seed", "3"], "--data_seed: None in the checkpoint, 3 now"),
        (["--max_ngram", "1"], "--max_ngram: 3 in the checkpoint, 1 now"),
        (["--dupe_factor", "2"], "--dupe_factor: 1 in the checkpoint, 2 now"),
        (["--short_seq_prob", "0.5"], "--short_seq_prob: 0.1 in the checkpoint, 0.5 now"),
        (["--pad_to_multiple_of", "8"], "--pad_to_multiple_of: None in the checkpoint, 8 now"),
        (["--word_segmenter", "pieces"], "--word_segmenter: None in the checkpoint, 'pieces' now"),
        (
            ["--train_sampling_strategy", "sequential"],
            "--train_sampling_strategy: 'random' in the checkpoint, 'sequential' now",
        ),
    ],
)
def test_each_option_that_decides_the_data_is_in_the_fingerprint(
    pretraining_run, tokenizer_folder, tmp_path, options, difference
):
    folder = copy_of(pretraining_run, tmp_path)
    assert error_line(pretrain_argv(folder, tokenizer_folder, 4, *options)) == changed(
        folder / "checkpoint-2", difference
    )


@pytest.mark.slow  # a refused resume, a few seconds
def test_another_tokenizer_at_the_same_path_is_refused(pretraining_run, tokenizer_folder, tmp_path):
    """Lower-casing turned off: the same vocabulary, other ids for the same text."""
    folder = copy_of(pretraining_run, tmp_path)
    config_file = tokenizer_folder / "tokenizer_config.json"
    original = config_file.read_text()
    config = json.loads(original)
    assert config["do_lower_case"] is True
    config_file.write_text(json.dumps({**config, "do_lower_case": False}))
    try:
        message = error_line(pretrain_argv(folder, tokenizer_folder, 4))
    finally:
        config_file.write_text(original)
    checkpoint = folder / "checkpoint-2"
    saved = json.loads((checkpoint / FINGERPRINT_NAME).read_text())["tokenizer.content"]
    assert message.startswith(
        f"Cannot resume from {checkpoint}: the run would change 1 of the options it was trained with "
        f"({checkpoint / FINGERPRINT_NAME}): the tokenizer's content (vocabulary, pieces and settings): {saved!r} in "
        "the checkpoint, '"
    )
    assert message.endswith(f"' now. {CHANGE}")


@pytest.mark.slow  # a refused resume, a few seconds
def test_fine_tuning_with_other_training_examples_is_refused(glue_run, tmp_path):
    folder = copy_of(glue_run, tmp_path)
    message = error_line(glue_argv(folder, 4, "--max_train_samples", "8"))
    assert message == changed(folder / "checkpoint-2", "--max_train_samples: 16 in the checkpoint, 8 now")


@pytest.mark.slow  # reads a trained run's checkpoint
def test_a_checkpoint_of_an_earlier_version_is_checked_on_what_it_recorded(pretraining_run, tmp_path, caplog):
    """A fingerprint written before the seed, the data order and the tokenizer's content were recorded: those are
    not compared (a warning names them), the others still are."""
    import logging

    from albert_hf.training.reliability import fingerprint_label

    checkpoint = copy_of(pretraining_run, tmp_path) / "checkpoint-2"
    current = json.loads((checkpoint / FINGERPRINT_NAME).read_text())
    new = [key for key in current if key.startswith(("checkpoint.", "training.", "tokenizer."))]
    earlier = {key: value for key, value in current.items() if key not in new}
    (checkpoint / FINGERPRINT_NAME).write_text(json.dumps(earlier))
    with caplog.at_level(logging.WARNING, logger="albert_hf"):
        check_fingerprint(str(checkpoint), {**current, "training.seed": 7})
    assert "did not record " in caplog.text and fingerprint_label("training.seed") in caplog.text
    learning_rate = current["optimizer.learning_rate"]
    with pytest.raises(Exception, match=re.escape(f"--learning_rate: {learning_rate!r} in the checkpoint, 0.1 now")):
        check_fingerprint(str(checkpoint), {**current, "optimizer.learning_rate": 0.1})


# ---- the files of a checkpoint agree about its step -------------------------------------------------------------


def set_state_step(checkpoint: Path, step: int) -> None:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    (checkpoint / "trainer_state.json").write_text(json.dumps({**state, "global_step": step}))


@pytest.mark.slow  # a refused resume of a trained run
def test_an_edited_global_step_is_refused_naming_the_files(pretraining_run, tokenizer_folder, tmp_path, data_reads):
    folder = copy_of(pretraining_run, tmp_path)
    checkpoint = folder / "checkpoint-2"
    set_state_step(checkpoint, 1)
    message = error_line(pretrain_argv(folder, tokenizer_folder, 4))
    assert message == (
        f"Cannot resume from {checkpoint} (the newest complete checkpoint): the files of {checkpoint} disagree about "
        f"its step: {checkpoint / 'trainer_state.json'} says global step 1, but the folder is named for step 2; "
        f"{checkpoint / FINGERPRINT_NAME} recorded step 2 when it was written; {checkpoint / 'scheduler.pt'} has the "
        f"learning-rate schedule at step 2; {checkpoint / 'optimizer.pt'} has the optimizer at step 2. A file was "
        "edited or copied from another checkpoint: put it back, or resume from another checkpoint."
    )
    assert data_reads == []
    # The same given as a path.
    path_argv = pretrain_argv(folder, tokenizer_folder, 4)
    path_argv[path_argv.index("latest")] = str(checkpoint)
    assert error_line(path_argv).startswith(f"Cannot resume from {checkpoint}: the files of {checkpoint} disagree")


@pytest.mark.slow  # a refused resume each, a few seconds
@pytest.mark.parametrize(("name", "what"), [("scheduler.pt", "learning-rate schedule"), ("optimizer.pt", "optimizer")])
def test_a_state_file_copied_from_another_checkpoint_is_refused(
    pretraining_run, tokenizer_folder, tmp_path, name, what
):
    folder = copy_of(pretraining_run, tmp_path)
    checkpoint = folder / "checkpoint-2"
    shutil.copyfile(folder / "checkpoint-1" / name, checkpoint / name)
    message = error_line(pretrain_argv(folder, tokenizer_folder, 4))
    assert message == (
        f"Cannot resume from {checkpoint} (the newest complete checkpoint): the files of {checkpoint} disagree about "
        f"its step: {checkpoint / 'trainer_state.json'} says global step 2, but {checkpoint / name} has the {what} "
        f"at step 1, where {FINGERPRINT_NAME} recorded 2. A file was edited or copied from another checkpoint: put it "
        "back, or resume from another checkpoint."
    )


@pytest.mark.slow  # a refused resume, a few seconds
def test_a_renamed_checkpoint_with_its_step_edited_to_match_is_refused(pretraining_run, tokenizer_folder, tmp_path):
    folder = copy_of(pretraining_run, tmp_path)
    checkpoint = folder / "checkpoint-3"
    (folder / "checkpoint-2").rename(checkpoint)
    set_state_step(checkpoint, 3)
    message = error_line(pretrain_argv(folder, tokenizer_folder, 4))
    assert message.startswith(
        f"Cannot resume from {checkpoint} (the newest complete checkpoint): the files of {checkpoint} disagree about "
        f"its step: {checkpoint / 'trainer_state.json'} says global step 3, but {checkpoint / FINGERPRINT_NAME} "
        "recorded step 2 when it was written"
    )


def test_a_checkpoint_without_a_record_is_held_to_what_its_files_count(tmp_path):
    """A plain Trainer's (or an earlier albert_hf's) checkpoint: its schedule and optimizer may count fewer steps
    than its global step (fp16 skips steps), never more."""
    import torch

    checkpoint = tmp_path / "checkpoint-5"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 5}))
    torch.save({"last_epoch": 4}, checkpoint / "scheduler.pt")
    torch.save({"state": {0: {"step": torch.tensor(4.0)}}, "param_groups": []}, checkpoint / "optimizer.pt")
    assert checkpoint_consistency_problem(checkpoint) is None
    torch.save({"last_epoch": 6}, checkpoint / "scheduler.pt")
    assert checkpoint_consistency_problem(checkpoint) == (
        f"the files of {checkpoint} disagree about its step: {checkpoint / 'trainer_state.json'} says global step 5, "
        f"but {checkpoint / 'scheduler.pt'} has the learning-rate schedule at step 6. A file was edited or copied "
        "from another checkpoint: put it back, or resume from another checkpoint"
    )


def test_the_seed_and_the_data_order_are_in_the_fingerprint_of_the_training_arguments(tmp_path):
    """What a resume checks before any data or model work (`check_resume_before_work`): the keys of the training
    arguments alone. A checkpoint's fingerprint written by hand, as a seed-42 run writes it."""
    from transformers import TrainingArguments

    def arguments(**changed):
        return TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", **changed)

    saved = fingerprint_of(arguments(), None)
    assert {key: saved[key] for key in saved if key.startswith("training.")} == {
        "training.seed": 42,
        "training.data_seed": None,
        "training.train_sampling_strategy": "random",
        "training.dataloader_drop_last": False,
    }
    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / FINGERPRINT_NAME).write_text(json.dumps({**saved, "checkpoint.fingerprint_version": 2}))
    check_fingerprint(str(checkpoint), fingerprint_of(arguments(), None), only_current_keys=True)
    with pytest.raises(CheckpointError) as refused:
        check_fingerprint(str(checkpoint), fingerprint_of(arguments(seed=7, data_seed=3), None), only_current_keys=True)
    assert str(refused.value) == changed(
        checkpoint, "--data_seed: None in the checkpoint, 3 now", "--seed: 42 in the checkpoint, 7 now"
    )
