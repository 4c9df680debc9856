"""Identity of data, not of paths: the run fingerprint keys each data file by its content
(`albert_hf.training.reliability.data_files_fingerprint`), so a resume after the data changed at the same path is
refused naming the file.

The identities are compared with sha256 digests computed here with hashlib over the bytes the rule names; the refusal
is checked through the real `albert-hf pretrain` command line.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from helpers.command_line import assert_one_line_error, run_cli
from helpers.data import FIXTURES
from helpers.tiny import TINY_TWO_LAYER_OVERRIDES

from albert_hf.training import reliability
from albert_hf.training.callbacks import CompleteCheckpoints
from albert_hf.training.reliability import data_file_identity, data_files_fingerprint


def test_a_small_file_is_identified_by_the_sha256_of_all_its_bytes(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one sentence.\nanother one.\n")
    assert data_file_identity(path) == "sha256 " + hashlib.sha256(b"one sentence.\nanother one.\n").hexdigest()


def test_a_large_file_is_identified_by_its_size_and_evenly_spaced_samples(tmp_path, monkeypatch):
    # The rule at a small scale: files above 10 bytes are large; 3 samples of 4 bytes at offsets 0, 8 and 16 of 20.
    monkeypatch.setattr(reliability, "WHOLE_FILE_HASH_LIMIT", 10)
    monkeypatch.setattr(reliability, "DATA_SAMPLE_COUNT", 3)
    monkeypatch.setattr(reliability, "DATA_SAMPLE_BYTES", 4)
    content = bytearray(b"ABCDefghIJKLmnopQRST")
    path = tmp_path / "big.txt"
    path.write_bytes(content)
    expected = hashlib.sha256(b"ABCD" + b"IJKL" + b"QRST").hexdigest()
    assert data_file_identity(path) == f"20 bytes, sha256 of 3 samples {expected}"
    content[9] = ord("x")  # inside the second sample
    path.write_bytes(content)
    assert data_file_identity(path) != f"20 bytes, sha256 of 3 samples {expected}"
    content[9], content[5] = ord("J"), ord("X")  # between samples: the stated limit of the rule
    path.write_bytes(content)
    assert data_file_identity(path) == f"20 bytes, sha256 of 3 samples {expected}"


def test_folders_and_globs_give_each_file_under_its_absolute_path(tmp_path):
    folder = tmp_path / "shards"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("a")
    (folder / "sub" / "b.txt").write_text("b")
    (folder / ".hidden").write_text("h")
    digest = {name: "sha256 " + hashlib.sha256(name.encode()).hexdigest() for name in ("a", "b")}
    expected = {f"data file {folder / 'a.txt'}": digest["a"], f"data file {folder / 'sub' / 'b.txt'}": digest["b"]}
    assert data_files_fingerprint([str(folder)]) == expected
    assert data_files_fingerprint([str(folder / "**" / "*.txt"), None, "glue/some-hub-dataset"]) == expected


def pretrain_argv(corpus, output_dir, max_steps: int) -> list[str]:
    return [
        "pretrain",
        "--train_files",
        str(corpus),
        "--lines_are_paragraphs",
        "--tokenizer_name_or_path",
        str(FIXTURES / "spiece" / "albert-30k-clean.model"),
        "--config_overrides",
        TINY_TWO_LAYER_OVERRIDES,
        "--max_seq_length",
        "32",
        "--max_steps",
        str(max_steps),
        "--per_device_train_batch_size",
        "4",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
        "--resume_from_checkpoint",
        "latest",
    ]


@pytest.mark.slow
def test_cli_resume_after_the_data_changed_at_the_same_path_is_refused_naming_the_file(tmp_path):
    corpus = tmp_path / "corpus.txt"
    lines = (FIXTURES / "corpus" / "wikitext2_valid_paragraphs.txt").read_text(encoding="utf-8").splitlines()
    corpus.write_text("\n".join(lines[:60]) + "\n", encoding="utf-8")
    output_dir = tmp_path / "run"
    first = run_cli(pretrain_argv(corpus, output_dir, max_steps=1))
    assert first.returncode == 0, first.stderr[-3000:]
    saved = json.loads((output_dir / "checkpoint-1" / "run_fingerprint.json").read_text())
    key = f"job.data file {corpus}"
    assert saved[key] == "sha256 " + hashlib.sha256(corpus.read_bytes()).hexdigest()

    corpus.write_text("\n".join(lines[60:120]) + "\n", encoding="utf-8")  # other text, same path
    resumed = run_cli(pretrain_argv(corpus, output_dir, max_steps=2))
    assert_one_line_error(
        resumed,
        "pretrain",
        f"Cannot resume from {output_dir / 'checkpoint-1'}",
        f"the content of {corpus}: {saved[key]!r} in the checkpoint, "
        f"'sha256 {hashlib.sha256(corpus.read_bytes()).hexdigest()}' now",
    )
    assert not (output_dir / "checkpoint-2").exists()


def test_fine_tuning_jobs_fingerprint_the_files_of_their_training_data(tmp_path, spiece_model, monkeypatch):
    """What albert_hf/scripts/glue.py gives its Trainer to fingerprint (the run stops before training)."""
    from albert_hf.scripts import glue

    trainers = []
    monkeypatch.setattr(glue, "train_and_evaluate", lambda trainer, *args: trainers.append(trainer))
    data_dir = FIXTURES / "glue" / "RTE"
    argv = ["--task_name", "rte", "--data_dir", str(data_dir), "--output_dir", str(tmp_path), "--do_train"]
    argv += ["--tokenizer_name_or_path", str(spiece_model), "--config_overrides", TINY_TWO_LAYER_OVERRIDES]
    argv += ["--max_seq_length", "64"]
    assert glue.main([*argv, "--report_to", "none", "--use_cpu", "true"]) == 0
    fingerprint = CompleteCheckpoints.of(trainers[0]).fingerprint_extra
    train = data_dir / "train.tsv"
    assert fingerprint[f"data file {train}"] == "sha256 " + hashlib.sha256(train.read_bytes()).hexdigest()
    assert fingerprint["train_data"]["data_dir"] == str(data_dir)
