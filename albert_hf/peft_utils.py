"""PEFT (LoRA, IA3, ...) on albert_hf models: target module names, and what cross-layer sharing does to adapters.

Target modules. Every Linear layer of the encoder has transformers' ALBERT name:

    attention:     query, key, value (H -> H each), dense (H -> H, the attention output projection)
    feed-forward:  ffn (H -> intermediate), ffn_output (intermediate -> H)

Pass them to peft as `target_modules`. Beware that a plain list matches by name suffix anywhere in the model:
`"dense"` also matches the MLM head's `predictions.dense` (H -> E) in AlbertForMaskedLM / AlbertForPreTraining.
`encoder_target_modules(...)` gives a regex restricted to the encoder.

Sharing. PEFT wraps *modules*, and with cross-layer sharing one module is applied at several layers. So a LoRA on the
shared `query` of ALBERT (sharing="all", one group) is ONE adapter, trained by and applied at all L layer
applications: the adapter has the parameters of one layer, not L. In general an adapter exists once per distinct
module, as many as `AlbertConfig.num_copies(block)` says: `num_hidden_groups * inner_group_num` copies of a shared
block, `num_hidden_layers * inner_group_num` of an unshared one (sharing "attention" leaves the FFN unshared, "ffn"
the attention, "none" has one group per layer).
`lora_parameter_count` / `ia3_parameter_count` give the closed forms; merging (`merge_and_unload`) folds the adapter
into the shared weights once, which changes every layer that uses them, exactly as the adapter did.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from peft import IA3Config, LoraConfig

from .configuration import SHARED_BLOCKS, AlbertConfig

ATTENTION_MODULES = ("query", "key", "value", "dense")
FFN_MODULES = ("ffn", "ffn_output")
TARGET_MODULES = ATTENTION_MODULES + FFN_MODULES

# Names of the trainable tensors that the PEFT methods used here add (LoRA: A and B matrices; IA3: scaling vectors).
ADAPTER_PARAMETER_MARKERS = ("lora_A", "lora_B", "ia3_l")


def _check_names(names: Sequence[str]) -> None:
    unknown = [name for name in names if name not in TARGET_MODULES]
    if unknown or not names:
        raise ValueError(f"Unknown ALBERT target modules {unknown or names!r}; choose from {TARGET_MODULES}.")


def encoder_target_modules(names: Sequence[str] = TARGET_MODULES) -> str:
    """A peft `target_modules` regex matching the named Linear layers inside the encoder only (not the heads).

    peft full-matches it against module paths such as `albert.encoder.albert_layer_groups.0.albert_layers.0.ffn`.
    """
    _check_names(names)
    return rf"(.*\.)?encoder\..*\.({'|'.join(re.escape(name) for name in names)})"


def lora_config(
    r: int = 8,
    lora_alpha: int = 16,
    lora_dropout: float = 0.0,
    target_modules: Sequence[str] = TARGET_MODULES,
    task_type: str | None = None,
    **kwargs,
) -> LoraConfig:
    """A LoraConfig on the encoder's Linear layers (`target_modules` among `TARGET_MODULES`).

    `task_type` ("SEQ_CLS", "TOKEN_CLS", "QUESTION_ANS", ...) makes peft train and save the task head in full.
    """
    return LoraConfig(
        r=r,
        lora_alpha=lora_alpha,
        lora_dropout=lora_dropout,
        target_modules=encoder_target_modules(target_modules),
        task_type=task_type,
        **kwargs,
    )


def ia3_config(
    target_modules: Sequence[str] = ("key", "value", "ffn_output"),
    task_type: str | None = None,
    **kwargs,
) -> IA3Config:
    """An IA3Config (learned rescaling vectors) on the encoder; `ffn_output` is scaled on its input, as IA3 does for
    feed-forward layers, the others on their output."""
    feedforward = [name for name in target_modules if name in FFN_MODULES]
    return IA3Config(
        target_modules=encoder_target_modules(target_modules),
        feedforward_modules=encoder_target_modules(feedforward) if feedforward else [],
        task_type=task_type,
        **kwargs,
    )


def module_copies(config: AlbertConfig) -> dict[str, int]:
    """How many distinct attention and feed-forward blocks the encoder holds (what adapters attach to)."""
    return {block: config.num_copies(block) for block in SHARED_BLOCKS}


def module_shapes(config: AlbertConfig) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of each target module."""
    hidden, intermediate = config.hidden_size, config.intermediate_size
    shapes = {name: (hidden, hidden) for name in ATTENTION_MODULES}
    shapes["ffn"] = (hidden, intermediate)
    shapes["ffn_output"] = (intermediate, hidden)
    return shapes


def _copies_of(name: str, copies: dict[str, int]) -> int:
    return copies["attention"] if name in ATTENTION_MODULES else copies["ffn"]


def lora_parameter_count(config: AlbertConfig, r: int, target_modules: Sequence[str] = TARGET_MODULES) -> int:
    """LoRA parameters on the encoder: r * (in + out) per adapted module, once per distinct module (see module
    docstring: a shared module has one adapter however many layers apply it)."""
    _check_names(target_modules)
    copies, shapes = module_copies(config), module_shapes(config)
    return sum(r * sum(shapes[name]) * _copies_of(name, copies) for name in target_modules)


def ia3_parameter_count(config: AlbertConfig, target_modules: Sequence[str] = ("key", "value", "ffn_output")) -> int:
    """IA3 parameters on the encoder: one vector per adapted module (input-sized for feed-forward modules,
    output-sized otherwise), once per distinct module."""
    _check_names(target_modules)
    copies, shapes = module_copies(config), module_shapes(config)
    total = 0
    for name in target_modules:
        in_features, out_features = shapes[name]
        total += (in_features if name in FFN_MODULES else out_features) * _copies_of(name, copies)
    return total


def count_adapter_parameters(model: torch.nn.Module) -> int:
    """Parameters that LoRA/IA3 added to `model` (not counting a task head peft trains in full)."""
    return sum(
        parameter.numel()
        for name, parameter in model.named_parameters()
        if any(marker in name for marker in ADAPTER_PARAMETER_MARKERS)
    )


__all__ = [
    "ATTENTION_MODULES",
    "FFN_MODULES",
    "TARGET_MODULES",
    "count_adapter_parameters",
    "encoder_target_modules",
    "ia3_config",
    "ia3_parameter_count",
    "lora_config",
    "lora_parameter_count",
    "module_copies",
    "module_shapes",
]
