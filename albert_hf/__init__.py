"""albert_hf: ALBERT for the Hugging Face ecosystem.

Importing the package registers `AlbertConfig` (model_type "albert_hf") and every model class with transformers'
Auto classes, without touching transformers' own "albert" type.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from .configuration import PRESETS, SHARING_STRATEGIES, AlbertConfig
from .data.collator import DataCollatorForSOP
from .modeling import (
    ALBERT_AUTO_CLASSES,
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForPreTraining,
    AlbertForPreTrainingOutput,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertModel,
    AlbertPreTrainedModel,
)
from .tokenization import AlbertHFTokenizer
from .training.checkpoints import check_pretrained_source
from .training.lamb import Lamb, lamb_parameter_groups
from .training.schedules import get_albert_polynomial_decay_schedule
from .vocabulary import train_tokenizer

__version__ = "0.1.0"

_AUTO_FACTORIES = {
    "AutoModel": AutoModel,
    "AutoModelForPreTraining": AutoModelForPreTraining,
    "AutoModelForMaskedLM": AutoModelForMaskedLM,
    "AutoModelForSequenceClassification": AutoModelForSequenceClassification,
    "AutoModelForTokenClassification": AutoModelForTokenClassification,
    "AutoModelForQuestionAnswering": AutoModelForQuestionAnswering,
    "AutoModelForMultipleChoice": AutoModelForMultipleChoice,
}


def _register_auto_classes() -> None:
    AutoConfig.register(AlbertConfig.model_type, AlbertConfig, exist_ok=True)
    for auto_name, model_class in ALBERT_AUTO_CLASSES.items():
        _AUTO_FACTORIES[auto_name].register(AlbertConfig, model_class, exist_ok=True)
        # save_pretrained then copies modeling.py/configuration.py and writes `auto_map`, so the folder loads with
        # trust_remote_code=True where albert_hf is not installed.
        model_class.register_for_auto_class(auto_name)
    AlbertConfig.register_for_auto_class()
    # from_pretrained then names a damaged weights file or a missing folder (modeling.py, which also travels as remote
    # code, imports nothing of albert_hf to do it itself).
    AlbertPreTrainedModel.check_pretrained_source = check_pretrained_source
    # Folders saved with our config load our tokenizer; its class name (AlbertHFTokenizer) leaves transformers' own
    # "AlbertTokenizer" untouched for official checkpoints.
    AutoTokenizer.register(AlbertConfig, tokenizer_class=AlbertHFTokenizer, exist_ok=True)
    # save_pretrained copies tokenization.py and writes `auto_map`, so the tokenizer also loads without albert_hf.
    AlbertHFTokenizer.register_for_auto_class("AutoTokenizer")


_register_auto_classes()

# The Trainers (albert_hf/training/trainer.py, albert_hf/pretraining/trainer.py) import transformers' Trainer and
# accelerate, which loading a model or a tokenizer does not need: they are imported on first access, so
# `import albert_hf` stays as light as before.
_TRAINER_MODULES = {
    "AlbertModelCardMixin": "training.trainer",
    "AlbertPretrainingTrainer": "pretraining.trainer",
    "AlbertTrainer": "training.trainer",
    "FineTuningTrainer": "training.trainer",
    "PretrainingArguments": "pretraining.trainer",
    "ReliableTrainer": "training.trainer",
    "SquadTrainer": "tasks.squad",  # SQuAD's evaluation lives with its task
}
_TRAINER_NAMES = tuple(_TRAINER_MODULES)


def __getattr__(name: str):
    if name in _TRAINER_MODULES:
        import importlib

        return getattr(importlib.import_module(f".{_TRAINER_MODULES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AlbertConfig",
    "PRESETS",
    "SHARING_STRATEGIES",
    "AlbertPreTrainedModel",
    "AlbertModel",
    "AlbertForPreTraining",
    "AlbertForPreTrainingOutput",
    "AlbertForMaskedLM",
    "AlbertForSequenceClassification",
    "AlbertForTokenClassification",
    "AlbertForQuestionAnswering",
    "AlbertForMultipleChoice",
    "AlbertHFTokenizer",
    "train_tokenizer",
    "DataCollatorForSOP",
    "Lamb",
    "lamb_parameter_groups",
    "get_albert_polynomial_decay_schedule",
    *_TRAINER_NAMES,
    "SquadTrainer",
]
