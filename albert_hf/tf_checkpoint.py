"""Reading TensorFlow checkpoints without TensorFlow.

A TensorFlow (V2) checkpoint is a *tensor bundle* (TensorFlow's `tensorflow/core/util/tensor_bundle/tensor_bundle.h`):
files sharing a prefix, e.g. `model.ckpt-best`:

    model.ckpt-best.index                 a table: tensor name -> BundleEntryProto (dtype, shape, where its bytes are)
    model.ckpt-best.data-00000-of-00001   the tensors' bytes, one shard or several

The `.index` file is a LevelDB-format table (TensorFlow's `core/lib/io/table_format.txt`, which refers to LevelDB's
`doc/table_format.md`): data blocks of prefix-compressed keys with a restart array, an index block whose entries are
the handles (offset, size) of the data blocks, and a 48-byte footer ending in the magic number 0xdb4775248b80fb57.
Every block is followed by a 5-byte trailer: a compression byte (TensorFlow writes bundles uncompressed) and the masked
CRC32C of the block and that byte. The first key is the empty string; its value is the `BundleHeaderProto` (number
of shards, endianness, version). Every other value is a `BundleEntryProto` (tensorflow/core/protobuf/tensor_bundle.proto):
dtype, shape, shard, offset, size and the masked CRC32C of the tensor's bytes, or for a partitioned (sliced)
variable the list of its slices. The two messages are read here field by field (a handful of varints), so the reader
needs no generated protobuf code.

What this module refuses, each as one [`CheckpointFormatError`] (a `UserError`: `albert-hf` prints one line and exits
with status 2) naming the file: a file that is not a table (bad magic number), a compressed block, a checksum that
does not match (index blocks and every tensor read are checked, as TensorFlow's reader does), a bundle written on a
big-endian machine, a missing data shard, a partitioned variable, and a dtype other than the numeric ones of
[`NUMPY_DTYPES`] (strings, resources, variants: the bookkeeping tensors of some checkpoints, never read unless asked).

`find_checkpoint` turns what a user names (a folder, a `checkpoint` state file, a prefix, the `.index` or a data file,
a TF-Hub module's folder with `variables/variables.*`) into a prefix. A `checkpoint` state file written on another
machine names paths that do not exist here: the prefix of the same name beside it is used, else the newest prefix
present, with a warning; none present is an error naming the file and the path it names.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import MissingFileError, UnreadableFileError

logger = logging.getLogger(__name__)

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48  # two block handles padded to 40 bytes, then the 8-byte magic number
BLOCK_TRAILER_SIZE = 5  # compression type (1 byte) + masked CRC32C (4 bytes)
COMPRESSION_NAMES = {1: "Snappy", 2: "Zlib", 3: "LZ4", 4: "Zstd"}
CHECKPOINT_STATE_FILE = "checkpoint"

# TensorFlow's DataType enum (tensorflow/core/framework/types.proto) -> the little-endian numpy dtype of its bytes.
# bfloat16 has no numpy dtype: its 16 bits are the high half of a float32, read as uint16 and widened exactly.
NUMPY_DTYPES: dict[int, str] = {
    1: "<f4",  # DT_FLOAT
    2: "<f8",  # DT_DOUBLE
    3: "<i4",  # DT_INT32
    4: "u1",  # DT_UINT8
    5: "<i2",  # DT_INT16
    6: "i1",  # DT_INT8
    9: "<i8",  # DT_INT64
    10: "?",  # DT_BOOL
    14: "<u2",  # DT_BFLOAT16
    17: "<u2",  # DT_UINT16
    19: "<f2",  # DT_HALF
    22: "<u4",  # DT_UINT32
    23: "<u8",  # DT_UINT64
}
DT_BFLOAT16 = 14
DTYPE_NAMES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    8: "complex64",
    9: "int64",
    10: "bool",
    11: "qint8",
    12: "quint8",
    13: "qint32",
    14: "bfloat16",
    15: "qint16",
    16: "quint16",
    17: "uint16",
    18: "complex128",
    19: "float16",
    20: "resource",
    21: "variant",
    22: "uint32",
    23: "uint64",
}


class CheckpointFormatError(UnreadableFileError):
    """A TensorFlow checkpoint that cannot be read as it is: its file and what is wrong are named."""


# --------------------------------------------------------------------------------------------------------------------
# CRC32C (Castagnoli), as LevelDB and TensorFlow checksum blocks and tensors
# --------------------------------------------------------------------------------------------------------------------

_CRC32C_POLYNOMIAL = 0x82F63B78  # reflected
_MASK_DELTA = 0xA282EAD8


def _byte_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_CRC32C_POLYNOMIAL if crc & 1 else 0)
        table[byte] = crc
    return table


_TABLE = _byte_table()
_TABLE_LIST = [int(value) for value in _TABLE]
# Below this many bytes a plain loop is faster than the vectorized lanes.
_SMALL = 4096
# The vectorized path: the data in chunks of _CHUNK bytes (a cache-sized transpose), each in _LANES lanes.
_CHUNK = 1 << 22
_LANES = 1 << 14

# The CRC register is linear over GF(2) in what it has read: reading bytes b after register r gives Z^len(b)(r) xor
# the register of b read from zero, where Z is the change over one zero byte. A linear map of 32-bit values is kept as
# its images of the 32 unit vectors, and applied through two 65536-entry tables (the low and the high 16 bits).
_UNIT_VECTORS = np.uint32(1) << np.arange(32, dtype=np.uint32)


def _span(images: np.ndarray) -> np.ndarray:
    """The table of xor-combinations of 16 images: entry x is the xor of the images of x's set bits."""
    table = np.zeros(1 << 16, dtype=np.uint32)
    size = 1
    for image in images:
        table[size : 2 * size] = table[:size] ^ image
        size *= 2
    return table


def _tables(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _span(images[:16]), _span(images[16:])


def _apply(tables: tuple[np.ndarray, np.ndarray], values: np.ndarray) -> np.ndarray:
    low, high = tables
    return low[values & np.uint32(0xFFFF)] ^ high[values >> np.uint32(16)]


_ZERO_BYTE = _TABLE[_UNIT_VECTORS & np.uint32(0xFF)] ^ (_UNIT_VECTORS >> np.uint32(8))


@functools.lru_cache(maxsize=64)
def _zero_bytes(count: int) -> tuple[np.ndarray, np.ndarray]:
    """The tables of Z^count: the register's change over `count` zero bytes (by squaring)."""
    result, power = _UNIT_VECTORS.copy(), _ZERO_BYTE.copy()
    while count:
        if count & 1:
            result = _apply(_tables(power), result)
        count >>= 1
        if count:
            power = _apply(_tables(power), power)
    return _tables(result)


def _register_from_zero(buffer: np.ndarray, lanes: int) -> int:
    """The register after reading `buffer` from zero, in `lanes` lanes of 32-bit words read side by side: zeros in
    front (which leave a zero register unchanged) make the lanes equal, and the lanes' registers are joined pairwise
    (A then B: Z^len(B) of A's, xor B's)."""
    words = -(-buffer.size // (4 * lanes))
    padded = np.zeros(lanes * words * 4, dtype=np.uint8)
    padded[padded.size - buffer.size :] = buffer
    columns = np.ascontiguousarray(padded.view("<u4").reshape(lanes, words).T)
    step = _zero_bytes(4)  # a word xor-ed into the register, then four bytes read: Z^4
    registers = np.zeros(lanes, dtype=np.uint32)
    for column in columns:
        registers = _apply(step, registers ^ column)
    length = 4 * words
    while registers.size > 1:
        registers = _apply(_zero_bytes(length), registers[0::2]) ^ registers[1::2]
        length *= 2
    return int(registers[0])


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC32C of `data` (LevelDB's and TensorFlow's checksum): a plain loop for short data, else numpy lanes
    (some 50 MB/s on one core)."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    if buffer.size < _SMALL:
        return _raw_crc_small(buffer.tobytes(), 0xFFFFFFFF) ^ 0xFFFFFFFF
    register = np.array([0xFFFFFFFF], dtype=np.uint32)
    for start in range(0, buffer.size, _CHUNK):
        chunk = buffer[start : start + _CHUNK]
        lanes = min(_LANES, 1 << max(0, (chunk.size // 256).bit_length() - 1))
        register = _apply(_zero_bytes(chunk.size), register) ^ np.uint32(_register_from_zero(chunk, lanes))
    return int(register[0]) ^ 0xFFFFFFFF


def _raw_crc_small(data: bytes, register: int) -> int:
    table = _TABLE_LIST
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


def mask_crc(crc: int) -> int:
    """LevelDB's masked form of a CRC (stored so that a CRC of data holding CRCs is not degenerate)."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def unmask_crc(masked: int) -> int:
    rotated = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


# --------------------------------------------------------------------------------------------------------------------
# Varints and protobuf fields
# --------------------------------------------------------------------------------------------------------------------


def _varint(data: bytes, position: int, source: str) -> tuple[int, int]:
    """(value, next position) of the base-128 varint at `position`."""
    value = shift = 0
    while True:
        if position >= len(data) or shift > 63:
            raise CheckpointFormatError(f"{source}: truncated or malformed varint")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _proto_fields(data: bytes, source: str) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of a serialized protobuf message: an int for varint and fixed-width
    fields, bytes for length-delimited ones."""
    position = 0
    while position < len(data):
        tag, position = _varint(data, position, source)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, position = _varint(data, position, source)
        elif wire_type == 1:
            value, position = struct.unpack_from("<Q", data, position)[0], position + 8
        elif wire_type == 2:
            size, position = _varint(data, position, source)
            value, position = data[position : position + size], position + size
        elif wire_type == 5:
            value, position = struct.unpack_from("<I", data, position)[0], position + 4
        else:
            raise CheckpointFormatError(f"{source}: unexpected protobuf wire type {wire_type}")
        if position > len(data):
            raise CheckpointFormatError(f"{source}: truncated protobuf message")
        yield number, value


# --------------------------------------------------------------------------------------------------------------------
# The LevelDB-format table of the .index file
# --------------------------------------------------------------------------------------------------------------------


def _block_handle(data: bytes, position: int, source: str) -> tuple[int, int, int]:
    offset, position = _varint(data, position, source)
    size, position = _varint(data, position, source)
    return offset, size, position


def _read_block(table: bytes, offset: int, size: int, source: str) -> bytes:
    """The contents of the block at (offset, size), its trailer checked: no compression, the masked CRC32C."""
    end = offset + size + BLOCK_TRAILER_SIZE
    if offset < 0 or end > len(table):
        raise CheckpointFormatError(f"{source}: block at offset {offset} runs past the end of the file (truncated?)")
    contents = table[offset : offset + size]
    compression = table[offset + size]
    if compression != 0:
        name = COMPRESSION_NAMES.get(compression, f"unknown type {compression}")
        raise CheckpointFormatError(
            f"{source}: the block at offset {offset} is {name}-compressed; only uncompressed index tables (what "
            "TensorFlow writes) are read. Rewrite the checkpoint with TensorFlow (tf.train.Saver or tf.train.Checkpoint "
            "save it uncompressed)."
        )
    (stored,) = struct.unpack_from("<I", table, offset + size + 1)
    if crc32c(table[offset : offset + size + 1]) != unmask_crc(stored):
        raise CheckpointFormatError(f"{source}: checksum mismatch in the block at offset {offset}: the file is corrupt")
    return contents


def _block_entries(block: bytes, source: str) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of each entry of a block: keys share a prefix with the previous key, restarting from full keys
    at the restart points listed at the block's end."""
    if len(block) < 4:
        raise CheckpointFormatError(f"{source}: block too short")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    entries_end = len(block) - 4 - 4 * restarts
    if entries_end < 0:
        raise CheckpointFormatError(f"{source}: bad restart count {restarts} in a block of {len(block)} bytes")
    restart_points = set(struct.unpack_from(f"<{restarts}I", block, entries_end))
    position, key = 0, b""
    while position < entries_end:
        start = position
        shared, position = _varint(block, position, source)
        unshared, position = _varint(block, position, source)
        value_size, position = _varint(block, position, source)
        if (start in restart_points and shared) or shared > len(key):
            raise CheckpointFormatError(f"{source}: malformed key prefix in a block")
        key = key[:shared] + block[position : position + unshared]
        position += unshared
        value = block[position : position + value_size]
        position += value_size
        if position > entries_end:
            raise CheckpointFormatError(f"{source}: a block entry runs past the block's end")
        yield key, value


def read_table(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a LevelDB-format table file, in key order."""
    source = str(path)
    table = Path(path).read_bytes()
    if len(table) < FOOTER_SIZE:
        raise CheckpointFormatError(f"{source}: {len(table)} bytes, too short for a TensorFlow checkpoint index")
    footer = table[-FOOTER_SIZE:]
    (magic,) = struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)
    if magic != TABLE_MAGIC:
        raise CheckpointFormatError(
            f"{source}: not a TensorFlow checkpoint index (bad magic number {magic:#018x}, expected {TABLE_MAGIC:#018x})"
        )
    _, _, position = _block_handle(footer, 0, source)  # the metaindex block: no filters in TensorFlow's tables
    index_offset, index_size, _ = _block_handle(footer, position, source)
    entries = []
    for _, handle in _block_entries(_read_block(table, index_offset, index_size, source), source):
        offset, size, _ = _block_handle(handle, 0, source)
        entries.extend(_block_entries(_read_block(table, offset, size, source), source))
    return entries


# --------------------------------------------------------------------------------------------------------------------
# Tensor bundles
# --------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorEntry:
    """What a bundle's index says of one tensor (a `BundleEntryProto`)."""

    name: str
    dtype: int  # TensorFlow's DataType enum
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int | None  # masked, as stored; None when absent
    slices: int  # number of slices of a partitioned variable (0: stored whole)

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(self.dtype, f"DataType {self.dtype}")


def _parse_shape(data: bytes, source: str) -> tuple[int, ...]:
    dims = []
    for number, value in _proto_fields(data, source):
        if number == 2:  # repeated Dim dim = 2 { int64 size = 1; string name = 2; }
            size = next((_signed64(v) for n, v in _proto_fields(value, source) if n == 1), 0)
            dims.append(size)
        elif number == 3 and value:
            raise CheckpointFormatError(f"{source}: a tensor of unknown rank")
    return tuple(dims)


def _parse_entry(name: str, data: bytes, source: str) -> TensorEntry:
    fields = {"dtype": 0, "shape": (), "shard": 0, "offset": 0, "size": 0, "crc32c": None, "slices": 0}
    for number, value in _proto_fields(data, f"{source} ({name})"):
        if number == 1:
            fields["dtype"] = value
        elif number == 2:
            fields["shape"] = _parse_shape(value, f"{source} ({name})")
        elif number == 3:
            fields["shard"] = value
        elif number == 4:
            fields["offset"] = _signed64(value)
        elif number == 5:
            fields["size"] = _signed64(value)
        elif number == 6:
            fields["crc32c"] = value
        elif number == 7:
            fields["slices"] += 1
    return TensorEntry(name=name, **fields)


def data_file(prefix: str, shard: int, num_shards: int) -> str:
    """The path of shard `shard` of a bundle (TensorFlow's `DataFilename`)."""
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


class TFCheckpoint:
    """The tensors of a TensorFlow checkpoint (tensor bundle), read with numpy.

    `TFCheckpoint("model.ckpt-best")` reads the index (every entry, the header checked); `read(name)` returns one
    tensor as a numpy array (bfloat16 widened exactly to float32), its bytes checked against the stored CRC32C.
    """

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = str(prefix)
        self.index_path = f"{self.prefix}.index"
        if not os.path.isfile(self.index_path):
            raise MissingFileError(f"{self.index_path}: no such file (the index of checkpoint {self.prefix})")
        entries = read_table(self.index_path)
        if not entries or entries[0][0] != b"":
            raise CheckpointFormatError(
                f"{self.index_path}: no bundle header (the first key of a TensorFlow V2 checkpoint index is empty): "
                "not a TensorFlow V2 checkpoint"
            )
        self.num_shards, endianness = 1, 0
        for number, value in _proto_fields(entries[0][1], self.index_path):
            if number == 1:
                self.num_shards = value
            elif number == 2:
                endianness = value
        if endianness != 0:
            raise CheckpointFormatError(
                f"{self.index_path}: the checkpoint was written on a big-endian machine; only little-endian "
                "checkpoints (those of x86, ARM and TPU hosts) are read"
            )
        missing = [
            data_file(self.prefix, shard, self.num_shards)
            for shard in range(self.num_shards)
            if not os.path.isfile(data_file(self.prefix, shard, self.num_shards))
        ]
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            raise MissingFileError(
                f"checkpoint {self.prefix} has {self.num_shards} data shard(s) and {len(missing)} missing: {shown}"
            )
        self.entries: dict[str, TensorEntry] = {}
        for key, value in entries[1:]:
            if key.startswith(b"\x00"):  # an encoded slice key: the slices of a partitioned variable
                continue
            name = key.decode("utf-8", errors="replace")
            self.entries[name] = _parse_entry(name, value, self.index_path)

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def names(self) -> list[str]:
        return sorted(self.entries)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.entries[name].shape

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        """Tensor `name` as a numpy array of its shape (float32 for bfloat16), its checksum verified."""
        entry = self.entries[name]
        where = f"{self.prefix} ({name})"
        if entry.slices:
            raise CheckpointFormatError(
                f"{where}: a partitioned variable ({entry.slices} slices); partitioned variables are not read. Save "
                "it unpartitioned (tf.compat.v1.get_variable without a partitioner) and import again"
            )
        if entry.dtype not in NUMPY_DTYPES:
            supported = ", ".join(DTYPE_NAMES[code] for code in sorted(NUMPY_DTYPES))
            raise CheckpointFormatError(f"{where}: dtype {entry.dtype_name} cannot be read (supported: {supported})")
        if not 0 <= entry.shard < self.num_shards:
            raise CheckpointFormatError(f"{where}: shard {entry.shard} of a checkpoint of {self.num_shards}")
        dtype = np.dtype(NUMPY_DTYPES[entry.dtype])
        count = int(np.prod(entry.shape, dtype=np.int64)) if entry.shape else 1
        if any(dim < 0 for dim in entry.shape) or entry.size != count * dtype.itemsize:
            raise CheckpointFormatError(
                f"{where}: {entry.size} bytes stored for a {entry.dtype_name} tensor of shape {list(entry.shape)}"
            )
        path = data_file(self.prefix, entry.shard, self.num_shards)
        with open(path, "rb") as file:
            file.seek(entry.offset)
            raw = file.read(entry.size)
        if len(raw) != entry.size:
            raise CheckpointFormatError(
                f"{path}: {name} needs bytes {entry.offset}..{entry.offset + entry.size}, the file ends before "
                "(truncated?)"
            )
        if verify and entry.crc32c is not None and crc32c(raw) != unmask_crc(entry.crc32c):
            raise CheckpointFormatError(f"{path}: checksum mismatch in {name}: the file is corrupt")
        array = np.frombuffer(raw, dtype=dtype).reshape(entry.shape)
        if entry.dtype == DT_BFLOAT16:
            array = (array.astype(np.uint32) << np.uint32(16)).view(np.float32)
        return array.astype(array.dtype.newbyteorder("="), copy=True)


# --------------------------------------------------------------------------------------------------------------------
# Finding the checkpoint a user names
# --------------------------------------------------------------------------------------------------------------------

_DATA_FILE = re.compile(r"^(?P<prefix>.+)\.data-\d{5}-of-\d{5}$")
_STEP = re.compile(r"-(\d+)$")
_STATE_LINE = re.compile(r'^\s*(model_checkpoint_path|all_model_checkpoint_paths)\s*:\s*"((?:[^"\\]|\\.)*)"\s*$')


def _is_prefix(path: str) -> bool:
    return os.path.isfile(f"{path}.index")


def prefixes_in(folder: str | os.PathLike) -> list[str]:
    """The checkpoint prefixes of `folder` (each `<prefix>.index`), newest first: by the global step ending their
    names (`model.ckpt-1000`) when every one has one, else by the index file's modification time."""
    found = [str(path)[: -len(".index")] for path in Path(folder).glob("*.index") if path.is_file()]
    steps = [_STEP.search(os.path.basename(prefix)) for prefix in found]
    if found and all(steps):
        order = sorted(zip(found, steps, strict=True), key=lambda item: int(item[1].group(1)), reverse=True)
        return [prefix for prefix, _ in order]
    return sorted(found, key=lambda prefix: os.stat(f"{prefix}.index").st_mtime_ns, reverse=True)


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def read_checkpoint_state(path: str | os.PathLike) -> tuple[str | None, list[str]]:
    """(`model_checkpoint_path`, `all_model_checkpoint_paths`) of a `checkpoint` state file (text protobuf)."""
    latest, every = None, []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        match = _STATE_LINE.match(line)
        if match is None:
            continue
        value = _unescape(match.group(2))
        if match.group(1) == "model_checkpoint_path":
            latest = value
        else:
            every.append(value)
    return latest, every


def _from_state_file(state_file: str) -> str:
    folder = os.path.dirname(os.path.abspath(state_file))
    latest, every = read_checkpoint_state(state_file)
    if latest is None:
        latest = every[-1] if every else None
    if latest is not None:
        named = latest if os.path.isabs(latest) else os.path.join(folder, latest)
        if _is_prefix(named):
            return named
        # Written on another machine (gs://..., another home folder): the prefix of the same name beside the file.
        beside = os.path.join(folder, os.path.basename(latest.rstrip("/")))
        if _is_prefix(beside):
            logger.info("%s names %s, not on this machine: reading %s beside it", state_file, latest, beside)
            return beside
    present = prefixes_in(folder)
    if not present:
        named = f"names {latest}, which does not exist" if latest else "names no checkpoint"
        raise MissingFileError(f"{state_file} {named}, and {folder} holds no checkpoint (no *.index file)")
    logger.warning(
        "%s %s: reading %s, the newest checkpoint in %s",
        state_file,
        f"names {latest}, which does not exist" if latest else "names no checkpoint",
        present[0],
        folder,
    )
    return present[0]


def find_checkpoint(path: str | os.PathLike) -> str:
    """The prefix of the checkpoint `path` names: a prefix, its `.index` or a data file, a `checkpoint` state file, a
    folder holding one (the state file's choice, else the newest prefix), or a TF-Hub module / SavedModel folder
    (`variables/variables.index`)."""
    path = os.path.expanduser(str(path))
    if _is_prefix(path):
        return path
    name = os.path.basename(path)
    if os.path.isfile(path):
        if name.endswith(".index"):
            return path[: -len(".index")]
        match = _DATA_FILE.match(path)
        if match:
            return match.group("prefix")
        if name == CHECKPOINT_STATE_FILE:
            return _from_state_file(path)
        raise CheckpointFormatError(
            f"{path}: not a TensorFlow checkpoint file (expected <prefix>.index, <prefix>.data-NNNNN-of-NNNNN or a "
            "`checkpoint` state file)"
        )
    if os.path.isdir(path):
        state_file = os.path.join(path, CHECKPOINT_STATE_FILE)
        if os.path.isfile(state_file):
            return _from_state_file(state_file)
        module_variables = os.path.join(path, "variables", "variables")
        if _is_prefix(module_variables):
            return module_variables
        present = prefixes_in(path)
        if present:
            if len(present) > 1:
                others = ", ".join(os.path.basename(prefix) for prefix in present[1:])
                logger.warning(
                    "%s holds several checkpoints: reading %s, the newest (also: %s)", path, present[0], others
                )
            return present[0]
        raise MissingFileError(f"{path} holds no TensorFlow checkpoint (no *.index file, no variables/variables.index)")
    raise MissingFileError(f"{path}: no such checkpoint (no {path}.index, no such file or folder)")


__all__ = [
    "CheckpointFormatError",
    "TFCheckpoint",
    "TensorEntry",
    "crc32c",
    "find_checkpoint",
    "mask_crc",
    "prefixes_in",
    "read_checkpoint_state",
    "read_table",
    "unmask_crc",
]
