"""Reading data files as UTF-8 text, with errors that name the file and the line.

Python's own error for a bad byte ("'utf-8' codec can't decode byte 0xe9 in position 48213") names neither the
file nor the line, so a corpus or task file with one Latin-1 line fails without saying where. Every reader of
`albert_hf.data` decodes through `read_utf8` instead.
"""

from __future__ import annotations

import os

from ..errors import DataError


def utf8_error(path: str | os.PathLike, line_number: int, error: UnicodeDecodeError) -> DataError:
    """The DataError for invalid UTF-8 at `line_number` of `path` (1-based)."""
    return DataError(
        f"{os.fspath(path)}:{line_number}: not valid UTF-8 ({error.reason}: byte "
        f"{error.object[error.start : error.start + 1]!r}); data files must be UTF-8 encoded."
    )


def read_utf8(path: str | os.PathLike, encoding: str = "utf-8") -> str:
    """The whole file as text (newlines as written); invalid UTF-8 raises an error naming the file and line.

    `encoding` may be "utf-8-sig" to drop a leading byte-order mark (MRPC's tsv files start with one).
    """
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line_number = data.count(b"\n", 0, error.start) + 1
        raise utf8_error(path, line_number, error) from None
