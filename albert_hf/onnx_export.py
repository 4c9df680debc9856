"""Export for deployment: ONNX (fp32 or dynamic int8) with the shared layer stored once, and PyTorch dynamic int8.

Exporters fold `Linear`'s weight transpose into a constant at every call site, so a layer applied L times is written
L times (transformers issue #8869: ALBERT's ONNX file about 7x its parameters). `export_onnx` exports with torch's
dynamo exporter, then merges initializers with identical contents, which brings the file back to one copy of each
weight. Outputs are checked against PyTorch with onnxruntime by `verify_onnx`.

int8 is *dynamic* quantization (weights stored as int8 with a scale, activations quantized per batch at run time):
it needs no calibration data and suits ALBERT on CPU, whose time goes to the matrix products of the one shared
layer. `quantize_onnx` runs onnxruntime's quantizer on the deduplicated fp32 graph, so every application of the
shared layer points at the same quantized weight (the quantizer keys quantized weights by initializer name), and the
word embeddings (a `Gather`) are stored as int8 too. `quantize_pytorch` is `torch.ao.quantization.quantize_dynamic`
over the `nn.Linear` modules (embeddings stay fp32 there: PyTorch's dynamic quantization has no embedding kernel).

    albert-hf export --model_name_or_path out/sst2 --output_dir out/sst2-onnx --quantize int8

Adaptive depth (a sequence classifier with `early_exit` or `num_layers_at_inference`) cannot be one static graph: the
number of layer applications depends on the example. `export_exit_onnx` writes three graphs instead, the embeddings,
ONE application of the shared layer (stored once by construction) and all exit heads (the depth is an input), and
`OnnxExitModel` drives them with the same loop as PyTorch (`modeling.run_with_exits`): the layer session runs once
per application on the examples that have not exited. `quantize_exit_onnx` makes int8 copies of the embeddings and
layer graphs, optionally keeping named modules ("ffn", "ffn_output") in fp32; `layer_quantization_error` measures
the int8 error at every depth, which grows with each application of the same quantized layer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from .errors import MissingFileError, UserError
from .modeling import AlbertForSequenceClassification, AlbertPreTrainedModel, attention_implementation
from .options import QUANTIZE_CHOICES
from .output_files import staged_folder

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")


class _TensorOutputs(torch.nn.Module):
    """Wraps a model so that it returns a tuple of tensors (ONNX outputs), without the ModelOutput container."""

    def __init__(self, model: AlbertPreTrainedModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        output = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return tuple(value for value in output.values() if isinstance(value, torch.Tensor))


def export_onnx(model: AlbertPreTrainedModel, path: str | Path, batch_size: int = 2, seq_len: int = 16) -> list[str]:
    """Write `model` (eval mode, fp32) to `path` as ONNX with dynamic batch and sequence axes.

    Returns the output names (those of the model's ModelOutput that are tensors, e.g. ["logits"]).
    """
    model = model.eval()
    example = (
        torch.randint(5, model.config.vocab_size, (batch_size, seq_len)),
        torch.ones(batch_size, seq_len, dtype=torch.long),
        torch.zeros(batch_size, seq_len, dtype=torch.long),
    )
    with torch.no_grad():
        sample = model(*example)
    output_names = [name for name, value in sample.items() if isinstance(value, torch.Tensor)]
    dynamic = {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence", max=model.config.max_position_embeddings)}
    torch.onnx.export(
        _TensorOutputs(model),
        example,
        str(path),
        input_names=list(INPUT_NAMES),
        output_names=output_names,
        dynamic_shapes=(dynamic, dynamic, dynamic),
        dynamo=True,
        external_data=False,
        verbose=False,
    )
    deduplicate_initializers(path)
    return output_names


def deduplicate_initializers(path: str | Path) -> int:
    """Point every use of a repeated initializer (same dtype, shape and bytes) at its first copy; returns how many
    copies were removed. This is what makes a shared layer cost its size once in the file."""
    import hashlib

    import onnx

    model = onnx.load(str(path))
    first_of: dict[tuple, str] = {}
    renamed: dict[str, str] = {}
    kept = []
    for initializer in model.graph.initializer:
        # The tensor without its name: a name is also length-prefixed in the serialized bytes, so removing the name's
        # bytes alone would keep copies whose names differ in length apart.
        content = onnx.TensorProto()
        content.CopyFrom(initializer)
        content.name = ""
        key = (
            initializer.data_type,
            tuple(initializer.dims),
            hashlib.sha256(content.SerializeToString(deterministic=True)).hexdigest(),
        )
        if key in first_of:
            renamed[initializer.name] = first_of[key]
        else:
            first_of[key] = initializer.name
            kept.append(initializer)
    if renamed:
        del model.graph.initializer[:]
        model.graph.initializer.extend(kept)
        for node in model.graph.node:
            for index, name in enumerate(node.input):
                if name in renamed:
                    node.input[index] = renamed[name]
        onnx.save(model, str(path))
    return len(renamed)


def verify_onnx(model: AlbertPreTrainedModel, path: str | Path, inputs: dict[str, torch.Tensor]) -> float:
    """Largest absolute difference between onnxruntime's outputs and PyTorch's on `inputs`."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {name: inputs[name].numpy() for name in INPUT_NAMES}
    onnx_outputs = session.run(None, feed)
    with torch.no_grad():
        torch_outputs = [v for v in model.eval()(**inputs).values() if isinstance(v, torch.Tensor)]
    return max(float(abs(a - b.numpy()).max()) for a, b in zip(onnx_outputs, torch_outputs))


def quantize_onnx(fp32_path: str | Path, int8_path: str | Path, keep_fp32: tuple[str, ...] = ()) -> Path:
    """Dynamic int8 quantization of an fp32 ONNX file from `export_onnx` (MatMul weights and the embedding Gather).

    Weights are quantized per tensor, signed int8 (QInt8), which onnxruntime's x86 kernels (MatMulInteger) run with
    VNNI/AVX2 integer products. The result is deduplicated again, so a weight shared by several nodes stays one.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32_path, int8_path = Path(fp32_path), Path(int8_path)
    # Written beside the target and renamed, so an interrupted run never leaves a truncated model at `int8_path`.
    with tempfile.TemporaryDirectory(dir=int8_path.parent) as scratch:
        folded, partial = Path(scratch) / "folded.onnx", Path(scratch) / int8_path.name
        graph = onnx.load(str(fp32_path))
        fold_weight_transposes(graph)
        onnx.save(graph, str(folded))
        excluded = nodes_of_modules(graph, keep_fp32) if keep_fp32 else []
        quantize_dynamic(
            folded,
            partial,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gather"],
            nodes_to_exclude=excluded,
        )
        deduplicate_initializers(partial)
        os.replace(partial, int8_path)
    return int8_path


def nodes_of_modules(model, module_names: tuple[str, ...]) -> list[str]:
    """Names of the nodes that the exporter traced inside a module whose attribute name is one of `module_names`
    (e.g. "ffn_output"), read from the module scopes torch's exporter stores with each node."""
    import ast

    selected = []
    for node in model.graph.node:
        scopes = next((p.value for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"), "[]")
        if any(scope.rsplit(".", 1)[-1] in module_names for scope in ast.literal_eval(scopes)):
            selected.append(node.name)
    return selected


def fold_weight_transposes(model) -> int:
    """Replace every `Transpose` of an initializer by a transposed initializer (one per weight and permutation, shared
    by all its uses), in place; returns how many nodes were folded.

    The deduplicated graph applies the shared layer's weights through a Transpose node per application, and the
    quantizer only quantizes a MatMul whose weight is an initializer: folded, every application's MatMul reads the
    same initializer and so the same int8 weight.
    """
    from onnx import numpy_helper

    initializers = {initializer.name: initializer for initializer in model.graph.initializer}
    transposed: dict[tuple[str, tuple[int, ...]], str] = {}
    renamed: dict[str, str] = {}
    kept_nodes = []
    for node in model.graph.node:
        if node.op_type != "Transpose" or node.input[0] not in initializers:
            kept_nodes.append(node)
            continue
        array = numpy_helper.to_array(initializers[node.input[0]])
        perm = next((tuple(a.ints) for a in node.attribute if a.name == "perm"), tuple(reversed(range(array.ndim))))
        key = (node.input[0], perm)
        if key not in transposed:
            transposed[key] = f"{node.input[0]}_transposed_{''.join(map(str, perm))}"
            model.graph.initializer.append(numpy_helper.from_array(array.transpose(perm).copy(), transposed[key]))
        renamed[node.output[0]] = transposed[key]
    if not renamed:
        return 0
    del model.graph.node[:]
    model.graph.node.extend(kept_nodes)
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            if name in renamed:
                node.input[index] = renamed[name]
    for output in model.graph.output:
        if output.name in renamed:
            raise ValueError(f"graph output {output.name} is a transposed weight; cannot fold it")
    used = {name for node in model.graph.node for name in node.input} | {output.name for output in model.graph.output}
    unused = [initializer for initializer in model.graph.initializer if initializer.name not in used]
    for initializer in unused:
        model.graph.initializer.remove(initializer)
    return len(renamed)


# --------------------------------------------------------------------------------------------------------------------
# Adaptive depth: the shared layer as one graph, applied in a loop by a Python driver of three sessions
# --------------------------------------------------------------------------------------------------------------------

EXIT_GRAPHS = ("embeddings", "layer", "exits")  # file stems: embeddings.onnx, layer.onnx, exits.onnx


class _EmbeddingsGraph(torch.nn.Module):
    """(input_ids, attention_mask, token_type_ids) -> hidden states (B, T, H) entering the first layer, and the
    additive attention mask (B, 1, 1, T) every application reads."""

    def __init__(self, model):
        super().__init__()
        self.albert = model.albert

    def forward(self, input_ids, attention_mask, token_type_ids):
        from .modeling import additive_mask

        embeddings = self.albert.embeddings(input_ids, token_type_ids)
        mask = additive_mask(attention_mask, embeddings.dtype)
        return self.albert.encoder.embedding_hidden_mapping_in(embeddings), mask


class _LayerGraph(torch.nn.Module):
    """One application of the shared layer: (hidden (B, T, H), mask (B, 1, 1, T)) -> hidden."""

    def __init__(self, model):
        super().__init__()
        self.encoder = model.albert.encoder

    def forward(self, hidden_states, mask):
        return self.encoder.apply_layer(0, hidden_states, mask)[0]


class _ExitsGraph(torch.nn.Module):
    """Every exit in one graph: (hidden (B, T, H), depth ()) -> that exit's logits (B, C); the classifiers are stacked
    (L, C, H) and the depth picks one (Gather), so one session serves all depths."""

    def __init__(self, model):
        super().__init__()
        self.albert = model.albert
        depths = range(1, model.config.num_layer_applications + 1)
        classifiers = [model.exit_classifier(depth) for depth in depths]
        self.weight = torch.nn.Parameter(torch.stack([c.weight.detach() for c in classifiers]), requires_grad=False)
        self.bias = torch.nn.Parameter(torch.stack([c.bias.detach() for c in classifiers]), requires_grad=False)

    def forward(self, hidden_states, depth):
        pooled = self.albert.pool(hidden_states)  # (B, H)
        index = depth - 1
        return pooled @ self.weight[index].transpose(0, 1) + self.bias[index]


def check_loopable(model) -> None:
    """The looped export applies one layer graph L times: only a model whose every application uses the same weights
    (sharing "all", one group, one inner layer) can be written so."""
    config = model.config
    if not isinstance(model, AlbertForSequenceClassification):
        # The exit graph and its driver score one row per example; multiple choice (one row per choice) would need
        # both reshaped, which is not written: such a model runs its exits in PyTorch only.
        raise UserError(
            f"ONNX export of {type(model).__name__} with early exit or num_layers_at_inference is not supported "
            "(sequence classification only); export it with early_exit=False and num_layers_at_inference=None."
        )
    if config.sharing != "all" or config.num_hidden_groups != 1 or config.inner_group_num != 1:
        raise UserError(
            "The looped export needs one layer shared by every application (sharing='all', num_hidden_groups=1, "
            f"inner_group_num=1); this model has sharing={config.sharing!r}, num_hidden_groups="
            f"{config.num_hidden_groups}, inner_group_num={config.inner_group_num}."
        )


def export_exit_onnx(model, folder: str | Path, batch_size: int = 2, seq_len: int = 16) -> dict[str, Path]:
    """Write embeddings.onnx, layer.onnx (the shared layer, once) and exits.onnx of an
    `AlbertForSequenceClassification` to `folder`, for [`OnnxExitModel`]; returns {stem: path}.

    The layer graph is the shared layer by construction, so its weights are stored once whatever the depth.
    Exported with eager attention (an additive mask), which every attention kernel equals in eval mode.
    """
    check_loopable(model)
    model = model.eval()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hidden = model.config.hidden_size
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence", max=model.config.max_position_embeddings)
    ids = torch.randint(5, model.config.vocab_size, (batch_size, seq_len))
    graphs = {
        "embeddings": (
            _EmbeddingsGraph(model),
            (ids, torch.ones_like(ids), torch.zeros_like(ids)),
            ["input_ids", "attention_mask", "token_type_ids"],
            ["hidden_states", "mask"],
            ({0: batch, 1: sequence},) * 3,
        ),
        "layer": (
            _LayerGraph(model),
            (torch.randn(batch_size, seq_len, hidden), torch.zeros(batch_size, 1, 1, seq_len)),
            ["hidden_states", "mask"],
            ["output"],
            ({0: batch, 1: sequence}, {0: batch, 3: sequence}),
        ),
        "exits": (
            _ExitsGraph(model),
            (torch.randn(batch_size, seq_len, hidden), torch.tensor(1)),
            ["hidden_states", "depth"],
            ["logits"],
            ({0: batch, 1: sequence}, None),
        ),
    }
    written = {}
    implementation = attention_implementation(model.config, output_attentions=False)
    model.set_attn_implementation("eager")
    try:
        for stem, (module, example, inputs, outputs, dynamic) in graphs.items():
            path = folder / f"{stem}.onnx"
            module.eval()
            with torch.no_grad():
                torch.onnx.export(
                    module,
                    example,
                    str(path),
                    input_names=inputs,
                    output_names=outputs,
                    dynamic_shapes=dynamic,
                    dynamo=True,
                    external_data=False,
                    verbose=False,
                )
            deduplicate_initializers(path)
            written[stem] = path
    finally:
        model.set_attn_implementation(implementation)
    return written


def quantize_exit_onnx(folder: str | Path, keep_fp32: tuple[str, ...] = ()) -> dict[str, Path]:
    """int8 (dynamic) copies of the embeddings and layer graphs: `embeddings.int8.onnx`, `layer.int8.onnx` (the exit
    heads stay fp32: a few hundred multiply-adds per example). `keep_fp32`: module names (e.g. "ffn_output", "ffn")
    whose matrix products stay fp32, where the per-depth error of [`layer_quantization_error`] says so."""
    folder = Path(folder)
    return {
        stem: quantize_onnx(folder / f"{stem}.onnx", folder / f"{stem}.int8.onnx", keep_fp32=keep_fp32)
        for stem in ("embeddings", "layer")
    }


class OnnxExitModel:
    """Adaptive-depth inference with ONNX Runtime: the embeddings session once, the layer session once per
    application, the exits session where an exit is read, driven by the same loop as PyTorch ([`run_with_exits`]).

    `config`: the model's AlbertConfig (its `early_exit_patience`, `num_layers_at_inference`, threshold and labels);
    `patience` / `num_layers` override them per call. `int8`: load the quantized graphs.
    """

    def __init__(self, folder: str | Path, config, int8: bool = False, threads: int | None = None):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        folder = Path(folder)
        self.config = config
        self.sessions = {}
        for stem in EXIT_GRAPHS:
            path = folder / (f"{stem}.int8.onnx" if int8 and stem != "exits" else f"{stem}.onnx")
            if not path.is_file():
                raise MissingFileError(f"{path}: missing; write it with export_exit_onnx (and quantize_exit_onnx).")
            self.sessions[stem] = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def apply_layer(self, application: int, hidden_states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        feed = {"hidden_states": hidden_states.numpy(), "mask": mask.numpy()}
        return torch.from_numpy(self.sessions["layer"].run(None, feed)[0])

    def exit_logits(self, hidden_states: torch.Tensor, depth: int) -> torch.Tensor:
        feed = {"hidden_states": hidden_states.numpy(), "depth": np.array(depth, dtype=np.int64)}
        return torch.from_numpy(self.sessions["exits"].run(None, feed)[0])

    def __call__(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        patience: int | None = None,
        num_layers: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(B, C) logits and (B,) exit depths of a batch (numpy or torch int64 arrays)."""
        from .modeling import run_with_exits

        config = self.config
        input_ids = np.asarray(input_ids, dtype=np.int64)
        attention_mask = np.ones_like(input_ids) if attention_mask is None else np.asarray(attention_mask, np.int64)
        token_type_ids = np.zeros_like(input_ids) if token_type_ids is None else np.asarray(token_type_ids, np.int64)
        feed = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        hidden_states, mask = (torch.from_numpy(a) for a in self.sessions["embeddings"].run(None, feed))
        if patience is None:
            patience = config.early_exit_patience if config.early_exit else 0
        logits, depths = run_with_exits(
            hidden_states,
            mask,
            self.apply_layer,
            self.exit_logits,
            max_depth=num_layers or config.num_layers_at_inference or config.num_layer_applications,
            patience=patience,
            regression=config.num_labels == 1,
            threshold=config.early_exit_regression_threshold,
        )
        return logits.numpy(), depths.numpy()


def layer_quantization_error(fp32: OnnxExitModel, int8: OnnxExitModel, batches: list[dict]) -> list[float]:
    """Largest absolute difference of the logits, int8 against fp32, at each fixed depth 1 .. L over `batches`
    (dicts of input_ids / attention_mask / token_type_ids): how the quantized shared layer's error grows with the
    number of times it is applied."""
    errors = []
    for depth in range(1, fp32.config.num_layer_applications + 1):
        worst = 0.0
        for batch in batches:
            reference, _ = fp32(**batch, patience=0, num_layers=depth)
            quantized, _ = int8(**batch, patience=0, num_layers=depth)
            worst = max(worst, float(np.abs(reference - quantized).max()))
        errors.append(worst)
    return errors


def quantize_pytorch(model: AlbertPreTrainedModel) -> torch.nn.Module:
    """A copy of `model` (eval mode) whose `nn.Linear` layers run in int8 (torch dynamic quantization, qint8).

    The shared layer's Linear modules are one set of modules applied at every layer, so they are quantized once.
    """
    import copy

    quantized = copy.deepcopy(model).eval()
    return torch.ao.quantization.quantize_dynamic(quantized, {torch.nn.Linear}, dtype=torch.qint8)


def save_pytorch_int8(model: AlbertPreTrainedModel, path: str | Path) -> Path:
    """Quantize `model` with [`quantize_pytorch`] and save its state dict (int8 packed weights) to `path`.

    Load with [`load_pytorch_int8`] and the model's config (the quantized modules are rebuilt, then filled)."""
    path = Path(path)
    state = quantize_pytorch(model).state_dict()
    partial = path.with_name(path.name + ".partial")
    torch.save(state, partial)
    os.replace(partial, path)
    return path


def load_pytorch_int8(model_class, config, path: str | Path) -> torch.nn.Module:
    """The int8 model saved by [`save_pytorch_int8`]: a fresh `model_class(config)`, quantized, then loaded."""
    model = quantize_pytorch(model_class(config))
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


def export(
    model_name_or_path: str | os.PathLike,
    output_dir: str | os.PathLike,
    quantize: str | None = None,
    pytorch_int8: bool = True,
) -> dict[str, Path]:
    """Export a saved albert_hf model (any head) to `output_dir`; returns {"onnx": ..., "onnx_int8": ..., ...}.

    A sequence classifier with exits or a fixed depth (`early_exit`, `num_layers_at_inference`) is written in the
    looped form instead ([`export_exit_onnx`]: embeddings.onnx, layer.onnx, exits.onnx, and with int8
    embeddings.int8.onnx, layer.int8.onnx), which [`OnnxExitModel`] runs with the config's settings.
    Otherwise always writes `model.onnx` (fp32, shared layer once) and the model's config and tokenizer files (so the folder
    is self-contained for inference); with `quantize="int8"` also `model.int8.onnx` (onnxruntime dynamic int8) and,
    unless `pytorch_int8=False`, `pytorch_model.int8.pt` (torch dynamic int8 state dict, see `load_pytorch_int8`).
    """
    from . import modeling
    from .configuration import AlbertConfig

    if quantize is not None and quantize not in QUANTIZE_CHOICES:
        raise UserError(f"quantize must be one of {QUANTIZE_CHOICES} or None, got {quantize!r}.")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as error:
        raise ImportError(
            f"export needs onnx, onnxscript and onnxruntime ({error}): pip install 'albert_hf[onnx]'"
        ) from None
    source, output_dir = Path(model_name_or_path), Path(output_dir)
    if not (source / "config.json").is_file():
        raise MissingFileError(f"{source}: no config.json here; pass a folder saved with save_pretrained.")
    config = AlbertConfig.from_pretrained(source)
    architecture = (config.architectures or ["AlbertModel"])[0]
    model_class = getattr(modeling, architecture, None)
    if model_class is None:
        raise UserError(f"{source}: architecture {architecture!r} is not an albert_hf model class.")
    model = model_class.from_pretrained(source).eval()
    exits = has_adaptive_depth(config)
    if exits:
        check_loopable(model)  # before anything is written
    # The folder is written whole or not at all (`staged_folder`): an export that fails or is interrupted (a full
    # disk, Ctrl-C, a kill) publishes none of its files, and a rerun finds nothing of it. A user's README.md there
    # stays, the model's card going beside it; every other file keeps its name, which inference reads.
    with staged_folder(output_dir, keep_name=lambda name: name != "README.md") as staging:
        folder = staging.path
        for item in copied_files(source):  # config, tokenizer and card: what an inference folder needs
            shutil.copy2(item, folder / item.name)
        if exits:
            # Adaptive depth cannot live in one static graph: the looped form, run by OnnxExitModel.
            written = export_exit_onnx(model, folder)
            if quantize == "int8":
                written.update({f"{stem}_int8": path for stem, path in quantize_exit_onnx(folder).items()})
        else:
            written = {"onnx": folder / "model.onnx"}
            export_onnx(model, written["onnx"])
            if quantize == "int8":
                written["onnx_int8"] = quantize_onnx(written["onnx"], folder / "model.int8.onnx")
                if pytorch_int8:
                    written["pytorch_int8"] = save_pytorch_int8(model, folder / "pytorch_model.int8.pt")
    return {kind: staging.published[path.name] for kind, path in written.items()}


def has_adaptive_depth(config) -> bool:
    """Whether a model of `config` exits early or runs a fixed depth (`export` then writes the looped form)."""
    return bool(getattr(config, "early_exit", False) or getattr(config, "num_layers_at_inference", None) is not None)


def copied_files(source: str | os.PathLike) -> list[Path]:
    """The files of a model folder an export copies beside its graphs: config, tokenizer and card (`.json`,
    `.model`, `.txt`, `.md`), not the private files of albert_hf's jobs (`_*`) or hidden ones."""
    return sorted(
        item
        for item in Path(source).iterdir()
        if item.is_file() and item.suffix in (".json", ".model", ".txt", ".md") and not item.name.startswith(("_", "."))
    )


def export_file_names(
    model_name_or_path: str | os.PathLike, quantize: str | None, pytorch_int8: bool = True
) -> list[str]:
    """The names of the files `export` writes for these options (known before any work: the output folder's guard
    refuses one of them there that is finished work or no job wrote)."""
    from .configuration import AlbertConfig

    names = [item.name for item in copied_files(model_name_or_path)]
    if has_adaptive_depth(AlbertConfig.from_pretrained(model_name_or_path)):
        names += [f"{stem}.onnx" for stem in EXIT_GRAPHS]
        names += ["embeddings.int8.onnx", "layer.int8.onnx"] if quantize == "int8" else []
        return names
    names.append("model.onnx")
    if quantize == "int8":
        names += ["model.int8.onnx", *(["pytorch_model.int8.pt"] if pytorch_int8 else [])]
    return names


def run_export(args: argparse.Namespace) -> int:
    """Export with parsed `export_parser` options and print what was written; the exit code."""
    written = export(args.model_name_or_path, args.output_dir, args.quantize, pytorch_int8=not args.no_pytorch_int8)
    for kind, path in written.items():
        print(f"{kind}: {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
