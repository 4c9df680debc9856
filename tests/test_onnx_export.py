"""ONNX export: outputs equal PyTorch's under onnxruntime, and the shared layer is stored once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.onnx_export import export_onnx, verify_onnx

pytestmark = pytest.mark.needs("onnx", "onnxruntime", "onnxscript")


def test_onnx_export_matches_pytorch_and_stores_shared_layer_once(tmp_path):
    model = _tiny_classifier()
    path = tmp_path / "albert.onnx"
    assert export_onnx(model, path) == ["logits"]

    # dynamic axes: another batch size and length than the export example, with padding
    input_ids = torch.randint(5, 300, (3, 23))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 15:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 12:] = 1
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    assert verify_onnx(model, path, inputs) <= 1e-4

    import onnx

    parameter_bytes = sum(p.numel() * 4 for p in model.parameters())
    layer_bytes = sum(p.numel() * 4 for p in model.albert.encoder.albert_layer_groups.parameters())
    stored_bytes = sum(len(init.raw_data) for init in onnx.load(str(path)).graph.initializer)
    # At most the parameters plus one pre-transposed copy of the shared layer; storing it per application (as the
    # exporter's constant folding does before deduplication) would add 6 x layer_bytes.
    assert stored_bytes <= parameter_bytes + layer_bytes, (stored_bytes, parameter_bytes, layer_bytes)


# ---- int8 ------------------------------------------------------------------------------------------------------------

# the shared layer's Linear modules (one set, applied num_hidden_layers times)
SHARED_LINEARS = ("attention.query", "attention.key", "attention.value", "attention.dense", "ffn", "ffn_output")


def _tiny_classifier() -> albert_hf.AlbertForSequenceClassification:
    torch.manual_seed(0)
    config = AlbertConfig(
        vocab_size=300,
        embedding_size=16,
        hidden_size=64,
        num_hidden_layers=6,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=3,
    )
    return albert_hf.AlbertForSequenceClassification(config).eval()


def _inputs(batch: int = 4, length: int = 20) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, 300, (batch, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, 12:] = 0
    return dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`albert-hf export --quantize int8` on a saved tiny classifier: (model, output folder)."""
    from albert_hf.cli import main as cli

    model = _tiny_classifier()
    source, output = tmp_path_factory.mktemp("saved"), tmp_path_factory.mktemp("exported")
    model.save_pretrained(source)
    assert cli(["export", "--model_name_or_path", str(source), "--output_dir", str(output), "--quantize", "int8"]) == 0
    return model, output


def _relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


def test_onnx_int8_is_close_to_fp32_loads_in_onnxruntime_and_stores_the_shared_layer_once(exported):
    import onnx
    import onnxruntime

    model, output = exported
    inputs = _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits.numpy()
    session = onnxruntime.InferenceSession(str(output / "model.int8.onnx"), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
    # int8 weights with per-tensor scales: logits within 10% of fp32's (relative L2). On the hidden-256 classifier of
    # docs/performance.md the error was 4.0% (4 x 40 tokens); a tiny random model is not better conditioned, hence the margin.
    assert _relative_error(logits, expected) <= 0.10

    graph = onnx.load(str(output / "model.int8.onnx")).graph
    int8 = [init for init in graph.initializer if init.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)]
    # Each shared weight stored once, as int8, whatever the number of layer applications (counted by shape, since
    # the exporter may name a merged weight after any of its uses): 64 x 64 are query, key, value, dense + the pooler;
    # the feed-forward pair is 64 x 128 and 128 x 64. Stored per application, these counts would be 6x.
    shapes = [tuple(init.dims) for init in int8 if len(init.dims) == 2]
    assert shapes.count((64, 64)) == 5, shapes
    assert shapes.count((64, 128)) == 1 and shapes.count((128, 64)) == 1, shapes
    assert not [
        init.name
        for init in graph.initializer
        if init.data_type == onnx.TensorProto.FLOAT and tuple(init.dims) in {(64, 64), (64, 128), (128, 64)}
    ], "an fp32 copy of a shared weight is left"
    int8_bytes = sum(len(init.raw_data) for init in int8)
    parameters = sum(p.numel() for p in model.parameters())
    assert int8_bytes <= parameters  # one byte per parameter at most: nothing stored per application
    assert (output / "model.int8.onnx").stat().st_size < (output / "model.onnx").stat().st_size


def test_pytorch_int8_is_close_to_fp32_and_reloads(exported):
    from albert_hf.onnx_export import load_pytorch_int8, quantize_pytorch

    model, output = exported
    inputs = _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits.numpy()
        quantized = quantize_pytorch(model)
        actual = quantized(**inputs).logits.numpy()
        reloaded = load_pytorch_int8(
            albert_hf.AlbertForSequenceClassification, model.config, output / "pytorch_model.int8.pt"
        )(**inputs).logits.numpy()
    assert _relative_error(actual, expected) <= 0.10  # same bound as the ONNX int8 model
    np.testing.assert_array_equal(reloaded, actual)
    dynamic = [
        name
        for name, module in quantized.named_modules()
        if type(module).__name__ == "Linear" and "quantized" in type(module).__module__
    ]
    assert sum("albert_layer_groups" in name for name in dynamic) == len(SHARED_LINEARS)  # once, not per layer
    assert not any(type(module) is torch.nn.Linear for module in quantized.modules())  # every Linear quantized


def test_export_refuses_unknown_quantization_and_missing_model(tmp_path):
    from albert_hf.onnx_export import export

    with pytest.raises(ValueError, match="quantize must be one of"):
        export(tmp_path, tmp_path / "out", quantize="int4")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        export(tmp_path, tmp_path / "out", quantize="int8")
