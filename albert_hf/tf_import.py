"""The original TensorFlow ALBERTs, imported into albert_hf (`albert-hf import`): config, weights, tokenizer, card.

The checkpoints are read by `albert_hf.tf_checkpoint` (no TensorFlow needed) and mapped onto albert_hf's keys, which
are transformers' ALBERT keys. Three layouts are known, told apart by their variable names:

    google-research      google-research/albert: `bert/embeddings/...` (LayerNorm at the embedding width E),
                         `bert/encoder/embedding_hidden_mapping_in` (absent when E == H),
                         `bert/encoder/transformer/group_G/inner_group_I/...`, `bert/pooler/dense`; the heads of its
                         scripts: run_pretraining's `cls/predictions/...` (MLM) and `cls/seq_relationship/...` (SOP),
                         run_classifier's and run_race's `output_weights` / `output_bias`, run_squad_v1's
                         `cls/squad/...`. Google's Chinese ALBERTs (albert_*_zh) use this layout with a WordPiece
                         vocabulary.
    TF-Hub               the same names under a scope: a TF-Hub module's own `variables/variables.*` holds them as
                         they are, a checkpoint fine-tuned on `hub.Module` holds them under `module/` (the heads
                         outside it); the scope is found from where `bert/embeddings/word_embeddings` is.
    brightmart           brightmart/albert_zh: a factorized word table, `bert/embeddings/word_embeddings` [V, E] times
                         `word_embeddings_2` [E, H], added to position and token-type embeddings of width H and
                         normalized at H; BERT's layer names under `bert/encoder/layer_shared/`; an MLM head whose
                         transform is H -> H and whose decoder is the same factorized table, transposed.

brightmart's layout folds into standard ALBERT exactly, with the embedding width set to H: the word table becomes
the product W[V, E] @ P[E, H] (what brightmart computes for each token before adding the other embeddings), position,
type and LayerNorm keep their H-wide weights, `embedding_hidden_mapping_in` is the identity, and the tied MLM decoder
(transformers' ALBERT decodes with the word table) is then that same product, as brightmart's `logits = h P^T W^T`.
It cannot be folded at E: brightmart adds the position and type embeddings (H wide, of full rank) before its
LayerNorm, so the first layer's inputs span all H dimensions, while ALBERT's (a LayerNorm at E, then an E -> H
projection) lie in an E-dimensional affine subspace. The folded model has V * (H - E) - E * H + H * H more parameters
than brightmart's (the identity projection included), and gives its outputs.

google-research's SQuAD v2 head (run_squad_v2.py: start logits, end logits computed from each token *and the start
token's features*, an answerability classifier) has no counterpart in transformers' AlbertForQuestionAnswering (two
logits per token from that token alone): its backbone is imported (AlbertModel) and its head variables are named as
not imported. Optimizer slots (`adam_m`, `adam_v`, `lamb_m`, `lamb_v`, ...) and bookkeeping (`global_step`) are skipped
and counted in the log: the weights are imported, not the training state.

`albert_config.json`'s `"hidden_act": "gelu"` is google-research's (and brightmart's) tanh approximation of GELU
(`modeling.gelu`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))), transformers' `gelu_new`, not the exact
`gelu`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .configuration import AlbertConfig
from .errors import MissingFileError, UserError
from .formats import is_sentencepiece_model, wordpiece_tokenizer
from .hub import CardInfo, card_language, save_for_hub
from .modeling import (
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertModel,
    AlbertPreTrainedModel,
)
from .output_files import staged_folder
from .tf_checkpoint import TFCheckpoint, find_checkpoint

logger = logging.getLogger(__name__)


class CheckpointLayoutError(UserError):
    """A checkpoint whose variables are not those of a layout albert_hf imports, or disagree with its config."""


# The activation names of google-research's (and brightmart's) `modeling.get_activation`.
ORIGINAL_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh", "linear": "linear"}
# The LayerNorm epsilon of TensorFlow 1's tf.contrib.layers.layer_norm, which both codes use.
ORIGINAL_LAYER_NORM_EPS = 1e-12
# Config fields the original code reads and albert_hf keeps under the same name.
ORIGINAL_CONFIG_FIELDS = (
    "vocab_size",
    "embedding_size",
    "hidden_size",
    "num_hidden_layers",
    "num_hidden_groups",
    "num_attention_heads",
    "intermediate_size",
    "inner_group_num",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
)
REQUIRED_CONFIG_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")

# Optimizer slots (the last part of their names) and bookkeeping variables: training state, not weights.
OPTIMIZER_SLOTS = frozenset(
    {
        "adam_m",
        "adam_v",
        "lamb_m",
        "lamb_v",
        "Adam",
        "Adam_1",
        "LAMB",
        "LAMB_1",
        "Momentum",
        "RMSProp",
        "RMSProp_1",
        "Adagrad",
        "Adafactor",
        "ExponentialMovingAverage",
    }
)
BOOKKEEPING = frozenset(
    {
        "global_step",
        "beta1_power",
        "beta2_power",
        "loss_scale",
        "good_steps",
        "current_loss_scale",
        "_CHECKPOINTABLE_OBJECT_GRAPH",
    }
)

ANCHOR = "bert/embeddings/word_embeddings"
GOOGLE_ENCODER = "bert/encoder/transformer/"
BRIGHTMART_ENCODER = "bert/encoder/layer_shared/"
MLM_HEAD = "cls/predictions/"
SOP_HEAD = "cls/seq_relationship/"
CLASSIFIER_HEAD = ("output_weights", "output_bias")
SQUAD_V1_HEAD = "cls/squad/"
SQUAD_V2_HEADS = ("start_logits/", "end_logits/", "answer_class/")

# --head: the albert_hf class each choice builds.
HEAD_CLASSES: dict[str, type[AlbertPreTrainedModel]] = {
    "base": AlbertModel,
    "pretraining": AlbertForPreTraining,
    "masked-lm": AlbertForMaskedLM,
    "sequence-classification": AlbertForSequenceClassification,
    "multiple-choice": AlbertForMultipleChoice,
    "question-answering": AlbertForQuestionAnswering,
}
HEAD_CHOICES = ("auto", *HEAD_CLASSES)


def is_training_state(name: str) -> bool:
    """Whether variable `name` is an optimizer slot or bookkeeping (`global_step`), not a weight of the model."""
    last = name.rsplit("/", 1)[-1]
    return last in OPTIMIZER_SLOTS or last in BOOKKEEPING or name in BOOKKEEPING


# --------------------------------------------------------------------------------------------------------------------
# The config
# --------------------------------------------------------------------------------------------------------------------


def config_from_original(path: str | os.PathLike, **overrides) -> AlbertConfig:
    """The AlbertConfig of an original `albert_config.json` (google-research's) or brightmart's `albert_config_*.json`
    (BERT's fields plus `embedding_size` and `ln_type`): the same fields, `hidden_act` "gelu" read as the tanh
    approximation it is there, LayerNorm epsilon 1e-12."""
    path = str(path)
    try:
        original = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such config file") from None
    if not isinstance(original, dict):
        raise CheckpointLayoutError(f"{path}: not an ALBERT config (a JSON object of fields)")
    missing = [name for name in REQUIRED_CONFIG_FIELDS if name not in original]
    if missing:
        raise CheckpointLayoutError(f"{path}: not an ALBERT config, it lacks {', '.join(missing)}")
    if original.get("ln_type") not in (None, "postln"):
        raise CheckpointLayoutError(
            f"{path}: ln_type {original['ln_type']!r} (brightmart's pre-LayerNorm transformer) has no exact "
            "counterpart in ALBERT, which normalizes after each residual; only ln_type 'postln' models are imported"
        )
    activation = original.get("hidden_act", "gelu")
    if activation not in ORIGINAL_ACTIVATIONS:
        raise CheckpointLayoutError(
            f"{path}: hidden_act {activation!r} is not one of the original code's activations "
            f"({', '.join(ORIGINAL_ACTIVATIONS)})"
        )
    fields = {name: original[name] for name in ORIGINAL_CONFIG_FIELDS if original.get(name) is not None}
    fields.setdefault("embedding_size", original["hidden_size"])  # BERT's configs: no factorization
    fields.update(hidden_act=ORIGINAL_ACTIVATIONS[activation], layer_norm_eps=ORIGINAL_LAYER_NORM_EPS, **overrides)
    try:
        return AlbertConfig(**fields)
    except ValueError as error:
        raise CheckpointLayoutError(f"{path}: {error}") from error


# --------------------------------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Weight:
    """One albert_hf tensor and where it comes from: checkpoint variables (their names with the scope removed), the
    shape each must have, and how they become the tensor."""

    key: str
    sources: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    build: Callable[..., np.ndarray]


def _same(array: np.ndarray) -> np.ndarray:
    return array


def _transposed(kernel: np.ndarray) -> np.ndarray:
    """TensorFlow's dense kernel [in, out] as torch's Linear weight [out, in]."""
    return kernel.T


def _product(table: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """brightmart's factorized word table folded: W[V, E] @ P[E, H], in float32 as brightmart computes each token's
    row (a float64 product rounded once is nearer the real product, and farther from what the original computes)."""
    return table.astype(np.float32) @ projection.astype(np.float32)


def _copy(key: str, source: str, shape: tuple[int, ...], transposed: bool = False) -> Weight:
    return Weight(key, (source,), (shape,), _transposed if transposed else _same)


def _dense(key: str, source: str, inputs: int, outputs: int) -> list[Weight]:
    return [
        _copy(f"{key}.weight", f"{source}/kernel", (inputs, outputs), True),
        _copy(f"{key}.bias", f"{source}/bias", (outputs,)),
    ]


def _layer_norm(key: str, source: str, width: int) -> list[Weight]:
    return [_copy(f"{key}.weight", f"{source}/gamma", (width,)), _copy(f"{key}.bias", f"{source}/beta", (width,))]


@dataclass(frozen=True)
class LayoutMatch:
    """A checkpoint's layout: which one, the scope its model variables sit under, and the heads found."""

    layout: str  # "google-research", "TF-Hub" (google-research's names under a scope) or "brightmart"
    scope: str  # removed from the names that start with it ("" or e.g. "module/")
    heads: frozenset[str]  # "mlm", "sop", "classifier", "squad-v1", "squad-v2"

    @property
    def description(self) -> str:
        return {
            "google-research": "google-research/albert's layout",
            "TF-Hub": f"google-research/albert's layout under the scope {self.scope!r} of a TF-Hub module",
            "brightmart": "brightmart/albert_zh's layout",
        }[self.layout]


def detect_layout(names: list[str], source: str) -> LayoutMatch:
    """The layout of a checkpoint holding variables `names` (`source` names it in errors)."""
    scopes = sorted({name[: -len(ANCHOR)] for name in names if name.endswith(ANCHOR) and not is_training_state(name)})
    if not scopes:
        shown = ", ".join(sorted(name for name in names if not is_training_state(name))[:6])
        raise CheckpointLayoutError(
            f"{source}: no ALBERT variables (no {ANCHOR}); it holds {shown or 'no weights'}. The layouts read are "
            "google-research/albert's (also under a TF-Hub module's scope) and brightmart/albert_zh's"
        )
    if len(scopes) > 1:
        raise CheckpointLayoutError(
            f"{source}: several models in one checkpoint (scopes {', '.join(map(repr, scopes))})"
        )
    scope = scopes[0]
    local = {unscoped(name, scope) for name in names}
    if any(name.startswith(BRIGHTMART_ENCODER) for name in local):
        layout = "brightmart"
    elif any(name.startswith(GOOGLE_ENCODER) for name in local):
        layout = "TF-Hub" if scope else "google-research"
    else:
        encoder = sorted(name for name in local if name.startswith("bert/encoder/"))[:3]
        raise CheckpointLayoutError(
            f"{source}: its encoder ({', '.join(encoder) or 'none'}) is neither google-research's "
            f"({GOOGLE_ENCODER}group_G/inner_group_I/...) nor brightmart's ({BRIGHTMART_ENCODER}...); BERT's unshared "
            "layers (bert/encoder/layer_N/) are not an ALBERT layout"
        )
    heads = set()
    if any(name.startswith(MLM_HEAD) for name in local):
        heads.add("mlm")
    if any(name.startswith(SOP_HEAD) for name in local):
        heads.add("sop")
    if CLASSIFIER_HEAD[0] in local:
        heads.add("classifier")
    if any(name.startswith(SQUAD_V1_HEAD) for name in local):
        heads.add("squad-v1")
    if any(name.startswith(SQUAD_V2_HEADS) for name in local):
        heads.add("squad-v2")
    return LayoutMatch(layout, scope, frozenset(heads))


def unscoped(name: str, scope: str) -> str:
    return name[len(scope) :] if scope and name.startswith(scope) else name


def backbone_weights(config: AlbertConfig, layout: str, prefix: str, factorized_width: int | None) -> list[Weight]:
    """The AlbertModel tensors (keys under `prefix`, "albert." in a head model) and their sources."""
    V, E, H, I = config.vocab_size, config.embedding_size, config.hidden_size, config.intermediate_size
    P, T = config.max_position_embeddings, config.type_vocab_size
    embeddings, encoder = f"{prefix}embeddings", f"{prefix}encoder"
    weights = [
        _copy(f"{embeddings}.position_embeddings.weight", "bert/embeddings/position_embeddings", (P, E)),
        _copy(f"{embeddings}.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", (T, E)),
        *_layer_norm(f"{embeddings}.LayerNorm", "bert/embeddings/LayerNorm", E),
    ]
    if layout == "brightmart":
        F = factorized_width
        weights.append(
            Weight(
                f"{embeddings}.word_embeddings.weight",
                ("bert/embeddings/word_embeddings", "bert/embeddings/word_embeddings_2"),
                ((V, F), (F, H)),
                _product,
            )
        )
        groups = [("bert/encoder/layer_shared", f"{encoder}.albert_layer_groups.0.albert_layers.0")]
        for source, key in groups:
            weights += [
                *_dense(f"{key}.attention.query", f"{source}/attention/self/query", H, H),
                *_dense(f"{key}.attention.key", f"{source}/attention/self/key", H, H),
                *_dense(f"{key}.attention.value", f"{source}/attention/self/value", H, H),
                *_dense(f"{key}.attention.dense", f"{source}/attention/output/dense", H, H),
                *_layer_norm(f"{key}.attention.LayerNorm", f"{source}/attention/output/LayerNorm", H),
                *_dense(f"{key}.ffn", f"{source}/intermediate/dense", H, I),
                *_dense(f"{key}.ffn_output", f"{source}/output/dense", I, H),
                *_layer_norm(f"{key}.full_layer_layer_norm", f"{source}/output/LayerNorm", H),
            ]
    else:
        weights.append(_copy(f"{embeddings}.word_embeddings.weight", ANCHOR, (V, E)))
        if E != H:  # google-research's model has no projection when E == H (see `identity_weights`)
            weights += _dense(
                f"{encoder}.embedding_hidden_mapping_in", "bert/encoder/embedding_hidden_mapping_in", E, H
            )
        for group in range(config.num_hidden_groups):
            for inner in range(config.inner_group_num):
                source = f"{GOOGLE_ENCODER}group_{group}/inner_group_{inner}"
                key = f"{encoder}.albert_layer_groups.{group}.albert_layers.{inner}"
                weights += [
                    *_dense(f"{key}.attention.query", f"{source}/attention_1/self/query", H, H),
                    *_dense(f"{key}.attention.key", f"{source}/attention_1/self/key", H, H),
                    *_dense(f"{key}.attention.value", f"{source}/attention_1/self/value", H, H),
                    *_dense(f"{key}.attention.dense", f"{source}/attention_1/output/dense", H, H),
                    *_layer_norm(f"{key}.attention.LayerNorm", f"{source}/LayerNorm", H),
                    *_dense(f"{key}.ffn", f"{source}/ffn_1/intermediate/dense", H, I),
                    *_dense(f"{key}.ffn_output", f"{source}/ffn_1/intermediate/output/dense", I, H),
                    *_layer_norm(f"{key}.full_layer_layer_norm", f"{source}/LayerNorm_1", H),
                ]
    return weights


def identity_weights(config: AlbertConfig, prefix: str) -> dict[str, np.ndarray]:
    """`embedding_hidden_mapping_in` as the identity (zero bias): the original model's embeddings go into the first
    layer unprojected when E == H (google-research) or once brightmart's table is folded."""
    H = config.hidden_size
    key = f"{prefix}encoder.embedding_hidden_mapping_in"
    return {f"{key}.weight": np.eye(H, dtype=np.float32), f"{key}.bias": np.zeros(H, dtype=np.float32)}


def head_weights(config: AlbertConfig, head: str) -> list[Weight]:
    """The tensors of albert_hf's head `head` and their sources."""
    H, E, V = config.hidden_size, config.embedding_size, config.vocab_size
    mlm = [
        *_dense("predictions.dense", f"{MLM_HEAD}transform/dense", H, E),
        *_layer_norm("predictions.LayerNorm", f"{MLM_HEAD}transform/LayerNorm", E),
        _copy("predictions.bias", f"{MLM_HEAD}output_bias", (V,)),
    ]
    sop = [
        _copy("sop_classifier.classifier.weight", f"{SOP_HEAD}output_weights", (2, H)),
        _copy("sop_classifier.classifier.bias", f"{SOP_HEAD}output_bias", (2,)),
    ]
    labels = 1 if head == "multiple-choice" else config.num_labels
    classifier = [
        _copy("classifier.weight", CLASSIFIER_HEAD[0], (labels, H)),
        _copy("classifier.bias", CLASSIFIER_HEAD[1], (labels,)),
    ]
    squad = [
        _copy("qa_outputs.weight", f"{SQUAD_V1_HEAD}output_weights", (2, H)),
        _copy("qa_outputs.bias", f"{SQUAD_V1_HEAD}output_bias", (2,)),
    ]
    return {
        "base": [],
        "pretraining": mlm + sop,
        "masked-lm": mlm,
        "sequence-classification": classifier,
        "multiple-choice": classifier,
        "question-answering": squad,
    }[head]


# What each head needs from the checkpoint, and says when it is missing.
HEAD_NEEDS = {
    "pretraining": ("mlm", "sop"),
    "masked-lm": ("mlm",),
    "sequence-classification": ("classifier",),
    "multiple-choice": ("classifier",),
    "question-answering": ("squad-v1",),
}
HEAD_DESCRIPTIONS = {
    "mlm": "the MLM head (cls/predictions/...)",
    "sop": "the SOP head (cls/seq_relationship/...)",
    "classifier": "run_classifier's output_weights/output_bias",
    "squad-v1": "run_squad_v1's head (cls/squad/...)",
    "squad-v2": "run_squad_v2's head (start_logits/, end_logits/, answer_class/)",
}
SQUAD_V2_NOTE = (
    "run_squad_v2's head is not imported: its end logits read each token's features together with the start token's "
    "(end_logits/dense_0 is [2H, H]) and its answer_class layer scores answerability from the start distribution, "
    "while AlbertForQuestionAnswering's two logits per token read that token alone; the backbone is imported "
    "(AlbertModel): fine-tune a question-answering head on it (albert-hf squad)"
)


def choose_head(match: LayoutMatch, head: str, source: str) -> str:
    """The head to build: `head`, or with "auto" the one the checkpoint's variables hold."""
    if head == "auto":
        if "squad-v1" in match.heads:
            return "question-answering"
        if "classifier" in match.heads:
            return "sequence-classification"
        if "squad-v2" in match.heads:
            return "base"
        if {"mlm", "sop"} <= match.heads:
            return "pretraining"
        return "masked-lm" if "mlm" in match.heads else "base"
    if head not in HEAD_CLASSES:
        raise CheckpointLayoutError(f"--head {head!r}: choose one of {', '.join(HEAD_CHOICES)}")
    if head == "question-answering" and "squad-v2" in match.heads:
        raise CheckpointLayoutError(f"{source}: {SQUAD_V2_NOTE}")
    missing = [HEAD_DESCRIPTIONS[need] for need in HEAD_NEEDS.get(head, ()) if need not in match.heads]
    if missing:
        held = ", ".join(HEAD_DESCRIPTIONS[name] for name in sorted(match.heads)) or "no head"
        raise CheckpointLayoutError(
            f"--head {head} needs {' and '.join(missing)}, which {source} lacks (it holds {held}); choose --head auto "
            "or base"
        )
    return head


# --------------------------------------------------------------------------------------------------------------------
# Conversion
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    """What an import read, built and left out."""

    checkpoint: str  # the prefix read
    config_file: str
    layout: LayoutMatch
    head: str
    model_class: str
    imported: list[str] = field(default_factory=list)  # checkpoint variables that became weights
    training_state: list[str] = field(default_factory=list)  # optimizer slots and bookkeeping, skipped
    not_imported: list[str] = field(default_factory=list)  # other variables the chosen head does not use
    notes: list[str] = field(default_factory=list)
    tokenizer_file: str | None = None

    def summary(self) -> str:
        lines = [
            f"Read {self.checkpoint} ({self.layout.description}, {len(self.imported)} variables) with "
            f"{self.config_file}: {self.model_class}."
        ]
        if self.training_state:
            slots = sum(1 for name in self.training_state if name.rsplit("/", 1)[-1] in OPTIMIZER_SLOTS)
            parts = [f"{slots} optimizer slot(s)"] if slots else []
            parts += sorted(name for name in self.training_state if name.rsplit("/", 1)[-1] not in OPTIMIZER_SLOTS)
            lines.append(f"Skipped the training state: {', '.join(parts)}.")
        if self.not_imported:
            more = len(self.not_imported) - 8
            shown = ", ".join(self.not_imported[:8]) + (f" and {more} more" if more > 0 else "")
            lines.append(f"Not imported ({len(self.not_imported)}, unused by {self.model_class}): {shown}.")
        lines += self.notes
        return "\n".join(lines)


def _check_shapes(weights: list[Weight], checkpoint: TFCheckpoint, scope: str, config_file: str) -> None:
    """Every source present with the shape the config implies; else one error naming the variable, both shapes and
    the config."""
    missing = []
    for weight in weights:
        for source, shape in zip(weight.sources, weight.shapes, strict=True):
            name = scope + source if scope + source in checkpoint else source
            if name not in checkpoint:
                missing.append(scope + source)
                continue
            found = checkpoint.shape(name)
            if tuple(found) != tuple(shape):
                raise CheckpointLayoutError(
                    f"{name} has shape {list(found)} in {checkpoint.index_path}, but {config_file} implies "
                    f"{list(shape)} ({_shape_fields(source)}): the config is not this checkpoint's"
                )
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise CheckpointLayoutError(
            f"{checkpoint.index_path} lacks {len(missing)} variable(s) the model of {config_file} needs: {shown}"
        )


# The config fields that decide each variable's shape, by the first pattern its name holds.
_SHAPE_FIELDS = (
    ("word_embeddings_2", "embedding_size, hidden_size"),
    ("word_embeddings", "vocab_size, embedding_size"),
    ("position_embeddings", "max_position_embeddings, embedding_size"),
    ("token_type_embeddings", "type_vocab_size, embedding_size"),
    ("predictions/output_bias", "vocab_size"),
    ("embeddings/LayerNorm", "embedding_size"),
    ("embedding_hidden_mapping_in", "embedding_size, hidden_size"),
    ("predictions/transform", "hidden_size, embedding_size"),
    ("intermediate/dense", "hidden_size, intermediate_size"),
    ("ffn_1/intermediate/output", "intermediate_size, hidden_size"),
    ("layer_shared/output/dense", "intermediate_size, hidden_size"),
    ("output_weights", "hidden_size and the number of labels"),
    ("output_bias", "the number of labels"),
)


def _shape_fields(source: str) -> str:
    return next((fields for pattern, fields in _SHAPE_FIELDS if pattern in source), "hidden_size")


def load_original(
    checkpoint_path: str | os.PathLike,
    config_file: str | os.PathLike,
    head: str = "auto",
    verify_checksums: bool = True,
) -> tuple[AlbertPreTrainedModel, ImportReport]:
    """The albert_hf model of an original TensorFlow checkpoint (in eval mode) and what was read.

    `checkpoint_path`: anything `tf_checkpoint.find_checkpoint` resolves (a folder, a prefix, a file, a `checkpoint`
    state file); `config_file`: its `albert_config.json`; `head`: one of `HEAD_CHOICES` ("auto": the head the
    checkpoint holds)."""
    checkpoint = TFCheckpoint(find_checkpoint(checkpoint_path))
    source = checkpoint.index_path
    names = checkpoint.names()
    match = detect_layout(names, source)
    head = choose_head(match, head, source)
    config = config_from_original(config_file)
    factorized_width = None
    notes = []
    if match.layout == "brightmart":
        factorized_width = config.embedding_size
        H = config.hidden_size
        extra = config.vocab_size * (H - factorized_width) - factorized_width * H + H * H
        notes.append(
            f"brightmart's factorized word table (word_embeddings [{config.vocab_size}, {factorized_width}] @ "
            f"word_embeddings_2 [{factorized_width}, {H}]) is folded into a word table of width {H}, with an identity "
            f"embedding_hidden_mapping_in: exact, {extra:,} more parameters than the original"
        )
        config.embedding_size = H

    def resolved(source: str) -> str:
        """The checkpoint's name of `source`: under the scope when it is there (a module's head), else as it is."""
        return match.scope + source if match.scope + source in checkpoint else source

    if head == "sequence-classification":
        config.num_labels = int(checkpoint.shape(resolved(CLASSIFIER_HEAD[0]))[0])
    elif head == "question-answering":
        config.num_labels = 2
    model_class = HEAD_CLASSES[head]
    prefix = "" if model_class is AlbertModel else "albert."
    weights = backbone_weights(config, match.layout, prefix, factorized_width)
    if model_class in (AlbertForMaskedLM, AlbertForQuestionAnswering):  # no pooler in these classes
        pooler = []
    else:
        pooler = _dense(f"{prefix}pooler", "bert/pooler/dense", config.hidden_size, config.hidden_size)
    weights += pooler + head_weights(config, head)
    _check_shapes(weights, checkpoint, match.scope, str(config_file))

    used = {resolved(source) for weight in weights for source in weight.sources}
    training_state = [name for name in names if is_training_state(name)]
    not_imported = [name for name in names if name not in used and not is_training_state(name)]
    # A backbone variable the config leaves unread (a group or inner layer more than it has) means the config is not
    # this checkpoint's: refused, never dropped. The pooler alone is left out, by the classes that have none.
    unread = [
        name
        for name in not_imported
        if unscoped(name, match.scope).startswith("bert/")
        and not unscoped(name, match.scope).startswith("bert/pooler/")
    ]
    if unread:
        shown = ", ".join(unread[:4]) + (f" and {len(unread) - 4} more" if len(unread) > 4 else "")
        raise CheckpointLayoutError(
            f"{source} holds {len(unread)} model variable(s) that {config_file} has no place for: {shown} (its "
            f"num_hidden_groups is {config.num_hidden_groups}, inner_group_num {config.inner_group_num}): the "
            "config is not this checkpoint's"
        )

    state: dict[str, np.ndarray] = {}
    for weight in weights:
        arrays = [checkpoint.read(resolved(name), verify=verify_checksums) for name in weight.sources]
        state[weight.key] = np.ascontiguousarray(weight.build(*arrays), dtype=np.float32)
    if not any(weight.key.endswith("embedding_hidden_mapping_in.weight") for weight in weights):
        state.update(identity_weights(config, prefix))

    model = model_class(config)
    result = model.load_state_dict({key: torch.from_numpy(value) for key, value in state.items()}, strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or {})
    if result.unexpected_keys or set(result.missing_keys) - tied:
        raise RuntimeError(
            f"albert_hf's mapping of {match.layout} does not fill {model_class.__name__}: missing "
            f"{sorted(set(result.missing_keys) - tied)}, unexpected {result.unexpected_keys}"
        )
    if tied:
        model.tie_weights()
    model.eval()

    if "squad-v2" in match.heads:
        notes.append(SQUAD_V2_NOTE)
    report = ImportReport(
        checkpoint=checkpoint.prefix,
        config_file=str(config_file),
        layout=match,
        head=head,
        model_class=model_class.__name__,
        imported=sorted(used),
        training_state=training_state,
        not_imported=not_imported,
        notes=notes,
    )
    return model, report


# --------------------------------------------------------------------------------------------------------------------
# The files beside a checkpoint, the tokenizer, the folder
# --------------------------------------------------------------------------------------------------------------------

CONFIG_NAMES = ("albert_config.json",)
SENTENCEPIECE_NAMES = ("30k-clean.model", "spiece.model")


def _search_folders(prefix: str) -> list[Path]:
    """Where a release keeps its config and vocabulary: beside the checkpoint and in `assets/` there; for a TF-Hub
    module (the checkpoint is `variables/variables`), the module's folder and its `assets/`."""
    folder = Path(prefix).parent
    folders = [folder, folder / "assets"]
    if folder.name == "variables":
        folders += [folder.parent, folder.parent / "assets"]
    return [path for path in dict.fromkeys(folders) if path.is_dir()]


def _one_of(candidates: list[Path], preferred: tuple[str, ...], what: str, option: str, prefix: str) -> Path | None:
    for name in preferred:
        chosen = [path for path in candidates if path.name == name]
        if chosen:
            return chosen[0]
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        shown = ", ".join(str(path) for path in candidates)
        raise UserError(f"several {what} beside {prefix} ({shown}): pass {option}")
    return None


def find_config_file(prefix: str) -> Path:
    """The original config beside checkpoint `prefix`: albert_config.json, else the one `*config*.json` there (e.g.
    brightmart's albert_config_tiny.json; transformers' config.json is not one)."""
    candidates = [
        path
        for folder in _search_folders(prefix)
        for path in sorted(folder.glob("*config*.json"))
        if path.name != "config.json"
    ]
    found = _one_of(candidates, CONFIG_NAMES, "config files", "--config_file", prefix)
    if found is None:
        folders = ", ".join(str(folder) for folder in _search_folders(prefix))
        raise MissingFileError(
            f"no albert_config.json beside the checkpoint {prefix} (looked in {folders}): pass --config_file (a "
            "fine-tuned checkpoint's folder holds none: the config of the model it was fine-tuned from)"
        )
    return found


def find_vocab_file(prefix: str) -> Path:
    """The vocabulary beside checkpoint `prefix`: a SentencePiece model (30k-clean.model, spiece.model or the one
    `*.model`), else a WordPiece `vocab*.txt`."""
    folders = _search_folders(prefix)
    models = [path for folder in folders for path in sorted(folder.glob("*.model"))]
    found = _one_of(models, SENTENCEPIECE_NAMES, "SentencePiece models", "--vocab_file", prefix)
    if found is None:
        texts = [path for folder in folders for path in sorted(folder.glob("vocab*.txt"))]
        found = _one_of(texts, ("vocab.txt",), "vocabularies", "--vocab_file", prefix)
    if found is None:
        raise MissingFileError(
            f"no vocabulary beside the checkpoint {prefix} (30k-clean.model, spiece.model or vocab.txt): pass "
            "--vocab_file (a fine-tuned checkpoint's folder holds none: the vocabulary of the model it was "
            "fine-tuned from)"
        )
    return found


def original_tokenizer(vocab_file: str | os.PathLike, do_lower_case: bool = True):
    """The tokenizer of an original release: albert_hf's on a SentencePiece model (the original's rules:
    lowercasing, accent stripping, whitespace collapsing), transformers' BertTokenizer on a WordPiece `vocab.txt`
    (the Chinese ALBERTs' tokenizer, with the same `do_lower_case`)."""
    vocab_file = str(vocab_file)
    if not os.path.isfile(vocab_file):
        raise MissingFileError(f"{vocab_file}: no such vocabulary file")
    if is_sentencepiece_model(vocab_file):
        from .tokenization import AlbertHFTokenizer

        return AlbertHFTokenizer(vocab_file=vocab_file, do_lower_case=do_lower_case, keep_accents=False)
    return wordpiece_tokenizer(vocab_file, do_lower_case=do_lower_case)


def _special_token_ids(tokenizer) -> dict[str, int]:
    ids = {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.cls_token_id,
        "eos_token_id": tokenizer.sep_token_id,
    }
    return {name: value for name, value in ids.items() if value is not None}


def card_description(report: ImportReport, tokenizer_file: str) -> str:
    source = Path(report.checkpoint)
    shown = f"{source.parent.name}/{source.name}" if source.parent.name else source.name
    lines = [
        f"ALBERT imported with albert_hf (`albert-hf import`) from the TensorFlow checkpoint `{shown}` "
        f"({report.layout.description}), with its config `{Path(report.config_file).name}` and vocabulary "
        f"`{Path(tokenizer_file).name}`; no TensorFlow was needed.",
        "",
        f'The head is `{report.model_class}`. "gelu" in the original config is its tanh approximation, kept here as '
        "`gelu_new`.",
    ]
    if report.training_state:
        lines.append("The optimizer state of the checkpoint was not imported.")
    lines += report.notes
    return "\n".join(lines)


def import_tf_checkpoint(
    checkpoint: str | os.PathLike,
    output_dir: str | os.PathLike,
    *,
    config_file: str | os.PathLike | None = None,
    vocab_file: str | os.PathLike | None = None,
    do_lower_case: bool = True,
    head: str = "auto",
    verify_checksums: bool = True,
    replace: bool = False,
) -> ImportReport:
    """Write a complete albert_hf model folder of an original TensorFlow checkpoint into `output_dir`: config,
    weights, tokenizer and a model card naming the source, through albert_hf's own saving (`hub.save_for_hub`).

    The config and vocabulary are found beside the checkpoint when not given (`find_config_file`,
    `find_vocab_file`). The files are written into a staging folder inside `output_dir` and moved into place when
    all are written, so an interrupted import leaves no partial model; a file already there of the same name is refused
    unless `replace` (the `albert-hf import` command guards its folder as every command does, and removes the old
    model's files with --overwrite_output_dir)."""
    prefix = find_checkpoint(checkpoint)
    config_file = str(config_file) if config_file is not None else str(find_config_file(prefix))
    vocab_file = str(vocab_file) if vocab_file is not None else str(find_vocab_file(prefix))
    tokenizer = original_tokenizer(vocab_file, do_lower_case)
    model, report = load_original(prefix, config_file, head=head, verify_checksums=verify_checksums)
    for name, value in _special_token_ids(tokenizer).items():
        setattr(model.config, name, value)
    tokenizer.model_max_length = model.config.max_position_embeddings
    report.tokenizer_file = vocab_file
    output_dir = Path(output_dir)
    # Written whole or not at all, through albert_hf's writer (`albert_hf.output_files.staged_folder`).
    with staged_folder(output_dir, last=("README.md",)) as staged:
        staging = staged.path
        if not is_sentencepiece_model(vocab_file):
            # BertTokenizer saves tokenizer.json alone; vocab.txt too keeps the folder readable by every WordPiece
            # reader (BERT's own code, tokenizers' BertWordPieceTokenizer).
            shutil.copyfile(vocab_file, staging / "vocab.txt")
        save_for_hub(
            model,
            staging,
            tokenizer=tokenizer,
            model_name=output_dir.resolve().name,
            # The card's language is read off the vocabulary (a Chinese vocab.txt is "zh").
            info=CardInfo(
                description=card_description(report, vocab_file), language=card_language(CardInfo(), tokenizer)
            ),
        )
        there = sorted(path.name for path in staging.iterdir() if os.path.lexists(output_dir / path.name))
        if there and not replace:
            raise UserError(f"{output_dir} already holds {', '.join(there)}: import into another folder")
        for name in there:  # `replace`: the caller asked for these to go
            logger.warning("Replacing %s.", output_dir / name)
            if (output_dir / name).is_dir() and not (output_dir / name).is_symlink():
                shutil.rmtree(output_dir / name)
            else:
                os.remove(output_dir / name)
    logger.info("%s\nWrote %s.", report.summary(), output_dir)
    return report


__all__ = [
    "CheckpointLayoutError",
    "HEAD_CHOICES",
    "ImportReport",
    "config_from_original",
    "detect_layout",
    "find_config_file",
    "find_vocab_file",
    "import_tf_checkpoint",
    "is_training_state",
    "load_original",
    "original_tokenizer",
]
