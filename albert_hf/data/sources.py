"""The one loader of the package: rows from local files of any format, a saved dataset folder, or a Hub dataset.

Users have their data as a Hub dataset (Wikipedia, CC-100), a folder of parquet or jsonl shards, a csv export, or
plain text. Every command that reads rows (pretraining, tokenizer training, fine-tuning on a table) goes through
[`load_rows`], so each of those sources works everywhere and fails the same way: a `DataError` (a `UserError`)
naming the file, folder, dataset, split, column or row, and what to do.

    expand_data_files(["shards/", "extra/*.jsonl"])   -> the files, sorted within each folder and glob
    data_format(files)                                 -> "text" | "json" | "csv" | "parquet"
    load_rows(data_files=files)                        -> datasets.Dataset (IterableDataset with streaming=True)
    load_rows(dataset_name="wikimedia/wikipedia", dataset_config_name="20231101.ja", streaming=True)
    require_columns(rows, {"--text_column": "text"}, source)
    for text in TextRows(rows, "text", source): ...   # strings only; empty ones skipped and counted
"""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import datasets

from ..errors import DataError, MissingFileError
from .text_checks import RowPlaces, check_text

logger = logging.getLogger(__name__)

# The loader of `datasets` that reads each extension, and the options it needs for it.
FORMAT_OF_EXTENSION = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
}
LOADER_OPTIONS_OF_EXTENSION = {".tsv": {"delimiter": "\t"}}
# Compressed files are read through `datasets` (fsspec), which decompresses them by their extension.
COMPRESSION_EXTENSIONS = (".gz", ".bz2", ".xz", ".zst", ".lz4")
# What `Dataset.save_to_disk` / `DatasetDict.save_to_disk` write: such a folder is one source, not a folder of files.
SAVED_DATASET_MARKERS = ("dataset_dict.json", "state.json")
# A dataset name that starts like this is a local path: a Hub name is `name` or `owner/name`.
LOCAL_PATH_PREFIXES = ("/", "./", "../", "~", "." + os.sep, ".." + os.sep)
# Rows read per batch by `TextRows`: Arrow hands out a batch of texts far faster than the same texts row by row.
TEXT_BATCH_SIZE = 1000


# ----------------------------------------------------------------------------------------------------------------------
# files


def data_extension(path: str | os.PathLike) -> str:
    """The extension that says the format: `.jsonl` for `a.jsonl` and `a.jsonl.gz`; lower-case."""
    suffixes = [suffix.lower() for suffix in Path(path).suffixes]
    if suffixes and suffixes[-1] in COMPRESSION_EXTENSIONS:
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def is_saved_dataset(path: str | os.PathLike) -> bool:
    """Whether `path` is a folder written by `save_to_disk` (read with `load_from_disk`)."""
    return os.path.isdir(path) and any(os.path.isfile(os.path.join(path, name)) for name in SAVED_DATASET_MARKERS)


def _files_of_folder(folder: str) -> list[str]:
    """The files of known formats under `folder` (recursively), sorted; hidden files and folders left out."""
    if is_saved_dataset(folder):
        raise DataError(
            f"{folder} is a dataset saved with save_to_disk, not a folder of data files: pass it alone "
            "(as the only data file, or as --dataset_name)."
        )
    found = []
    for root, folders, names in os.walk(folder):
        folders[:] = [name for name in folders if not name.startswith(".")]
        found += [os.path.join(root, name) for name in names if not name.startswith(".")]
    data_files = sorted(path for path in found if data_extension(path) in FORMAT_OF_EXTENSION)
    if len(data_files) < len(found):  # a README, a licence, a checksum file: said, so that no shard goes unnoticed
        others = sorted(set(found) - set(data_files))
        logger.warning("%s: %d file(s) of other formats not read (%s)", folder, len(others), ", ".join(others[:5]))
    return data_files


def expand_data_files(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Files, folders (their files of known formats, sorted) and globs (`data/*.parquet`, sorted) -> the files.

    Each path keeps its place in the order given; a path that does not exist, a glob that matches nothing, or a
    folder with no data file is an error that names it.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for path in map(os.fspath, paths):
        if glob.has_magic(path):
            expanded = sorted(match for match in glob.glob(path, recursive=True) if os.path.isfile(match))
            if not expanded:
                raise DataError(f"{path}: the pattern matches no file.")
        elif os.path.isdir(path):
            expanded = _files_of_folder(path)
            if not expanded:
                known = ", ".join(sorted(FORMAT_OF_EXTENSION))
                raise DataError(f"{path}: the folder holds no data file (known extensions: {known}).")
        elif os.path.isfile(path):
            expanded = [path]
        else:
            raise MissingFileError(f"{path}: no such file or folder.")
        files += expanded
    if not files:
        raise DataError("no data files given.")
    return files


def data_format(files: Sequence[str | os.PathLike]) -> str:
    """The `datasets` loader for `files`, from their extensions: "text", "json", "csv" or "parquet".

    One format per source: `.json` and `.jsonl` are both "json", but `.csv` and `.tsv` differ in their delimiter and
    cannot be mixed. Unknown or mixed extensions are an error naming the files.
    """
    return _format_and_options(files)[0]


def _format_and_options(files: Sequence[str | os.PathLike]) -> tuple[str, dict]:
    by_extension: dict[str, list[str]] = {}
    for file in map(os.fspath, files):
        by_extension.setdefault(data_extension(file), []).append(file)
    unknown = [
        file for extension, names in by_extension.items() if extension not in FORMAT_OF_EXTENSION for file in names
    ]
    if unknown:
        known = ", ".join(sorted(FORMAT_OF_EXTENSION))
        raise DataError(f"unknown data file format: {', '.join(unknown)} (known extensions: {known}).")
    loaders = {
        (FORMAT_OF_EXTENSION[ext], tuple(LOADER_OPTIONS_OF_EXTENSION.get(ext, {}).items())) for ext in by_extension
    }
    if len(loaders) != 1:
        kinds = "; ".join(f"{ext}: {', '.join(names[:3])}" for ext, names in sorted(by_extension.items()))
        raise DataError(f"data files of different formats cannot be read together ({kinds}); give one format.")
    (loader, options), *_ = loaders
    return loader, dict(options)


# ----------------------------------------------------------------------------------------------------------------------
# rows


def load_rows(
    *,
    data_files: Sequence[str | os.PathLike] | str | None = None,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    split: str = "train",
    streaming: bool = False,
    data_dir: str | None = None,
) -> datasets.Dataset | datasets.IterableDataset:
    """The rows of one source: local `data_files`, or `dataset_name` (a saved folder, a local dataset folder, a Hub name).

    `data_files` (files, folders, globs: see [`expand_data_files`]) are the rows of one split, read by the `datasets`
    loader of their format; a single folder written by `save_to_disk` is read with `load_from_disk`. `dataset_name` is
    a `save_to_disk` folder, a local folder of data files in a layout `load_dataset` knows (e.g. `train.jsonl`,
    `data/train-*.parquet`), or a Hub dataset, with `dataset_config_name` and `data_dir`; `split` picks its split.

    With `streaming` the rows come as an `IterableDataset`, read while iterating (nothing is downloaded first); an
    empty stream is found by its reader (see [`TextRows`]). Without it, a source with no rows is an error.
    """
    if (data_files is None) == (dataset_name is None):
        raise DataError("give either data files or a dataset name (--dataset_name), not both or neither.")
    if data_files is not None:
        if dataset_config_name is not None or data_dir is not None:
            raise DataError(
                "a configuration (--dataset_config_name) or data_dir selects part of a dataset (--dataset_name); "
                "data files are read whole."
            )
        paths = [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
        if len(paths) == 1 and is_saved_dataset(paths[0]):
            return load_rows(dataset_name=os.fspath(paths[0]), split=split, streaming=streaming)
        source, splits = source_name(data_files=paths), _splits_of_files(paths, split, streaming)
    else:
        source = source_name(dataset_name=dataset_name, dataset_config_name=dataset_config_name)
        splits = _splits_of_dataset(source, dataset_name, dataset_config_name, data_dir, streaming)
    rows = pick_split(splits, split, source)
    if isinstance(rows, datasets.Dataset) and len(rows) == 0:
        raise DataError(f"{source}: the {split} split has no rows.")
    return rows


def _splits_of_files(paths: list, split: str, streaming: bool):
    """Data files as the one split `split`, read by the `datasets` loader of their format."""
    files, source = expand_data_files(paths), source_name(data_files=paths)
    loader, options = _format_and_options(files)
    if not any(os.path.getsize(file) for file in files):  # `datasets` fails on these without saying why
        raise DataError(f"{source}: the data files are empty.")
    return _call_datasets(
        source, datasets.load_dataset, loader, data_files={split: files}, streaming=streaming, **options
    )


def _splits_of_dataset(source: str, name: str, config: str | None, data_dir: str | None, streaming: bool):
    """The splits of a saved folder (`load_from_disk`), a local dataset folder or a Hub name (`load_dataset`)."""
    name = os.path.expanduser(name)
    if name.startswith(LOCAL_PATH_PREFIXES) and not os.path.exists(name):  # not a Hub name: no need to ask the Hub
        raise MissingFileError(f"{name}: no such dataset folder.")
    if not is_saved_dataset(name):
        return _call_datasets(source, datasets.load_dataset, name, config, data_dir=data_dir, streaming=streaming)
    if config is not None or data_dir is not None:
        raise DataError(f"{name} is a dataset saved with save_to_disk: it has no configurations or data_dir.")
    splits = _call_datasets(source, datasets.load_from_disk, name)
    return _to_iterable(splits) if streaming else splits


def source_name(
    *,
    data_files: Sequence[str | os.PathLike] | str | None = None,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
) -> str:
    """How messages name a source: the paths as given (files, folders, globs), or the dataset and its configuration."""
    if data_files is not None:
        paths = [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
        return ", ".join(map(os.fspath, paths))
    return dataset_name if dataset_config_name is None else f"{dataset_name} ({dataset_config_name})"


def row_places(data_files: Sequence[str | os.PathLike] | str | None, source: str) -> RowPlaces:
    """Where the rows `load_rows(data_files=...)` reads are in their files, for messages (`text_checks.RowPlaces`:
    `train.csv:7`); rows of a dataset (no files, or a folder written by `save_to_disk`) by their index."""
    if data_files is None:
        return RowPlaces(None, source)
    paths = [data_files] if isinstance(data_files, (str, os.PathLike)) else list(data_files)
    if len(paths) == 1 and is_saved_dataset(paths[0]):
        return RowPlaces(None, source)
    return RowPlaces(expand_data_files(paths), source)


def pick_split(splits, split: str, source: str):
    """`splits[split]` of a DatasetDict (a single Dataset is its own split); an unknown split names those there are."""
    if isinstance(splits, (datasets.Dataset, datasets.IterableDataset)):
        return splits
    if split not in splits:
        raise DataError(f"{source} has no split {split!r}; its splits are {sorted(splits)}.")
    return splits[split]


def _to_iterable(splits):
    if isinstance(splits, datasets.Dataset):
        return splits.to_iterable_dataset()
    return datasets.IterableDatasetDict({name: rows.to_iterable_dataset() for name, rows in splits.items()})


def _call_datasets(source: str, function, *args, **kwargs):
    """`function(*args, **kwargs)` of `datasets`, with what it says about the user's source turned into a UserError.

    Unreadable data (a bad json line, a csv row with extra fields) surfaces as `DatasetGenerationError` with the
    parser's error as its cause; an unknown name as `DatasetNotFoundError`; the Hub unreachable (offline) as a
    `ConnectionError`. Other errors are faults below us and keep their traceback.
    """
    try:
        return function(*args, **kwargs)
    except datasets.exceptions.DatasetGenerationError as error:
        cause = error.__cause__ or error
        raise DataError(f"{source}: the data cannot be read ({type(cause).__name__}: {cause}).") from error
    except (datasets.exceptions.DatasetNotFoundError, FileNotFoundError) as error:
        raise DataError(f"{source}: not found ({error}). Check the name or path, or pass data files.") from error
    except ValueError as error:
        if "corresponds to no data" not in str(error):  # `datasets`' word for a split without rows (a csv header)
            raise
        raise DataError(f"{source}: no rows (the files hold no data, a csv only its header).") from error
    except ConnectionError as error:
        raise DataError(
            f"{source}: the dataset is not cached here and the Hub cannot be reached ({error}). Download it where "
            "the Hub can be reached (it is then cached), or pass local data files."
        ) from error


# ----------------------------------------------------------------------------------------------------------------------
# columns and texts


def column_names(rows: datasets.Dataset | datasets.IterableDataset) -> list[str]:
    """The columns of `rows`; a stream whose features are not known yet is asked for its first row."""
    if rows.column_names is not None:
        return list(rows.column_names)
    first = next(iter(rows), None)
    return list(first) if first is not None else []


def require_columns(rows: datasets.Dataset | datasets.IterableDataset, columns: Mapping[str, str], source: str) -> None:
    """Check that every column asked for exists: `{"--text_column": "text"}` maps the option to the column it names.

    The error names the option, the missing column, and the columns there are.
    """
    present = column_names(rows)
    for option, column in columns.items():
        if column not in present:
            raise DataError(
                f"{source} has no column {column!r} ({option}); its columns are {present}. Pass {option} with one."
            )


class TextRows:
    """The texts of `column` of `rows`, checked by the reader contract (`albert_hf.data.text_checks`): a row that is
    None, not a string or holds a NUL byte is an error naming its file and line (`places`, a `RowPlaces` of the files
    the rows were read from; its index in the dataset without one).

    An empty (or whitespace-only) text carries nothing to learn from, and a table export often has some: it is
    skipped, counted in `empty`, and the count is logged once the rows are first read. A source with no text at all is
    an error. Iterating again reads the rows again (a stream is streamed again); the counts are those of the last pass.
    """

    def __init__(
        self,
        rows: datasets.Dataset | datasets.IterableDataset,
        column: str,
        source: str,
        option: str = "--text_column",
        places: RowPlaces | None = None,
    ):
        require_columns(rows, {option: column}, source)
        self.rows, self.column, self.source = rows, column, source
        self.places = places or RowPlaces(None, source)  # where a row is, for messages: its file and line
        self.read = self.empty = 0
        self._empty_reported = False

    def __iter__(self) -> Iterator[str]:
        self.read = self.empty = 0
        for batch in self.rows.select_columns([self.column]).iter(batch_size=TEXT_BATCH_SIZE):
            for text in batch[self.column]:
                self._check(text)
                self.read += 1
                if text.strip():
                    yield text
                else:
                    self.empty += 1
        if self.read == self.empty:
            raise DataError(f"{self.source}: no text in column {self.column!r} ({self.read} rows, all empty).")
        if self.empty and not self._empty_reported:  # once: a reader may pass over the rows more than once
            self._empty_reported = True
            logger.warning(
                "%s: skipped %d empty texts of %d rows (column %r).", self.source, self.empty, self.read, self.column
            )

    def _check(self, text) -> None:
        """A text must be a string without NUL bytes (`text_checks.check_text`; an empty one is skipped); the error
        names the row (`self.read` rows came before it) by its file and line."""
        if isinstance(text, str) and "\x00" not in text:
            return
        check_text(text, self.places.where(self.read), f"column {self.column!r}", required=False)


def _short(value, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters: enough to recognise a value without printing a whole document."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = [
    "MissingFileError",
    "DataError",
    "TextRows",
    "column_names",
    "data_format",
    "expand_data_files",
    "is_saved_dataset",
    "load_rows",
    "pick_split",
    "require_columns",
    "row_places",
    "source_name",
]
