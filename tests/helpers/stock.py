"""Loading model folders the way someone without albert_hf does: transformers' Auto classes, in a process where
albert_hf cannot be imported, with no `trust_remote_code`; and the same inputs through albert_hf, to compare.

Shared by tests/test_stock_format.py (every job's output folder, save_pretrained, push_to_hub) and
tests/test_wordpiece.py (the jobs on a Chinese WordPiece vocabulary).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from . import processes
from .command_line import REPO_ROOT

# Texts each folder is run on: pairs (segments 0 and 1), a digit-comma, English and Chinese, punctuation.
STOCK_TEXTS = [
    ("Hello world, in 1990, 1,000 people came (they said).", "Did they?"),
    ("ALBERT shares its layers.", "俄国的盲诗人爱罗先珂君带了他那六弦琴到北京。"),
]

# The process without albert_hf: sys.path without the working tree, and the package marked absent (an editable
# install imports through a meta-path finder, not sys.path), so that any `import albert_hf...` raises.
STOCK_LOADER = """
import json, sys, torch
sys.path = [p for p in sys.path if p not in ("", {repo_root!r})]
sys.modules["albert_hf"] = None
try:
    import albert_hf
    raise SystemExit("albert_hf must not be importable here")
except ImportError:
    pass
import transformers
from transformers import AutoConfig, AutoTokenizer

folders, texts, out = json.loads({folders!r}), json.loads({texts!r}), {out!r}
results = {{}}
for folder in folders:
    config = AutoConfig.from_pretrained(folder)
    architecture = config.architectures[0]
    auto_name = {{
        "AlbertModel": "AutoModel",
        "AlbertForPreTraining": "AutoModelForPreTraining",
        "AlbertForMaskedLM": "AutoModelForMaskedLM",
        "AlbertForSequenceClassification": "AutoModelForSequenceClassification",
        "AlbertForTokenClassification": "AutoModelForTokenClassification",
        "AlbertForQuestionAnswering": "AutoModelForQuestionAnswering",
        "AlbertForMultipleChoice": "AutoModelForMultipleChoice",
    }}[architecture]
    model = getattr(transformers, auto_name).from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, return_tensors="pt")
    if architecture == "AlbertForMultipleChoice":  # the two pairs as the two choices of one question
        inputs = {{key: value.unsqueeze(0) for key, value in inputs.items()}}
    with torch.no_grad():
        outputs = model(**inputs)
    results[folder] = {{
        "model_class": type(model).__module__ + "." + type(model).__name__,
        "tokenizer_class": type(tokenizer).__module__ + "." + type(tokenizer).__name__,
        "config_class": type(config).__module__ + "." + type(config).__name__,
        "inputs": dict(inputs),
        "outputs": {{key: value for key, value in outputs.items() if torch.is_tensor(value)}},
    }}
torch.save(results, out)
"""


def load_without_albert_hf(folders: list[Path], work_dir: Path, texts=STOCK_TEXTS) -> dict[str, dict]:
    """Per folder: the classes transformers' Auto classes loaded (no `trust_remote_code`, albert_hf not importable),
    the encoded `texts` pairs and the model's tensor outputs on them."""
    out = work_dir / "stock_outputs.pt"
    script = STOCK_LOADER.format(
        repo_root=str(REPO_ROOT),
        folders=json.dumps([str(folder) for folder in folders]),
        texts=json.dumps(texts),
        out=str(out),
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # No folder's code could run anyway (none is trusted); the modules cache is the test's own all the same.
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(work_dir / "modules"), OMP_NUM_THREADS="1")
    result = processes.run(
        [sys.executable, "-c", script], cwd=work_dir, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {Path(folder).name: value for folder, value in torch.load(out).items()}


def albert_hf_outputs(folder: Path, texts=STOCK_TEXTS) -> tuple[dict, dict]:
    """(inputs, tensor outputs) of the folder's model and tokenizer loaded by albert_hf (`albert_hf.load_tokenizer`,
    the albert_hf class the folder's config names) on `texts`, as `load_without_albert_hf` runs them."""
    import albert_hf
    from albert_hf import modeling

    config = albert_hf.AlbertConfig.from_pretrained(folder)
    architecture = config.architectures[0]
    model = getattr(modeling, architecture).from_pretrained(folder).eval()
    tokenizer = albert_hf.load_tokenizer(folder)
    inputs = dict(tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, return_tensors="pt"))
    if architecture == "AlbertForMultipleChoice":
        inputs = {key: value.unsqueeze(0) for key, value in inputs.items()}
    with torch.no_grad():
        outputs = model(**inputs)
    return inputs, {key: value for key, value in outputs.items() if torch.is_tensor(value)}
