"""PyTorch ALBERT ("A Lite BERT", Lan et al., ICLR 2020), written from the paper and transformers' conventions.

One file, read top to bottom: embeddings -> attention -> layer -> encoder with cross-layer sharing -> heads.
It imports only `.configuration` (relatively), so it travels to the Hub as remote code unchanged.

What this adds over transformers' ALBERT, with identical weights and key names (for `sharing="all"`):
  * the paper's sharing ablation (`config.sharing`: "all", "attention", "ffn", "none"),
  * gradient checkpointing, one checkpoint per application of the shared layer (transformers'
    `GradientCheckpointingLayer`),
  * attention weights under every attention implementation (computed eagerly when asked for),
  * losses that honour Trainer's `num_items_in_batch` (exact gradient accumulation and multi-process averaging),
  * clear errors for bad inputs (ids out of the vocabulary, sequences too long, mismatched shapes).

Shapes: B batch, T sequence length, E embedding size, H hidden size, N heads, D = H / N head size, V vocabulary.
"""

# No `from __future__ import annotations`, as in transformers' modeling files: transformers inspects the evaluated
# signatures (`**kwargs: Unpack[TransformersKwargs]` says which options every head passes on to the backbone).
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.processing_utils import Unpack
from transformers.utils import ModelOutput, TransformersKwargs
from transformers.utils.generic import can_return_tuple

from .configuration import AlbertConfig, check_attention_heads

# --------------------------------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------------------------------


def check_inputs(
    config: AlbertConfig,
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    values: bool = True,
) -> None:
    """Raise a ValueError that names the problem for inputs the model cannot process correctly.

    Shape checks are free. Value checks (ids in range) read the tensors on the host: with `values` only (the model asks
    for them on its first batch, see `AlbertModel.check_input_values`), never while torch.compile traces the model
    (they would break the graph).
    """
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of input_ids or inputs_embeds (got both or neither).")
    if input_ids is not None:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (batch_size, seq_len), got {tuple(input_ids.shape)}.")
        shape = tuple(input_ids.shape)
    else:
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.embedding_size:
            raise ValueError(
                f"inputs_embeds must have shape (batch_size, seq_len, embedding_size={config.embedding_size}), got "
                f"{tuple(inputs_embeds.shape)}."
            )
        shape = tuple(inputs_embeds.shape[:2])
    seq_len = shape[1]
    if position_ids is None and seq_len > config.max_position_embeddings:
        raise ValueError(
            f"Sequence length {seq_len} exceeds max_position_embeddings ({config.max_position_embeddings}); "
            "truncate the inputs (tokenizer(..., truncation=True, max_length=...))."
        )
    for name, tensor in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if tensor is not None and tensor.dim() == 2 and tuple(tensor.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but the input has shape {shape}.")
    if position_ids is not None and (position_ids.dim() != 2 or position_ids.shape[-1] != seq_len):
        raise ValueError(f"position_ids has shape {tuple(position_ids.shape)}; expected (batch_size or 1, {seq_len}).")

    if not values or torch.compiler.is_compiling():
        return
    ranges = (
        ("input_ids", input_ids, config.vocab_size, "vocab_size"),
        ("token_type_ids", token_type_ids, config.type_vocab_size, "type_vocab_size"),
        ("position_ids", position_ids, config.max_position_embeddings, "max_position_embeddings"),
    )
    for name, tensor, limit, field in ranges:
        if tensor is None or tensor.numel() == 0:
            continue
        low, high = int(tensor.min()), int(tensor.max())
        if low < 0 or high >= limit:
            raise ValueError(f"{name} must lie in [0, {limit}) ({field}), found values in [{low}, {high}].")


# transformers' "gelu_new" is the tanh approximation of GELU written as five elementwise ops; torch's fused kernel
# computes the same formula (max difference ~2e-7 in fp32) about five times faster on CPU, and the FFN activation is the
# largest non-GEMM cost of a step. Same results, so we always use the fused form.
FUSED_ACTIVATIONS = {"gelu_new": "gelu_pytorch_tanh"}


def activation_function(name: str) -> nn.Module:
    return ACT2FN[FUSED_ACTIVATIONS.get(name, name)]


class AlbertLayerNorm(nn.LayerNorm):
    """LayerNorm computed in fp32 even under bf16/fp16 autocast (CPU autocast would run it in bf16), returning fp32
    when the weights are fp32 so the residual stream keeps full precision; a no-op change in plain fp32."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        output = F.layer_norm(
            hidden_states.float(), self.normalized_shape, self.weight.float(), self.bias.float(), self.eps
        )
        return output.to(torch.promote_types(hidden_states.dtype, self.weight.dtype))


# --------------------------------------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------------------------------------


class AlbertEmbeddings(nn.Module):
    """Word + position + token-type embeddings of width E (factorized: projected to H by the encoder)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.embedding_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = AlbertLayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # Non-persistent: rebuilt on load, never stored in checkpoints.
        self.register_buffer(
            "position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)), persistent=False
        )

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)  # (B, T, E)
        seq_len = inputs_embeds.shape[1]
        if position_ids is None:
            position_ids = self.position_ids[:, :seq_len]  # (1, T)
        if token_type_ids is None:
            token_type_embeddings = self.token_type_embeddings.weight[0]  # (E,): segment 0 everywhere
        else:
            token_type_embeddings = self.token_type_embeddings(token_type_ids)  # (B, T, E)
        embeddings = inputs_embeds + token_type_embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


# --------------------------------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------------------------------


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,  # (B, N, T, D)
    key: torch.Tensor,  # (B, N, T, D)
    value: torch.Tensor,  # (B, N, T, D)
    attention_mask: torch.Tensor | None,  # (B, 1, T, T) additive, or None
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain softmax(QK^T / sqrt(D) + mask) V; returns the output as (B, T, N, D) and the weights (B, N, T, T)."""
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = F.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


def attention_implementation(config: AlbertConfig, output_attentions: bool) -> str:
    """The attention kernel a forward pass runs: the configured one, or eager when the attention weights are asked for
    (fused kernels never materialise them). The model builds its one mask for this kernel, and every layer runs it."""
    return "eager" if output_attentions else (config._attn_implementation or "eager")


def additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(B, T) 1/0 padding mask -> (B, 1, 1, T) additive mask for eager attention."""
    if attention_mask is None:
        return None
    if attention_mask.dim() == 4:  # already prepared: additive floats, or booleans (True = attend)
        if attention_mask.dtype.is_floating_point:
            return attention_mask.to(dtype)
        return (~attention_mask).to(dtype) * torch.finfo(dtype).min
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


class AlbertAttention(nn.Module):
    """Multi-head self-attention with its output projection, residual and post-LayerNorm (one ALBERT sub-block)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        check_attention_heads(config)
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.scaling = self.attention_head_size**-0.5
        self.is_causal = False  # ALBERT is bidirectional: SDPA/flash must never fall back to a causal mask.

        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = AlbertLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention_dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.output_dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        hidden_states: torch.Tensor,  # (B, T, H)
        attention_mask: torch.Tensor | None = None,  # in the layout of `attention_implementation(...)`
        output_attentions: bool = False,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch_size, seq_len, _ = hidden_states.shape
        head_shape = (batch_size, seq_len, self.num_attention_heads, self.attention_head_size)
        query = self.query(hidden_states).view(head_shape).transpose(1, 2)  # (B, N, T, D)
        key = self.key(hidden_states).view(head_shape).transpose(1, 2)
        value = self.value(hidden_states).view(head_shape).transpose(1, 2)

        implementation = attention_implementation(self.config, output_attentions)
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        context, weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.attention_dropout.p if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        context = context.reshape(batch_size, seq_len, -1)  # (B, T, H)
        output = self.LayerNorm(hidden_states + self.output_dropout(self.dense(context)))
        return output, (weights if output_attentions else None)


# --------------------------------------------------------------------------------------------------------------------
# One layer (attention + FFN), groups of layers, and the encoder with cross-layer sharing
# --------------------------------------------------------------------------------------------------------------------


class AlbertLayer(GradientCheckpointingLayer):
    """Attention block then feed-forward block, each with residual and post-LayerNorm.

    One call is one layer application, and the unit of gradient checkpointing: as a transformers
    `GradientCheckpointingLayer`, `model.activation_checkpointing_enable()` (Trainer's `--gradient_checkpointing`)
    makes every call recompute itself in the backward pass, so a layer shared by L applications is checkpointed L
    times, once per application; the unshared layers of partial sharing are never called themselves.

    With partial sharing (`config.sharing` "attention" or "ffn") a layer holds only one of the two blocks, and the
    encoder passes the `partner` layer that holds the other for this application. Attribute names are transformers'
    (`attention`, `ffn`, `ffn_output`, `full_layer_layer_norm`), so checkpoint keys match.
    """

    def __init__(self, config: AlbertConfig, with_attention: bool = True, with_ffn: bool = True):
        super().__init__()
        if with_attention:
            self.attention = AlbertAttention(config)
        if with_ffn:
            self.full_layer_layer_norm = AlbertLayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
            self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
            self.activation = activation_function(config.hidden_act)
            self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def feed_forward(self, attention_output: torch.Tensor) -> torch.Tensor:
        ffn_output = self.ffn_output(self.activation(self.ffn(attention_output)))  # (B, T, H)
        return self.full_layer_layer_norm(attention_output + self.dropout(ffn_output))

    def forward(
        self,
        hidden_states: torch.Tensor,  # (B, T, H)
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        partner: "AlbertLayer | None" = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attention_owner = self if hasattr(self, "attention") else partner
        ffn_owner = self if hasattr(self, "ffn") else partner
        attention_output, weights = attention_owner.attention(
            hidden_states, attention_mask, output_attentions, **kwargs
        )
        return ffn_owner.feed_forward(attention_output), weights


class AlbertLayerGroup(nn.Module):
    """`inner_group_num` layers applied in turn; one group is one unit of cross-layer sharing."""

    def __init__(self, config: AlbertConfig, with_attention: bool = True, with_ffn: bool = True):
        super().__init__()
        self.albert_layers = nn.ModuleList(
            [AlbertLayer(config, with_attention, with_ffn) for _ in range(config.inner_group_num)]
        )


class AlbertTransformer(nn.Module):
    """Projects embeddings E -> H, then applies layers L times; which weights each application uses is the sharing.

    Layer i (0..L-1) uses group `i // (L / num_hidden_groups)` and runs that group's `inner_group_num` layers, one
    layer application each (`AlbertConfig.group_layer`); `AlbertConfig.shares(block)` says whether a block lives in
    the groups or once per layer application:
      sharing="all":       attention and FFN come from the group (ALBERT; transformers' layout).
      sharing="attention": attention from the group, FFN from `unshared_ffn[i * inner_group_num + j]`.
      sharing="ffn":       FFN from the group, attention from `unshared_attention[i * inner_group_num + j]`.
      sharing="none":      config sets num_hidden_groups = L, so each application owns its group (BERT).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        share_attention, share_ffn = config.shares("attention"), config.shares("ffn")
        self.albert_layer_groups = nn.ModuleList(
            [AlbertLayerGroup(config, share_attention, share_ffn) for _ in range(config.num_hidden_groups)]
        )
        applications = range(config.num_layer_applications)
        if not share_attention:
            self.unshared_attention = nn.ModuleList([AlbertLayer(config, with_ffn=False) for _ in applications])
        if not share_ffn:
            self.unshared_ffn = nn.ModuleList([AlbertLayer(config, with_attention=False) for _ in applications])

    def partner(self, application: int) -> AlbertLayer | None:
        """The layer holding this application's own block under partial sharing, else None."""
        if hasattr(self, "unshared_attention"):
            return self.unshared_attention[application]
        if hasattr(self, "unshared_ffn"):
            return self.unshared_ffn[application]
        return None

    def apply_layer(
        self,
        application: int,
        hidden_states: torch.Tensor,  # (B, T, H)
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Layer application `application` (0 .. L - 1): the one step that full depth and early exit both repeat."""
        group, inner = self.config.group_layer(application)
        layer = self.albert_layer_groups[group].albert_layers[inner]
        return layer(hidden_states, attention_mask, output_attentions, partner=self.partner(application), **kwargs)

    def forward(
        self,
        embeddings: torch.Tensor,  # (B, T, E)
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        hidden_states = self.embedding_hidden_mapping_in(embeddings)  # (B, T, H)
        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for application in range(self.config.num_layer_applications):
            hidden_states, weights = self.apply_layer(
                application, hidden_states, attention_mask, output_attentions, **kwargs
            )
            if output_hidden_states:
                all_hidden_states.append(hidden_states)
            if output_attentions:
                all_attentions.append(weights)
        return BaseModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden_states) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None,
        )


# --------------------------------------------------------------------------------------------------------------------
# Pretrained model base and losses
# --------------------------------------------------------------------------------------------------------------------


class AlbertPreTrainedModel(PreTrainedModel):
    config_class = AlbertConfig
    base_model_prefix = "albert"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # The unit that device maps and FSDP auto-wrap must keep whole: the encoder applies its (shared) layers itself, and
    # the word embeddings are tied to the MLM decoder, so they must live in the same group as the head (the root).
    _no_split_modules = ["AlbertTransformer"]

    # Called with the path or Hub id before transformers loads it, to raise an error that names a damaged weights file
    # or a missing folder (transformers' own errors name neither). `import albert_hf` installs
    # `albert_hf.training.checkpoints.check_pretrained_source`, the one weights-file checker; as remote code, without
    # albert_hf, loading is plain transformers'.
    check_pretrained_source: ClassVar[Callable[[str | os.PathLike], None] | None] = None

    # Overridden only to call that check first: transformers offers no hook that runs before it opens the files.
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        if cls.check_pretrained_source is not None and pretrained_model_name_or_path is not None:
            cls.check_pretrained_source(pretrained_model_name_or_path)
        return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        # Stock by default: where transformers' own ALBERT stands for this model under this class's name
        # (`AlbertConfig.stock_albert_problems` finds nothing), the folder is transformers' ALBERT: the config writes
        # itself as model_type "albert" without `auto_map`, and no code of albert_hf is copied beside it.
        if not self.config.stock_albert_problems([type(self).__name__.removeprefix("FSDP")]):
            with _code_not_copied(type(self)):
                return super().save_pretrained(save_directory, *args, **kwargs)
        # Otherwise, when albert_hf registered its classes (`import albert_hf`), the folder gets modeling.py and
        # configuration.py and an `auto_map` naming every Auto class, so any head loads with trust_remote_code=True
        # without albert_hf.
        if type(self)._auto_class is not None:
            auto_map = {name: f"modeling.{cls.__name__}" for name, cls in ALBERT_AUTO_CLASSES.items()}
            self.config.auto_map = {"AutoConfig": "configuration.AlbertConfig", **auto_map}
        # FSDP2's `fully_shard` swaps the model's class for a subclass `FSDP<name>` defined in torch, whose source
        # `save_pretrained` would copy as the folder's remote code: the model is saved under its own class, every
        # save (checkpoints, final saves, a user's) alike.
        sharded = type(self)
        own = next(
            (cls for cls in sharded.__mro__[1:] if cls.__name__ == sharded.__name__.removeprefix("FSDP")), sharded
        )
        self.__class__ = own
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self.__class__ = sharded

    def _init_weights(self, module: nn.Module) -> None:
        from transformers import initialization as init

        super()._init_weights(module)
        if isinstance(module, AlbertMLMHead):
            init.zeros_(module.bias)
        elif isinstance(module, AlbertEmbeddings):
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))


@contextlib.contextmanager
def _code_not_copied(cls: type) -> Iterator[None]:
    """For the duration, `cls` is no class registered for an Auto class: transformers' `save_pretrained` copies the
    file of a registered class (and sets `auto_map`) beside the weights, which a stock folder must not hold. The
    registration is the class's (`register_for_auto_class`), so it is lifted for the save and put back after."""
    own, saved = "_auto_class" in cls.__dict__, cls._auto_class
    cls._auto_class = None
    try:
        yield
    finally:
        if own:
            cls._auto_class = saved
        else:
            del cls._auto_class


def _normalize(loss_sum: torch.Tensor, count: torch.Tensor | int) -> torch.Tensor:
    if torch.is_tensor(count):
        count = count.to(loss_sum.device)
    return loss_sum / count


def cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: torch.Tensor | int | None = None
) -> torch.Tensor:
    """Cross-entropy in fp32 ignoring label -100; a sum over `num_items_in_batch` when given (Trainer's global count
    of labels across gradient accumulation and processes), else the mean over this batch."""
    logits = logits.reshape(-1, logits.shape[-1]).float()
    labels = labels.reshape(-1).to(logits.device)
    if num_items_in_batch is None:
        return F.cross_entropy(logits, labels, ignore_index=-100)
    return _normalize(F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum"), num_items_in_batch)


def _model_kwargs(kwargs: dict) -> dict:
    """Keyword arguments meant for the attention functions, without the loss-only ones."""
    return {k: v for k, v in kwargs.items() if k not in ("num_items_in_batch", "num_sequences_in_batch")}


# --------------------------------------------------------------------------------------------------------------------
# The base model
# --------------------------------------------------------------------------------------------------------------------


class AlbertModel(AlbertPreTrainedModel):
    """Embeddings + encoder (+ tanh pooler on [CLS]): the backbone every head calls once.

    `check_input_values`: whether every forward pass checks that its ids lie in their tables (`check_inputs`: a
    reduction per id tensor read on the host, a sync that stalls an accelerator), or only the model's first one
    (False, the default). After it, an id out of range still fails with the named error on the CPU (the lookup's
    IndexError is turned into it); on a GPU the lookup's device assertion comes first, so set it to True to find a
    bad batch.
    """

    check_input_values: bool = False

    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True):
        super().__init__(config)
        self.input_values_checked = False
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.pooler_activation = nn.Tanh() if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.word_embeddings = value

    def embed(
        self,
        input_ids: torch.LongTensor | None,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.LongTensor | None,
        position_ids: torch.LongTensor | None,
        inputs_embeds: torch.Tensor | None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Checked inputs -> embeddings (B, T, E) and the one attention mask every layer application reads."""
        checked = (input_ids, inputs_embeds, attention_mask, token_type_ids, position_ids)
        check_inputs(self.config, *checked, values=self.check_input_values or not self.input_values_checked)
        if not torch.compiler.is_compiling():
            self.input_values_checked = True
        try:
            embeddings = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)  # (B, T, E)
        except IndexError:  # an id out of its table (CPU): say which one
            check_inputs(self.config, *checked, values=True)
            raise
        # One mask for every layer, in the layout of the kernel they will run: additive (B, 1, 1, T) for eager, what
        # transformers builds for the others: none without an attention mask, and from an attention mask always, which
        # transformers would otherwise read on the host to see whether anything is padded (a sync per forward that
        # stalls an accelerator). A batch without padding can pass no attention mask: the kernel runs without one.
        if attention_implementation(self.config, output_attentions) == "eager":
            mask = additive_mask(attention_mask, embeddings.dtype)
        else:
            mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=embeddings,
                attention_mask=attention_mask,
                allow_is_bidirectional_skip=attention_mask is None,
            )
        return embeddings, mask

    def pool(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """tanh(dense([CLS])): (B, T, H) -> (B, H)."""
        return self.pooler_activation(self.pooler(sequence_output[:, 0]))

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPooling:
        """`return_dict=False` gives a tuple; other keyword arguments go to the attention kernel."""
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        embeddings, mask = self.embed(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, output_attentions
        )
        encoder_outputs = self.encoder(
            embeddings, mask, output_attentions, output_hidden_states, **_model_kwargs(kwargs)
        )
        sequence_output = encoder_outputs.last_hidden_state  # (B, T, H)
        pooled_output = self.pool(sequence_output) if self.pooler is not None else None

        return BaseModelOutputWithPooling(
            last_hidden_state=sequence_output,
            pooler_output=pooled_output,
            hidden_states=encoder_outputs.hidden_states,
            attentions=encoder_outputs.attentions,
        )


# --------------------------------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------------------------------


class AlbertMLMHead(nn.Module):
    """H -> E dense + activation + LayerNorm, then the decoder E -> V (its weight tied to the word embeddings) plus the
    output bias.

    The output bias belongs to this module alone, not also to the decoder: transformers' ALBERT ties `decoder.bias` to
    `bias`, one tensor in two modules, which FSDP2 refuses once the decoder is sharded in another unit than the head
    (accelerate's FSDP2 preparation puts the input and output embeddings in one unit of their own). State dicts that
    hold the tied copy `decoder.bias` (transformers' ALBERT's) still load: the copy is dropped, or stands in for
    `bias` where that is missing.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.LayerNorm = AlbertLayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=False)
        self.activation = activation_function(config.hidden_act)
        self.register_load_state_dict_pre_hook(_drop_tied_decoder_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.LayerNorm(self.activation(self.dense(hidden_states)))  # (..., E)
        return self.decoder(hidden_states) + self.bias  # (..., V)


def _drop_tied_decoder_bias(module, state_dict, prefix, *args) -> None:
    """Before `AlbertMLMHead` loads its part of a state dict: the tied copy `decoder.bias` of transformers' ALBERT
    dropped, or standing in for `bias` where that is missing (in place, as torch's pre-hooks may)."""
    tied_copy = state_dict.pop(prefix + "decoder.bias", None)
    if tied_copy is not None and prefix + "bias" not in state_dict:
        state_dict[prefix + "bias"] = tied_copy


class AlbertSOPHead(nn.Module):
    """Sentence-order prediction from the pooled [CLS] output."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, pooled_output: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled_output))


_TIED_MLM_KEYS = {"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight"}


class _AlbertWithMLMHead(AlbertPreTrainedModel):
    """Shared plumbing of the two models that carry the tied MLM head."""

    _tied_weights_keys = _TIED_MLM_KEYS
    # transformers' ALBERT checkpoints may hold the output bias twice (`predictions.decoder.bias`, tied to
    # `predictions.bias`); here the head's `bias` is the only copy (see AlbertMLMHead).
    _keys_to_ignore_on_load_unexpected = [r"predictions\.decoder\.bias"]

    def get_input_embeddings(self) -> nn.Embedding:
        return self.albert.embeddings.word_embeddings

    def get_output_embeddings(self) -> nn.Linear:
        return self.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.predictions.decoder = new_embeddings
        old_bias, vocab_size = self.predictions.bias, new_embeddings.out_features
        if old_bias.shape[0] != vocab_size:  # resize_token_embeddings: kept tokens keep their bias, new ones get 0
            bias = old_bias.new_zeros(vocab_size)
            kept = min(vocab_size, old_bias.shape[0])
            bias[:kept] = old_bias.detach()[:kept]
            self.predictions.bias = nn.Parameter(bias)

    def mlm_scores(
        self, sequence_output: torch.Tensor, labels: torch.Tensor | None, masked_positions_only: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """MLM logits (B, T, V) for every token; or, with `masked_positions_only` and labels, (M, V) for the M positions
        whose label is not -100 (row-major order), with their labels (M,), as the original ALBERT gathers them: the
        30k-way projection and softmax then cost ~15% of the full computation."""
        if not masked_positions_only or labels is None:
            return self.predictions(sequence_output), labels
        selected = labels.ne(-100)  # (B, T)
        return self.predictions(sequence_output[selected]), labels[selected]


@dataclass
class AlbertForPreTrainingOutput(ModelOutput):
    """Output of [`AlbertForPreTraining`].

    loss: mlm_loss + sop_loss (those present). mlm_loss / sop_loss: the two terms, for logging.
    prediction_logits: (B, T, V) MLM scores. sop_logits: (B, 2) sentence-order scores (0 = in order, 1 = swapped).
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    sop_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    mlm_loss: torch.Tensor | None = None
    sop_loss: torch.Tensor | None = None


class AlbertForPreTraining(_AlbertWithMLMHead):
    """ALBERT with the two pretraining heads: masked LM and sentence-order prediction."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        sentence_order_label: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        num_sequences_in_batch: torch.Tensor | int | None = None,
        masked_positions_only: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> AlbertForPreTrainingOutput:
        r"""
        labels: (B, T) MLM targets, -100 where not masked.
        masked_positions_only: with labels, compute MLM logits only where labels != -100; `prediction_logits` is then
            (M, V), rows in the order of `labels[labels != -100]`. Same loss and gradients, much less work.
        sentence_order_label: (B,) 0 when segment A precedes B in the document, 1 when swapped.
        num_items_in_batch: global count of MLM targets (Trainer); the MLM loss is then sum / count.
        num_sequences_in_batch: global count of sequences; the SOP loss is then sum / count.
        kwargs: `output_attentions`, `output_hidden_states`, `return_dict` and attention options, as for every head.
        """
        outputs = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        prediction_scores, mlm_labels = self.mlm_scores(outputs.last_hidden_state, labels, masked_positions_only)
        sop_scores = self.sop_classifier(outputs.pooler_output)  # (B, 2)

        mlm_loss = sop_loss = total_loss = None
        if labels is not None:
            mlm_loss = cross_entropy(prediction_scores, mlm_labels, num_items_in_batch)
        if sentence_order_label is not None:
            sop_loss = cross_entropy(sop_scores, sentence_order_label, num_sequences_in_batch)
        if mlm_loss is not None or sop_loss is not None:
            total_loss = sum(term for term in (mlm_loss, sop_loss) if term is not None)

        return AlbertForPreTrainingOutput(
            loss=total_loss,
            prediction_logits=prediction_scores,
            sop_logits=sop_scores,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            mlm_loss=mlm_loss,
            sop_loss=sop_loss,
        )


class AlbertForMaskedLM(_AlbertWithMLMHead):
    """ALBERT with the masked-LM head (no pooler)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config, add_pooling_layer=False)
        self.predictions = AlbertMLMHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        masked_positions_only: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MaskedLMOutput:
        """`masked_positions_only`: see [`AlbertForPreTraining.forward`]."""
        outputs = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        prediction_scores, mlm_labels = self.mlm_scores(outputs.last_hidden_state, labels, masked_positions_only)
        loss = cross_entropy(prediction_scores, mlm_labels, num_items_in_batch) if labels is not None else None
        return MaskedLMOutput(
            loss=loss, logits=prediction_scores, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


# --------------------------------------------------------------------------------------------------------------------
# Adaptive depth (early exit) for sequence classification and multiple choice
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class SequenceClassifierOutputWithExits(SequenceClassifierOutput):
    """[`SequenceClassifierOutput`] of a forward pass that may stop early (exits on, or a fixed depth).

    exit_layers: (B,) how many layer applications each example ran before its logits were taken (1 .. L).
    """

    exit_layers: torch.LongTensor | None = None


@dataclass
class MultipleChoiceModelOutputWithExits(MultipleChoiceModelOutput):
    """[`MultipleChoiceModelOutput`] of a forward pass that may stop early; `exit_layers` as in
    [`SequenceClassifierOutputWithExits`]."""

    exit_layers: torch.LongTensor | None = None


def exits_agree(previous: torch.Tensor, current: torch.Tensor, regression: bool, threshold: float) -> torch.Tensor:
    """(B,) whether two consecutive exits' logits (B, C) agree: same argmax, or for a regression (C = 1) scores
    within `threshold` of each other."""
    if regression:
        return (current - previous).abs().squeeze(-1) <= threshold
    return current.argmax(-1) == previous.argmax(-1)


def patience_exit_depths(
    exit_logits: torch.Tensor, patience: int, regression: bool = False, threshold: float = 0.0
) -> torch.Tensor:
    """(B,) the depth (1 .. L) at which patience-based exit stops each example, from the logits of every exit
    (L, B, C): the first depth whose exit agrees with the `patience` exits before it, else L.

    The definition the adaptive forward pass implements one layer at a time (PABEE, Zhou et al. 2020, Eq. 5:
    a counter of consecutive agreements, reset on a change, stops at `patience`); written here over all exits at once
    for analysis and as its reference.
    """
    num_exits, batch_size = exit_logits.shape[:2]
    depths = torch.full((batch_size,), num_exits, dtype=torch.long)
    counter = torch.zeros(batch_size, dtype=torch.long)
    done = torch.zeros(batch_size, dtype=torch.bool)
    for depth in range(2, num_exits + 1):
        agree = exits_agree(exit_logits[depth - 2], exit_logits[depth - 1], regression, threshold)
        counter = torch.where(agree, counter + 1, torch.zeros_like(counter))
        newly = ~done & (counter >= patience)
        depths[newly] = depth
        done |= newly
    return depths


def run_with_exits(
    hidden_states: torch.Tensor,  # (B, T, H) after the embedding projection
    mask: torch.Tensor | None,  # the layers' attention mask, batch first (or None / batch 1: broadcast)
    apply_layer: Callable[[int, torch.Tensor, torch.Tensor | None], torch.Tensor],
    exit_logits: Callable[[torch.Tensor, int], torch.Tensor],
    max_depth: int,
    patience: int,
    regression: bool,
    threshold: float,
    rows_per_example: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The adaptive-depth loop, written once for PyTorch and for the ONNX Runtime driver (which passes its sessions as
    `apply_layer(application, hidden, mask)` and `exit_logits(hidden, depth)`): (B, C) logits and (B,) depths.

    `rows_per_example` r: each example owns r consecutive rows of the hidden states and mask (multiple choice: one
    row per choice, B * r rows in all); `exit_logits` maps the (b * r, T, H) rows of b examples to their (b, C) logits,
    and an example that exits drops all its rows at once.

    Runs at most `max_depth` layer applications. With `patience` p > 0, an example leaves once p consecutive exits
    agreed with the one before them ([`patience_exit_depths`] states the same rule over all exits at once); its rows
    are then dropped from the hidden states and the mask (`index_select`), so later applications run on the
    remaining examples only. p = 0: fixed depth, only the exit at `max_depth` is computed.
    """
    batch_size, device = hidden_states.shape[0] // rows_per_example, hidden_states.device
    offsets = torch.arange(rows_per_example, device=device)
    active = torch.arange(batch_size, device=device)  # original row of each remaining example
    depths = torch.full((batch_size,), max_depth, dtype=torch.long, device=device)
    logits_out = previous = counter = None
    for application in range(max_depth):
        depth = application + 1
        hidden_states = apply_layer(application, hidden_states, mask)
        if patience == 0 and depth < max_depth:
            continue
        logits = exit_logits(hidden_states, depth)  # (b, C) for the b remaining examples
        if logits_out is None:
            logits_out = logits.new_empty(batch_size, logits.shape[-1])
        if depth == max_depth:
            logits_out[active] = logits
            break
        if previous is None:
            counter = torch.zeros(len(active), dtype=torch.long, device=device)
        else:
            agree = exits_agree(previous, logits, regression, threshold)
            counter = torch.where(agree, counter + 1, torch.zeros_like(counter))
        stop = counter >= patience
        if stop.any():
            logits_out[active[stop]] = logits[stop]
            depths[active[stop]] = depth
            keep = (~stop).nonzero().squeeze(-1)
            if len(keep) == 0:
                break
            active, logits, counter = active[keep], logits[keep], counter[keep]
            keep_rows = (keep.unsqueeze(-1) * rows_per_example + offsets).reshape(-1)
            hidden_states = hidden_states.index_select(0, keep_rows)
            if mask is not None and mask.shape[0] > 1:
                mask = mask.index_select(0, keep_rows)
        previous = logits
    return logits_out, depths


class AdaptiveDepthMixin:
    """Adaptive depth (`config.early_exit`, see [`AlbertConfig`]) for a head that scores the pooled [CLS] with
    `classifier` (sequence classification, multiple choice), written once.

    The shared layer is the same function at every application, so a classifier can read the pooled [CLS] after each
    one. Exit `d` (after d applications) is `exit_classifiers[d - 1]` for d < L and the usual `classifier` at d = L
    (so a checkpoint without exits still has its last exit), or `classifier` at every depth with
    `early_exit_shared_classifier`. Training minimises PABEE's weighted sum of the exits' losses, exit d weighing
    d / (1 + ... + L). In eval mode the loop stops each example at its exit (patience) or at
    `num_layers_at_inference`, and removes exited examples from the batch, so they cost nothing more. With
    `early_exit` off and no `num_layers_at_inference`, nothing of this runs: same modules, keys and logits as
    transformers' ALBERT.

    A head provides `albert`, `dropout`, `classifier`, `exit_loss(logits, labels, num_items_in_batch)` and
    `exit_regression()`; its inputs are `rows_per_example` rows each (multiple choice: one per choice), whose
    `classifier` outputs are read as one row of (B, rows_per_example * out_features) logits.
    """

    exits_output_class: ClassVar[type] = SequenceClassifierOutputWithExits

    def add_exit_classifiers(self, config: AlbertConfig, out_features: int) -> None:
        """One classifier per depth but the last (that one is `classifier`), unless shared or exits are off."""
        if config.early_exit and not config.early_exit_shared_classifier:
            self.exit_classifiers = nn.ModuleList(
                [nn.Linear(config.hidden_size, out_features) for _ in range(config.num_layer_applications - 1)]
            )

    def exit_classifier(self, depth: int) -> nn.Linear:
        """The classifier of the exit after `depth` layer applications (1 .. L)."""
        if depth == self.config.num_layer_applications or not hasattr(self, "exit_classifiers"):
            return self.classifier
        return self.exit_classifiers[depth - 1]

    def exit_logits(self, sequence_output: torch.Tensor, depth: int, rows_per_example: int = 1) -> torch.Tensor:
        """(b * r, T, H) hidden states after `depth` applications -> (b, r * out_features) logits of that exit."""
        scores = self.exit_classifier(depth)(self.dropout(self.albert.pool(sequence_output)))
        return scores.reshape(-1, rows_per_example * scores.shape[-1])

    def uses_exits(self) -> bool:
        """Whether this forward pass runs the exits (training with exits, or inference at adaptive/fixed depth)."""
        if self.training:
            return self.config.early_exit
        return self.config.early_exit or self.config.num_layers_at_inference is not None

    def all_exit_logits(self, inputs: tuple, rows_per_example: int = 1, **kwargs) -> torch.Tensor:
        """(L, B, C): every exit's logits for every example, at full depth (training; analysis)."""
        embeddings, mask = self.albert.embed(*inputs)
        encoder = self.albert.encoder
        hidden_states = encoder.embedding_hidden_mapping_in(embeddings)
        logits = []
        for application in range(self.config.num_layer_applications):
            hidden_states, _ = encoder.apply_layer(application, hidden_states, mask, **kwargs)
            logits.append(self.exit_logits(hidden_states, application + 1, rows_per_example))
        return torch.stack(logits)

    def forward_with_exits(
        self, inputs: tuple, labels: torch.Tensor | None, num_items_in_batch, rows_per_example: int = 1, **kwargs
    ) -> ModelOutput:
        """The forward pass with exits: PABEE loss over every exit in training, the adaptive loop in eval mode."""
        if kwargs.get("output_attentions") or kwargs.get("output_hidden_states"):
            raise ValueError(
                "output_attentions / output_hidden_states are not available with early exit or "
                "num_layers_at_inference (examples leave the batch at different depths); turn those off first."
            )
        not_for_layers = ("return_dict", "output_attentions", "output_hidden_states")
        kwargs = _model_kwargs({k: v for k, v in kwargs.items() if k not in not_for_layers})
        if self.training:
            exit_logits = self.all_exit_logits(inputs, rows_per_example, **kwargs)  # (L, B, C)
            loss = None
            if labels is not None:
                # PABEE: sum_d d * loss_d / sum_d d; deeper exits weigh more.
                weights = range(1, len(exit_logits) + 1)
                losses = [w * self.exit_loss(lg, labels, num_items_in_batch) for w, lg in zip(weights, exit_logits)]
                loss = sum(losses) / sum(weights)
            batch_size = exit_logits.shape[1]
            depth = torch.full((batch_size,), len(exit_logits), dtype=torch.long, device=exit_logits.device)
            return self.exits_output_class(loss=loss, logits=exit_logits[-1], exit_layers=depth)
        logits, depth = self.adaptive_forward(inputs, rows_per_example, **kwargs)
        loss = self.exit_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return self.exits_output_class(loss=loss, logits=logits, exit_layers=depth)

    def adaptive_forward(self, inputs: tuple, rows_per_example: int = 1, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        """Eval-mode forward that stops each example at its exit ([`run_with_exits`]): (B, C) logits, (B,) depths."""
        config = self.config
        embeddings, mask = self.albert.embed(*inputs)
        encoder = self.albert.encoder
        return run_with_exits(
            encoder.embedding_hidden_mapping_in(embeddings),
            mask,
            lambda application, hidden, mask: encoder.apply_layer(application, hidden, mask, **kwargs)[0],
            lambda hidden, depth: self.exit_logits(hidden, depth, rows_per_example),
            max_depth=config.num_layers_at_inference or config.num_layer_applications,
            patience=config.early_exit_patience if config.early_exit else 0,
            regression=self.exit_regression(),
            threshold=config.early_exit_regression_threshold,
            rows_per_example=rows_per_example,
        )


class AlbertForSequenceClassification(AdaptiveDepthMixin, AlbertPreTrainedModel):
    """Pooled [CLS] -> dropout -> linear. Regression (num_labels=1), single- or multi-label by `problem_type`.

    Adaptive depth: [`AdaptiveDepthMixin`] (one exit classifier of `num_labels` outputs per depth).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.add_exit_classifiers(config, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> SequenceClassifierOutput:
        if self.uses_exits():
            inputs = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
            return self.forward_with_exits(inputs, labels, num_items_in_batch, **kwargs)
        outputs = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))  # (B, num_labels)
        loss = self.sequence_classification_loss(logits, labels, num_items_in_batch) if labels is not None else None
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )

    def exit_loss(self, logits, labels, num_items_in_batch=None) -> torch.Tensor:
        return self.sequence_classification_loss(logits, labels, num_items_in_batch)

    def exit_regression(self) -> bool:
        return self.num_labels == 1

    def sequence_classification_loss(self, logits, labels, num_items_in_batch=None) -> torch.Tensor:
        """MSE, cross-entropy or BCE as transformers chooses them; sums over `num_items_in_batch` when given."""
        if self.config.problem_type is None:
            if self.num_labels == 1:
                self.config.problem_type = "regression"
            elif labels.dtype in (torch.long, torch.int):
                self.config.problem_type = "single_label_classification"
            else:
                self.config.problem_type = "multi_label_classification"
        if self.config.problem_type == "single_label_classification":
            return cross_entropy(logits, labels, num_items_in_batch)
        if self.config.problem_type == "regression":
            logits, labels = (logits.squeeze(), labels.squeeze()) if self.num_labels == 1 else (logits, labels)
            elementwise = F.mse_loss(logits.float(), labels.float(), reduction="none")
        else:
            elementwise = F.binary_cross_entropy_with_logits(logits.float(), labels.float(), reduction="none")
        if num_items_in_batch is None:
            return elementwise.mean()
        return _normalize(elementwise.sum(), num_items_in_batch)


class AlbertForTokenClassification(AlbertPreTrainedModel):
    """Per-token linear classifier (NER, POS)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.albert = AlbertModel(config, add_pooling_layer=False)
        dropout = config.classifier_dropout_prob
        self.dropout = nn.Dropout(config.hidden_dropout_prob if dropout is None else dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> TokenClassifierOutput:
        outputs = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))  # (B, T, num_labels)
        loss = cross_entropy(logits, labels, num_items_in_batch) if labels is not None else None
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class AlbertForQuestionAnswering(AlbertPreTrainedModel):
    """Span extraction: a start and an end logit per token."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.albert = AlbertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> QuestionAnsweringModelOutput:
        outputs = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.qa_outputs(outputs.last_hidden_state)  # (B, T, 2)
        start_logits, end_logits = (part.squeeze(-1).contiguous() for part in logits.split(1, dim=-1))

        total_loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the window (answer cut off by the stride) are ignored, as in the original.
            ignored_index = start_logits.shape[1]
            start_positions = start_positions.reshape(-1).clamp(0, ignored_index)
            end_positions = end_positions.reshape(-1).clamp(0, ignored_index)
            start_loss = F.cross_entropy(start_logits.float(), start_positions, ignore_index=ignored_index)
            end_loss = F.cross_entropy(end_logits.float(), end_positions, ignore_index=ignored_index)
            total_loss = (start_loss + end_loss) / 2

        return QuestionAnsweringModelOutput(
            loss=total_loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


class AlbertForMultipleChoice(AdaptiveDepthMixin, AlbertPreTrainedModel):
    """Scores each of C choices from its pooled [CLS]; inputs are (B, C, T).

    Adaptive depth: [`AdaptiveDepthMixin`] (output: [`MultipleChoiceModelOutputWithExits`]), each example's C
    choices being its C rows: exits score every choice, an example's prediction is the argmax over its choices, and
    once it exits all its choices leave the batch.
    """

    exits_output_class = MultipleChoiceModelOutputWithExits

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.add_exit_classifiers(config, 1)
        self.post_init()

    def exit_loss(self, logits, labels, num_items_in_batch=None) -> torch.Tensor:
        return cross_entropy(logits, labels, num_items_in_batch)

    def exit_regression(self) -> bool:
        return False

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> MultipleChoiceModelOutput:
        reference = input_ids if input_ids is not None else inputs_embeds
        if reference is None or reference.dim() < 3:
            raise ValueError("AlbertForMultipleChoice takes inputs of shape (batch_size, num_choices, seq_len).")
        num_choices = reference.shape[1]

        def flatten(tensor: torch.Tensor | None, trailing: int = 1) -> torch.Tensor | None:
            # (B, C, T[, E]) -> (B * C, T[, E])
            return None if tensor is None else tensor.reshape(-1, *tensor.shape[-trailing:])

        input_ids, attention_mask, token_type_ids, position_ids = map(
            flatten, (input_ids, attention_mask, token_type_ids, position_ids)
        )
        inputs_embeds = flatten(inputs_embeds, trailing=2)
        if self.uses_exits():
            inputs = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
            return self.forward_with_exits(inputs, labels, num_items_in_batch, rows_per_example=num_choices, **kwargs)
        outputs = self.albert(
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, return_dict=True, **kwargs
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)  # (B, C)
        loss = cross_entropy(logits, labels, num_items_in_batch) if labels is not None else None
        return MultipleChoiceModelOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


ALBERT_AUTO_CLASSES = {
    "AutoModel": AlbertModel,
    "AutoModelForPreTraining": AlbertForPreTraining,
    "AutoModelForMaskedLM": AlbertForMaskedLM,
    "AutoModelForSequenceClassification": AlbertForSequenceClassification,
    "AutoModelForTokenClassification": AlbertForTokenClassification,
    "AutoModelForQuestionAnswering": AlbertForQuestionAnswering,
    "AutoModelForMultipleChoice": AlbertForMultipleChoice,
}

__all__ = [
    "AlbertPreTrainedModel",
    "AlbertModel",
    "AlbertForPreTraining",
    "AlbertForPreTrainingOutput",
    "AlbertForMaskedLM",
    "AlbertForSequenceClassification",
    "AdaptiveDepthMixin",
    "SequenceClassifierOutputWithExits",
    "MultipleChoiceModelOutputWithExits",
    "exits_agree",
    "patience_exit_depths",
    "run_with_exits",
    "AlbertForTokenClassification",
    "AlbertForQuestionAnswering",
    "AlbertForMultipleChoice",
    "ALBERT_AUTO_CLASSES",
]
