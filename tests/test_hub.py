"""Sharing on the Hub without a network: every uploaded file checked, then loaded where albert_hf is absent.

The Hub API is intercepted at the calls transformers and albert_hf make (`HfApi.create_repo`, `create_branch`,
`create_commit` for `albert_hf.hub.push_to_hub`; `upload_folder` for `Trainer.push_to_hub`): a fake "remote" folder
receives the files, and a subprocess that cannot import albert_hf loads them: a model transformers' own ALBERT
describes with its Auto classes and no `trust_remote_code`, one that needs albert_hf's code with `trust_remote_code=True`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from helpers import processes
from helpers.hub import REMOTE_CODE_FILES, STOCK_FILES, TEXTS, encode, files_in, tiny_config
from helpers.stock import albert_hf_outputs, load_without_albert_hf
from huggingface_hub import CommitInfo, HfApi, ModelCard, RepoUrl
from huggingface_hub.errors import EntryNotFoundError
from huggingface_hub.utils import filter_repo_objects
from safetensors.torch import load_file
from transformers import TrainingArguments

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.hub import (
    CardInfo,
    latest_eval_metrics,
    push_to_hub,
    quality_metrics,
    render_model_card,
    training_recipe,
)
from albert_hf.modeling import ALBERT_AUTO_CLASSES
from albert_hf.training.trainer import AlbertTrainer

REPO_ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------------------------------------
# A fake Hub
# --------------------------------------------------------------------------------------------------------------------


class FakeHub:
    """Records Hub calls; committed files land in `remote/<repo_id>/` exactly as they would be uploaded."""

    def __init__(self, root: Path):
        self.root = root
        self.calls: list[tuple[str, dict]] = []

    def folder(self, repo_id: str) -> Path:
        return self.root / repo_id

    def create_repo(self, api, repo_id, **kwargs):
        self.calls.append(("create_repo", dict(repo_id=repo_id, **kwargs)))
        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def create_branch(self, api, repo_id, branch, **kwargs):
        self.calls.append(("create_branch", dict(repo_id=repo_id, branch=branch)))

    def create_commit(self, api, repo_id, operations, commit_message, **kwargs):
        self.calls.append(("create_commit", dict(repo_id=repo_id, commit_message=commit_message, **kwargs)))
        for operation in operations:
            target = self.folder(repo_id) / operation.path_in_repo
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(operation.path_or_fileobj, target)
        return CommitInfo(
            commit_url=f"https://huggingface.co/{repo_id}/commit/0",
            commit_message=commit_message,
            commit_description="",
            oid="0" * 40,
        )

    def upload_folder(self, api, repo_id, folder_path, ignore_patterns=None, commit_message=None, **kwargs):
        """What `HfApi.upload_folder` would send: the folder's files minus `ignore_patterns`."""
        self.calls.append(("upload_folder", dict(repo_id=repo_id, commit_message=commit_message)))
        folder_path = Path(folder_path)
        relative = [path.relative_to(folder_path).as_posix() for path in folder_path.rglob("*") if path.is_file()]
        for name in filter_repo_objects(relative, ignore_patterns=ignore_patterns):
            target = self.folder(repo_id) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder_path / name, target)
        return CommitInfo(
            commit_url=f"https://huggingface.co/{repo_id}/commit/0",
            commit_message=commit_message or "",
            commit_description="",
            oid="0" * 40,
        )


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> FakeHub:
    hub = FakeHub(tmp_path / "remote")
    for name in ("create_repo", "create_branch", "create_commit", "upload_folder"):
        method = getattr(hub, name)
        monkeypatch.setattr(HfApi, name, lambda api, *args, _method=method, **kwargs: _method(api, *args, **kwargs))
    return hub


# --------------------------------------------------------------------------------------------------------------------
# Loading where albert_hf cannot be imported
# --------------------------------------------------------------------------------------------------------------------

REMOTE_LOADER = """
import json, sys, torch
sys.path = [p for p in sys.path if p not in ("", {repo_root!r})]
# An editable install (pip install -e .) imports through a meta-path finder, not sys.path: mark the package as
# absent, as on a machine without albert_hf (any `import albert_hf...` then raises ModuleNotFoundError).
sys.modules["albert_hf"] = None
try:
    import albert_hf
    raise SystemExit("albert_hf must not be importable here")
except ImportError:
    pass
import transformers
from transformers import AutoTokenizer

folder, auto_name, out = {folder!r}, {auto_name!r}, {out!r}
model = getattr(transformers, auto_name).from_pretrained(folder, trust_remote_code=True).eval()
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
texts = json.loads({texts!r})
inputs = tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, return_tensors="pt")
with torch.no_grad():
    logits = model(**inputs).logits
torch.save({{"inputs": dict(inputs), "logits": logits, "tokenizer_class": type(tokenizer).__module__}}, out)
"""


def load_without_albert_hf_trusting_code(folder: Path, auto_name: str, tmp_path: Path) -> dict:
    out = tmp_path / "remote_outputs.pt"
    script = REMOTE_LOADER.format(
        repo_root=str(REPO_ROOT), folder=str(folder), auto_name=auto_name, out=str(out), texts=json.dumps(TEXTS)
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"), OMP_NUM_THREADS="1")
    result = processes.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(out)


# --------------------------------------------------------------------------------------------------------------------
# push_to_hub
# --------------------------------------------------------------------------------------------------------------------


MNLI_CARD = dict(
    info=CardInfo(
        dataset_id="nyu-mll/glue",
        dataset_config="mnli",
        dataset_name="GLUE MNLI",
        base_model="albert/albert-base-v2",
        task_name="Natural language inference",
    ),
    eval_metrics={"accuracy": 0.8125},
)


def check_card(remote: Path) -> ModelCard:
    """The model card: ours, valid metadata, the run's result in model-index."""
    card = ModelCard.load(remote / "README.md")
    assert card.data.library_name == "transformers" and card.data.license == "apache-2.0"
    assert card.data.pipeline_tag == "text-classification" and card.data.base_model == "albert/albert-base-v2"
    [result] = card.data.eval_results
    assert (result.dataset_type, result.dataset_config, result.metric_type, result.metric_value) == (
        "nyu-mll/glue",
        "mnli",
        "accuracy",
        0.8125,
    )
    return card


def test_push_to_hub_uploads_transformers_albert_that_loads_without_albert_hf(fake_hub, tokenizer, tmp_path):
    """Stock by default: the model transformers' ALBERT describes is pushed as one, in one commit, and someone without
    albert_hf loads it with the Auto classes, no `trust_remote_code`, to the same outputs."""
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=3)).eval()
    push_to_hub(model, "someone/tiny-albert-mnli", tokenizer=tokenizer, revision="v1", **MNLI_CARD)

    kinds = [kind for kind, _ in fake_hub.calls]
    assert kinds == ["create_repo", "create_branch", "create_commit"]  # one commit holds everything
    assert fake_hub.calls[2][1]["revision"] == "v1"
    remote = fake_hub.folder("someone/tiny-albert-mnli")
    assert files_in(remote) == STOCK_FILES | {"README.md"}
    config = json.loads((remote / "config.json").read_text())
    assert config["model_type"] == "albert" and "auto_map" not in config and len(config["id2label"]) == 3
    weights = load_file(remote / "model.safetensors")
    state = model.state_dict()
    assert set(weights) == set(state) and all(torch.equal(weights[k], state[k]) for k in weights)
    tokenizer_config = json.loads((remote / "tokenizer_config.json").read_text())
    assert "auto_map" not in tokenizer_config and tokenizer_config["tokenizer_class"] == "AlbertHFTokenizer"
    assert (remote / "spiece.model").read_bytes() == Path(tokenizer.vocab_file).read_bytes()
    card = check_card(remote)
    assert "albert_hf" in card.data.tags and "custom_code" not in card.data.tags
    assert "trust_remote_code" not in card.text.split("## How to use")[1].split("## Intended")[0]
    assert "import albert_hf" in card.text  # how to get the exact tokenizer

    loaded = load_without_albert_hf([remote], tmp_path)[remote.name]
    assert loaded["model_class"] == "transformers.models.albert.modeling_albert.AlbertForSequenceClassification"
    inputs, outputs = albert_hf_outputs(remote)
    for key, value in inputs.items():
        assert torch.equal(loaded["inputs"][key], value), key
    assert torch.allclose(loaded["outputs"]["logits"], outputs["logits"], atol=1e-6)


def test_push_to_hub_of_a_model_that_needs_albert_hf_carries_its_code(fake_hub, tokenizer, tmp_path):
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=3, sharing="attention")).eval()
    push_to_hub(model, "someone/tiny-albert-mnli", tokenizer=tokenizer, **MNLI_CARD)

    remote = fake_hub.folder("someone/tiny-albert-mnli")
    assert files_in(remote) == REMOTE_CODE_FILES
    # config: our model type, an auto_map for every Auto class, the labels
    config = json.loads((remote / "config.json").read_text())
    assert config["model_type"] == "albert_hf" and config["sharing"] == "attention"
    expected_auto_map = {name: f"modeling.{cls.__name__}" for name, cls in ALBERT_AUTO_CLASSES.items()}
    assert config["auto_map"] == {"AutoConfig": "configuration.AlbertConfig", **expected_auto_map}
    # weights: exactly the model's tensors
    weights = load_file(remote / "model.safetensors")
    state = model.state_dict()
    assert set(weights) == set(state) and all(torch.equal(weights[k], state[k]) for k in weights)
    # code: the package's own files, unchanged
    for name in ("modeling.py", "configuration.py", "tokenization.py"):
        assert (remote / name).read_text() == (REPO_ROOT / "albert_hf" / name).read_text()
    tokenizer_config = json.loads((remote / "tokenizer_config.json").read_text())
    # the class is named AlbertHFTokenizer so that it never shadows transformers' AlbertTokenizer by name
    assert tokenizer_config["auto_map"]["AutoTokenizer"][0] == "tokenization.AlbertHFTokenizer"
    assert (remote / "spiece.model").read_bytes() == Path(tokenizer.vocab_file).read_bytes()
    card = check_card(remote)
    assert {"albert_hf", "custom_code"} <= set(card.data.tags)
    assert "trust_remote_code=True" in card.text and "`tokenization.py`" in card.text
    assert "sharing='attention' keeps one feed-forward block per layer application" in card.text

    # Someone without albert_hf loads model and tokenizer from those files and gets the same outputs.
    remote_outputs = load_without_albert_hf_trusting_code(remote, "AutoModelForSequenceClassification", tmp_path)
    inputs = encode(tokenizer)
    assert remote_outputs["tokenizer_class"].startswith("transformers_modules")
    for key, value in inputs.items():
        assert torch.equal(remote_outputs["inputs"][key], value), key
    assert inputs["token_type_ids"].max() == 1  # pairs keep their segments
    with torch.no_grad():
        expected = model(**inputs).logits
    assert torch.allclose(remote_outputs["logits"], expected, atol=1e-6)


def test_transformers_push_to_hub_methods_write_the_same_formats(fake_hub, tokenizer, monkeypatch):
    """`model.push_to_hub` / `tokenizer.push_to_hub` (transformers' own, two commits, transformers' generic card): a
    stock model and its tokenizer are pushed as transformers' ALBERT; a model that needs albert_hf's code carries it
    (its tokenizer keeps its code only when saved beside it: `albert_hf.hub.push_to_hub`, Trainer)."""

    def no_card_on_the_hub(*args, **kwargs):
        raise EntryNotFoundError("README.md")  # a new repository: transformers then writes its default card

    monkeypatch.setattr(ModelCard, "load", no_card_on_the_hub)
    albert_hf.AlbertForTokenClassification(tiny_config(num_labels=5)).push_to_hub("someone/tiny-ner")
    tokenizer.push_to_hub("someone/tiny-ner")
    albert_hf.AlbertForTokenClassification(tiny_config(num_labels=5, sharing="ffn")).push_to_hub("someone/ffn-ner")
    assert [kind for kind, _ in fake_hub.calls].count("create_commit") == 3
    stock, custom = fake_hub.folder("someone/tiny-ner"), fake_hub.folder("someone/ffn-ner")
    assert files_in(stock) == STOCK_FILES | {"README.md"}
    assert json.loads((stock / "config.json").read_text())["model_type"] == "albert"
    tokenizer_config = json.loads((stock / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "AlbertHFTokenizer" and "auto_map" not in tokenizer_config
    assert {"config.json", "model.safetensors", "modeling.py", "configuration.py"} <= files_in(custom)
    assert "auto_map" in json.loads((custom / "config.json").read_text())


def test_push_refuses_a_tokenizer_that_does_not_fit_the_model(fake_hub, tokenizer):
    model = albert_hf.AlbertForMaskedLM(tiny_config(vocab_size=1000))
    with pytest.raises(
        ValueError, match="has 30000 pieces but the model has vocab_size 1000: ids 1000 to 29999 have no embedding row"
    ):
        push_to_hub(model, "someone/mismatch", tokenizer=tokenizer)
    assert [kind for kind, _ in fake_hub.calls] == ["create_repo"]  # nothing was committed


def test_trainer_push_to_hub_sends_the_albert_hf_model_card(fake_hub, tokenizer, tmp_path):
    """--push_to_hub / --hub_model_id go through Trainer.push_to_hub: the card it uploads must be ours."""
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=2))
    encoded = tokenizer(["a good film", "a bad film", "great fun", "dull"] * 2, padding="max_length", max_length=8)
    dataset = Dataset.from_dict({**encoded, "labels": [1, 0, 1, 0] * 2})
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        warmup_steps=1,
        seed=7,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        push_to_hub=True,
        hub_model_id="someone/tiny-sst2",
    )

    def accuracy(prediction) -> dict:
        return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

    trainer = AlbertTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        eval_dataset=dataset,
        processing_class=tokenizer,
        compute_metrics=accuracy,
        card_info=CardInfo(dataset_id="nyu-mll/glue", dataset_config="sst2"),
    )
    trainer.train()
    metrics = trainer.evaluate()
    trainer.push_to_hub(dataset="GLUE SST-2")

    assert ("create_repo", {"repo_id": "someone/tiny-sst2", "token": None, "private": None, "exist_ok": True}) in [
        (kind, call) for kind, call in fake_hub.calls
    ]
    remote = fake_hub.folder("someone/tiny-sst2")
    assert STOCK_FILES | {"README.md", "training_args.bin"} <= files_in(remote)
    assert not {"modeling.py", "configuration.py", "tokenization.py"} & files_in(remote)
    card = ModelCard.load(remote / "README.md")
    assert "albert_hf" in card.data.tags and card.data.model_name == "someone/tiny-sst2"
    reported = {result.metric_type: result.metric_value for result in card.data.eval_results}
    assert reported == {"accuracy": round(metrics["eval_accuracy"], 4), "loss": round(metrics["eval_loss"], 4)}
    assert card.data.eval_results[0].dataset_name == "GLUE SST-2"
    assert "| learning_rate | 0.001 |" in card.text and "| max_steps | 2 |" in card.text
    assert "| seed | 7 |" in card.text


# --------------------------------------------------------------------------------------------------------------------
# Model cards
# --------------------------------------------------------------------------------------------------------------------


def test_metrics_filtering_and_latest_eval_values():
    assert quality_metrics(
        {
            "eval_f1": 0.5,
            "eval_runtime": 2.0,
            "eval_samples_per_second": 9.0,
            "epoch": 1.0,
            "eval_loss": 0.3,
            "train_loss": 0.9,
        }
    ) == {"f1": 0.5, "loss": 0.3}
    history = [{"loss": 1.0}, {"eval_accuracy": 0.5, "eval_loss": 0.9}, {"eval_accuracy": 0.75, "step": 4}]
    assert latest_eval_metrics(history) == {"accuracy": 0.75, "loss": 0.9}


def test_card_without_results_or_recipe_still_validates():
    card = render_model_card(albert_hf.AlbertForMaskedLM(tiny_config(sharing="attention")), model_name="me/mlm")
    parsed = ModelCard(str(card))
    assert parsed.data.eval_results is None and parsed.data.pipeline_tag == "fill-mask"
    assert "No evaluation results were recorded" in parsed.text
    assert "needs albert_hf's code: sharing='attention' keeps one feed-forward block" in parsed.text


def test_results_without_a_hub_dataset_are_in_the_text_not_the_model_index(tmp_path):
    """A user's own data (or a local dataset folder) has no Hub id to report results against in the model-index;
    the card's text still gives them, and the folder by its name alone."""
    local = tmp_path / "my-data"
    local.mkdir()
    for info in (CardInfo(), CardInfo(dataset_id=str(local))):
        card = ModelCard(
            str(
                render_model_card(
                    albert_hf.AlbertModel(tiny_config()), model_name="x", info=info, eval_metrics={"f1": 0.5}
                )
            )
        )
        assert card.data.eval_results is None and card.data.datasets is None
        assert "| f1 | 0.5000 |" in card.text and str(tmp_path) not in card.text
    assert "my-data, `validation` split" in card.text


@pytest.mark.parametrize(
    "name, on_the_hub",
    [
        ("albert/albert-base-v2", True),
        ("albert-base-v2", True),
        ("../repo/quickstart-output", False),
        ("/abs/x", False),
    ],
)
def test_a_base_model_is_a_hub_id_only_when_it_names_no_local_folder(name, on_the_hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    card = render_model_card(albert_hf.AlbertModel(tiny_config()), model_name="x", info=CardInfo(base_model=name))
    assert card.data.base_model == (name if on_the_hub else None)
    assert ("not on the Hub" in card.text) != on_the_hub
    (tmp_path / "albert-base-v2").mkdir()  # the same name, now a folder here: a local start
    card = render_model_card(
        albert_hf.AlbertModel(tiny_config()), model_name="x", info=CardInfo(base_model="albert-base-v2")
    )
    assert card.data.base_model is None and "local checkpoint (`albert-base-v2`, not on the Hub)" in card.text


def test_recipe_names_the_optimizer_and_schedule_objects_that_ran():
    from transformers import get_scheduler

    model = torch.nn.Linear(3, 2)
    optimizer = albert_hf.Lamb(albert_hf.lamb_parameter_groups(model, 0.01), lr=0.003, betas=(0.9, 0.999), eps=1e-6)
    schedule = albert_hf.get_albert_polynomial_decay_schedule(optimizer, num_warmup_steps=5, num_training_steps=50)
    args = TrainingArguments(output_dir="unused", optim="adamw_torch", learning_rate=0.5, report_to=[])
    recipe = training_recipe(args, optimizer=optimizer, lr_scheduler=schedule, steps_trained=50)
    assert recipe["optimizer"] == "Lamb" and recipe["learning_rate"] == "0.003"  # the peak, not the warmup's 0
    assert recipe["weight_decay"] == "0.01 / 0.0" and recipe["betas"] == "(0.9, 0.999)" and recipe["eps"] == "1e-06"
    assert recipe["lr_schedule"] == (
        "albert_polynomial_decay_schedule (num_warmup_steps=5, num_training_steps=50, power=1.0)"
    )
    assert recipe["steps_trained"] == 50 and "adam_betas" not in recipe and "lr_scheduler_type" not in recipe
    adamw = torch.optim.AdamW(model.parameters(), lr=0.1)
    constant = get_scheduler("constant", adamw)
    recipe = training_recipe(args, optimizer=adamw, lr_scheduler=constant)
    assert recipe["optimizer"] == "AdamW" and recipe["lr_schedule"] == "constant"


RELEASED = {"base": 11_683_584, "large": 17_683_968, "xlarge": 58_724_864, "xxlarge": 222_595_584}


@pytest.mark.parametrize("size", sorted(RELEASED))
def test_release_cards_match_the_presets(size):
    card = ModelCard.load(REPO_ROOT / "model_cards" / f"{size}.md")
    assert card.data.library_name == "transformers" and card.data.license == "apache-2.0"
    config = AlbertConfig.preset(size)
    with torch.device("meta"):
        parameters = sum(p.numel() for p in albert_hf.AlbertModel(config).parameters())
    assert parameters == RELEASED[size]
    text = card.text
    assert f"| {parameters:,} |" in text
    assert f"| Layers (applications of the shared layer) | {config.num_hidden_layers} |" in text
    assert f"| Hidden size H / embedding size E | {config.hidden_size} / {config.embedding_size} |" in text
    assert f"| Attention heads | {config.num_attention_heads} |" in text
    assert f"| Feed-forward size | {config.intermediate_size} |" in text
    # both releases' reported results, and the citation
    assert re.search(rf"\| ALBERT-{size} v2 \| [\d.]+ \| [\d.]+/[\d.]+ \| [\d.]+/[\d.]+ \|", text)
    assert re.search(rf"\| ALBERT-{size} v1 \| [\d.]+ \| [\d.]+/[\d.]+ \| [\d.]+/[\d.]+ \|", text)
    assert "@inproceedings{lan2020albert" in text and "trust_remote_code" not in card.data.to_dict()
