"""`albert-hf export --format sentence-transformers`: sentence-transformers' layout on a stock ALBERT folder, which
`SentenceTransformer(folder)` loads offline, without albert_hf, and whose embeddings are the mean of albert_hf's token
embeddings under the attention mask (computed here by hand from albert_hf's `AlbertModel`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch
from helpers import processes
from helpers.command_line import REPO_ROOT
from helpers.data import SPIECE_MODEL
from helpers.hub import tiny_config

import albert_hf
from albert_hf.cli import main as cli_main
from albert_hf.convert import add_sentence_transformers_layout
from albert_hf.errors import UserError
from albert_hf.hub import save_for_hub

pytestmark = pytest.mark.needs("sentence_transformers")

TEXTS = ["ALBERT shares its layers.", "In 1990, 1,000 people came (they said).", "A much longer sentence " * 6]

ENCODE_WITHOUT_ALBERT_HF = """
import json, sys
sys.path = [p for p in sys.path if p not in ("", {repo_root!r})]
sys.modules["albert_hf"] = None
try:
    import albert_hf
    raise SystemExit("albert_hf must not be importable here")
except ImportError:
    pass
import torch
from sentence_transformers import SentenceTransformer

model = SentenceTransformer({folder!r}, device="cpu")
embeddings = model.encode(json.loads({texts!r}), convert_to_tensor=True, batch_size=2)
torch.save({{"embeddings": embeddings, "max_seq_length": model.max_seq_length}}, {out!r})
"""


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    """A fine-tuned classifier as a job leaves it (stock folder, real 30k tokenizer): its backbone is exported."""
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("models") / "classifier"
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=2))
    save_for_hub(model, folder, tokenizer=albert_hf.AlbertHFTokenizer(vocab_file=str(SPIECE_MODEL)))
    return folder


def mean_pooled(folder: Path, texts: list[str], max_length: int) -> torch.Tensor:
    """albert_hf's token embeddings of `texts`, averaged under the attention mask (by hand)."""
    model = albert_hf.AlbertModel.from_pretrained(folder).eval()
    tokenizer = albert_hf.load_tokenizer(folder)
    inputs = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**inputs).last_hidden_state
    mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


def test_export_writes_a_sentence_transformer_that_embeds_as_albert_hf_mean_pooling(model_folder, tmp_path):
    output = tmp_path / "st"
    argv = ["export", "--format", "sentence-transformers", "--model_name_or_path", str(model_folder)]
    assert cli_main([*argv, "--output_dir", str(output), "--max_seq_length", "16"]) == 0
    files = {path.relative_to(output).as_posix() for path in output.rglob("*") if path.is_file()}
    assert {"modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"} <= files
    assert {"1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json", "README.md"} <= files
    config = json.loads((output / "config.json").read_text())
    assert config["model_type"] == "albert" and config["architectures"] == ["AlbertModel"]
    assert "sentence-transformers" in (output / "README.md").read_text()

    out = tmp_path / "embeddings.pt"
    script = ENCODE_WITHOUT_ALBERT_HF.format(
        repo_root=str(REPO_ROOT), folder=str(output), texts=json.dumps(TEXTS), out=str(out)
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"), OMP_NUM_THREADS="1")
    result = processes.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = torch.load(out)
    assert loaded["max_seq_length"] == 16
    expected = mean_pooled(model_folder, TEXTS, max_length=16)  # the third text is truncated at 16 tokens
    assert loaded["embeddings"].shape == expected.shape
    assert (loaded["embeddings"] - expected).abs().max().item() <= 1e-5


def test_cls_pooling_and_normalization_in_process(model_folder, tmp_path):
    from sentence_transformers import SentenceTransformer

    output = tmp_path / "st"
    argv = ["export", "--format", "sentence-transformers", "--model_name_or_path", str(model_folder)]
    assert cli_main([*argv, "--output_dir", str(output), "--pooling", "cls", "--normalize"]) == 0
    embeddings = SentenceTransformer(str(output), device="cpu").encode(TEXTS, convert_to_tensor=True)
    model = albert_hf.AlbertModel.from_pretrained(model_folder).eval()
    inputs = albert_hf.load_tokenizer(model_folder)(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        cls = model(**inputs).last_hidden_state[:, 0]
    expected = torch.nn.functional.normalize(cls, dim=-1)
    assert (embeddings - expected).abs().max().item() <= 1e-5


def test_a_model_that_needs_albert_hf_is_refused(tmp_path, capsys):
    folder = tmp_path / "attention"
    save_for_hub(albert_hf.AlbertModel(tiny_config(sharing="attention")), folder)
    argv = ["export", "--format", "sentence-transformers", "--model_name_or_path", str(folder)]
    assert cli_main([*argv, "--output_dir", str(tmp_path / "st")]) == 2
    assert "sharing='attention' keeps one feed-forward block" in capsys.readouterr().err
    assert not (tmp_path / "st" / "modules.json").exists()
    with pytest.raises(UserError, match="not transformers' own ALBERT: sentence-transformers would need its code"):
        add_sentence_transformers_layout(folder)
    quantized = [*argv, "--output_dir", str(tmp_path / "q"), "--quantize", "int8"]
    assert cli_main(quantized) == 2
    assert "--quantize is for --format onnx" in capsys.readouterr().err
