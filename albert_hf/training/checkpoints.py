"""Weights-file checks: whether a checkpoint's weights can be loaded, with every failure naming the file.

transformers reports a truncated safetensors file as "incomplete metadata, file not fully covered" without saying
which file, and a missing local folder as an invalid Hub repository id. Two callers check first instead:
`from_pretrained` of every albert_hf model (through `check_pretrained_source`, which `import albert_hf` installs on
`AlbertPreTrainedModel`), and resumption from a Trainer checkpoint (`training/reliability.py`). Only headers are read,
never tensor data, so a check costs milliseconds whatever the model's size.
"""

from __future__ import annotations

import json
import os
import re
import zipfile

import huggingface_hub.constants
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..errors import MissingFileError, UnreadableFileError

# Weights files Trainer writes or reads in a checkpoint folder, best first.
WEIGHTS_FILE_NAMES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "adapter_model.safetensors",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.bin",
)
ADAPTER_FILE_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
# How the names of weights files end (whole files, shards, and shard indexes).
WEIGHTS_FILE_SUFFIXES = (".safetensors", ".bin", ".index.json")
# Files `torch.save` writes (a zip archive since torch 1.6), e.g. optimizer.pt, rng_state.pth, pytorch_model.bin.
TORCH_FILE_SUFFIXES = (".pt", ".pth", ".bin")
# Trainer's checkpoint folders, `checkpoint-<global step>` (the name its `get_last_checkpoint` matches too).
CHECKPOINT_NAME = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")


def weights_file_problem(path: str) -> str | None:
    """Why a weights file cannot be loaded (naming it), or None. Reads headers only, never tensor data.

    For a sharded checkpoint's `*.index.json`, every shard it lists is checked.
    """
    if os.path.getsize(path) == 0:
        return f"{path} is empty"
    if path.endswith(".index.json"):
        return _sharded_weights_problem(path)
    if path.endswith(".safetensors"):
        from safetensors import safe_open

        try:
            # Parsing the header checks that the tensors it lists fit in the file: a truncated file fails here.
            with safe_open(path, framework="pt"):
                pass
        except Exception as error:  # noqa: BLE001 - any failure means the file cannot be loaded
            return f"{path} is corrupt or truncated ({error})"
    return None


def torch_file_problem(path: str) -> str | None:
    """Why a file written by `torch.save` cannot be loaded (naming it), or None.

    `torch.save` writes a zip archive whose directory sits at the end of the file, so a truncated file has none;
    `zipfile.is_zipfile` reads just that directory (torch would fail later with "PytorchStreamReader failed reading
    zip archive" and no file name).
    """
    if os.path.getsize(path) == 0:
        return f"{path} is empty"
    if not zipfile.is_zipfile(path):
        return f"{path} is truncated or not a file written by torch.save (no zip directory at its end)"
    return None


def _sharded_weights_problem(index_path: str) -> str | None:
    try:
        with open(index_path, encoding="utf-8") as handle:
            shards = sorted(set(json.load(handle)["weight_map"].values()))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, AttributeError) as error:
        return f"{index_path} is not a readable weights index ({error!r})"
    folder = os.path.dirname(index_path)
    for shard in shards:
        path = os.path.join(folder, shard)
        if not os.path.isfile(path):
            return f"{path}, listed in {os.path.basename(index_path)}, is missing"
        problem = weights_file_problem(path)
        if problem is not None:
            return problem
    return None


def check_pretrained_source(
    pretrained_model_name_or_path: str | os.PathLike, option: str | None = None, needs_weights: bool = True
) -> None:
    """Raise an error naming the file or folder when `from_pretrained(pretrained_model_name_or_path)` cannot load it;
    `option` (e.g. "--model_name_or_path") names where the user gave it.

    A local folder: every weights file in it must be readable (`.bin` files are only ever loaded by transformers with
    `weights_only=True`, so reading them cannot run code; an empty one is refused here), and unless `needs_weights`
    is False (a tokenizer's folder) there must be one: transformers' own error for a folder without weights is an
    `OSError` listing file names it looked for, not what the folder holds. A local file (a tokenizer's
    spiece.model) is left to its reader. Anything else must be a Hub repository id: a value that looks like a path
    (`looks_like_local_path`), or any value while the Hub is offline, is a missing file or folder
    (`MissingFileError`), which is what the user meant, rather than transformers' "invalid repository id".
    """
    path = os.fspath(pretrained_model_name_or_path)
    named = f"{option} {path}" if option else path
    expanded = os.path.expanduser(path)
    if os.path.isdir(expanded):
        for name in sorted(os.listdir(expanded)):
            if name.endswith(WEIGHTS_FILE_SUFFIXES):
                problem = weights_file_problem(os.path.join(expanded, name))
                if problem is not None:
                    raise UnreadableFileError(f"Cannot load {named}: {problem}.")
        if needs_weights and not any(map(is_weights_file, os.listdir(expanded))):
            held = sorted(os.listdir(expanded))
            shown = ", ".join(held[:8]) + (f" and {len(held) - 8} more" if len(held) > 8 else "") or "nothing"
            raise MissingFileError(
                f"Cannot load {named}: the folder holds no weights file (model.safetensors, pytorch_model.bin or "
                f"their shards), only {shown}. Its save did not finish, or it holds a config or tokenizer alone: "
                "pass the folder of a saved model."
            )
        return
    if os.path.isfile(expanded):
        return
    if path.startswith((".", "/", "~")):
        raise MissingFileError(f"{named}: no such folder.")
    if looks_like_local_path(path):
        raise MissingFileError(f"{named}: no such folder, nor a Hub repository id (those read 'name' or 'org/name').")
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        raise MissingFileError(
            f"{named}: no such folder here, and the Hub is offline (HF_HUB_OFFLINE), so it cannot be a Hub id either."
        )


def is_weights_file(name: str) -> bool:
    """Whether a file named `name` holds a model's weights (whole, a shard, or a shard index); `training_args.bin`,
    the only other `.bin` Trainer writes beside a model, does not."""
    return name.endswith(WEIGHTS_FILE_SUFFIXES) and name != "training_args.bin"


def non_finite_tensors(path: str) -> list[str]:
    """Names of the tensors of a weights file (`.safetensors`, or `.bin` loaded weights-only) holding a NaN or inf.

    Reads every tensor (memory-mapped), unlike the header checks above: asked once at the start of a job or an
    export, where a model that already diverged would otherwise train or export without a word."""
    import torch

    if path.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(path, framework="pt") as handle:
            return [name for name in handle.keys() if not _all_finite(handle.get_tensor(name))]
    try:
        # weights_only: a pickle that would run code is refused, never executed. mmap needs the zip format of
        # torch >= 1.6; older files are read whole.
        try:
            state_dict = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:
            state_dict = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - corrupt zip, refused pickle, ...: all mean "cannot load"
        raise UnreadableFileError(f"{path} cannot be loaded as plain weights: {error}") from None
    return [name for name, tensor in state_dict.items() if isinstance(tensor, torch.Tensor) and not _all_finite(tensor)]


def _all_finite(tensor) -> bool:
    import torch

    return not tensor.is_floating_point() or bool(torch.isfinite(tensor).all())


def check_finite_weights(source: str | os.PathLike, option: str | None = None) -> None:
    """Raise `UnreadableFileError` naming the file and the tensors when a local model folder's weights hold NaN or
    inf (a Hub id or a file is left alone: a Hub model is checked by its publisher, and a file is a tokenizer)."""
    folder = os.path.expanduser(os.fspath(source))
    if not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        if name.endswith((".safetensors", ".bin")) and is_weights_file(name):
            bad = non_finite_tensors(os.path.join(folder, name))
            if bad:
                shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
                named = f"{option} {source}" if option else os.fspath(source)
                raise UnreadableFileError(
                    f"Cannot use {named}: {os.path.join(folder, name)} holds NaN or inf in {len(bad)} tensor(s): "
                    f"{shown}. The run that saved it diverged; start from an earlier checkpoint."
                )


def looks_like_local_path(value: str) -> bool:
    """Whether `value` can only mean a local path: it starts with `.`, `/` or `~`, or is not a valid Hub repository
    id (`name` or `namespace/name`; a path with two separators, a backslash or spaces is none)."""
    if value.startswith((".", "/", "~")) or os.sep != "/" and os.sep in value:
        return True
    try:
        validate_repo_id(value)
    except HFValidationError:
        return True
    return False
