"""What the Hub tests share: the tiny model on the real 30k vocabulary, texts to encode, the files a Hub repository of
an albert_hf model must hold (tests/test_hub.py, tests/test_convert.py), and a fake Hub client that records what each
upload would send (`FakeHfApi`, installed by the `fake_hub` fixture of tests/conftest.py)."""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

from .tiny import TINY_CONFIG
from .tiny import tiny_config as _tiny_config

# The real ALBERT vocabulary, so the real tokenizer's ids fit.
TINY = dict(TINY_CONFIG, vocab_size=30000, num_hidden_layers=2)
TEXTS = [("Hello world, 1,000 people came.", "Did they?"), ("ALBERT shares its layers.", "Yes: all of them.")]
tiny_config = functools.partial(_tiny_config, **TINY)


# What a repository of a model transformers' own ALBERT describes holds (besides its card): no code.
STOCK_FILES = {"config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json"}
# What a repository of a model that needs albert_hf's code holds to load with trust_remote_code and no albert_hf
# installed, plus its card.
REMOTE_CODE_FILES = {
    "config.json",
    "model.safetensors",
    "modeling.py",
    "configuration.py",
    "spiece.model",
    "tokenizer_config.json",
    "tokenization.py",
    "README.md",
}


def files_in(folder: Path) -> set[str]:
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}


def encode(tokenizer, texts=TEXTS) -> dict:
    return dict(tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, return_tensors="pt"))


def _checkpoint_problem(folder, marked: bool):
    from albert_hf.training.reliability import checkpoint_problem

    return checkpoint_problem(folder, marked=marked)


class FakeHfApi:
    """Records uploads; runs each in a background thread like `run_as_future=True` does, once `release` is set. Each
    record holds the folder, its name in the repository, whether a checkpoint was marked complete when the upload was
    asked for, the files the folder held when the upload ran and the README.md (model card) it would send."""

    def __init__(self, fail: str | None = None):
        self.fail = fail  # None, "at_call" (upload_folder raises) or "in_background" (the future fails)
        self.uploads: list[dict] = []
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.release = threading.Event()
        self.release.set()

    def create_repo(self, repo_id, **kwargs):
        return SimpleNamespace(repo_id=f"user/{repo_id}")

    def upload_folder(self, *, repo_id, folder_path, path_in_repo=None, run_as_future=False, **kwargs):
        record = {
            "folder": Path(folder_path),
            "path_in_repo": path_in_repo,
            # What a reader of the folder sees at the moment the upload is asked for: a checkpoint marked complete.
            "problem_at_call": _checkpoint_problem(folder_path, marked=True) if path_in_repo else None,
            "commit_message": kwargs.get("commit_message"),
        }
        self.uploads.append(record)
        if self.fail == "at_call":
            raise ConnectionError("fake network down")

        def upload():
            self.release.wait(timeout=30)
            record["files"] = sorted(p.name for p in Path(folder_path).iterdir())
            readme = Path(folder_path) / "README.md"
            record["readme"] = readme.read_text(encoding="utf-8") if readme.is_file() else None
            if self.fail == "in_background":
                raise ConnectionError("fake upload rejected")
            return "commit"

        if run_as_future:
            return self.executor.submit(upload)
        future = Future()
        future.set_result(upload())
        return future
