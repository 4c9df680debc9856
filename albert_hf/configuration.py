"""ALBERT configuration: every field of transformers' AlbertConfig, plus the paper's cross-layer sharing ablation.

An official Hub `config.json` (model_type "albert") loads into this class unchanged; configs of other model types are
refused with an error that names the type.

Saving is stock by default: a config that transformers' own ALBERT describes exactly ([`AlbertConfig.
stock_albert_problems`] finds nothing: sharing "all" or "none", no exits, a transformers ALBERT class and tokenizer)
is written as transformers' `AlbertConfig` (model_type "albert", no `auto_map`, no code beside it), which every tool
that keys on "albert" reads; any other is written as albert_hf's (model_type "albert_hf", with its code).
"""

from __future__ import annotations

import os
from typing import Any

import transformers
from transformers import PretrainedConfig

SHARING_STRATEGIES = ("all", "attention", "ffn", "none")
# The two blocks of a layer that cross-layer sharing decides about, named after `sharing`'s values.
SHARED_BLOCKS = ("attention", "ffn")
# Model types whose config.json describes the same architecture and weights layout as ours.
COMPATIBLE_MODEL_TYPES = ("albert_hf", "albert")

# The sizes that decide the shapes of a model's weights (positive integers), and with the sharing strategy every
# field a saved checkpoint's weights fix.
SIZE_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "max_position_embeddings",
    "type_vocab_size",
)
WEIGHT_SHAPE_FIELDS = (*SIZE_FIELDS, "sharing")

# Fields transformers' AlbertConfig does not have: the sharing ablation and adaptive depth. A stock config.json leaves
# them out (their defaults are what stock ALBERT does), and reading one back gives those defaults.
ALBERT_HF_ONLY_FIELDS = (
    "sharing",
    "early_exit",
    "early_exit_shared_classifier",
    "early_exit_patience",
    "early_exit_regression_threshold",
    "num_layers_at_inference",
)
# transformers' ALBERT classes, by name: albert_hf's classes of the same names hold the same weights under the same keys.
STOCK_ALBERT_ARCHITECTURES = (
    "AlbertModel",
    "AlbertForPreTraining",
    "AlbertForMaskedLM",
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertForQuestionAnswering",
    "AlbertForMultipleChoice",
)


class AlbertConfig(PretrainedConfig):
    r"""
    Configuration of an ALBERT model ("A Lite BERT", Lan et al., ICLR 2020).

    Field names and meanings are those of `transformers.AlbertConfig`, so official checkpoints load as they are. The
    defaults describe ALBERT-xxlarge-v2, as in transformers; use [`AlbertConfig.preset`] for the released sizes.

    Args:
        vocab_size: number of SentencePiece pieces (30000 for the released models).
        embedding_size: width E of the factorized vocabulary embeddings (128), projected to `hidden_size`.
        hidden_size: width H of the transformer layers.
        num_hidden_layers: number of layer applications L.
        num_hidden_groups: number of distinct parameter groups; layer i uses group
            `i // (num_hidden_layers // num_hidden_groups)` (see [`AlbertConfig.group_layer`]).
        num_attention_heads: attention heads per layer; must divide `hidden_size`. Checked when a model is built, not
            here, as in transformers: a config can then be edited one field at a time (`hidden_size=312`, then 12
            heads) without passing through a refused state.
        intermediate_size: width of the feed-forward layer.
        inner_group_num: number of (attention + FFN) layers inside each group, each applied in turn.
        hidden_act: activation of the FFN and MLM head (`gelu_new` in the released models).
        hidden_dropout_prob / attention_probs_dropout_prob / classifier_dropout_prob: dropout rates.
        max_position_embeddings: longest sequence the model accepts.
        type_vocab_size: number of segment (token type) ids.
        initializer_range: std of the truncated-normal initialisation.
        layer_norm_eps: LayerNorm epsilon.
        sharing: cross-layer parameter sharing (paper, Table 4): `"all"` (ALBERT: attention and FFN shared within a
            group), `"attention"` (attention shared, every layer application has its own FFN), `"ffn"` (FFN shared,
            own attention), `"none"` (BERT-style: nothing shared; implies `num_hidden_groups == num_hidden_layers`,
            which keeps the stock transformers key layout).
        early_exit: sequence classification and multiple choice: an exit classifier reads the pooled [CLS] after
            every application of the layers, and training minimises the PABEE loss (the exits' losses weighted by
            their depth). Off: the model, its keys and its logits are exactly those of transformers' ALBERT.
        early_exit_shared_classifier: with `early_exit`, all exits use the final `classifier` (one head shared by
            every depth) instead of one classifier per depth.
        early_exit_patience: inference (eval mode) with exits: an example stops once its prediction has stayed the
            same for `early_exit_patience` consecutive exits after the one that first gave it (PABEE's patience: p + 1
            agreeing exits; for regression, consecutive exits within `early_exit_regression_threshold`). 0: off.
        early_exit_regression_threshold: largest change of a regression score between consecutive exits that counts
            as agreement.
        num_layers_at_inference: run at most this many layer applications in eval mode and classify with the exit at
            that depth (fixed depth; with `early_exit_patience`, the deepest exit). None: all of them.
    """

    model_type = "albert_hf"
    # The model types whose config.json this class reads: its own, and transformers' ALBERT (the official checkpoints,
    # and every folder saved in transformers' format).
    compatible_model_types = COMPATIBLE_MODEL_TYPES

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    inner_group_num: int = 1
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: int | float = 0.0
    attention_probs_dropout_prob: int | float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    classifier_dropout_prob: int | float = 0.1
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3
    tie_word_embeddings: bool = True
    sharing: str = "all"
    early_exit: bool = False
    early_exit_shared_classifier: bool = False
    early_exit_patience: int = 0
    early_exit_regression_threshold: float = 0.01
    num_layers_at_inference: int | None = None

    def __post_init__(self, **kwargs):
        # BERT-style "no sharing" is exactly ALBERT with one group per layer application: say so in the config so the
        # weights keep transformers' key layout (and export to a stock ALBERT checkpoint).
        if self.sharing == "none" and self.num_hidden_groups == 1:
            self.num_hidden_groups = self.num_hidden_layers
        super().__post_init__(**kwargs)
        self.validate_architecture()

    def validate_architecture(self):
        """Refuse settings that cannot build a model, naming the field."""
        from transformers.activations import ACT2FN

        for name in SIZE_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"AlbertConfig.{name} must be a positive integer, got {value!r}.")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups ({self.num_hidden_groups}) cannot exceed num_hidden_layers "
                f"({self.num_hidden_layers}): every group must be used by at least one layer."
            )
        if self.num_hidden_layers % self.num_hidden_groups != 0:
            raise ValueError(
                f"AlbertConfig.num_hidden_layers ({self.num_hidden_layers}) must be a multiple of num_hidden_groups "
                f"({self.num_hidden_groups}), so that every group is applied the same number of times."
            )
        if self.sharing not in SHARING_STRATEGIES:
            raise ValueError(f"AlbertConfig.sharing must be one of {SHARING_STRATEGIES}, got {self.sharing!r}.")
        if self.sharing == "none" and self.num_hidden_groups != self.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.sharing='none' means one group per layer: num_hidden_groups must be 1 (set for you) or "
                f"num_hidden_layers ({self.num_hidden_layers}), got {self.num_hidden_groups}."
            )
        if self.hidden_act not in ACT2FN:
            raise ValueError(
                f"AlbertConfig.hidden_act {self.hidden_act!r} is not a known activation; choose one of "
                f"{sorted(ACT2FN.keys())}."
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout_prob"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"AlbertConfig.{name} must be in [0, 1), got {value!r}.")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"AlbertConfig.layer_norm_eps must be positive, got {self.layer_norm_eps!r}.")
        self.validate_early_exit()

    def validate_early_exit(self):
        """Refuse adaptive-depth settings that cannot mean anything, naming the field."""
        patience = self.early_exit_patience
        if not isinstance(patience, int) or isinstance(patience, bool) or patience < 0:
            raise ValueError(f"AlbertConfig.early_exit_patience must be an integer >= 0 (0: off), got {patience!r}.")
        if patience > 0 and not self.early_exit:
            raise ValueError(
                "AlbertConfig.early_exit_patience needs exit classifiers: set early_exit=True (and train them) too."
            )
        if self.early_exit_shared_classifier and not self.early_exit:
            raise ValueError("AlbertConfig.early_exit_shared_classifier needs early_exit=True.")
        if not self.early_exit_regression_threshold >= 0:
            raise ValueError(
                "AlbertConfig.early_exit_regression_threshold must be >= 0, got "
                f"{self.early_exit_regression_threshold!r}."
            )
        depth = self.num_layers_at_inference
        if depth is not None and (
            not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= self.num_layer_applications
        ):
            raise ValueError(
                f"AlbertConfig.num_layers_at_inference must be None or an integer in [1, {self.num_layer_applications}] "
                f"(num_hidden_layers * inner_group_num), got {depth!r}."
            )

    # Cross-layer sharing: the one place that says which blocks the encoder holds once per group and which once per
    # layer application. The model builds its modules from these answers; parameter, adapter and memory counts
    # (peft_utils, distributed) and the stock-ALBERT export (hub) read them too.

    @property
    def layers_per_group(self) -> int:
        """How many consecutive layer applications use the same group."""
        return self.num_hidden_layers // self.num_hidden_groups

    @property
    def num_layer_applications(self) -> int:
        """How many (attention + FFN) layers a forward pass applies: `num_hidden_layers * inner_group_num`."""
        return self.num_hidden_layers * self.inner_group_num

    def group_layer(self, application: int) -> tuple[int, int]:
        """(group, inner layer) whose weights layer application `application` (0 .. num_layer_applications - 1) uses:
        each of the `num_hidden_layers` layers runs its group's `inner_group_num` inner layers in turn, and
        `layers_per_group` consecutive layers use the same group."""
        layer, inner = divmod(application, self.inner_group_num)
        return layer // self.layers_per_group, inner

    def shares(self, block: str) -> bool:
        """Whether `block` ("attention" or "ffn") lives in the layer groups, each copy applied at the
        `layers_per_group` layer applications of its group, rather than once per layer application.

        True for both blocks under sharing "all" and "none" (where every group has one application), for attention
        only under "attention", for the FFN only under "ffn".
        """
        if block not in SHARED_BLOCKS:
            raise ValueError(f"Unknown block {block!r}; choose one of {SHARED_BLOCKS}.")
        return self.sharing in ("all", "none", block)

    def num_copies(self, block: str) -> int:
        """How many distinct `block` modules ("attention" or "ffn") the encoder holds: `num_hidden_groups *
        inner_group_num` when the groups hold it, else one per layer application."""
        if self.shares(block):
            return self.num_hidden_groups * self.inner_group_num
        return self.num_layer_applications

    # Saving: transformers' own format where it describes the model, albert_hf's where it does not.

    def stock_albert_problems(self, architectures: list[str] | None = None) -> list[str]:
        """Why transformers' own ALBERT (model_type "albert", no custom code) cannot stand for this model; [] when it
        can, and the model is then saved in its format (`save_pretrained`).

        What stock ALBERT has no place for: blocks kept once per layer application (sharing "attention" or "ffn"),
        exit classifiers and a depth at inference (`early_exit`, `num_layers_at_inference`), a head class of its own
        (`architectures`, by default the config's: a forked script's head), and a tokenizer whose class is not one
        of transformers' (`tokenizer_class`, set on the config when the model is paired with a tokenizer that
        transformers' tokenizer format cannot express: `albert_hf.formats`). The one rule every save asks.
        """
        weights = self.stock_weights_problem()
        problems = [] if weights is None else [weights]
        if self.early_exit:
            problems.append("early_exit=True adds an exit classifier after every layer application")
        if self.num_layers_at_inference is not None:
            problems.append(f"num_layers_at_inference={self.num_layers_at_inference} stops before the last layer")
        for name in architectures if architectures is not None else self.architectures or []:
            if name.removeprefix("FSDP") not in STOCK_ALBERT_ARCHITECTURES:
                problems.append(f"{name} is not one of transformers' ALBERT classes")
        tokenizer_class = getattr(self, "tokenizer_class", None)
        if tokenizer_class and not is_transformers_tokenizer(tokenizer_class):
            problems.append(f"its tokenizer ({tokenizer_class}) needs albert_hf's code")
        return problems

    def stock_weights_problem(self) -> str | None:
        """Why transformers' AlbertModel cannot hold this model's weights (a block kept once per layer application:
        sharing "attention" or "ffn"), or None: sharing "all", any groups, and "none", one group per layer."""
        if self.shares("attention") and self.shares("ffn"):
            return None
        block, modules = {
            "attention": ("feed-forward", "unshared_ffn"),
            "ffn": ("attention", "unshared_attention"),
        }[self.sharing]
        return (
            f"sharing={self.sharing!r} keeps one {block} block per layer application (encoder.{modules}.*), which "
            "transformers' AlbertModel has no place for"
        )

    def to_stock_albert(self) -> transformers.AlbertConfig:
        """transformers' `AlbertConfig` (model_type "albert") of the same weights: every field but albert_hf's own
        (`ALBERT_HF_ONLY_FIELDS`: stock ALBERT has no exits and runs every layer) and the remote-code map. Raises
        ValueError when stock ALBERT cannot hold the weights ([`stock_weights_problem`])."""
        problem = self.stock_weights_problem()
        if problem is not None:
            raise ValueError(f"transformers' ALBERT cannot hold this model: {problem}.")
        left_out = {*ALBERT_HF_ONLY_FIELDS, "auto_map", "model_type", "transformers_version", "_name_or_path"}
        return transformers.AlbertConfig(**{key: value for key, value in self.to_dict().items() if key not in left_out})

    def save_pretrained(self, save_directory: str | os.PathLike, push_to_hub: bool = False, **kwargs):
        """Write `config.json`: transformers' own ALBERT config where it describes the model (no code copied, no
        `auto_map`: every tool that keys on model_type "albert" reads it), else albert_hf's, whose `auto_map` and
        configuration.py let it load with `trust_remote_code=True` where albert_hf is absent."""
        if self.stock_albert_problems():
            return super().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)
        return self.to_stock_albert().save_pretrained(save_directory, push_to_hub=push_to_hub, **kwargs)

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path: str | os.PathLike, **kwargs) -> tuple[dict, dict]:
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type not in COMPATIBLE_MODEL_TYPES:
            raise ValueError(
                f"{pretrained_model_name_or_path} holds a config of model type {model_type!r}, not an ALBERT "
                f"({' or '.join(repr(t) for t in COMPATIBLE_MODEL_TYPES)}): refusing to load it into AlbertConfig."
            )
        # Official checkpoints say "albert": the same fields mean the same thing here.
        config_dict["model_type"] = cls.model_type
        return config_dict, kwargs

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> AlbertConfig:
        """The configuration of a released ALBERT, e.g. `AlbertConfig.preset("base-v2")` or `("xxlarge")` (v2)."""
        key = name.removeprefix("albert-").removeprefix("albert/albert-")
        if key in _SIZES:
            key = f"{key}-v2"
        if key not in PRESETS:
            raise ValueError(f"Unknown ALBERT preset {name!r}; choose one of {sorted(PRESETS)}.")
        return cls(**{**PRESETS[key], **overrides})


# The released sizes, as in the official config.json files (albert/albert-{size}-v{1,2} on the Hub).
_SIZES = {
    "base": dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, num_hidden_layers=12),
    "large": dict(hidden_size=1024, num_attention_heads=16, intermediate_size=4096, num_hidden_layers=24),
    "xlarge": dict(hidden_size=2048, num_attention_heads=16, intermediate_size=8192, num_hidden_layers=24),
    "xxlarge": dict(hidden_size=4096, num_attention_heads=64, intermediate_size=16384, num_hidden_layers=12),
}
_COMMON = dict(
    vocab_size=30000,
    embedding_size=128,
    num_hidden_groups=1,
    inner_group_num=1,
    max_position_embeddings=512,
    type_vocab_size=2,
    initializer_range=0.02,
    layer_norm_eps=1e-12,
    classifier_dropout_prob=0.1,
    hidden_act="gelu_new",
)


def _preset(size: str, version: int) -> dict:
    # v1: dropout 0.1 (xxlarge: 0); v2: no dropout. All released models use gelu_new and E=128.
    dropout = 0.1 if version == 1 and size != "xxlarge" else 0.0
    return {**_COMMON, **_SIZES[size], "hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}


PRESETS = {f"{size}-v{version}": _preset(size, version) for size in _SIZES for version in (1, 2)}


def is_transformers_tokenizer(class_name: str) -> bool:
    """Whether `class_name` names one of transformers' own tokenizer classes (which a stock folder may name)."""
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    try:
        found = tokenizer_class_from_name(class_name)
    except (ImportError, AttributeError, ValueError):  # a module it names fails to import: not a class it has
        return False
    return found is not None and found.__module__.startswith("transformers.")


def check_attention_heads(config) -> None:
    """Refuse a `hidden_size` the heads do not divide (any ALBERT config: albert_hf's or transformers'). Asked when a
    model is built (`AlbertAttention`) and by the jobs before any work (`argument_parsing.known_config`), not when the
    config is made: as in transformers, a config takes its fields one at a time (`AlbertConfig(hidden_size=312)` with
    the default 64 heads, then 12 heads), and only the finished config has to agree with itself."""
    if config.hidden_size % config.num_attention_heads != 0:
        raise ValueError(
            f"AlbertConfig.hidden_size ({config.hidden_size}) must be divisible by num_attention_heads "
            f"({config.num_attention_heads}): each head gets hidden_size / num_attention_heads dimensions."
        )
