"""ONNX export: outputs equal PyTorch's under onnxruntime, and the shared layer is stored once."""

from __future__ import annotations

import torch

import albert_hf
from albert_hf import AlbertConfig
from albert_hf.export import export_onnx, verify_onnx


def test_onnx_export_matches_pytorch_and_stores_shared_layer_once(tmp_path):
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
    model = albert_hf.AlbertForSequenceClassification(config).eval()
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
