"""albert_hf: ALBERT for the Hugging Face ecosystem.

Importing the package registers `AlbertConfig` (model_type "albert_hf") and every model class with transformers'
Auto classes, without touching transformers' own "albert" type, and `AlbertHFTokenizer` by name: a folder saved in
transformers' own format (model_type "albert": every model stock ALBERT describes) names it as its tokenizer class,
so `AutoTokenizer` gives the exact tokenizer where albert_hf is imported and transformers' `TokenizersBackend` on
the folder's tokenizer.json elsewhere.

Every other public name is loaded from its module on first access (`albert_hf.Lamb` imports the LAMB optimizer, and
nothing else does), as transformers' lazy `__init__` does: a job imports the modules it uses and no more, so a
fine-tuning script never loads pretraining's optimizer or the vocabulary trainer. Type checkers and editors read the
names from `__init__.pyi`. One process defers even the registration: the `albert-hf` command itself (its console
script, or `python -m albert_hf.cli`), whose `--help` and `--version` must answer without loading torch and
transformers (seconds); `albert_hf.cli` registers the Auto classes before it runs a job, so a job sees the package as
every other program does.
"""

from __future__ import annotations

import importlib
import os
import re
import sys

__version__ = "0.1.0"

# Public name -> the module of the package that defines it, imported on the name's first access.
_PUBLIC_MODULES = {
    "PRESETS": "configuration",
    "SHARING_STRATEGIES": "configuration",
    "AlbertConfig": "configuration",
    "DataCollatorForSOP": "data.collator",
    "AlbertPreTrainedModel": "modeling",
    "AlbertModel": "modeling",
    "AlbertForPreTraining": "modeling",
    "AlbertForPreTrainingOutput": "modeling",
    "AlbertForMaskedLM": "modeling",
    "AlbertForSequenceClassification": "modeling",
    "AlbertForTokenClassification": "modeling",
    "AlbertForQuestionAnswering": "modeling",
    "AlbertForMultipleChoice": "modeling",
    "AlbertHFTokenizer": "tokenization",
    "load_tokenizer": "formats",
    "check_pretrained_source": "training.checkpoints",
    "Lamb": "training.lamb",
    "lamb_parameter_groups": "training.lamb",
    "get_albert_polynomial_decay_schedule": "training.schedules",
    "train_tokenizer": "vocabulary",
    # The Trainers, and the reliability plugin any Trainer attaches in one line, its resume function and its atomic
    # final save (they import transformers' Trainer and accelerate, which loading a model does not need).
    "AlbertPretrainingTrainer": "pretraining.trainer",
    "AlbertTrainer": "training.trainer",
    "PretrainingArguments": "pretraining.trainer",
    "SquadTrainer": "training.squad_trainer",  # SQuAD's evaluation: answers from all the windows of each question
    "attach_reliability": "training.callbacks",
    "resume_training": "training.callbacks",
    "save_final_model": "training.callbacks",
}

_AUTO_FACTORY_NAMES = (
    "AutoModel",
    "AutoModelForPreTraining",
    "AutoModelForMaskedLM",
    "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification",
    "AutoModelForQuestionAnswering",
    "AutoModelForMultipleChoice",
)


def _register_auto_classes() -> None:
    import transformers

    from .configuration import AlbertConfig
    from .modeling import ALBERT_AUTO_CLASSES, AlbertPreTrainedModel
    from .tokenization import AlbertHFTokenizer
    from .training.checkpoints import check_pretrained_source

    factories = {name: getattr(transformers, name) for name in _AUTO_FACTORY_NAMES}
    transformers.AutoConfig.register(AlbertConfig.model_type, AlbertConfig, exist_ok=True)
    for auto_name, model_class in ALBERT_AUTO_CLASSES.items():
        factories[auto_name].register(AlbertConfig, model_class, exist_ok=True)
        # save_pretrained then copies modeling.py/configuration.py and writes `auto_map`, so the folder loads with
        # trust_remote_code=True where albert_hf is not installed.
        model_class.register_for_auto_class(auto_name)
    AlbertConfig.register_for_auto_class()
    # from_pretrained then names a damaged weights file or a missing folder (modeling.py, which also travels as remote
    # code, imports nothing of albert_hf to do it itself).
    AlbertPreTrainedModel.check_pretrained_source = check_pretrained_source
    # Folders saved with our config load our tokenizer; its class name (AlbertHFTokenizer) leaves transformers' own
    # "AlbertTokenizer" untouched for official checkpoints.
    transformers.AutoTokenizer.register(AlbertConfig, tokenizer_class=AlbertHFTokenizer, exist_ok=True)
    # save_pretrained copies tokenization.py and writes `auto_map`, so the tokenizer also loads without albert_hf.
    AlbertHFTokenizer.register_for_auto_class("AutoTokenizer")


_registered = False


def _register() -> None:
    """Register the Auto classes, once (`import albert_hf` does it, except in the `albert-hf` process)."""
    global _registered
    if not _registered:
        _register_auto_classes()
        _registered = True


def __getattr__(name: str):
    if name not in _PUBLIC_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _register()  # a name of the package comes with the Auto classes registered, as after `import albert_hf`
    value = getattr(importlib.import_module(f".{_PUBLIC_MODULES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _started_as_the_command() -> bool:
    """Whether this process is the `albert-hf` command: its console script (`albert-hf`, `albert-hf.exe`,
    `albert-hf-script.py` on Windows) or `python -m albert_hf.cli`."""
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    if re.fullmatch(r"albert-hf(\.exe|-script\.pyw?)?", script):
        return True
    command_line = list(getattr(sys, "orig_argv", []))
    return any(
        item == "-m" and command_line[position + 1 : position + 2] == ["albert_hf.cli"]
        for position, item in enumerate(command_line)
    )


if not _started_as_the_command():
    _register()

__all__ = [*_PUBLIC_MODULES]
