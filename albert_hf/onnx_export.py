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
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from .errors import MissingFileError, UserError
from .modeling import AlbertPreTrainedModel
from .options import RefusingParser

QUANTIZE_CHOICES = ("int8",)

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


def quantize_onnx(fp32_path: str | Path, int8_path: str | Path) -> Path:
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
        quantize_dynamic(folded, partial, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"])
        deduplicate_initializers(partial)
        os.replace(partial, int8_path)
    return int8_path


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

    Always writes `model.onnx` (fp32, shared layer once) and the model's config and tokenizer files (so the folder
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
    output_dir.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():  # config, tokenizer and card: what an inference folder needs besides weights
        if item.is_file() and item.suffix in (".json", ".model", ".txt", ".md"):
            shutil.copy2(item, output_dir / item.name)
    written = {"onnx": output_dir / "model.onnx"}
    partial = output_dir / "model.onnx.partial"
    export_onnx(model, partial)
    os.replace(partial, written["onnx"])
    if quantize == "int8":
        written["onnx_int8"] = quantize_onnx(written["onnx"], output_dir / "model.int8.onnx")
        if pytorch_int8:
            written["pytorch_int8"] = save_pytorch_int8(model, output_dir / "pytorch_model.int8.pt")
    return written


def export_main(argv: list[str] | None = None) -> int:
    """`albert-hf export`: ONNX (and int8) files of a saved model."""
    parser = RefusingParser(
        prog="albert-hf export",
        description="Export a saved albert_hf model to ONNX (shared layer stored once), optionally quantized to int8 "
        "(onnxruntime dynamic quantization, and torch dynamic quantization of the Linear layers).",
    )
    parser.add_argument("--model_name_or_path", required=True, help="folder saved with save_pretrained")
    parser.add_argument("--output_dir", required=True, help="folder for model.onnx (+ int8 files)")
    parser.add_argument("--quantize", choices=QUANTIZE_CHOICES, default=None, help="also write int8 models")
    parser.add_argument("--no_pytorch_int8", action="store_true", help="with --quantize: skip the PyTorch int8 file")
    args = parser.parse_args(argv)
    written = export(args.model_name_or_path, args.output_dir, args.quantize, pytorch_int8=not args.no_pytorch_int8)
    for kind, path in written.items():
        print(f"{kind}: {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0
