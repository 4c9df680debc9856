"""PEFT on albert_hf models: target modules, adapter sizes under cross-layer sharing, Trainer, save/load, merge."""

from __future__ import annotations

import re

import pytest
import torch
from datasets import Dataset
from helpers.tiny import tiny_config
from peft import PeftModel, get_peft_model
from transformers import Trainer, TrainingArguments

import albert_hf
from albert_hf.peft_utils import (
    TARGET_MODULES,
    count_adapter_parameters,
    encoder_target_modules,
    ia3_config,
    ia3_parameter_count,
    lora_config,
    lora_parameter_count,
)


def batch(batch_size: int = 4, seq_len: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 99, (batch_size, seq_len), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 8:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


# --------------------------------------------------------------------------------------------------------------------
# Target modules
# --------------------------------------------------------------------------------------------------------------------


def test_encoder_regex_targets_encoder_layers_but_not_the_mlm_head():
    model = albert_hf.AlbertForMaskedLM(tiny_config())
    pattern = encoder_target_modules()
    matched = {name for name, _ in model.named_modules() if re.fullmatch(pattern, name)}
    linear_leaves = {name.rsplit(".", 1)[-1] for name in matched}
    assert linear_leaves == set(TARGET_MODULES)
    assert all(".encoder." in name for name in matched)
    # The pitfall the regex avoids: a plain "dense" also names the MLM head's H -> E projection.
    assert "predictions.dense" in {name for name, _ in model.named_modules() if name.endswith("dense")}
    assert "predictions.dense" not in matched


def test_unknown_target_module_is_refused():
    with pytest.raises(ValueError, match="Unknown ALBERT target modules"):
        lora_config(target_modules=["query", "intermediate"])


# --------------------------------------------------------------------------------------------------------------------
# Adapter sizes: one adapter per distinct module, however many layers apply it
# --------------------------------------------------------------------------------------------------------------------

SHARING_CASES = {
    "all": dict(sharing="all"),
    "none": dict(sharing="none"),
    "attention": dict(sharing="attention"),
    "ffn": dict(sharing="ffn"),
    "all_groups2_inner2": dict(sharing="all", num_hidden_groups=2, inner_group_num=2),
}


@pytest.mark.parametrize("case", sorted(SHARING_CASES))
def test_lora_parameter_count_follows_sharing(case):
    config = tiny_config(**SHARING_CASES[case])
    peft_model = get_peft_model(albert_hf.AlbertModel(config), lora_config(r=4))
    assert count_adapter_parameters(peft_model) == lora_parameter_count(config, r=4)
    # Only the adapters train.
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert trainable == count_adapter_parameters(peft_model)


def test_shared_layer_has_one_adapter_for_all_layers():
    """sharing="all": one LoRA per module serves the L = 4 applications; "none": one per layer, so L times more."""
    shared = get_peft_model(albert_hf.AlbertModel(tiny_config(sharing="all")), lora_config(r=4))
    unshared = get_peft_model(albert_hf.AlbertModel(tiny_config(sharing="none")), lora_config(r=4))
    # 6 target modules x r * (in + out); H=32, F=37: 4 attention (32+32) + ffn (32+37) + ffn_output (37+32)
    per_layer = 4 * (4 * 64 + 2 * 69)
    assert count_adapter_parameters(shared) == per_layer
    assert count_adapter_parameters(unshared) == 4 * per_layer
    query_adapters = [name for name, _ in shared.named_modules() if name.endswith("attention.query.lora_A.default")]
    assert len(query_adapters) == 1


def test_ia3_parameter_count_follows_sharing():
    for sharing in ("all", "none", "ffn"):
        config = tiny_config(sharing=sharing)
        peft_model = get_peft_model(albert_hf.AlbertModel(config), ia3_config())
        assert count_adapter_parameters(peft_model) == ia3_parameter_count(config)
    # sharing="all": key (32) + value (32) + ffn_output input (37), once.
    assert ia3_parameter_count(tiny_config()) == 32 + 32 + 37


# --------------------------------------------------------------------------------------------------------------------
# Training with Trainer, saving and loading the adapter, merging
# --------------------------------------------------------------------------------------------------------------------


def toy_classification_dataset(size: int = 16) -> Dataset:
    """Label = whether token 7 occurs: learnable, deterministic."""
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(8, 99, (size, 10), generator=generator)
    labels = torch.arange(size) % 2
    input_ids[labels == 1, 4] = 7
    return Dataset.from_dict({"input_ids": input_ids.tolist(), "labels": labels.tolist()})


def adapter_config_for(method: str):
    if method == "lora":
        return lora_config(r=4, lora_alpha=8, task_type="SEQ_CLS")
    return ia3_config(task_type="SEQ_CLS")


@pytest.mark.parametrize("method", ["lora", "ia3"])
def test_train_save_load_and_merge_adapter(tmp_path, method):
    torch.manual_seed(0)
    base = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=2)).eval()
    base.save_pretrained(tmp_path / "base")
    frozen_before = first_layer(base).attention.key.weight.clone()

    peft_model = get_peft_model(base, adapter_config_for(method))
    adapter_before = {n: p.detach().clone() for n, p in peft_model.named_parameters() if p.requires_grad}
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        max_steps=4,
        per_device_train_batch_size=8,
        learning_rate=5e-2,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = Trainer(model=peft_model, args=args, train_dataset=toy_classification_dataset())
    trainer.train()
    assert all(torch.isfinite(torch.tensor(entry["loss"])) for entry in trainer.state.log_history if "loss" in entry)

    changed = [n for n, p in peft_model.named_parameters() if p.requires_grad and not torch.equal(p, adapter_before[n])]
    assert any(marker in name for name in changed for marker in ("lora_B", "ia3_l"))
    shared_key = first_layer(peft_model.base_model.model).attention.key
    assert torch.equal(shared_key.base_layer.weight, frozen_before)  # the pretrained weights stay frozen

    # Save the adapter (plus the fully trained classifier head) and load it onto a fresh copy of the base model.
    peft_model.eval()
    inputs = batch()
    expected = peft_model(**inputs).logits
    peft_model.save_pretrained(tmp_path / "adapter")
    saved = {path.name for path in (tmp_path / "adapter").iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= saved
    fresh_base = albert_hf.AlbertForSequenceClassification.from_pretrained(tmp_path / "base")
    reloaded = PeftModel.from_pretrained(fresh_base, tmp_path / "adapter").eval()
    assert torch.allclose(reloaded(**inputs).logits, expected, atol=1e-6)

    # Merging folds the adapter into the (shared) weights: a plain albert_hf model with the same outputs.
    merged = reloaded.merge_and_unload()
    assert type(merged) is albert_hf.AlbertForSequenceClassification
    assert not any(marker in name for name, _ in merged.named_parameters() for marker in ("lora_", "ia3_"))
    assert torch.allclose(merged(**inputs).logits, expected, atol=1e-5)
    assert not torch.allclose(first_layer(merged).attention.key.weight, frozen_before)  # the shared weight moved


def first_layer(model: albert_hf.AlbertForSequenceClassification):
    """The shared layer of group 0 (with sharing="all", the one every layer application uses)."""
    return model.albert.encoder.albert_layer_groups[0].albert_layers[0]
