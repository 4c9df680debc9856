"""The original TensorFlow ALBERTs, read without TensorFlow (albert_hf/tf_checkpoint.py) and imported
(albert_hf/tf_import.py, `albert-hf import`).

The checkpoints of tests/data/tf_checkpoints/ were written by TensorFlow itself, by the original code of each layout
(google-research/albert's, a TF-Hub module and a classifier fine-tuned on it, brightmart/albert_zh's), and their
`reference.npz` holds that code's outputs, computed by TensorFlow (make_tf_checkpoints.py, README.md there). The
imported models must give them within 1e-5. The files a test breaks on purpose are copies of those fixtures, edited
as the test says (a flipped compression byte, an entry's dtype or slices rewritten through a small table writer).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.command_line import run_cli

from albert_hf import tf_checkpoint
from albert_hf.errors import MissingFileError, UserError
from albert_hf.tf_checkpoint import CheckpointFormatError, TFCheckpoint, crc32c, find_checkpoint, mask_crc, read_table
from albert_hf.tf_import import (
    CheckpointLayoutError,
    config_from_original,
    find_config_file,
    import_tf_checkpoint,
    is_training_state,
    load_original,
)

DATA = Path(__file__).resolve().parent / "data" / "tf_checkpoints"
TOLERANCE = 1e-5
# Each fixture, the config it is imported with when not found beside it, the class `--head auto` builds, and the
# reference outputs its model is compared on.
LAYOUTS = {
    "google_pretraining": (None, "AlbertForPreTraining", ("sequence_output", "pooled_output", "mlm", "sop")),
    "google_classifier_zh": (None, "AlbertForSequenceClassification", ("sequence_output", "pooled_output", "logits")),
    "google_squad_v1": (None, "AlbertForQuestionAnswering", ("sequence_output", "start_logits", "end_logits")),
    "google_squad_v2": (None, "AlbertModel", ("sequence_output", "pooled_output")),
    "tfhub_module": (None, "AlbertForPreTraining", ("sequence_output", "pooled_output", "mlm", "sop")),
    "tfhub_classifier": (
        DATA / "tfhub_module" / "assets" / "albert_config.json",
        "AlbertForSequenceClassification",
        ("sequence_output", "pooled_output", "logits"),
    ),
    "brightmart": (None, "AlbertForPreTraining", ("sequence_output", "pooled_output", "mlm", "sop")),
}


def config_of(layout: str) -> Path:
    config, _, _ = LAYOUTS[layout]
    return config or find_config_file(find_checkpoint(DATA / layout))


def outputs(model, reference) -> dict[str, np.ndarray]:
    """The model's outputs named as the reference names TensorFlow's: log-probabilities for the MLM and SOP heads
    (what run_pretraining.py's functions return)."""
    inputs = {
        "input_ids": torch.from_numpy(reference["input_ids"]).long(),
        "attention_mask": torch.from_numpy(reference["input_mask"]).long(),
        "token_type_ids": torch.from_numpy(reference["token_type_ids"]).long(),
    }
    backbone = model if type(model).__name__ == "AlbertModel" else model.albert
    with torch.no_grad():
        base = backbone(**inputs)
        out = model(**inputs) if backbone is not model else base
    found = {"sequence_output": base.last_hidden_state}
    if base.pooler_output is not None:
        found["pooled_output"] = base.pooler_output
    for name in ("logits", "start_logits", "end_logits"):
        if name in out:
            found[name] = out[name]
    if "prediction_logits" in out:
        found["mlm"] = torch.log_softmax(out.prediction_logits, -1)
        found["sop"] = torch.log_softmax(out.sop_logits, -1)
    return {name: value.numpy() for name, value in found.items()}


def differences(model, layout: str) -> dict[str, float]:
    reference = np.load(DATA / layout / "reference.npz")
    names = {"mlm": "mlm_log_probs", "sop": "sop_log_probs"}
    found = outputs(model, reference)
    return {name: float(np.abs(found[name] - reference[names.get(name, name)]).max()) for name in LAYOUTS[layout][2]}


# --------------------------------------------------------------------------------------------------------------------
# The imported models give the original code's outputs
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_imported_model_gives_the_original_codes_outputs(layout):
    model, report = load_original(DATA / layout, config_of(layout))
    assert report.model_class == LAYOUTS[layout][1]
    found = differences(model, layout)
    assert set(found) == set(LAYOUTS[layout][2])
    assert max(found.values()) <= TOLERANCE, found


@pytest.mark.parametrize("layout", ["google_pretraining", "brightmart"])
def test_gelu_is_the_tanh_approximation_exact_gelu_misses_the_reference(layout):
    """albert_config.json's "gelu" is google-research's and brightmart's tanh approximation: read as transformers'
    exact GELU the same weights miss the original's outputs by far more than the tolerance."""
    model, _ = load_original(DATA / layout, config_of(layout))
    assert model.config.hidden_act == "gelu_new"
    config = model.config
    config.hidden_act = "gelu"
    exact = type(model)(config)
    exact.load_state_dict(model.state_dict())
    exact.eval()
    assert max(differences(exact, layout).values()) > 20 * TOLERANCE


def test_brightmart_factorized_embeddings_fold_exactly_at_the_hidden_width():
    """The word table becomes word_embeddings @ word_embeddings_2 (what brightmart computes per token), the
    projection the identity, and the tied MLM decoder that same product."""
    checkpoint = TFCheckpoint(find_checkpoint(DATA / "brightmart"))
    table = checkpoint.read("bert/embeddings/word_embeddings")
    projection = checkpoint.read("bert/embeddings/word_embeddings_2")
    model, report = load_original(DATA / "brightmart", config_of("brightmart"))
    H = projection.shape[1]
    assert model.config.embedding_size == model.config.hidden_size == H
    words = model.albert.embeddings.word_embeddings.weight.detach().numpy()
    np.testing.assert_allclose(words, table @ projection, rtol=0, atol=1e-6)
    mapping = model.albert.encoder.embedding_hidden_mapping_in
    assert torch.equal(mapping.weight, torch.eye(H)) and not mapping.bias.any()
    assert model.predictions.decoder.weight is model.albert.embeddings.word_embeddings.weight
    assert "folded" in report.summary()
    assert checkpoint.num_shards == 2  # written by a sharded Saver: both data files are read


def test_google_model_without_projection_when_embedding_and_hidden_widths_agree():
    """google-research's model has no embedding_hidden_mapping_in when E == H: the import sets it to the identity."""
    model, _ = load_original(DATA / "google_classifier_zh", config_of("google_classifier_zh"))
    assert "bert/encoder/embedding_hidden_mapping_in/kernel" not in TFCheckpoint(
        find_checkpoint(DATA / "google_classifier_zh")
    )
    mapping = model.albert.encoder.embedding_hidden_mapping_in
    assert torch.equal(mapping.weight, torch.eye(model.config.hidden_size))


def test_training_state_is_skipped_and_counted():
    _, report = load_original(DATA / "google_pretraining", config_of("google_pretraining"))
    assert report.training_state and all(is_training_state(name) for name in report.training_state)
    assert "global_step" in report.training_state
    assert not report.not_imported
    assert "Skipped the training state: 160 optimizer slot(s), global_step." in report.summary()
    for name in ("a/b/adam_m", "a/b/adam_v", "a/lamb_m", "a/lamb_v", "global_step", "module/global_step"):
        assert is_training_state(name), name
    assert not is_training_state("bert/embeddings/word_embeddings")


def test_squad_v2_head_is_named_as_not_imported_and_refused_as_question_answering():
    model, report = load_original(DATA / "google_squad_v2", config_of("google_squad_v2"))
    assert type(model).__name__ == "AlbertModel"
    assert sorted({name.split("/")[0] for name in report.not_imported}) == [
        "answer_class",
        "end_logits",
        "start_logits",
    ]
    assert "start token" in report.summary()
    with pytest.raises(CheckpointLayoutError, match="run_squad_v2's head is not imported"):
        load_original(DATA / "google_squad_v2", config_of("google_squad_v2"), head="question-answering")


def test_tfhub_scope_is_found_and_the_module_heads_are_named_as_not_imported():
    model, report = load_original(DATA / "tfhub_classifier", config_of("tfhub_classifier"))
    assert report.layout.layout == "TF-Hub" and report.layout.scope == "module/"
    assert all(name.startswith("module/cls/") for name in report.not_imported)
    assert model.config.num_labels == 2


def test_heads_other_than_the_checkpoints_are_chosen_or_refused():
    config = config_of("google_pretraining")
    model, report = load_original(DATA / "google_pretraining", config, head="base")
    assert type(model).__name__ == "AlbertModel"
    assert {name.split("/")[0] for name in report.not_imported} == {"cls"}
    masked, _ = load_original(DATA / "google_pretraining", config, head="masked-lm")
    reference = np.load(DATA / "google_pretraining" / "reference.npz")
    inputs = {
        "input_ids": torch.from_numpy(reference["input_ids"]).long(),
        "token_type_ids": torch.from_numpy(reference["token_type_ids"]).long(),
        "attention_mask": torch.from_numpy(reference["input_mask"]).long(),
    }
    with torch.no_grad():
        log_probs = torch.log_softmax(masked(**inputs).logits, -1).numpy()
    assert np.abs(log_probs - reference["mlm_log_probs"]).max() <= TOLERANCE
    with pytest.raises(
        CheckpointLayoutError, match="--head sequence-classification needs run_classifier's output_weights"
    ):
        load_original(DATA / "google_pretraining", config, head="sequence-classification")
    with pytest.raises(CheckpointLayoutError, match=r"output_weights has shape \[3, 24\].*implies \[1, 24\]"):
        load_original(DATA / "google_classifier_zh", config_of("google_classifier_zh"), head="multiple-choice")


# --------------------------------------------------------------------------------------------------------------------
# The config
# --------------------------------------------------------------------------------------------------------------------


def edited_config(tmp_path: Path, layout: str, **changes) -> Path:
    config = json.loads(config_of(layout).read_text(encoding="utf-8"))
    config.update(changes)
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_a_variable_whose_shape_disagrees_with_the_config_names_both(tmp_path):
    config = edited_config(tmp_path, "google_pretraining", intermediate_size=40)
    with pytest.raises(CheckpointLayoutError) as error:
        load_original(DATA / "google_pretraining", config)
    message = str(error.value)
    assert (
        "ffn_1/intermediate/dense/bias has shape [37]" in message
        or "intermediate/dense/kernel has shape [32, 37]" in message
    )
    assert str(config) in message and "implies" in message and "intermediate_size" in message
    assert "model.ckpt-3.index" in message


def test_a_config_of_more_groups_names_the_variables_the_checkpoint_lacks(tmp_path):
    config = edited_config(tmp_path, "google_pretraining", num_hidden_groups=4)
    with pytest.raises(CheckpointLayoutError, match=r"lacks \d+ variable\(s\).*group_2/inner_group_0"):
        load_original(DATA / "google_pretraining", config)


def test_a_config_of_fewer_groups_is_refused_not_dropping_the_others(tmp_path):
    for change in ({"num_hidden_groups": 1}, {"inner_group_num": 1}):
        config = edited_config(tmp_path, "google_pretraining", **change)
        with pytest.raises(CheckpointLayoutError, match=r"model variable\(s\) that .* has no place for: .*group_1"):
            load_original(DATA / "google_pretraining", config)


def test_original_config_fields(tmp_path):
    config = config_from_original(config_of("google_pretraining"))
    assert (config.hidden_act, config.layer_norm_eps, config.num_hidden_groups, config.inner_group_num) == (
        "gelu_new",
        1e-12,
        2,
        2,
    )
    with pytest.raises(CheckpointLayoutError, match="pre-LayerNorm"):
        config_from_original(edited_config(tmp_path, "brightmart", ln_type="preln"))
    with pytest.raises(CheckpointLayoutError, match="hidden_act 'swish'"):
        config_from_original(edited_config(tmp_path, "google_pretraining", hidden_act="swish"))
    (tmp_path / "bad.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(CheckpointLayoutError, match="lacks vocab_size"):
        config_from_original(tmp_path / "bad.json")


# --------------------------------------------------------------------------------------------------------------------
# The reader
# --------------------------------------------------------------------------------------------------------------------


def test_crc32c_known_value_and_the_plain_loop_across_lanes_and_chunks(monkeypatch):
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert crc32c(b"") == 0
    rng = np.random.default_rng(0)

    def plain(data: bytes) -> int:
        register = 0xFFFFFFFF
        for byte in data:
            register ^= byte
            for _ in range(8):
                register = (register >> 1) ^ (0x82F63B78 if register & 1 else 0)
        return register ^ 0xFFFFFFFF

    monkeypatch.setattr(tf_checkpoint, "_CHUNK", 1 << 13)  # several chunks of several lanes, a ragged last one
    for size in (4095, 4096, 4097, 9000, 30001):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert crc32c(data) == plain(data), size


def test_every_dtype_reads_as_tensorflow_reads_it():
    expected = json.loads((DATA / "dtypes" / "expected.json").read_text(encoding="utf-8"))
    checkpoint = TFCheckpoint(DATA / "dtypes" / "dtypes")
    for name, value in expected.items():
        if name == "partitioned":
            continue
        array = checkpoint.read(f"scope/{name}")
        assert list(array.shape) == value["shape"], name
        np.testing.assert_array_equal(array.astype(np.float64), np.asarray(value["values"], dtype=np.float64))
        if name == "bfloat16":
            assert array.dtype == np.float32
    assert checkpoint.read("scope/int64").item() == 2**40 + 17


def test_partitioned_and_string_tensors_are_refused_in_one_line():
    checkpoint = TFCheckpoint(DATA / "dtypes" / "dtypes")
    assert (
        list(checkpoint.shape("partitioned"))
        == json.loads((DATA / "dtypes" / "expected.json").read_text())["partitioned"]["shape"]
    )
    with pytest.raises(CheckpointFormatError, match=r"partitioned variable \(3 slices\)"):
        checkpoint.read("partitioned")
    with pytest.raises(CheckpointFormatError, match="dtype string cannot be read"):
        checkpoint.read("scope/string")


def copy_fixture(layout: str, target: Path) -> Path:
    shutil.copytree(DATA / layout, target)
    return target


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A table block with a restart at every entry (no shared prefixes)."""
    body, restarts = b"", []
    for key, value in entries:
        restarts.append(len(body))
        body += _varint(0) + _varint(len(key)) + _varint(len(value)) + key + value
    restarts = restarts or [0]
    return body + struct.pack(f"<{len(restarts)}I", *restarts) + struct.pack("<I", len(restarts))


def write_table(path: Path, entries: list[tuple[bytes, bytes]]) -> None:
    """A LevelDB-format table of `entries` (sorted keys): one data block, an empty metaindex, the index, the footer."""

    def with_trailer(block: bytes) -> bytes:
        return block + b"\x00" + struct.pack("<I", mask_crc(crc32c(block + b"\x00")))

    data = _block(entries)
    metaindex = _block([])
    index = _block([(entries[-1][0], _varint(0) + _varint(len(data)))])
    out = with_trailer(data)
    meta_handle = _varint(len(out)) + _varint(len(metaindex))
    out += with_trailer(metaindex)
    index_handle = _varint(len(out)) + _varint(len(index))
    out += with_trailer(index)
    footer = (meta_handle + index_handle).ljust(40, b"\x00") + struct.pack("<Q", tf_checkpoint.TABLE_MAGIC)
    path.write_bytes(out + footer)


def rewrite_index(prefix: Path, edit) -> None:
    """Rewrite `<prefix>.index` with `edit(key, value) -> value` applied to every entry."""
    entries = read_table(f"{prefix}.index")
    write_table(Path(f"{prefix}.index"), [(key, edit(key, value)) for key, value in entries])


def test_a_rewritten_index_still_reads(tmp_path):
    """The table writer the next tests break files with writes tables the reader reads as TensorFlow's."""
    folder = copy_fixture("google_classifier_zh", tmp_path / "ckpt")
    rewrite_index(folder / "model.ckpt-5", lambda key, value: value)
    model, _ = load_original(folder, folder / "albert_config.json")
    assert max(differences(model, "google_classifier_zh").values()) <= TOLERANCE


def first_data_block_trailer(index: Path) -> int:
    """The offset of the compression byte of the index file's first data block."""
    table = index.read_bytes()
    footer = table[-48:]
    position = 0
    for _ in range(2):  # the metaindex handle
        while footer[position] & 0x80:
            position += 1
        position += 1
    index_offset, position = tf_checkpoint._varint(footer, position, "footer")
    index_size, _ = tf_checkpoint._varint(footer, position, "footer")
    entries = list(tf_checkpoint._block_entries(table[index_offset : index_offset + index_size], "index"))
    offset, position = tf_checkpoint._varint(entries[0][1], 0, "handle")
    size, _ = tf_checkpoint._varint(entries[0][1], position, "handle")
    return offset + size


def test_a_compressed_index_block_is_refused_in_one_line(tmp_path):
    folder = copy_fixture("google_pretraining", tmp_path / "ckpt")
    index = folder / "model.ckpt-3.index"
    raw = bytearray(index.read_bytes())
    raw[first_data_block_trailer(index)] = 1  # kSnappyCompression
    index.write_bytes(bytes(raw))
    with pytest.raises(CheckpointFormatError, match="Snappy-compressed; only uncompressed index tables"):
        TFCheckpoint(folder / "model.ckpt-3")


def test_corrupt_index_and_data_bytes_fail_their_checksums(tmp_path):
    folder = copy_fixture("google_classifier_zh", tmp_path / "ckpt")
    index = folder / "model.ckpt-5.index"
    raw = bytearray(index.read_bytes())
    raw[10] ^= 0xFF
    index.write_bytes(bytes(raw))
    with pytest.raises(CheckpointFormatError, match="checksum mismatch in the block at offset 0"):
        TFCheckpoint(folder / "model.ckpt-5")
    shutil.copy(DATA / "google_classifier_zh" / "model.ckpt-5.index", index)
    checkpoint = TFCheckpoint(folder / "model.ckpt-5")
    entry = checkpoint.entries["bert/embeddings/word_embeddings"]
    data = folder / "model.ckpt-5.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[entry.offset + 7] ^= 0x01
    data.write_bytes(bytes(raw))
    with pytest.raises(CheckpointFormatError, match="checksum mismatch in bert/embeddings/word_embeddings"):
        checkpoint.read("bert/embeddings/word_embeddings")
    assert checkpoint.read("bert/embeddings/word_embeddings", verify=False).shape == entry.shape
    (folder / "not-an-index.index").write_bytes(b"\x00" * 100)
    with pytest.raises(CheckpointFormatError, match="bad magic number"):
        TFCheckpoint(folder / "not-an-index")


def test_a_big_endian_bundle_is_refused(tmp_path):
    folder = copy_fixture("google_classifier_zh", tmp_path / "ckpt")
    rewrite_index(folder / "model.ckpt-5", lambda key, value: value + b"\x10\x01" if key == b"" else value)
    with pytest.raises(CheckpointFormatError, match="big-endian"):
        TFCheckpoint(folder / "model.ckpt-5")


def test_a_missing_shard_is_named(tmp_path):
    folder = copy_fixture("brightmart", tmp_path / "ckpt")
    (folder / "albert_model.ckpt.data-00001-of-00002").unlink()
    with pytest.raises(
        MissingFileError, match=r"2 data shard\(s\) and 1 missing: .*albert_model.ckpt.data-00001-of-00002"
    ):
        TFCheckpoint(folder / "albert_model.ckpt")


def test_find_checkpoint_from_every_spelling(tmp_path):
    prefix = str(DATA / "google_pretraining" / "model.ckpt-3")
    for spelling in (
        prefix,
        f"{prefix}.index",
        f"{prefix}.data-00000-of-00001",
        DATA / "google_pretraining",
        DATA / "google_pretraining" / "checkpoint",
    ):
        assert find_checkpoint(spelling) == prefix, spelling
    assert find_checkpoint(DATA / "tfhub_module") == str(DATA / "tfhub_module" / "variables" / "variables")
    assert find_checkpoint(DATA / "brightmart") == str(DATA / "brightmart" / "albert_model.ckpt")  # no state file
    with pytest.raises(MissingFileError, match="no such checkpoint"):
        find_checkpoint(tmp_path / "model.ckpt-1")
    with pytest.raises(MissingFileError, match="holds no TensorFlow checkpoint"):
        find_checkpoint(tmp_path)


def test_a_state_file_written_elsewhere_names_the_prefix_beside_it(caplog):
    """tfhub_classifier's `checkpoint` file, as TensorFlow's Saver wrote it, names an absolute path of the machine
    that trained it."""
    state = (DATA / "tfhub_classifier" / "checkpoint").read_text()
    named = state.split('"')[1]
    assert os.path.isabs(named) and not os.path.exists(f"{named}.index")
    with caplog.at_level(logging.INFO, logger="albert_hf.tf_checkpoint"):
        assert find_checkpoint(DATA / "tfhub_classifier") == str(DATA / "tfhub_classifier" / "model.ckpt-9")
    assert "not on this machine" in caplog.text


def test_a_state_file_naming_a_missing_path_falls_back_newest_first(tmp_path, caplog):
    folder = tmp_path / "run"
    folder.mkdir()
    for step in (3, 10, 7):
        for suffix in (".index", ".data-00000-of-00001"):
            shutil.copy(DATA / "google_pretraining" / f"model.ckpt-3{suffix}", folder / f"model.ckpt-{step}{suffix}")
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-99"\n')
    with caplog.at_level(logging.WARNING, logger="albert_hf.tf_checkpoint"):
        assert find_checkpoint(folder) == str(folder / "model.ckpt-10")
    assert "names model.ckpt-99, which does not exist: reading" in caplog.text
    for step in (3, 10, 7):
        for suffix in (".index", ".data-00000-of-00001"):
            (folder / f"model.ckpt-{step}{suffix}").unlink()
    with pytest.raises(
        MissingFileError, match=r"checkpoint names model.ckpt-99, which does not exist, and .* holds no"
    ):
        find_checkpoint(folder)


# --------------------------------------------------------------------------------------------------------------------
# Breaks the import meets: one line each
# --------------------------------------------------------------------------------------------------------------------


def test_a_partitioned_model_variable_and_an_unknown_dtype_are_refused(tmp_path):
    folder = copy_fixture("google_classifier_zh", tmp_path / "sliced")
    word = b"bert/embeddings/word_embeddings"
    rewrite_index(folder / "model.ckpt-5", lambda key, value: value + b"\x3a\x00" if key == word else value)
    with pytest.raises(CheckpointFormatError, match=r"bert/embeddings/word_embeddings\): a partitioned variable"):
        load_original(folder, folder / "albert_config.json")
    folder = copy_fixture("google_classifier_zh", tmp_path / "complex")
    rewrite_index(folder / "model.ckpt-5", lambda key, value: value + b"\x08\x08" if key == word else value)
    with pytest.raises(CheckpointFormatError, match="dtype complex64 cannot be read"):
        load_original(folder, folder / "albert_config.json")


def test_not_an_albert_checkpoint_says_what_it_holds():
    with pytest.raises(CheckpointLayoutError, match="no ALBERT variables .* it holds partitioned, scope/bfloat16"):
        load_original(DATA / "dtypes", config_of("google_pretraining"))


# --------------------------------------------------------------------------------------------------------------------
# The folder and the command
# --------------------------------------------------------------------------------------------------------------------


def test_import_writes_a_complete_folder_that_loads_with_from_pretrained(tmp_path):
    from transformers import AutoModelForPreTraining

    from albert_hf import AlbertForPreTraining, AlbertHFTokenizer

    output = tmp_path / "imported"
    report = import_tf_checkpoint(DATA / "google_pretraining", output)
    files = {path.name for path in output.iterdir()}
    assert {"config.json", "model.safetensors", "spiece.model", "tokenizer_config.json", "README.md"} <= files
    assert not [name for name in files if name.startswith("_import-")]
    model = AlbertForPreTraining.from_pretrained(output).eval()
    assert max(differences(model, "google_pretraining").values()) <= TOLERANCE
    # transformers' Auto class loads it too (albert_hf's class, or transformers' own for a stock folder), the same.
    auto = AutoModelForPreTraining.from_pretrained(output).eval()
    assert max(differences(auto, "google_pretraining").values()) <= TOLERANCE
    card = (output / "README.md").read_text(encoding="utf-8")
    assert "`google_pretraining/model.ckpt-3`" in card and "google-research/albert's layout" in card
    assert "The optimizer state of the checkpoint was not imported." in card
    # The tokenizer: albert_hf's on the release's SentencePiece model, which gives SentencePiece's own pieces.
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(DATA / "google_pretraining" / "30k-clean.model"))
    tokenizer = AlbertHFTokenizer.from_pretrained(output)
    text = "the old man had a house by the river."
    assert tokenizer(text, add_special_tokens=False)["input_ids"] == processor.encode(text)
    assert tokenizer.model_max_length == 16 and report.tokenizer_file.endswith("30k-clean.model")


def test_a_wordpiece_vocabulary_becomes_a_bert_tokenizer_folder(tmp_path):
    from transformers import AutoTokenizer, BertTokenizer

    output = tmp_path / "imported"
    import_tf_checkpoint(DATA / "brightmart", output)
    assert (output / "vocab.txt").read_bytes() == (DATA / "brightmart" / "vocab.txt").read_bytes()
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert isinstance(tokenizer, BertTokenizer) and tokenizer.do_lower_case
    vocabulary = (DATA / "brightmart" / "vocab.txt").read_text(encoding="utf-8").splitlines()
    ideographs = [index for index, token in enumerate(vocabulary) if len(token) == 1 and "\u4e00" <= token <= "\u9fff"]
    first, second = ideographs[3], ideographs[0]
    text = vocabulary[first] + vocabulary[second] + " THE"
    expected = [vocabulary.index("[CLS]"), first, second, vocabulary.index("the"), vocabulary.index("[SEP]")]
    assert tokenizer(text)["input_ids"] == expected
    config = json.loads((output / "config.json").read_text())
    assert (config["pad_token_id"], config["bos_token_id"], config["eos_token_id"]) == (0, 2, 3)
    card = (output / "README.md").read_text(encoding="utf-8")
    assert "folded" in card and "language:\n- zh" in card


def test_a_fine_tuned_checkpoint_without_its_release_files_asks_for_them(tmp_path):
    with pytest.raises(MissingFileError, match="no albert_config.json beside the checkpoint .* pass --config_file"):
        import_tf_checkpoint(DATA / "tfhub_classifier", tmp_path / "out")
    with pytest.raises(MissingFileError, match="no vocabulary beside the checkpoint .* pass --vocab_file"):
        import_tf_checkpoint(DATA / "tfhub_classifier", tmp_path / "out", config_file=config_of("tfhub_classifier"))


def test_import_never_replaces_a_file_already_there(tmp_path):
    output = tmp_path / "imported"
    output.mkdir()
    (output / "README.md").write_text("my notes")
    with pytest.raises(UserError, match="already holds README.md"):
        import_tf_checkpoint(DATA / "google_squad_v1", output)
    assert (output / "README.md").read_text() == "my notes"
    assert sorted(path.name for path in output.iterdir()) == ["README.md"]


def test_head_choices_of_the_command_are_the_librarys():
    from albert_hf.folder_commands import HEAD_CHOICES
    from albert_hf.tf_import import HEAD_CHOICES as LIBRARY_CHOICES

    assert HEAD_CHOICES == LIBRARY_CHOICES


@pytest.mark.slow
def test_the_command_imports_end_to_end(tmp_path):
    """`albert-hf import` in a fresh process: the folder, its summary, and the same model."""
    from albert_hf import AlbertForSequenceClassification

    output = tmp_path / "mrpc"
    result = run_cli(
        [
            "import",
            str(DATA / "tfhub_classifier"),
            "--output_dir",
            str(output),
            "--config_file",
            str(DATA / "tfhub_module" / "assets" / "albert_config.json"),
            "--vocab_file",
            str(DATA / "tfhub_module" / "assets" / "30k-clean.model"),
        ]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "under the scope 'module/' of a TF-Hub module" in result.stdout
    assert f"wrote {output}: AlbertForSequenceClassification" in result.stdout
    model = AlbertForSequenceClassification.from_pretrained(output).eval()
    assert max(differences(model, "tfhub_classifier").values()) <= TOLERANCE


def import_in_process(capsys, *argv: str) -> str:
    """`albert-hf import <argv>` in this process, refused: its one error line (exit status 2, no traceback)."""
    from albert_hf.cli import main

    capsys.readouterr()
    status = main(["import", *map(str, argv)])
    stderr = capsys.readouterr().err
    lines = [line for line in stderr.splitlines() if line.startswith("albert-hf import: error: ")]
    assert status == 2 and len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


def test_the_command_refuses_in_one_line(tmp_path, capsys):
    """Each refusal of the command: one error line, exit status 2, the folder untouched."""
    from albert_hf.cli import main

    finished = tmp_path / "finished"
    import_tf_checkpoint(DATA / "google_squad_v1", finished)
    before = {path.name: path.read_bytes() for path in finished.iterdir()}
    line = import_in_process(capsys, DATA / "google_squad_v1", "--output_dir", finished)
    assert f"--output_dir {finished} holds another run's files (README.md, config.json" in line
    assert {path.name: path.read_bytes() for path in finished.iterdir()} == before
    line = import_in_process(
        capsys, DATA / "google_squad_v1", "--output_dir", DATA / "google_squad_v1", "--overwrite_output_dir"
    )
    assert "is the folder of the checkpoint" in line
    broken = copy_fixture("brightmart", tmp_path / "broken")
    (broken / "albert_model.ckpt.data-00000-of-00002").unlink()
    line = import_in_process(capsys, broken, "--output_dir", tmp_path / "out")
    assert "1 missing: " in line and "albert_model.ckpt.data-00000-of-00002" in line
    config = edited_config(tmp_path, "google_squad_v1", hidden_size=36)
    line = import_in_process(
        capsys, DATA / "google_squad_v1", "--output_dir", tmp_path / "out", "--config_file", config
    )
    assert "has shape [16, 32]" in line and f"{config} implies [16, 36]" in line
    line = import_in_process(
        capsys, DATA / "google_squad_v2", "--output_dir", tmp_path / "out", "--head", "question-answering"
    )
    assert "run_squad_v2's head is not imported" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert main(["import", str(DATA / "google_squad_v1"), "--output_dir", str(finished), "--overwrite_output_dir"]) == 0
