"""Conversion to and from stock transformers ALBERT: exported checkpoints load in transformers' own classes with the
same outputs and no custom code, and what stock ALBERT cannot hold is refused; official checkpoints import into
albert_hf classes whole or not at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from helpers.hub import STOCK_FILES, TINY, encode, files_in, tiny_config
from huggingface_hub import ModelCard
from safetensors.torch import load_file, save_file

import albert_hf
from albert_hf.convert import check_exportable, export_to_transformers, import_official_checkpoint
from albert_hf.tokenization import AlbertHFTokenizer


@pytest.mark.parametrize(
    "overrides",
    [dict(sharing="all", num_hidden_groups=2, inner_group_num=2, num_hidden_layers=4), dict(sharing="none")],
)
def test_export_to_stock_transformers(tmp_path, tokenizer, overrides):
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=2, **overrides)).eval()
    export_to_transformers(model, tmp_path / "stock", tokenizer=tokenizer)

    config = json.loads((tmp_path / "stock" / "config.json").read_text())
    assert config["model_type"] == "albert" and "auto_map" not in config and "sharing" not in config
    assert not list((tmp_path / "stock").glob("*.py"))  # no custom code
    stock = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "stock").eval()
    assert type(stock) is transformers.AlbertForSequenceClassification
    # With albert_hf imported, AutoTokenizer gives the exact tokenizer the folder names; transformers alone reads its
    # tokenizer.json with TokenizersBackend (the class it resolves an unknown one to: tests/test_stock_format.py).
    assert type(transformers.AutoTokenizer.from_pretrained(tmp_path / "stock")) is AlbertHFTokenizer
    stock_tokenizer = transformers.TokenizersBackend.from_pretrained(tmp_path / "stock")
    ours, theirs = encode(tokenizer), encode(stock_tokenizer)
    assert set(theirs) == set(ours) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    with torch.no_grad():
        assert torch.allclose(stock(**theirs).logits, model(**ours).logits, atol=1e-6)


@pytest.mark.parametrize(
    "overrides, named",
    [
        (dict(sharing="attention"), "sharing='attention'.*unshared_ffn"),
        (dict(sharing="ffn"), "sharing='ffn'.*unshared_attention"),
        (dict(early_exit=True), "early_exit=True adds an exit classifier"),
        (dict(num_layers_at_inference=1), "num_layers_at_inference=1 stops before the last layer"),
    ],
)
def test_export_refuses_what_stock_albert_has_no_place_for(tmp_path, overrides, named):
    model = albert_hf.AlbertForSequenceClassification(tiny_config(**overrides))
    with pytest.raises(ValueError, match=named):
        export_to_transformers(model, tmp_path / "stock")
    assert not (tmp_path / "stock").exists()
    check_exportable(tiny_config(sharing="none"))  # the allowed ones pass


def official_folder(folder: Path, spiece_model: Path) -> transformers.AlbertForPreTraining:
    """What albert/albert-base-v2 publishes: config (model_type "albert"), weights, spiece.model."""
    torch.manual_seed(0)
    reference = transformers.AlbertForPreTraining(transformers.AlbertConfig(**TINY)).eval()
    reference.save_pretrained(folder)
    shutil.copyfile(spiece_model, folder / "spiece.model")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 512}))
    return reference


def test_import_official_checkpoint(tmp_path, spiece_model):
    reference = official_folder(tmp_path / "official", spiece_model)
    model = import_official_checkpoint(tmp_path / "official", tmp_path / "imported")
    assert type(model) is albert_hf.AlbertForPreTraining
    imported = tmp_path / "imported"
    # transformers' own ALBERT describes it, so it is saved as one: no code, no auto_map.
    assert files_in(imported) == STOCK_FILES | {"README.md", "_albert_hf.files.json"}  # and the writer's record
    config = json.loads((imported / "config.json").read_text())
    assert config["model_type"] == "albert" and "auto_map" not in config
    card = ModelCard.load(imported / "README.md")
    # A local folder is no Hub id: the card's metadata names none, its text says where the weights came from.
    assert card.data.base_model is None and "official" in card.text

    tokenizer = AlbertHFTokenizer.from_pretrained(imported)
    inputs = encode(tokenizer)
    reloaded = albert_hf.AlbertForPreTraining.from_pretrained(imported).eval()
    with torch.no_grad():
        expected = reference(**inputs)
        for candidate in (model.eval(), reloaded):
            actual = candidate(**inputs)
            assert torch.allclose(actual.prediction_logits, expected.prediction_logits, atol=1e-5)
            assert torch.allclose(actual.sop_logits, expected.sop_logits, atol=1e-5)


def test_import_refuses_a_checkpoint_without_backbone_weights(tmp_path, spiece_model):
    official_folder(tmp_path / "official", spiece_model)
    weights_path = tmp_path / "official" / "model.safetensors"
    weights = load_file(weights_path)
    del weights["albert.embeddings.word_embeddings.weight"]
    save_file(weights, weights_path, metadata={"format": "pt"})
    with pytest.raises(ValueError, match="missing backbone weights.*word_embeddings"):
        import_official_checkpoint(tmp_path / "official", model_class=albert_hf.AlbertModel)
