"""Loading runs no code from a checkpoint folder when albert_hf is installed.

A model that transformers' own ALBERT describes is saved without any code (tests/test_stock_format.py). One that needs
albert_hf's (here sharing="attention") carries modeling.py, configuration.py and tokenization.py (with `auto_map`
entries in its config.json and tokenizer_config.json) for `trust_remote_code=True` users without albert_hf. With
albert_hf imported,
its registered classes win over the folder's code: here the folder's three files are replaced by code that writes a
marker file when run, and the Auto classes load the folder in a fresh process with `trust_remote_code` True, False
and unset. The counter-check, without `import albert_hf`, shows that the planted code does run when transformers
resolves the folder's `auto_map` (so the marker would catch it).

The one exception, documented in the card and README: `AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`
runs the folder's tokenization.py even with albert_hf imported. transformers 5.24 prefers a registered tokenizer
over the folder's only when the config class is not in its tokenizer mapping by *name*, and its own ALBERT's config is
also called `AlbertConfig`; config and models have no such check. With albert_hf installed, `trust_remote_code` is not
needed, so the card tells such users to leave it out. The test of that case asserts the behaviour as it is, so that a
transformers release that changes it is noticed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import processes
from helpers.command_line import CLI_ENV
from helpers.data import FIXTURES

PLANTED = """
import pathlib
pathlib.Path({marker!r}).open("a").write({name!r} + "\\n")
raise RuntimeError("code from the checkpoint folder ran: " + {name!r})
"""

LOAD = """
import sys, json
{import_line}
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, AutoTokenizer
folder, trusts, autos = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].split(",")
for trust in trusts:
    kwargs = {{}} if trust is None else {{"trust_remote_code": trust}}
    loaded = [globals()[auto].from_pretrained(folder, **kwargs) for auto in autos]
    print(json.dumps([type(obj).__module__ + "." + type(obj).__name__ for obj in loaded]))
"""
MODEL_AUTOS = "AutoConfig,AutoModel,AutoModelForSequenceClassification"
INSTALLED_MODEL_CLASSES = [
    "albert_hf.configuration.AlbertConfig",
    "albert_hf.modeling.AlbertModel",
    "albert_hf.modeling.AlbertForSequenceClassification",
]


@pytest.fixture(scope="module")
def planted_folder(tmp_path_factory) -> tuple[Path, Path]:
    """(a saved tiny albert_hf model and tokenizer whose remote code writes a marker, the marker's path)."""
    from albert_hf import AlbertConfig, AlbertForSequenceClassification, AlbertHFTokenizer

    root = tmp_path_factory.mktemp("planted")
    folder, marker = root / "model", root / "ran.txt"
    AlbertForSequenceClassification(
        AlbertConfig(
            vocab_size=30000,
            embedding_size=16,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            sharing="attention",  # which transformers' ALBERT cannot hold: the folder keeps albert_hf's code
        )
    ).save_pretrained(folder)
    AlbertHFTokenizer(vocab_file=str(FIXTURES / "spiece" / "albert-30k-clean.model")).save_pretrained(folder)
    auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
    assert {"AutoConfig", "AutoModel", "AutoModelForSequenceClassification"} <= set(auto_map)
    assert "AutoTokenizer" in json.loads((folder / "tokenizer_config.json").read_text())["auto_map"]
    for name in ("modeling.py", "configuration.py", "tokenization.py"):
        assert (folder / name).is_file()  # the files transformers would import
        (folder / name).write_text(PLANTED.format(marker=str(marker), name=name))
    return folder, marker


def load(folder: Path, trusts: list, import_albert_hf: bool, modules_cache: Path, autos: str):
    """Load `folder` with each Auto class of `autos` for each `trust_remote_code` value of `trusts` (None: not
    passed), in one fresh process; one line of loaded classes per value."""
    script = LOAD.format(import_line="import albert_hf" if import_albert_hf else "")
    env = {**CLI_ENV, "HF_MODULES_CACHE": str(modules_cache)}
    return processes.run(
        [sys.executable, "-c", script, str(folder), json.dumps(trusts), autos],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def loaded_classes(result: processes.CompletedProcess) -> list[list[str]]:
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.strip().splitlines() if line.startswith("[")]


@pytest.mark.slow
def test_with_albert_hf_imported_no_code_of_the_folder_runs(planted_folder, tmp_path):
    folder, marker = planted_folder
    models = load(folder, [True, False, None], True, tmp_path / "modules", MODEL_AUTOS)
    assert loaded_classes(models) == [INSTALLED_MODEL_CLASSES] * 3  # trust_remote_code True, False, unset
    tokenizers = load(folder, [False, None], True, tmp_path / "modules", "AutoTokenizer")
    assert loaded_classes(tokenizers) == [["albert_hf.tokenization.AlbertHFTokenizer"]] * 2
    assert not marker.exists(), marker.read_text()


def test_the_tokenizer_with_trust_remote_code_runs_the_folders_code_as_documented(planted_folder, tmp_path):
    folder, marker = planted_folder
    result = load(folder, [True], True, tmp_path / "modules", "AutoTokenizer")
    assert result.returncode != 0 and "code from the checkpoint folder ran: tokenization.py" in result.stderr
    assert marker.read_text().splitlines() == ["tokenization.py"]
    marker.unlink()


def test_without_albert_hf_trust_remote_code_runs_the_folders_code(planted_folder, tmp_path):
    folder, marker = planted_folder
    result = load(folder, [True], False, tmp_path / "modules", MODEL_AUTOS)
    assert result.returncode != 0 and "code from the checkpoint folder ran" in result.stderr, result.stderr[-3000:]
    assert marker.read_text().splitlines() == ["configuration.py"]
    marker.unlink()
