"""Every private name of transformers and torch albert_hf touches (albert_hf/training/transformers_internals.py),
checked against the installed libraries, failing with the version, the name and what albert_hf uses it for, and what
each one does for albert_hf tested (here, or where the test below names: Trainer's weights loading and save of given
weights in tests/test_trainer_public_ways.py, its checkpoint upload in tests/test_push_checkpoints.py, the scheduler
state's `_last_lr` in tests/test_reliability.py, DeepSpeed's `_hp_mapping` in tests/test_lamb_distributed.py).

A source scan checks the other half of the rule: no module of albert_hf but the adapter uses a private name of
transformers' Trainer.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import transformers
from transformers import Trainer

import albert_hf
from albert_hf.training import transformers_internals
from albert_hf.training.transformers_internals import INTERNAL_NAMES, InternalName, internal_name_problem

PACKAGE = Path(albert_hf.__file__).parent


def test_transformers_still_has_the_private_names():
    """One check over the registry: each name exists in the installed transformers and torch, with the parameters
    albert_hf passes; what each one does is tested below and where its entry says."""
    problems = [problem for entry in INTERNAL_NAMES if (problem := internal_name_problem(entry)) is not None]
    assert problems == [], problems


def test_a_missing_or_changed_name_is_reported_with_the_version_and_its_use(monkeypatch):
    missing = InternalName("Trainer._no_such_method", "override", "testing the report", "none")
    assert internal_name_problem(missing) == (
        f"transformers {transformers.__version__} no longer has Trainer._no_such_method, used for testing the report."
    )
    changed = InternalName("Trainer._save_checkpoint", "override", "atomic checkpoints", "none", ("model", "steps"))
    problem = internal_name_problem(changed)
    assert problem.startswith(
        f"transformers {transformers.__version__}: Trainer._save_checkpoint no longer takes steps"
    )
    assert "used for atomic checkpoints" in problem
    gone_global = InternalName("transformers.trainer.no_such_global", "module global", "x", "none")
    assert "no longer has transformers.trainer.no_such_global" in internal_name_problem(gone_global)
    gone_attribute = InternalName("Trainer._no_such_attribute", "attribute", "x", "none")
    assert "no longer has Trainer._no_such_attribute" in internal_name_problem(gone_attribute)


def test_every_override_of_a_private_trainer_method_is_registered():
    """A private Trainer method that any class of albert_hf (mixins included) overrides but the registry does not
    list would escape the checks above."""
    registered = {entry.attribute for entry in INTERNAL_NAMES}
    private_methods = {name for name in dir(Trainer) if name.startswith("_") and not name.startswith("__")}
    private_methods = {name for name in private_methods if callable(getattr(Trainer, name))}
    overridden = set()
    for info in pkgutil.walk_packages(albert_hf.__path__, "albert_hf."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                overridden |= {f"{cls.__qualname__}.{name}" for name in vars(cls) if name in private_methods}
    assert {name.rsplit(".", 1)[1] for name in overridden} <= registered, overridden


def _trainer_private_names() -> set[str]:
    """Private names Trainer defines (methods, class attributes, and attributes its methods set on self)."""
    names = {name for name in dir(Trainer) if name.startswith("_") and not name.startswith("__")}
    tree = ast.parse(inspect.getsource(Trainer))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                names.add(node.attr)
    return names


def test_no_module_but_the_adapter_uses_a_private_trainer_name():
    """Attribute accesses `x._name` and definitions `def _name` in albert_hf whose name is one of Trainer's private
    names (albert_hf's own private helpers have other names); the adapter is the one allowed place."""
    private = _trainer_private_names()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "transformers_internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "name", None)
            if isinstance(node, (ast.Attribute, ast.FunctionDef)) and name in private:
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert offenders == [], "private transformers names outside transformers_internals.py:\n" + "\n".join(offenders)


# Private names that are documented extension points of another library: what a subclass sets or defines to plug in
# (transformers' model-writing class attributes and `_init_weights`, as every modeling file of transformers sets them;
# a `Pipeline`'s `_sanitize_parameters` and `_forward`; an `evaluate.Metric`'s `_info` and `_compute`).
EXTENSION_POINTS = frozenset(
    {
        "_supports_sdpa",
        "_supports_flash_attn",
        "_supports_flex_attn",
        "_supports_attention_backend",
        "_no_split_modules",
        "_tied_weights_keys",
        "_keys_to_ignore_on_load_unexpected",
        "_keys_to_ignore_on_load_missing",
        "_init_weights",
        "_checkpoint_conversion_mapping",
        "_can_record_outputs",
        "_sanitize_parameters",
        "_forward",
        "_info",
        "_compute",
    }
)


def _library_private_names() -> set[str]:
    """The private names of the library classes albert_hf builds on: their attributes and methods, and what their
    methods set on `self`."""
    import datasets
    import torch
    from transformers import (
        PreTrainedConfig,
        PreTrainedModel,
        PreTrainedTokenizerBase,
        TokenizersBackend,
        TrainerCallback,
        TrainerState,
        TrainingArguments,
    )

    classes = (
        Trainer, TrainingArguments, TrainerCallback, TrainerState, PreTrainedModel, PreTrainedConfig,
        PreTrainedTokenizerBase, TokenizersBackend, torch.nn.Module, torch.Tensor, torch.optim.Optimizer,
        torch.optim.lr_scheduler.LRScheduler, torch.utils.data.DataLoader, datasets.Dataset, datasets.IterableDataset,
    )  # fmt: skip
    names = set()
    for cls in classes:
        names |= {name for name in dir(cls) if _is_private(name)}
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):  # defined in C
            continue
        for node in ast.walk(ast.parse(textwrap_dedent(source))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                names |= {node.attr} if _is_private(node.attr) else set()
    return names


def textwrap_dedent(source: str) -> str:
    import textwrap

    return textwrap.dedent(source)


def _is_private(name: str) -> bool:
    return re.fullmatch(r"_[A-Za-z]\w*", name) is not None


def _owned_names(tree: ast.AST) -> tuple[set[str], dict[ast.ClassDef, set[str]]]:
    """The names albert_hf defines in a module (functions, classes, assignments, attributes it stores), and per class
    what its own code sets on `self` or defines (`setattr(self, "_x", ...)`, `object.__setattr__` included)."""
    owned: set[str] = set()
    per_class: dict[ast.ClassDef, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            owned.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            owned.add(node.attr)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            owned |= {target.id for target in targets if isinstance(target, ast.Name)}
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        own = per_class.setdefault(cls, set())
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or isinstance(node, ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                if isinstance(node.args[0], ast.Name) and node.args[0].id == "self":
                    own.add(str(node.args[1].value))
        for statement in cls.body:
            if isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                own |= {target.id for target in targets if isinstance(target, ast.Name)}
    return owned, per_class


def _private_uses(tree: ast.AST, per_class: dict[ast.ClassDef, set[str]]) -> list[tuple[int, str, bool]]:
    """(line, name, on its own class's `self`) of every private name a module reads or writes on an object
    (`x._name`), passes as a keyword (`_name=`), names by string (`getattr(x, "_name")` and the like) or defines as a
    method of a class."""
    uses = []

    def visit(node: ast.AST, own: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            own = per_class[node]
            for statement in node.body:
                if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_private(statement.name):
                    uses.append((statement.lineno, statement.name, False))
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and node.attr in own
            uses.append((node.lineno, node.attr, on_self))
        elif isinstance(node, ast.keyword) and node.arg and _is_private(node.arg):
            uses.append((node.lineno, node.arg, False))
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            name = node.args[1].value
            if isinstance(name, str) and _is_private(name) and not name.startswith("__"):
                on_self = isinstance(node.args[0], ast.Name) and node.args[0].id == "self" and name in own
                uses.append((node.lineno, name, on_self))
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(tree, set())
    return uses


def test_no_private_name_of_another_library_is_used_unregistered():
    """The guard of the registry: every private name albert_hf reads, writes, calls, passes or overrides on an object
    it does not own is a registered one (`INTERNAL_NAMES`: the name or one of its parameters), or a documented
    extension point. A name albert_hf defines itself is its own, except where it is also a private name of a library
    class it builds on and is used on another object than the class's own `self` (a Dataset's `_fingerprint` beside a
    stream's own `_fingerprint`). A new private name cannot slip in without its entry, reason and test."""
    registered = {entry.attribute for entry in INTERNAL_NAMES}
    registered |= {name for entry in INTERNAL_NAMES for name in entry.parameters if _is_private(name)}
    library = _library_private_names()
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(PACKAGE.rglob("*.py"))}
    owned: set[str] = set()
    classes: dict[ast.ClassDef, set[str]] = {}
    for tree in trees.values():
        module_owned, per_class = _owned_names(tree)
        owned |= module_owned.union(*per_class.values())
        classes.update(per_class)
    unregistered = []
    for path, tree in trees.items():
        for line, name, on_own_self in _private_uses(tree, classes):
            foreign = name in library and not on_own_self or name not in owned
            if foreign and name not in registered and name not in EXTENSION_POINTS:
                unregistered.append(f"{path.relative_to(PACKAGE.parent)}:{line} {name}")
    assert unregistered == [], "private names of other libraries, not registered:\n" + "\n".join(unregistered)


def test_the_guard_sees_each_way_of_using_a_private_name(tmp_path):
    """The scan finds an attribute read, a write, a keyword, a name by string and a method override, and tells a
    class's own attribute from a library's attribute of the same name on another object."""
    source = textwrap_dedent(
        """
        class Stream:
            def __init__(self):
                self._fingerprint = None
            def fingerprint(self, dataset):
                return self._fingerprint, dataset._fingerprint
        def f(trainer, config):
            config._attn_implementation = "eager"
            trainer.save_model("x", _internal_call=True)
            getattr(trainer, "_load_rng_state")
        class Mine(Trainer):
            def _save(self, output_dir=None, state_dict=None):
                pass
        """
    )
    tree = ast.parse(source)
    _, per_class = _owned_names(tree)
    uses = {(name, on_self) for _, name, on_self in _private_uses(tree, per_class)}
    assert uses == {
        ("_fingerprint", True),
        ("_fingerprint", False),
        ("_attn_implementation", False),
        ("_internal_call", False),
        ("_load_rng_state", False),
        ("_save", False),
    }


def test_a_run_on_a_transformers_without_a_name_warns_naming_it(monkeypatch, caplog):
    missing = InternalName("Trainer._no_such_method", "override", "testing the warning", "none")
    monkeypatch.setattr(transformers_internals, "INTERNAL_NAMES", (*INTERNAL_NAMES, missing))
    transformers_internals.warn_about_missing_internal_names.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="albert_hf.training.transformers_internals"):
            problems = transformers_internals.warn_about_missing_internal_names()
    finally:
        transformers_internals.warn_about_missing_internal_names.cache_clear()
    assert problems == (internal_name_problem(missing),)
    assert "no longer has Trainer._no_such_method, used for testing the warning" in caplog.text


def test_save_model_with_internal_call_saves_without_pushing(tmp_path, fake_hub):
    """What `Trainer.save_model`'s `_internal_call` means to albert_hf (`save_model_unpushed`, the final save into a
    staging folder): Trainer saves and uploads nothing, where a user's call with --push_to_hub uploads the output folder
    at once. A release that pushed on an internal call too, or stopped pushing on a user's, fails here."""
    from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier

    api = fake_hub()
    args = tiny_arguments(tmp_path, max_steps=1, save_strategy="no", push_to_hub=True, hub_model_id="run")
    trainer = Trainer(model=tiny_classifier(), args=args, train_dataset=RandomSequences())
    transformers_internals.save_model_unpushed(trainer, str(tmp_path / "staging"))
    assert (tmp_path / "staging" / "model.safetensors").is_file()
    assert api.uploads == []
    trainer.save_model()
    assert [upload["folder"] for upload in api.uploads] == [tmp_path]


def test_trainer_restores_the_rng_states_of_a_checkpoint(tmp_path):
    """What the resumed stream relies on (`load_rng_state`: Trainer's `_load_rng_state`): the Python, NumPy and torch
    generators give again what they gave right after the checkpoint was written."""
    import random

    import numpy as np
    import torch
    from helpers.trainer import RandomSequences, tiny_arguments, tiny_classifier

    trainer = Trainer(
        model=tiny_classifier(), args=tiny_arguments(tmp_path, max_steps=2), train_dataset=RandomSequences()
    )
    trainer.train()  # checkpoint-2 holds the states of the end of step 2

    def draws():
        return random.random(), float(np.random.rand()), torch.rand(3).tolist()

    transformers_internals.load_rng_state(trainer, str(tmp_path / "checkpoint-2"))
    first = draws()
    assert draws() != first
    transformers_internals.load_rng_state(trainer, str(tmp_path / "checkpoint-2"))
    assert draws() == first
    saved = torch.load(tmp_path / "checkpoint-2" / "rng_state.pth", weights_only=False)
    torch.random.set_rng_state(saved["cpu"])
    assert torch.rand(3).tolist() == first[2]  # and they are the checkpoint's


def test_the_attention_implementation_read_is_the_one_set_publicly():
    """What modeling.py reads `config._attn_implementation` for: the kernel a forward pass runs is the one given when
    the model was made (`attn_implementation=`) or set since (`set_attn_implementation`), eager when the attention
    weights are asked for."""
    from helpers.trainer import tiny_classifier

    from albert_hf.modeling import attention_implementation

    model = tiny_classifier()
    model.set_attn_implementation("eager")
    assert attention_implementation(model.config, output_attentions=False) == "eager"
    model.set_attn_implementation("sdpa")
    assert attention_implementation(model.config, output_attentions=False) == "sdpa"
    assert attention_implementation(model.config, output_attentions=True) == "eager"


def test_only_registered_classes_write_an_auto_map(tmp_path):
    """What modeling.py reads `_auto_class` for: a class albert_hf registered (`import albert_hf`) saves the `auto_map`
    that lets the folder load with trust_remote_code, a class of one's own that nobody registered does not."""
    import json

    from helpers.trainer import tiny_classifier

    from albert_hf.modeling import AlbertForSequenceClassification

    # A model that needs albert_hf's code (a stock one is saved without code or auto_map: tests/test_stock_format.py).
    def config():
        needs_code = tiny_classifier().config
        needs_code.sharing = "attention"
        return needs_code

    AlbertForSequenceClassification(config()).save_pretrained(tmp_path / "registered")
    assert (
        "AutoModelForSequenceClassification"
        in json.loads((tmp_path / "registered" / "config.json").read_text())["auto_map"]
    )

    class Unregistered(AlbertForSequenceClassification):
        _auto_class = None

    Unregistered(config()).save_pretrained(tmp_path / "unregistered")
    saved = json.loads((tmp_path / "unregistered" / "config.json").read_text())
    assert "AutoModelForSequenceClassification" not in saved.get("auto_map", {})


def test_a_map_fingerprint_follows_its_input_s(tmp_path):
    """What `map_fingerprint` reads `Dataset._fingerprint` for: the same input and function give the same fingerprint
    (the cache is used), another input another one."""
    from datasets import Dataset

    from albert_hf.data.caching import map_fingerprint

    def double(rows):
        return {"x": [x * 2 for x in rows["x"]]}

    one, same, other = (Dataset.from_dict({"x": values}) for values in ([1, 2], [1, 2], [1, 3]))
    assert map_fingerprint(one, double) == map_fingerprint(same, double) != map_fingerprint(other, double)


def test_transformers_encodes_every_entry_point_through_the_backend_s_encode(tokenizer, spiece_model, monkeypatch):
    """What `TokenizersBackend._tokenizer` means to albert_hf: every public way transformers offers to encode
    (`ENTRY_POINTS` of tests/helpers/tokenization_reference.py) hands each text to `self._tokenizer.encode_batch` or
    `encode`, where albert_hf's backend routes it. A release that encoded some texts another way (another attribute,
    or a copy of the Rust tokenizer) fails here naming the entry point, before any id could change silently; that
    the ids are the original's through each of them is tests/test_tokenization.py's property test."""
    import sentencepiece as spm
    from helpers.tokenization_reference import ENTRY_POINTS, encode_through, overflow_windows

    from albert_hf.tokenization import _Backend

    reached: list[str] = []

    def record(item) -> None:
        for part in item if isinstance(item, (tuple, list)) else (item,):
            if isinstance(part, (tuple, list)):
                record(part)
            else:
                reached.append(part)

    encode_batch, encode = _Backend.encode_batch, _Backend.encode

    def recording_encode_batch(self, inputs, *args, **kwargs):
        record(list(inputs))
        return encode_batch(self, inputs, *args, **kwargs)

    def recording_encode(self, sequence, pair=None, *args, **kwargs):
        record([sequence] if pair is None else [sequence, pair])
        return encode(self, sequence, pair, *args, **kwargs)

    monkeypatch.setattr(_Backend, "encode_batch", recording_encode_batch)
    monkeypatch.setattr(_Backend, "encode", recording_encode)
    sp = spm.SentencePieceProcessor(model_file=str(spiece_model))
    texts = ["In 1990, 4,666 people came.", "naïve café x1,y", "A plain sentence"]
    pairs = ["Was it 2,000?", "Ünïcödé text", "Another one"]
    for way in ENTRY_POINTS:
        reached.clear()
        if way == "return_overflowing_tokens stride":
            given = [texts[0], " ".join(texts + pairs)]  # a question and a context cut into windows
            overflow_windows(tokenizer, sp, *given, 8, 3)
        else:
            given = texts
            encode_through(tokenizer, sp, way, texts, pairs)
        missing = [text for text in given if text not in reached and not set(text.split(" ")) <= set(reached)]
        assert reached and missing == [], (way, missing, reached[:6])


FULLY_SHARD_CLASS = """
import os, torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from albert_hf import AlbertConfig, AlbertForPreTraining
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT={port!r})
dist.init_process_group("gloo", rank=0, world_size=1)
config = AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=16, sharing="attention")  # saved with its code
model = AlbertForPreTraining(config)
fully_shard(model)
swapped = type(model)
assert swapped is not AlbertForPreTraining and issubclass(swapped, AlbertForPreTraining), swapped
assert swapped.__name__ == "FSDPAlbertForPreTraining", swapped.__name__
full = {{name: tensor.full_tensor() for name, tensor in model.state_dict().items()}}
model.save_pretrained({folder!r}, state_dict=full)
assert type(model) is swapped
dist.destroy_process_group()
print("ok")
"""


def test_fully_shard_swaps_the_class_and_the_save_sets_it_aside(tmp_path):
    """What FSDP2's class swap means to albert_hf: `fully_shard` gives the model a subclass `FSDP<name>` defined by
    torch, and `save_pretrained` (every save under FSDP2: checkpoints, final saves) sets the model's own class back for
    the save and the swapped one after, so the folder's remote code is albert_hf's modeling, not torch's FSDP source.
    One process, gloo."""
    import json
    import socket
    import sys

    from helpers import processes

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    script = FULLY_SHARD_CLASS.format(port=port, folder=str(tmp_path / "saved"))
    result = processes.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config["architectures"] == ["AlbertForPreTraining"]
    assert not any("fsdp" in path.name.lower() for path in (tmp_path / "saved").iterdir())
    assert (tmp_path / "saved" / "modeling.py").read_text() == (PACKAGE / "modeling.py").read_text()
