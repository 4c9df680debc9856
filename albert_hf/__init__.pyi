# What type checkers and editors read for `albert_hf`: its public names, each from the module that defines it.
# At run time `albert_hf/__init__.py` loads each on first access (`_PUBLIC_MODULES`); tests/test_packaging.py checks
# that this stub and that table name the same names.
from .configuration import PRESETS as PRESETS
from .configuration import SHARING_STRATEGIES as SHARING_STRATEGIES
from .configuration import AlbertConfig as AlbertConfig
from .data.collator import DataCollatorForSOP as DataCollatorForSOP
from .formats import load_tokenizer as load_tokenizer
from .modeling import AlbertForMaskedLM as AlbertForMaskedLM
from .modeling import AlbertForMultipleChoice as AlbertForMultipleChoice
from .modeling import AlbertForPreTraining as AlbertForPreTraining
from .modeling import AlbertForPreTrainingOutput as AlbertForPreTrainingOutput
from .modeling import AlbertForQuestionAnswering as AlbertForQuestionAnswering
from .modeling import AlbertForSequenceClassification as AlbertForSequenceClassification
from .modeling import AlbertForTokenClassification as AlbertForTokenClassification
from .modeling import AlbertModel as AlbertModel
from .modeling import AlbertPreTrainedModel as AlbertPreTrainedModel
from .pretraining.trainer import AlbertPretrainingTrainer as AlbertPretrainingTrainer
from .pretraining.trainer import PretrainingArguments as PretrainingArguments
from .tokenization import AlbertHFTokenizer as AlbertHFTokenizer
from .training.callbacks import attach_reliability as attach_reliability
from .training.callbacks import resume_training as resume_training
from .training.callbacks import save_final_model as save_final_model
from .training.checkpoints import check_pretrained_source as check_pretrained_source
from .training.lamb import Lamb as Lamb
from .training.lamb import lamb_parameter_groups as lamb_parameter_groups
from .training.schedules import get_albert_polynomial_decay_schedule as get_albert_polynomial_decay_schedule
from .training.squad_trainer import SquadTrainer as SquadTrainer
from .training.trainer import AlbertTrainer as AlbertTrainer
from .vocabulary import train_tokenizer as train_tokenizer

__version__: str
__all__: list[str]
