"""Export to ONNX with the shared layer stored once.

Exporters fold `Linear`'s weight transpose into a constant at every call site, so a layer applied L times is written
L times (transformers issue #8869: ALBERT's ONNX file about 7x its parameters). `export_onnx` exports with torch's
dynamo exporter, then merges initializers with identical contents, which brings the file back to one copy of each
weight. Outputs are checked against PyTorch with onnxruntime by `verify_onnx`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from .modeling import AlbertPreTrainedModel

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
        key = (
            initializer.data_type,
            tuple(initializer.dims),
            hashlib.sha256(
                initializer.SerializeToString(deterministic=True).replace(initializer.name.encode(), b"")
            ).hexdigest(),
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
