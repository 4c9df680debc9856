"""No secret in any file the project writes: a tiny GLUE job pushed to a fake Hub, with a Hub token planted in every
way a user gives one (`--hub_token=X`, `--hub-token X`, and `HF_TOKEN` in the environment), leaves none of them in
any file of its output folder and checkpoints (`training_args.bin` included), in the lock it held, nor in its logs;
and the pushes still authenticate with the token given on the command line.

No network: transformers' `hf_api()` is replaced by a fake that records, for every call, the token huggingface_hub
would send (the `token` argument, else `huggingface_hub.get_token()`, which reads `HF_TOKEN`).
"""

from __future__ import annotations

import logging
import sys
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
import transformers.trainer as trainer_module
from helpers.data import FIXTURES
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf.training.run_folder import LOCK_NAME, _command_line

FIRST = "hf_plantedFirstSpellingAAAA1111"  # --hub_token=..., overridden by the later spelling
GIVEN = "hf_plantedSecondSpellingBBBB2222"  # --hub-token ..., the one the job uses
ENVIRONMENT = "hf_plantedEnvironmentCCCC3333"  # HF_TOKEN before the job started
PLANTED = (FIRST, GIVEN, ENVIRONMENT)


class RecordingHub:
    """A Hub that records the token each call would authenticate with, and the lock file while the job runs."""

    def __init__(self, output_dir: Path):
        self.output_dir = output_dir
        self.tokens: list[str | None] = []
        self.lock_text = ""

    def _token(self, token) -> str | None:
        return token or huggingface_hub.get_token()

    def create_repo(self, repo_id, token=None, **kwargs):
        self.tokens.append(self._token(token))
        self.lock_text = (self.output_dir / LOCK_NAME).read_text()  # the job holds its lock now
        return SimpleNamespace(repo_id=f"user/{repo_id}")

    def upload_folder(self, *, token=None, run_as_future=False, **kwargs):
        self.tokens.append(self._token(token))
        done = Future()
        done.set_result(SimpleNamespace(commit_url="https://hub.invalid/commit", oid="0" * 40))
        return done if run_as_future else done.result()


def glue_argv(output_dir: Path) -> list[str]:
    return [
        "--task_name",
        "rte",
        "--data_dir",
        str(FIXTURES / "glue" / "RTE"),
        "--tokenizer_name_or_path",
        str(FIXTURES / "spiece" / "albert-30k-clean.model"),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--do_train",
        "--do_eval",
        "--max_train_samples",
        "8",
        "--max_eval_samples",
        "8",
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "4",
        "--max_seq_length",
        "32",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--push_to_hub",
        "--hub_model_id",
        "run",
        "--hub_strategy",
        "all_checkpoints",
        f"--hub_token={FIRST}",
        "--hub-token",
        GIVEN,
        "--output_dir",
        str(output_dir),
    ]


def test_no_planted_token_in_any_file_lock_or_log_and_pushes_still_authenticate(tmp_path, monkeypatch, caplog, capfd):
    from albert_hf.scripts.glue import main

    output_dir = tmp_path / "out"
    hub = RecordingHub(output_dir)
    monkeypatch.setattr(trainer_module, "hf_api", lambda: hub)
    monkeypatch.setenv("HF_TOKEN", ENVIRONMENT)  # restored after the test, whatever the job set
    argv = glue_argv(output_dir)
    monkeypatch.setattr(sys, "argv", ["albert-hf", "glue", *argv])  # what the lock records
    with caplog.at_level(logging.INFO):
        assert main(argv) == 0
    captured = capfd.readouterr()

    # The pushes authenticated, every one with the token the command line gave last.
    assert hub.tokens and set(hub.tokens) == {GIVEN}, hub.tokens
    files = [path for path in output_dir.rglob("*") if path.is_file()]
    names = {path.relative_to(output_dir).as_posix() for path in files}
    assert {"training_args.bin", "checkpoint-1/training_args.bin", "checkpoint-2/training_args.bin"} <= names
    assert {"README.md", "checkpoint-2/run_fingerprint.json", "eval_results.json"} <= names
    assert "--hub-token ***" in hub.lock_text and "--hub_token=***" in hub.lock_text
    texts = {str(path): path.read_bytes() for path in files}
    texts.update({"lock": hub.lock_text.encode(), "log records": caplog.text.encode()})
    texts.update({"stdout": captured.out.encode(), "stderr": captured.err.encode()})
    for token in PLANTED:
        leaks = [where for where, content in texts.items() if token.encode() in content]
        assert not leaks, f"{token} written in {leaks}"


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["--hub_token", "T"], "--hub_token ***"),
        (["--hub-token", "T"], "--hub-token ***"),
        (["--hub_token=T"], "--hub_token=***"),
        (["--hub-token=T"], "--hub-token=***"),
        (["--hub_tok", "T"], "--hub_tok ***"),  # argparse's abbreviation of --hub_token
        (["--hub-t=T"], "--hub-t=***"),
        (["--HUB_TOKEN", "T"], "--HUB_TOKEN ***"),
        (["--hub_model_id", "T"], "--hub_model_id T"),  # not a secret
    ],
)
def test_the_lock_masks_a_token_in_every_spelling(argv, shown):
    assert _command_line(["albert-hf", "glue", *argv]) == f"albert-hf glue {shown}"
