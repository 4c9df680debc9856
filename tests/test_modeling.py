"""Core model: exact parity with transformers' ALBERT, sharing strategies, checkpoints, Auto classes, bad input."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
import torch
import transformers
from helpers import processes
from helpers.tiny import TINY_CONFIG, tiny_config
from transformers.modeling_layers import GradientCheckpointingLayer

import albert_hf
from albert_hf import AlbertConfig

HEAD_CLASSES = [
    "AlbertModel",
    "AlbertForPreTraining",
    "AlbertForMaskedLM",
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertForQuestionAnswering",
    "AlbertForMultipleChoice",
]

# transformers' AlbertConfig is built from the same fields: the activation is named so that both sides say it.
TINY = dict(TINY_CONFIG, hidden_act="gelu_new")
# groups > 1, inner_group_num > 1, and E == H (the projection still exists, as in transformers).
PARITY_CONFIGS = {
    "plain": dict(TINY),
    "groups2_inner2": dict(TINY, num_hidden_groups=2, inner_group_num=2),
    "e_equals_h": dict(TINY, embedding_size=32, num_hidden_layers=3, num_hidden_groups=3),
}


def padded_batch(batch_size: int = 3, seq_len: int = 10, vocab_size: int = 99, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, vocab_size, (batch_size, seq_len), generator=generator)
    attention_mask = torch.ones(batch_size, seq_len, dtype=torch.long)
    attention_mask[1, seq_len - 3 :] = 0
    attention_mask[2, 4:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, seq_len // 2 :] = 1
    return input_ids, attention_mask, token_type_ids


def labels_for(class_name: str, input_ids: torch.Tensor, config) -> dict:
    generator = torch.Generator().manual_seed(1)
    batch_size, seq_len = input_ids.shape
    if class_name in ("AlbertForPreTraining", "AlbertForMaskedLM"):
        labels = torch.full_like(input_ids, -100)
        labels[:, 2:5] = input_ids[:, 2:5]
        extra = {"labels": labels}
        if class_name == "AlbertForPreTraining":
            extra["sentence_order_label"] = torch.tensor([0, 1, 1])[:batch_size]
        return extra
    if class_name == "AlbertForSequenceClassification":
        return {"labels": torch.randint(0, config.num_labels, (batch_size,), generator=generator)}
    if class_name == "AlbertForTokenClassification":
        labels = torch.randint(0, config.num_labels, (batch_size, seq_len), generator=generator)
        labels[:, 0] = -100
        return {"labels": labels}
    if class_name == "AlbertForQuestionAnswering":
        return {"start_positions": torch.tensor([1, 2, 3]), "end_positions": torch.tensor([2, 5, 3])}
    if class_name == "AlbertForMultipleChoice":
        return {"labels": torch.tensor([0, 1, 1])[:batch_size]}
    return {}


def paired_models(class_name: str, config_kwargs: dict, attn_implementation: str):
    """The same randomly initialised weights in transformers' class and ours."""
    torch.manual_seed(0)
    reference = getattr(transformers, class_name)(
        transformers.AlbertConfig(**config_kwargs, attn_implementation=attn_implementation)
    ).eval()
    ours = getattr(albert_hf, class_name)(AlbertConfig(**config_kwargs, attn_implementation=attn_implementation)).eval()
    ours.load_state_dict(reference.state_dict(), strict=True)
    return reference, ours


def max_abs_diff(a, b) -> float:
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b), f"length {len(a)} != {len(b)}"
        return max(max_abs_diff(x, y) for x, y in zip(a, b))
    return (a - b).abs().max().item()


# --------------------------------------------------------------------------------------------------------------------
# Parity with transformers' ALBERT
# --------------------------------------------------------------------------------------------------------------------


# fp32, outputs and gradients: measured at most 3e-8 (outputs) and 1.2e-7 (gradients) on these cases. The exact erf
# GELU in place of gelu_new moves outputs by about 1e-4.
PARITY_TOLERANCE = 1e-6


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("config_name", sorted(PARITY_CONFIGS))
@pytest.mark.parametrize("class_name", HEAD_CLASSES)
def test_parity_with_transformers(class_name, config_name, attn_implementation):
    config_kwargs = PARITY_CONFIGS[config_name]
    reference, ours = paired_models(class_name, config_kwargs, attn_implementation)
    input_ids, attention_mask, token_type_ids = padded_batch()
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    if class_name == "AlbertForMultipleChoice":  # (B, C, T): two choices per example
        inputs = {k: torch.stack([v, v.flip(0)], dim=1) for k, v in inputs.items()}
    inputs.update(labels_for(class_name, input_ids, ours.config))
    # transformers returns no attention weights under sdpa, so only compare them under eager.
    output_attentions = attn_implementation == "eager"
    expected = reference(**inputs, output_hidden_states=True, output_attentions=output_attentions)
    actual = ours(**inputs, output_hidden_states=True, output_attentions=output_attentions)

    for key, value in expected.items():
        if key == "attentions" and not output_attentions:
            continue
        assert actual[key] is not None, key
        assert max_abs_diff(value, actual[key]) <= PARITY_TOLERANCE, key
    # one hidden state per layer application after the E -> H projection, as transformers 5 records them
    assert len(actual.hidden_states) == 1 + config_kwargs["num_hidden_layers"] * config_kwargs.get("inner_group_num", 1)
    if "loss" in expected:
        assert actual.loss is not None

    # Gradient parity: every parameter, after one backward of the head's loss (the base model: of a function of all
    # its hidden states).
    def objective(outputs):
        if "loss" in outputs:
            return outputs.loss
        return sum(state.pow(2).mean() for state in outputs.hidden_states)

    objective(expected).backward()
    objective(actual).backward()
    reference_parameters = dict(reference.named_parameters())
    for name, parameter in ours.named_parameters():
        expected_grad = reference_parameters[name].grad
        assert (parameter.grad is None) == (expected_grad is None), name
        if expected_grad is not None:
            assert max_abs_diff(expected_grad, parameter.grad) <= PARITY_TOLERANCE, name


def test_parity_tolerance_tells_the_exact_gelu_from_gelu_new():
    """The tolerance above must be tight enough to notice a wrong activation: ours with the exact erf GELU, given
    transformers' gelu_new weights, is more than twice the tolerance away (it was within the 1e-5 used before)."""
    torch.manual_seed(0)
    reference = transformers.AlbertForPreTraining(transformers.AlbertConfig(**TINY)).eval()
    ours = albert_hf.AlbertForPreTraining(AlbertConfig(**{**TINY, "hidden_act": "gelu"})).eval()
    ours.load_state_dict(reference.state_dict())
    input_ids, attention_mask, token_type_ids = padded_batch()
    expected = reference(input_ids, attention_mask, token_type_ids)
    actual = ours(input_ids, attention_mask, token_type_ids)
    assert max_abs_diff(expected.prediction_logits, actual.prediction_logits) > 2 * PARITY_TOLERANCE


def test_attentions_returned_under_sdpa_match_eager():
    _, eager = paired_models("AlbertModel", PARITY_CONFIGS["groups2_inner2"], "eager")
    sdpa = albert_hf.AlbertModel(AlbertConfig(**PARITY_CONFIGS["groups2_inner2"], attn_implementation="sdpa")).eval()
    sdpa.load_state_dict(eager.state_dict())
    input_ids, attention_mask, _ = padded_batch()
    a = eager(input_ids, attention_mask=attention_mask, output_attentions=True)
    b = sdpa(input_ids, attention_mask=attention_mask, output_attentions=True)
    assert len(b.attentions) == 8 and b.attentions[0].shape == (3, 4, 10, 10)
    assert max_abs_diff(a.attentions, b.attentions) <= 1e-6
    # padded keys get no weight
    assert b.attentions[0][2, :, :, 4:].abs().max().item() == 0.0


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_unpadded_batch_is_bidirectional(attn_implementation):
    """With no mask at all SDPA must not fall back to causal attention: the first token sees the last one."""
    reference, ours = paired_models("AlbertModel", TINY, attn_implementation)
    input_ids = torch.randint(5, 99, (2, 8))
    assert max_abs_diff(reference(input_ids).last_hidden_state, ours(input_ids).last_hidden_state) <= 1e-5
    changed = input_ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 99
    first_before = ours(input_ids).last_hidden_state[:, 0]
    first_after = ours(changed).last_hidden_state[:, 0]
    assert (first_before - first_after).abs().max().item() > 1e-4


def test_inputs_embeds_and_position_ids_parity():
    reference, ours = paired_models("AlbertModel", TINY, "sdpa")
    input_ids, attention_mask, token_type_ids = padded_batch()
    embeds = reference.embeddings.word_embeddings(input_ids)
    position_ids = torch.arange(10).flip(0).unsqueeze(0)
    kwargs = dict(attention_mask=attention_mask, token_type_ids=token_type_ids, position_ids=position_ids)
    expected = reference(inputs_embeds=embeds, **kwargs).last_hidden_state
    assert max_abs_diff(expected, ours(inputs_embeds=embeds, **kwargs).last_hidden_state) <= 1e-5


def test_tuple_outputs_when_return_dict_false():
    _, ours = paired_models("AlbertForSequenceClassification", TINY, "sdpa")
    input_ids, attention_mask, _ = padded_batch()
    output = ours(input_ids, attention_mask=attention_mask, labels=torch.tensor([0, 1, 0]), return_dict=False)
    assert isinstance(output, tuple) and output[0].dim() == 0 and output[1].shape == (3, 2)


# --------------------------------------------------------------------------------------------------------------------
# Losses: problem types, ignore index, num_items_in_batch
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "problem_type, num_labels",
    [("regression", 1), ("single_label_classification", 3), ("multi_label_classification", 3)],
)
def test_sequence_classification_problem_types_match_transformers(problem_type, num_labels):
    torch.manual_seed(0)
    kwargs = dict(TINY, num_labels=num_labels, problem_type=problem_type)
    reference = transformers.AlbertForSequenceClassification(transformers.AlbertConfig(**kwargs)).eval()
    ours = albert_hf.AlbertForSequenceClassification(AlbertConfig(**kwargs)).eval()
    ours.load_state_dict(reference.state_dict())
    input_ids, attention_mask, _ = padded_batch()
    labels = {
        "regression": torch.tensor([0.5, 2.0, -1.0]),
        "single_label_classification": torch.tensor([0, 2, 1]),
        "multi_label_classification": torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]),
    }[problem_type]
    expected = reference(input_ids, attention_mask=attention_mask, labels=labels).loss
    actual = ours(input_ids, attention_mask=attention_mask, labels=labels).loss
    assert abs(expected.item() - actual.item()) <= 1e-6


def test_sequence_classification_infers_problem_type():
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=1)).eval()
    input_ids, _, _ = padded_batch()
    model(input_ids, labels=torch.tensor([0.1, 0.2, 0.3]))
    assert model.config.problem_type == "regression"


@pytest.mark.parametrize("class_name", ["AlbertForMaskedLM", "AlbertForTokenClassification", "AlbertForPreTraining"])
def test_num_items_in_batch_gives_one_large_batch_gradient(class_name):
    """Two micro-batches with losses summed over the global label count == one batch with the mean loss."""
    torch.manual_seed(0)
    model = getattr(albert_hf, class_name)(tiny_config()).eval()
    input_ids, attention_mask, token_type_ids = padded_batch(batch_size=4, seq_len=9)
    labels = torch.full_like(input_ids, -100)
    labels[0, 1:6] = input_ids[0, 1:6] % 2  # uneven label counts per micro-batch
    labels[2, 3] = input_ids[2, 3] % 2
    labels[3, 2:4] = input_ids[3, 2:4] % 2
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels)
    if class_name == "AlbertForPreTraining":
        inputs["sentence_order_label"] = torch.tensor([0, 1, 1, 0])

    model.zero_grad()
    model(**inputs).loss.backward()
    full = [p.grad.clone() for p in model.parameters() if p.grad is not None]

    model.zero_grad()
    num_items = labels.ne(-100).sum()
    for half in (slice(0, 2), slice(2, 4)):
        micro = {k: v[half] for k, v in inputs.items()}
        extra = {"num_sequences_in_batch": 4} if class_name == "AlbertForPreTraining" else {}
        model(**micro, num_items_in_batch=num_items, **extra).loss.backward()
    accumulated = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    assert max_abs_diff(full, accumulated) <= 1e-6


@pytest.mark.parametrize(
    ("class_name", "problem_type", "num_labels"),
    [
        ("AlbertForSequenceClassification", "single_label_classification", 3),
        ("AlbertForSequenceClassification", "regression", 1),
        ("AlbertForSequenceClassification", "multi_label_classification", 3),
        ("AlbertForMultipleChoice", None, 2),
    ],
)
def test_num_items_in_batch_gives_one_large_batch_gradient_per_example_heads(class_name, problem_type, num_labels):
    """Micro-batches of 1 and 3 examples, each loss a sum over the count Trainer passes (`labels.ne(-100).sum()` of
    the whole batch: examples, or examples x labels for multi-label) == one batch of 4 with the mean loss."""
    torch.manual_seed(0)
    model = getattr(albert_hf, class_name)(tiny_config(num_labels=num_labels, problem_type=problem_type)).eval()
    input_ids, attention_mask, token_type_ids = padded_batch(batch_size=4, seq_len=9)
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    generator = torch.Generator().manual_seed(2)
    if class_name == "AlbertForMultipleChoice":
        inputs = {k: torch.stack([v, v.roll(1, 0)], dim=1) for k, v in inputs.items()}  # (4, 2, 9)
        inputs["labels"] = torch.tensor([0, 1, 1, 0])
    elif problem_type == "single_label_classification":
        inputs["labels"] = torch.randint(0, num_labels, (4,), generator=generator)
    elif problem_type == "regression":
        inputs["labels"] = torch.rand(4, generator=generator) * 5
    else:
        inputs["labels"] = torch.randint(0, 2, (4, num_labels), generator=generator).float()

    model.zero_grad()
    model(**inputs).loss.backward()
    full = [p.grad.clone() for p in model.parameters() if p.grad is not None]

    model.zero_grad()
    num_items = inputs["labels"].ne(-100).sum()
    for part in (slice(0, 1), slice(1, 4)):  # uneven micro-batches: a mean per micro-batch would weigh them wrongly
        model(**{k: v[part] for k, v in inputs.items()}, num_items_in_batch=num_items).loss.backward()
    accumulated = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    assert len(full) == len(accumulated) > 0
    assert max_abs_diff(full, accumulated) <= 1e-6


def test_pretraining_loss_parts_and_ignore_index():
    _, ours = paired_models("AlbertForPreTraining", TINY, "sdpa")
    input_ids, attention_mask, _ = padded_batch()
    labels = torch.full_like(input_ids, -100)
    labels[:, 3] = input_ids[:, 3]
    output = ours(input_ids, attention_mask=attention_mask, labels=labels, sentence_order_label=torch.tensor([0, 1, 0]))
    assert torch.allclose(output.loss, output.mlm_loss + output.sop_loss)
    manual = torch.nn.functional.cross_entropy(output.prediction_logits[:, 3], input_ids[:, 3])
    assert abs(manual.item() - output.mlm_loss.item()) <= 1e-5


# --------------------------------------------------------------------------------------------------------------------
# Sharing strategies and parameter counts
# --------------------------------------------------------------------------------------------------------------------


def module_parameter_count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "preset, expected",
    [("base", 11_683_584), ("large", 17_683_968), ("xlarge", 58_724_864), ("xxlarge", 222_595_584)],
)
def test_preset_parameter_counts(preset, expected):
    with torch.device("meta"):  # shapes only: no memory, no init
        model = albert_hf.AlbertModel(AlbertConfig.preset(preset))
    assert module_parameter_count(model) == expected


def closed_form_parameter_count(config: AlbertConfig) -> int:
    """AlbertModel parameters from the formulas, per sharing strategy (paper, Table 4)."""
    V, E, H, F, P, S = (
        config.vocab_size,
        config.embedding_size,
        config.hidden_size,
        config.intermediate_size,
        config.max_position_embeddings,
        config.type_vocab_size,
    )
    embeddings = (V + P + S) * E + 2 * E
    projection = E * H + H
    attention = 4 * (H * H + H) + 2 * H  # q, k, v, output dense + LayerNorm
    ffn = (H * F + F) + (F * H + H) + 2 * H  # two dense + LayerNorm
    pooler = H * H + H
    applications = config.num_hidden_layers * config.inner_group_num
    per_group = config.inner_group_num
    copies = {
        "all": (config.num_hidden_groups * per_group, config.num_hidden_groups * per_group),
        "attention": (config.num_hidden_groups * per_group, applications),
        "ffn": (applications, config.num_hidden_groups * per_group),
        "none": (applications, applications),
    }[config.sharing]
    return embeddings + projection + copies[0] * attention + copies[1] * ffn + pooler


@pytest.mark.parametrize("sharing, paper_millions", [("all", 12), ("attention", 64), ("ffn", 38), ("none", 89)])
def test_sharing_ablation_parameter_counts(sharing, paper_millions):
    config = AlbertConfig.preset("base", sharing=sharing)
    with torch.device("meta"):
        model = albert_hf.AlbertModel(config)
    count = module_parameter_count(model)
    assert count == closed_form_parameter_count(config)
    assert round(count / 1e6) == paper_millions or abs(count / 1e6 - paper_millions) < 1.0


@pytest.mark.parametrize("sharing", ["attention", "ffn"])
@pytest.mark.parametrize("groups, inner", [(1, 1), (2, 2)])
def test_partial_sharing_runs_and_uses_distinct_blocks(sharing, groups, inner):
    config = tiny_config(sharing=sharing, num_hidden_groups=groups, inner_group_num=inner)
    model = albert_hf.AlbertModel(config).eval()
    assert module_parameter_count(model) == closed_form_parameter_count(config)
    input_ids, attention_mask, _ = padded_batch()
    output = model(input_ids, attention_mask=attention_mask, output_hidden_states=True)
    assert len(output.hidden_states) == 1 + 4 * inner
    # every unshared block receives a gradient (it is really used)
    output.last_hidden_state.sum().backward()
    unshared = model.encoder.unshared_ffn if sharing == "attention" else model.encoder.unshared_attention
    assert len(unshared) == 4 * inner
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in unshared.parameters() if p.dim() > 1)


def test_no_sharing_is_stock_layout_and_loads_in_transformers(tmp_path):
    config = tiny_config(sharing="none")
    assert config.num_hidden_groups == config.num_hidden_layers
    ours = albert_hf.AlbertModel(config).eval()
    reference = transformers.AlbertModel(transformers.AlbertConfig(**TINY, num_hidden_groups=4)).eval()
    reference.load_state_dict(ours.state_dict(), strict=True)
    input_ids, attention_mask, _ = padded_batch()
    assert max_abs_diff(reference(input_ids).last_hidden_state, ours(input_ids).last_hidden_state) <= 1e-5


# --------------------------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------------------------


def test_presets_match_official_configs():
    base_v1, base_v2 = AlbertConfig.preset("base-v1"), AlbertConfig.preset("albert-base-v2")
    assert base_v1.hidden_dropout_prob == 0.1 and base_v1.attention_probs_dropout_prob == 0.1
    assert base_v2.hidden_dropout_prob == 0.0 and base_v2.attention_probs_dropout_prob == 0.0
    assert AlbertConfig.preset("xxlarge-v1").hidden_dropout_prob == 0.0
    for name in ("base", "large", "xlarge", "xxlarge"):
        config = AlbertConfig.preset(name)
        assert (config.embedding_size, config.vocab_size, config.hidden_act) == (128, 30000, "gelu_new")
    assert AlbertConfig.preset("large").num_hidden_layers == 24
    with pytest.raises(ValueError, match="Unknown ALBERT preset"):
        AlbertConfig.preset("huge")


OFFICIAL_BASE_V2_CONFIG = {
    "architectures": ["AlbertForMaskedLM"],
    "attention_probs_dropout_prob": 0,
    "bos_token_id": 2,
    "classifier_dropout_prob": 0.1,
    "down_scale_factor": 1,
    "embedding_size": 128,
    "eos_token_id": 3,
    "gap_size": 0,
    "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "inner_group_num": 1,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "albert",
    "net_structure_type": 0,
    "num_attention_heads": 12,
    "num_hidden_groups": 1,
    "num_hidden_layers": 12,
    "num_memory_blocks": 0,
    "pad_token_id": 0,
    "type_vocab_size": 2,
    "vocab_size": 30000,
}


def test_official_hub_config_loads_unchanged(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(OFFICIAL_BASE_V2_CONFIG))
    config = AlbertConfig.from_pretrained(tmp_path)
    assert config.hidden_size == 768 and config.sharing == "all" and config.model_type == "albert_hf"
    assert config.to_diff_dict()["hidden_size"] == 768
    preset = AlbertConfig.preset("base-v2")
    for field in ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads", "embedding_size"):
        assert getattr(config, field) == getattr(preset, field)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(num_hidden_groups=5, num_hidden_layers=4), "num_hidden_groups"),
        (dict(num_hidden_groups=3, num_hidden_layers=4), "num_hidden_layers"),
        (dict(sharing="some"), "sharing"),
        (dict(hidden_act="swishy"), "hidden_act"),
        (dict(embedding_size=0), "embedding_size"),
        (dict(vocab_size=-3), "vocab_size"),
        (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
        (dict(sharing="none", num_hidden_groups=2), "sharing"),
    ],
)
def test_invalid_config_names_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        tiny_config(**overrides)


def test_heads_that_do_not_divide_the_width_are_refused_when_the_model_is_built():
    """As in transformers, the config takes the fields one at a time (`hidden_size=312` with the default 64 heads,
    then 12 heads); the model refuses a head count that does not divide the width, naming both fields."""
    config = AlbertConfig(hidden_size=312)
    config.num_attention_heads = 12
    assert albert_hf.AlbertModel(tiny_config(hidden_size=312, num_attention_heads=12)).config.hidden_size == 312
    config = tiny_config(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match=r"hidden_size \(30\) must be divisible by num_attention_heads \(4\)"):
        albert_hf.AlbertModel(config)


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_config_answers_the_sharing_questions(sharing):
    """What the config says about sharing is what the model builds: the block copies and the layer applications."""
    from albert_hf.modeling import AlbertAttention, AlbertLayer

    config = tiny_config(sharing=sharing, num_hidden_groups=1 if sharing == "none" else 2, inner_group_num=2)
    assert config.num_layer_applications == 4 * 2
    assert (config.shares("attention"), config.shares("ffn")) == {
        "all": (True, True),
        "attention": (True, False),
        "ffn": (False, True),
        "none": (True, True),
    }[sharing]
    model = albert_hf.AlbertModel(config)
    attention_blocks = [module for module in model.modules() if isinstance(module, AlbertAttention)]
    ffn_blocks = [module for module in model.modules() if isinstance(module, AlbertLayer) and hasattr(module, "ffn")]
    assert len(attention_blocks) == config.num_copies("attention")
    assert len(ffn_blocks) == config.num_copies("ffn")
    assert config.num_copies("attention") == {"all": 4, "attention": 4, "ffn": 8, "none": 8}[sharing]
    with pytest.raises(ValueError, match="pooler"):
        config.shares("pooler")


# --------------------------------------------------------------------------------------------------------------------
# Checkpoints: official layout in, transformers layout out, remote code, damaged files
# --------------------------------------------------------------------------------------------------------------------


def official_checkpoint(folder, legacy_bin: bool = False):
    """A folder as published for albert/albert-base-v2 (config.json with model_type "albert" + weights)."""
    torch.manual_seed(0)
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**TINY)).eval()
    model.save_pretrained(folder)
    if legacy_bin:
        os.remove(os.path.join(folder, "model.safetensors"))
        torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
    assert json.loads((folder / "config.json").read_text())["model_type"] == "albert"
    return model


@pytest.mark.parametrize("legacy_bin", [False, True])
@pytest.mark.parametrize("class_name", HEAD_CLASSES)
def test_official_checkpoint_loads_into_every_class(tmp_path, class_name, legacy_bin):
    reference = official_checkpoint(tmp_path, legacy_bin)
    model, info = getattr(albert_hf, class_name).from_pretrained(tmp_path, output_loading_info=True)
    # The backbone loads completely; only a head the pretraining checkpoint does not have is new.
    new_head_keys = {"classifier.weight", "classifier.bias", "qa_outputs.weight", "qa_outputs.bias"}
    assert set(info["missing_keys"]) <= new_head_keys
    assert not any(key.startswith("albert.") for key in info["missing_keys"])
    input_ids, attention_mask, token_type_ids = padded_batch()
    if class_name in ("AlbertModel", "AlbertForPreTraining"):
        base = model if class_name == "AlbertModel" else model.albert
        expected = reference.albert(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        actual = base(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        assert max_abs_diff(expected.last_hidden_state, actual.last_hidden_state) <= 1e-5
    if class_name == "AlbertForPreTraining":
        assert set(info["unexpected_keys"]) == set()
        assert max_abs_diff(reference(input_ids).prediction_logits, model(input_ids).prediction_logits) <= 1e-5


def test_saved_checkpoint_loads_into_transformers(tmp_path):
    torch.manual_seed(0)
    ours = albert_hf.AlbertForPreTraining(tiny_config(num_hidden_groups=2, inner_group_num=2)).eval()
    ours.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    reference, info = transformers.AlbertForPreTraining.from_pretrained(
        tmp_path,
        config=transformers.AlbertConfig(**TINY, num_hidden_groups=2, inner_group_num=2),
        output_loading_info=True,
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    input_ids, attention_mask, _ = padded_batch()
    assert (
        max_abs_diff(
            reference.eval()(input_ids, attention_mask=attention_mask).prediction_logits,
            ours(input_ids, attention_mask=attention_mask).prediction_logits,
        )
        <= 1e-5
    )


def test_tied_embeddings_and_resize(tmp_path):
    model = albert_hf.AlbertForMaskedLM(tiny_config())
    assert model.predictions.decoder.weight.data_ptr() == model.albert.embeddings.word_embeddings.weight.data_ptr()
    model.resize_token_embeddings(120)
    assert model.config.vocab_size == 120
    assert model.predictions.decoder.weight.shape == (120, 16) and model.predictions.bias.shape == (120,)
    assert model.predictions.decoder.weight.data_ptr() == model.albert.embeddings.word_embeddings.weight.data_ptr()
    output = model(torch.tensor([[2, 110, 119, 3]]))
    assert output.logits.shape == (1, 4, 120)
    model.save_pretrained(tmp_path)
    reloaded = albert_hf.AlbertForMaskedLM.from_pretrained(tmp_path)
    assert max_abs_diff(reloaded(torch.tensor([[2, 110, 3]])).logits, model(torch.tensor([[2, 110, 3]])).logits) == 0


def test_auto_classes_registered(tmp_path):
    config = tiny_config()
    assert isinstance(transformers.AutoConfig.for_model("albert_hf", **TINY), AlbertConfig)
    from albert_hf.modeling import ALBERT_AUTO_CLASSES

    for auto_name, model_class in ALBERT_AUTO_CLASSES.items():
        auto = getattr(transformers, auto_name)
        assert type(auto.from_config(config)) is model_class
    # A folder saved with albert_hf's code (a model stock ALBERT cannot hold) loads into albert_hf's class; one saved in
    # transformers' own format into transformers' (tests/test_stock_format.py).
    albert_hf.AlbertForTokenClassification(tiny_config(sharing="ffn")).save_pretrained(tmp_path / "ffn")
    loaded = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "ffn")
    assert type(loaded) is albert_hf.AlbertForTokenClassification
    albert_hf.AlbertForTokenClassification(config).save_pretrained(tmp_path / "stock")
    loaded = transformers.AutoModelForTokenClassification.from_pretrained(tmp_path / "stock")
    assert type(loaded) is transformers.AlbertForTokenClassification
    # transformers' own "albert" type is untouched
    assert type(transformers.AutoModel.from_config(transformers.AlbertConfig(**TINY))) is transformers.AlbertModel


def test_remote_code_loads_without_albert_hf(tmp_path):
    """A model transformers' ALBERT cannot hold (here sharing="attention") is saved with albert_hf's code, which
    transformers runs with trust_remote_code=True where albert_hf is absent (stock folders: test_stock_format.py)."""
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=3, sharing="attention")).eval()
    model.save_pretrained(tmp_path / "ckpt")
    saved = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert saved["auto_map"]["AutoModelForSequenceClassification"] == "modeling.AlbertForSequenceClassification"
    assert (tmp_path / "ckpt" / "modeling.py").exists() and (tmp_path / "ckpt" / "configuration.py").exists()
    input_ids, attention_mask, _ = padded_batch()
    expected = model(input_ids, attention_mask=attention_mask).logits
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask}, tmp_path / "inputs.pt")
    script = textwrap.dedent(
        f"""
        import sys, torch
        sys.path = [p for p in sys.path if p not in ("", {str(os.getcwd())!r})]
        # An editable install imports through a meta-path finder, not sys.path: mark the package as absent, as on a
        # machine without albert_hf (any `import albert_hf...` then raises ModuleNotFoundError).
        sys.modules["albert_hf"] = None
        try:
            import albert_hf
            raise SystemExit("albert_hf must not be importable here")
        except ImportError:
            pass
        from transformers import AutoModelForSequenceClassification, AutoModel
        model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path / "ckpt")!r}, trust_remote_code=True)
        AutoModel.from_pretrained({str(tmp_path / "ckpt")!r}, trust_remote_code=True)
        inputs = torch.load({str(tmp_path / "inputs.pt")!r})
        torch.save(model.eval()(**inputs).logits, {str(tmp_path / "logits.pt")!r})
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_MODULES_CACHE=str(tmp_path / "modules"))
    result = processes.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert max_abs_diff(expected, torch.load(tmp_path / "logits.pt")) <= 1e-6


def test_checkpoint_of_another_model_is_refused(tmp_path):
    bert = transformers.BertModel(
        transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1, num_attention_heads=4)
    )
    bert.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="model type 'bert'"):
        albert_hf.AlbertModel.from_pretrained(tmp_path)


def test_truncated_weights_file_is_named(tmp_path):
    official_checkpoint(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(OSError, match="model.safetensors"):
        albert_hf.AlbertModel.from_pretrained(tmp_path)


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-checkpoint"):
        albert_hf.AlbertModel.from_pretrained(tmp_path / "no-such-checkpoint")


def test_from_pretrained_without_a_checkpoint_path():
    """transformers' case of no path at all: the config and state dict are given, nothing is checked on disk."""
    model = albert_hf.AlbertModel(tiny_config()).eval()
    loaded = albert_hf.AlbertModel.from_pretrained(None, config=model.config, state_dict=model.state_dict()).eval()
    input_ids, attention_mask, _ = padded_batch()
    assert max_abs_diff(model(input_ids).last_hidden_state, loaded(input_ids).last_hidden_state) == 0


def test_mismatched_shapes_are_refused(tmp_path):
    official_checkpoint(tmp_path)
    with pytest.raises(Exception, match="size|shape"):
        albert_hf.AlbertModel.from_pretrained(tmp_path, hidden_size=64, num_attention_heads=4)


# --------------------------------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "inputs, message",
    [
        (dict(input_ids=torch.tensor([[2, 99, 3]])), r"input_ids must lie in \[0, 99\)"),
        (dict(input_ids=torch.tensor([[2, -1, 3]])), "input_ids must lie"),
        (dict(input_ids=torch.ones(1, 65, dtype=torch.long)), "exceeds max_position_embeddings"),
        (
            dict(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(2, 4)),
            "attention_mask has shape",
        ),
        (
            dict(input_ids=torch.ones(2, 5, dtype=torch.long), token_type_ids=torch.zeros(1, 5, dtype=torch.long)),
            "token_type_ids has shape",
        ),
        (dict(input_ids=torch.ones(2, 5, dtype=torch.long), token_type_ids=torch.full((2, 5), 2)), "type_vocab_size"),
        (dict(), "exactly one of input_ids or inputs_embeds"),
        (dict(input_ids=torch.ones(1, 3, dtype=torch.long), inputs_embeds=torch.zeros(1, 3, 16)), "exactly one"),
        (dict(input_ids=torch.ones(3, dtype=torch.long)), r"shape \(batch_size, seq_len\)"),
        (dict(inputs_embeds=torch.zeros(1, 3, 32)), "embedding_size=16"),
    ],
)
def test_bad_inputs_raise_clear_errors(inputs, message):
    model = albert_hf.AlbertModel(tiny_config()).eval()
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_ids_are_read_on_the_host_on_the_first_batch_only_and_still_named_after_it(monkeypatch):
    """The value checks read the ids on the host (a sync that stalls an accelerator): on the model's first batch
    only, unless `check_input_values`. A bad id in a later batch is still named (the lookup's IndexError, on the
    CPU, turned into the same message)."""
    reads = []
    to_int = torch.Tensor.__int__
    monkeypatch.setattr(torch.Tensor, "__int__", lambda tensor: reads.append(1) or to_int(tensor))
    model = albert_hf.AlbertModel(tiny_config()).eval()
    batch = dict(input_ids=torch.tensor([[2, 5, 3]]), token_type_ids=torch.tensor([[0, 0, 1]]))
    model(**batch)
    assert len(reads) == 4  # min and max of input_ids and token_type_ids
    reads.clear()
    model(**batch)
    assert reads == []
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 99\) \(vocab_size\), found values in \[2, 99\]"):
        model(input_ids=torch.tensor([[2, 99, 3]]))
    with pytest.raises(ValueError, match=r"token_type_ids must lie in \[0, 2\)"):
        model(input_ids=torch.tensor([[2, 5, 3]]), token_type_ids=torch.tensor([[0, 2, 0]]))
    reads.clear()
    model.check_input_values = True
    model(**batch)
    assert len(reads) == 4


# --------------------------------------------------------------------------------------------------------------------
# Gradient checkpointing and torch.compile
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_gradient_checkpointing_gives_identical_gradients(sharing):
    torch.manual_seed(0)
    # dropout on: checkpointing must replay the same dropout masks when it recomputes a layer
    config = tiny_config(sharing=sharing, inner_group_num=2, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    model = albert_hf.AlbertForPreTraining(config).train()
    input_ids, attention_mask, token_type_ids = padded_batch()
    labels = torch.where(torch.rand(input_ids.shape) < 0.3, input_ids, -100)
    inputs = dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        token_type_ids=token_type_ids,
        labels=labels,
        sentence_order_label=torch.tensor([0, 1, 0]),
    )

    def gradients():
        torch.manual_seed(1)
        model.zero_grad()
        model(**inputs).loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = gradients()
    model.activation_checkpointing_enable()
    # transformers' convention: the applied layers are GradientCheckpointingLayers, switched on by the model.
    layers = [module for module in model.modules() if isinstance(module, GradientCheckpointingLayer)]
    assert layers and all(layer.gradient_checkpointing for layer in layers)
    calls = []
    for layer in layers:
        original = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda *a, _original=original, **k: calls.append(1) or _original(*a, **k)
    checkpointed = gradients()
    assert len(calls) == 4 * 2  # one checkpoint per application of a layer
    assert max_abs_diff(plain, checkpointed) == 0.0

    model.activation_checkpointing_disable()
    calls.clear()
    assert max_abs_diff(plain, gradients()) == 0.0 and not calls


def test_torch_compile_full_graph():
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config()).eval()
    input_ids, attention_mask, token_type_ids = padded_batch()
    expected = model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")  # fullgraph: any graph break raises
    actual = compiled(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits
    assert max_abs_diff(expected, actual) <= 1e-6


# --------------------------------------------------------------------------------------------------------------------
# Performance paths keep the numbers
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("class_name", ["AlbertForPreTraining", "AlbertForMaskedLM"])
def test_masked_positions_only_gives_same_loss_and_gradients(class_name):
    torch.manual_seed(0)
    model = getattr(albert_hf, class_name)(tiny_config()).eval()
    input_ids, attention_mask, token_type_ids = padded_batch()
    labels = torch.full_like(input_ids, -100)
    labels[0, [1, 4]] = input_ids[0, [1, 4]]
    labels[2, 2] = input_ids[2, 2]
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, labels=labels)
    if class_name == "AlbertForPreTraining":
        inputs["sentence_order_label"] = torch.tensor([1, 0, 1])

    def run(masked_positions_only):
        model.zero_grad()
        output = model(**inputs, masked_positions_only=masked_positions_only)
        output.loss.backward()
        return output, [p.grad.clone() for p in model.parameters()]

    full, full_grads = run(False)
    sparse, sparse_grads = run(True)
    logits_name = "prediction_logits" if class_name == "AlbertForPreTraining" else "logits"
    assert sparse[logits_name].shape == (3, 99)
    assert max_abs_diff(sparse[logits_name], full[logits_name][labels.ne(-100)]) <= 1e-6
    assert abs(full.loss.item() - sparse.loss.item()) <= 1e-6
    assert max_abs_diff(full_grads, sparse_grads) <= 1e-6


def test_fused_gelu_equals_gelu_new():
    from transformers.activations import ACT2FN

    from albert_hf.modeling import activation_function

    x = torch.linspace(-8, 8, 10001)
    assert max_abs_diff(activation_function("gelu_new")(x), ACT2FN["gelu_new"](x)) <= 1e-6


def test_layer_norm_runs_in_fp32_under_bf16_autocast():
    model = albert_hf.AlbertModel(tiny_config()).eval()
    input_ids, attention_mask, _ = padded_batch()
    expected = model(input_ids, attention_mask=attention_mask).last_hidden_state
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = model(input_ids, attention_mask=attention_mask).last_hidden_state
    assert output.dtype == torch.float32  # post-LayerNorm residual stream stays fp32
    assert max_abs_diff(expected, output) < 0.1  # bf16 matmuls: close, not equal
