"""Sharing albert_hf models on the Hugging Face Hub.

What a shared albert_hf checkpoint is, file by file (one commit, see `push_to_hub`). Stock by default: a model that
transformers' own ALBERT describes (sharing "all" or "none", no exits, a tokenizer transformers' format can express:
`albert_hf.formats.stock_format_problems`) is transformers' ALBERT, which every tool keyed on model_type "albert"
loads without albert_hf or `trust_remote_code`:

    config.json             transformers' AlbertConfig (model_type "albert"), no `auto_map`
    model.safetensors       the weights, in transformers' ALBERT key layout
    tokenizer.json          the tokenizer in transformers' format (`AlbertHFTokenizer.stock_tokenizer`; BERT's
                            WordPiece for the Chinese ALBERTs)
    tokenizer_config.json   its settings; its class, "AlbertHFTokenizer", resolves to albert_hf's exact tokenizer
                            where albert_hf is imported, to `TokenizersBackend` on tokenizer.json elsewhere
    spiece.model            the SentencePiece model, from which albert_hf rebuilds the exact tokenizer
    README.md               the model card rendered from `albert_hf/model_cards/template.md`

Any other model keeps albert_hf's format: config.json with model_type "albert_hf" and an `auto_map` naming every Auto
class, modeling.py and configuration.py (loaded by `trust_remote_code=True` where albert_hf is not installed),
spiece.model, tokenizer_config.json with an `auto_map` to tokenization.py, and the card.

Besides pushing, this module renders model cards (also for runs that Trainer pushes: `AlbertTrainer`'s
`create_model_card`, through `write_trainer_model_card` in albert_hf/training/trainer.py, calls `write_model_card`).
Conversion to and from stock transformers ALBERT is in albert_hf/convert.py, ONNX export in albert_hf/onnx_export.py.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import CommitInfo, CommitOperationAdd, EvalResult, HfApi, ModelCard, ModelCardData
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from transformers import PreTrainedTokenizerBase, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .configuration import AlbertConfig
from .data.sentences import script_language
from .data.word_segmentation import continuation_prefix
from .errors import UserError
from .formats import pair_with_tokenizer, stock_format_problems
from .modeling import ALBERT_AUTO_CLASSES, AlbertPreTrainedModel
from .output_files import MANIFEST_NAME, destination, write_file
from .tokenizer_fit import vocabulary_mismatch

logger = logging.getLogger(__name__)

# The card template is package data (read through importlib.resources), so a wheel install renders cards too.
DEFAULT_TEMPLATE = resources.files("albert_hf") / "model_cards" / "template.md"

# Files every albert_hf-format folder (a model stock ALBERT cannot describe) must hold to load with
# trust_remote_code=True where albert_hf is absent.
REMOTE_CODE_FILES = ("config.json", "modeling.py", "configuration.py")

# Hub pipeline tag of each head (what the Hub widget and `pipeline(model=repo_id)` use).
PIPELINE_TAGS = {
    "AlbertModel": "feature-extraction",
    "AlbertForPreTraining": "fill-mask",
    "AlbertForMaskedLM": "fill-mask",
    "AlbertForSequenceClassification": "text-classification",
    "AlbertForTokenClassification": "token-classification",
    "AlbertForQuestionAnswering": "question-answering",
    "AlbertForMultipleChoice": "multiple-choice",
}
AUTO_CLASS_OF = {model_class.__name__: auto_name for auto_name, model_class in ALBERT_AUTO_CLASSES.items()}

# Trainer metrics that describe speed or bookkeeping, not model quality: never reported as eval results.
_NON_QUALITY_METRICS = ("runtime", "samples_per_second", "steps_per_second", "samples", "epoch", "step")

SHARING_DESCRIPTIONS = {
    "all": "all parameters shared across layers (ALBERT): attention and feed-forward weights of a group are reused "
    "by every layer application of that group",
    "attention": "attention shared across layers, a separate feed-forward block per layer application",
    "ffn": "feed-forward shared across layers, a separate attention block per layer application",
    "none": "nothing shared (BERT-style): one group per layer",
}

CITATION = """@inproceedings{lan2020albert,
  title     = {{ALBERT}: A Lite {BERT} for Self-supervised Learning of Language Representations},
  author    = {Lan, Zhenzhong and Chen, Mingda and Goodman, Sebastian and Gimpel, Kevin and Sharma, Piyush and
               Soricut, Radu},
  booktitle = {International Conference on Learning Representations},
  year      = {2020},
  url       = {https://openreview.net/forum?id=H1eA7AEFvH}
}"""


# --------------------------------------------------------------------------------------------------------------------
# Model cards
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class CardInfo:
    """What a model card says beyond what the model and the run know.

    Args:
        base_model: checkpoint this one was fine-tuned from (Hub id or name), if any.
        dataset_id: Hub id of the training/evaluation dataset, e.g. "nyu-mll/glue".
        dataset_config: its configuration, e.g. "mrpc".
        dataset_name: human-readable name, e.g. "GLUE MRPC"; defaults to id + config.
        eval_split: split the reported metrics were measured on.
        task_name: human-readable task name for the results table, e.g. "Paraphrase detection".
        license: SPDX-style Hub license id.
        language: language codes of the training text; by default read off the tokenizer's vocabulary when its
            script names a language (Japanese, Korean, Chinese: `card_language`), else English.
        tags: extra Hub tags.
        description: a paragraph on what this model is; a generic one is written when empty.
    """

    base_model: str | None = None
    dataset_id: str | None = None
    dataset_config: str | None = None
    dataset_name: str | None = None
    eval_split: str = "validation"
    task_name: str | None = None
    license: str = "apache-2.0"
    language: list[str] | None = None
    tags: list[str] = field(default_factory=list)
    description: str | None = None

    @property
    def dataset_display_name(self) -> str | None:
        if self.dataset_name:
            return self.dataset_name
        if self.dataset_id:
            return " ".join(part for part in (self.dataset_id, self.dataset_config) if part)
        return None


def module_parameter_count(model: torch.nn.Module) -> int:
    """Distinct parameters of a built module (tied weights counted once, as `model.parameters()` yields them); for
    the count of a config without building the model, see `albert_hf.distributed.pretraining_parameter_count`."""
    return sum(parameter.numel() for parameter in model.parameters())


def quality_metrics(metrics: Mapping[str, Any], prefix: str = "eval_") -> dict[str, float]:
    """`{"eval_accuracy": 0.8, "eval_runtime": 3.1, ...}` -> `{"accuracy": 0.8}`: numeric quality metrics only."""
    result = {}
    for key, value in metrics.items():
        name = key.removeprefix(prefix) if key.startswith(prefix) else None
        if name is None or name.endswith(_NON_QUALITY_METRICS) or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            result[name] = float(value)
    return result


def latest_eval_metrics(log_history: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The most recent value of every `eval_*` quality metric in Trainer's `state.log_history`."""
    metrics: dict[str, float] = {}
    for entry in log_history:
        metrics.update(quality_metrics(entry))
    return metrics


def _innermost(wrapper: Any, attribute: str, kind: type) -> Any:
    """The object `wrapper` wraps under `attribute`, unwrapped all the way down (accelerate's `AcceleratedOptimizer`
    and `AcceleratedScheduler`, DeepSpeed's ZeRO optimizer hold the one that ran as `.optimizer` / `.scheduler`)."""
    while isinstance(getattr(wrapper, attribute, None), kind):
        wrapper = getattr(wrapper, attribute)
    return wrapper


def optimizer_recipe(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer that ran, read from the object itself (its class and parameter groups), not from the options
    that might have chosen it: pretraining's LAMB is built by its Trainer whatever `--optim` says."""
    optimizer = _innermost(optimizer, "optimizer", torch.optim.Optimizer)
    groups = optimizer.param_groups

    def values(key: str) -> str | None:
        found = list(dict.fromkeys(str(group[key]) for group in groups if key in group))
        return " / ".join(found) if found else None  # one value, or each parameter group's (e.g. no decay on biases)

    rows = {"optimizer": type(optimizer).__name__}
    # initial_lr: the peak rate, which a schedule's LambdaLR records before scaling `lr` step by step.
    rows["learning_rate"] = values("initial_lr") or values("lr")
    rows.update({key: values(key) for key in ("betas", "eps", "weight_decay")})
    return {key: value for key, value in rows.items() if value is not None}


def schedule_description(lr_scheduler: Any) -> str:
    """The learning-rate schedule that ran: transformers' schedules (and albert_hf's) are a `LambdaLR` over a
    function `_get_<name>_lr_lambda`, bound with its settings by `functools.partial`; any other scheduler by class."""
    lr_scheduler = _innermost(lr_scheduler, "scheduler", torch.optim.lr_scheduler.LRScheduler)
    factors = getattr(lr_scheduler, "lr_lambdas", None)
    if not factors:
        return type(lr_scheduler).__name__
    function = getattr(factors[0], "func", factors[0])
    name = getattr(function, "__name__", type(function).__name__).lstrip("_").removeprefix("get_")
    name = name.removesuffix("_lr_lambda").removesuffix("_lambda")
    settings = {key: value for key, value in getattr(factors[0], "keywords", {}).items() if key != "lr_init"}
    return f"{name} ({', '.join(f'{key}={value}' for key, value in settings.items())})" if settings else name


def training_recipe(
    training_args: TrainingArguments,
    optimizer: torch.optim.Optimizer | None = None,
    lr_scheduler: Any = None,
    steps_trained: int | None = None,
) -> dict[str, Any]:
    """The hyperparameters a reader needs to reproduce a Trainer run, in the order a paper would list them.

    `optimizer`, `lr_scheduler` and `steps_trained` (the Trainer's after `train()`) describe the run as trained and
    replace what the arguments say of them; without them the arguments' values are listed.
    """
    args = training_args
    if optimizer is not None:
        optimizer_rows = optimizer_recipe(optimizer)
    else:
        optimizer_rows = {
            "optimizer": str(getattr(args.optim, "value", args.optim)),
            "learning_rate": args.learning_rate,
            "weight_decay": args.weight_decay,
            "adam_betas": f"({args.adam_beta1}, {args.adam_beta2})",
            "adam_epsilon": args.adam_epsilon,
        }
    global_batch = args.per_device_train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size)
    recipe: dict[str, Any] = {
        "optimizer": optimizer_rows.pop("optimizer"),
        "learning_rate": optimizer_rows.pop("learning_rate"),
        "global_train_batch_size": global_batch,
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "num_processes": args.world_size,
    }
    if args.max_steps and args.max_steps > 0:
        recipe["max_steps"] = args.max_steps
    else:
        recipe["num_train_epochs"] = args.num_train_epochs
    if steps_trained is not None:
        recipe["steps_trained"] = steps_trained
    if lr_scheduler is not None:
        recipe["lr_schedule"] = schedule_description(lr_scheduler)
    else:
        recipe["warmup_steps"] = args.warmup_steps
        recipe["lr_scheduler_type"] = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))
    recipe.update(optimizer_rows)  # weight decay, betas, epsilon
    recipe["max_grad_norm"] = args.max_grad_norm
    recipe["precision"] = "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32"
    recipe["seed"] = args.seed
    return recipe


def eval_results_for_card(metrics: Mapping[str, float], info: CardInfo, pipeline_tag: str) -> list[EvalResult]:
    """One `EvalResult` per metric (they become the card's `model-index`); none without a Hub dataset to name (the
    results of a user's own files are in the card's text only)."""
    if not metrics or not info.dataset_id:
        return []
    return [
        EvalResult(
            task_type=pipeline_tag,
            task_name=info.task_name,
            dataset_type=info.dataset_id,
            dataset_name=info.dataset_display_name,
            dataset_config=info.dataset_config,
            dataset_split=info.eval_split,
            metric_type=name,
            metric_name=name,
            metric_value=round(value, 4),
        )
        for name, value in sorted(metrics.items())
    ]


def is_hub_repo_id(name: str) -> bool:
    """Whether `name` names a Hub repository (`albert/albert-base-v2`, `nyu-mll/glue`), not a folder of this machine:
    a card's `base_model` and `datasets` must be Hub ids, or the Hub links them to nothing (or to someone else's)."""
    if Path(name).expanduser().exists():
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def on_the_hub(info: CardInfo) -> CardInfo:
    """`info` with a dataset that is not a Hub id (a local dataset folder) kept as a name, its folder's alone, rather
    than as the card's `datasets` metadata."""
    if info.dataset_id is None or is_hub_repo_id(info.dataset_id):
        return info
    local = Path(info.dataset_id).name
    return replace(info, dataset_id=None, dataset_config=None, dataset_name=info.dataset_name or local)


def _architecture_rows(model: AlbertPreTrainedModel, wordpiece: bool = False) -> list[tuple[str, str]]:
    config: AlbertConfig = model.config
    backbone = getattr(model, model.base_model_prefix, model)
    return [
        ("Head", f"`{type(model).__name__}`"),
        ("Parameters (whole model)", f"{module_parameter_count(model):,}"),
        ("Parameters (AlbertModel backbone)", f"{module_parameter_count(backbone):,}"),
        ("Layers x inner layers", f"{config.num_hidden_layers} x {config.inner_group_num}"),
        ("Hidden size / embedding size", f"{config.hidden_size} / {config.embedding_size}"),
        ("Attention heads", str(config.num_attention_heads)),
        ("Feed-forward size", str(config.intermediate_size)),
        ("Parameter groups", str(config.num_hidden_groups)),
        ("Cross-layer sharing", f"`{config.sharing}`: {SHARING_DESCRIPTIONS[config.sharing]}"),
        ("Vocabulary", f"{config.vocab_size:,} {'WordPiece tokens' if wordpiece else 'SentencePiece pieces'}"),
        ("Max sequence length", str(config.max_position_embeddings)),
    ]


def _normalization_rows(tokenizer: PreTrainedTokenizerBase | None) -> list[tuple[str, str]]:
    if tokenizer is not None and continuation_prefix(tokenizer) is not None:
        case = "lowercased, accents stripped" if getattr(tokenizer, "do_lower_case", True) else "case kept"
        return [("Tokenizer", f"BERT WordPiece (`{type(tokenizer).__name__}`), {case}")]
    if tokenizer is None or not hasattr(tokenizer, "keep_accents"):
        return []
    case = "lowercased" if getattr(tokenizer, "do_lower_case", True) else "case kept"
    accents = "accents kept" if tokenizer.keep_accents else "accents stripped (NFKD, combining characters dropped)"
    rows = [("Tokenizer normalization", f"{case}, {accents}")]
    segmenter = getattr(tokenizer, "word_segmenter", None)
    if segmenter is not None:  # a word-bounded vocabulary: its users need the segmenter to load it
        from .tokenization import WORD_SEGMENTERS

        spec = WORD_SEGMENTERS[segmenter]
        rows.append(
            (
                "Word segmenter",
                f"pieces stop at the words of {spec.label} ({tokenizer.word_segmenter_dictionary}); the tokenizer "
                f"needs it: `pip install {' '.join(spec.distributions)}`",
            )
        )
    return rows


def card_language(info: CardInfo, tokenizer: PreTrainedTokenizerBase | None) -> list[str]:
    """The card's language codes: those of `info` when given, else the language the vocabulary's script names (a
    Japanese vocabulary is mostly kana and kanji), else English, the language of every default corpus here."""
    if info.language:
        return list(info.language)
    if tokenizer is not None:
        pieces = [piece.replace("\u2581", "") for piece in tokenizer.get_vocab()]
        language = script_language([piece for piece in pieces if piece])
        if language is not None:
            return [language]
    return ["en"]


def render_model_card(
    model: AlbertPreTrainedModel,
    *,
    model_name: str,
    info: CardInfo | None = None,
    eval_metrics: Mapping[str, float] | None = None,
    training_args: TrainingArguments | None = None,
    files: Iterable[str] = (),
    template: str | os.PathLike | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    recipe: Mapping[str, Any] | None = None,
) -> ModelCard:
    """Fill `albert_hf/model_cards/template.md` for `model`: YAML metadata (with `model-index` when there are eval
    results), architecture, how to load it, the training recipe, the results, the files of the repository, the citation.

    Args:
        model: the albert_hf model being shared.
        model_name: repository id or name shown as the title and in `model-index`.
        info: dataset, base model, license, language, tags, description.
        eval_metrics: quality metrics by name (`{"accuracy": 0.87}`); see `quality_metrics`.
        training_args: the run's TrainingArguments, for the training recipe section.
        recipe: the training recipe as trained (`training_recipe` with the run's optimizer and schedule); by default
            the one `training_args` give.
        files: the files the repository holds, listed in the card.
        template: another Jinja2 template with the same variables.
        tokenizer: the model's tokenizer, whose normalization the card states (a Japanese vocabulary keeps accents:
            stripping them would turn が into か).
    """
    info = on_the_hub(info or CardInfo())
    if recipe is None and training_args is not None:
        recipe = training_recipe(training_args)
    hub_base = info.base_model if info.base_model and is_hub_repo_id(info.base_model) else None
    # A local start is named by its folder alone: the card is shared, the path of this machine means nothing there.
    local_base = Path(info.base_model).name if info.base_model and hub_base is None else None
    # The nearest albert_hf class among the model's own and its bases: a user's subclass (a forked script's head), or
    # the subclass FSDP2 swaps in (FSDP<class>), is carded as the albert_hf class it extends.
    class_name = next((cls.__name__ for cls in type(model).__mro__ if cls.__name__ in PIPELINE_TAGS), None)
    if class_name is None:
        raise TypeError(f"render_model_card takes an albert_hf model, got {type(model).__name__}.")
    pipeline_tag = PIPELINE_TAGS[class_name]
    eval_results = eval_results_for_card(eval_metrics or {}, info, pipeline_tag)
    # The card describes the folder the model is saved as: transformers' own ALBERT, or albert_hf's with its code.
    custom_reasons = stock_format_problems(model, tokenizer)
    wordpiece = tokenizer is not None and continuation_prefix(tokenizer) is not None
    card_data = ModelCardData(
        model_name=model_name,
        base_model=hub_base,
        datasets=[info.dataset_id] if info.dataset_id else None,
        language=card_language(info, tokenizer),
        library_name="transformers",
        license=info.license,
        pipeline_tag=pipeline_tag,
        tags=["albert", "albert_hf", *(["custom_code"] if custom_reasons else []), *info.tags],
        metrics=sorted(eval_metrics) if eval_metrics else None,
        eval_results=eval_results or None,
    )
    template_file = Path(template) if template is not None else DEFAULT_TEMPLATE
    if not template_file.is_file():
        raise FileNotFoundError(
            f"Model card template {template_file} not found: pass template=<path to a card template>."
        )
    return ModelCard.from_template(
        card_data,
        template_str=template_file.read_text(encoding="utf-8"),
        model_name=model_name,
        description=info.description,
        class_name=class_name,
        auto_class=AUTO_CLASS_OF[class_name],
        architecture=_architecture_rows(model, wordpiece) + _normalization_rows(tokenizer),
        sharing=model.config.sharing,
        stock=not custom_reasons,
        custom_reasons=custom_reasons,
        tokenizer_kind="wordpiece" if wordpiece else "sentencepiece" if tokenizer is not None else None,
        max_position_embeddings=model.config.max_position_embeddings,
        base_model=hub_base,
        local_base_model=local_base,
        dataset=info.dataset_display_name,
        eval_split=info.eval_split,
        eval_metrics=sorted((eval_metrics or {}).items()),
        recipe=list(recipe.items()) if recipe is not None else [],
        files=sorted(files),
        citation=CITATION,
    )


def write_model_card(output_dir: str | os.PathLike, model: AlbertPreTrainedModel, **card_kwargs: Any) -> Path:
    """Render the model card (see `render_model_card`) into `output_dir/README.md`; lists the folder's files.
    Returns the path written: written through albert_hf's writer (`albert_hf.output_files`), the card replaces only a
    README.md that a job wrote, and goes beside a user's (`README.albert_hf.md`).

    `model_name` defaults to the folder's name.
    """
    output_dir = Path(output_dir)
    card_kwargs.setdefault("model_name", output_dir.resolve().name)
    card_kwargs.setdefault("files", uploaded_files(output_dir) | {destination(output_dir / "README.md").name})
    return write_file(output_dir / "README.md", str(render_model_card(model, **card_kwargs)))


# --------------------------------------------------------------------------------------------------------------------
# Saving and pushing
# --------------------------------------------------------------------------------------------------------------------


# What transformers' Trainer leaves out of an upload of its output folder (`Trainer.push_to_hub`): private files such
# as the job's `_albert_hf.lock`, and the checkpoints. The card lists what a push of the folder sends.
UPLOAD_IGNORE_PATTERNS = ("_*", f"{PREFIX_CHECKPOINT_DIR}-*")


def _relative_files(folder: Path) -> set[str]:
    """The files under `folder`, but the record of the files albert_hf wrote there (`output_files.MANIFEST_NAME`)."""
    return {
        path.relative_to(folder).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and path.name != MANIFEST_NAME
    }


def uploaded_files(folder: Path) -> set[str]:
    """The files of `folder` that an upload of it sends (all but `UPLOAD_IGNORE_PATTERNS`)."""
    return {name for name in _relative_files(folder) if not any(fnmatch(name, p) for p in UPLOAD_IGNORE_PATTERNS)}


def check_tokenizer_fits(model: AlbertPreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Refuse a tokenizer whose ids the model cannot embed (a different vocabulary), naming both sizes; the rule is
    `albert_hf.tokenizer_fit.vocabulary_mismatch` (a padded embedding matrix is allowed)."""
    message = vocabulary_mismatch(tokenizer, model.config.vocab_size, "the model")
    if message is not None:
        raise UserError(message)


def save_for_hub(
    model: AlbertPreTrainedModel,
    folder: str | os.PathLike,
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    model_name: str | None = None,
    **card_kwargs: Any,
) -> list[str]:
    """Write everything a Hub repository of `model` holds into `folder`; return the files, relative and sorted.

    Model and tokenizer in transformers' own format where stock ALBERT describes them
    (`albert_hf.formats.stock_format_problems`), else in albert_hf's (config with `auto_map`, remote code), and the
    model card (last, so it lists every file). Raises if an albert_hf-format model's code did not travel (albert_hf's
    Auto registration missing).
    """
    folder = Path(folder)
    if tokenizer is not None:
        check_tokenizer_fits(model, tokenizer)
        pair_with_tokenizer(model, tokenizer)  # a tokenizer that needs code makes the model's folder albert_hf's
    model.save_pretrained(folder)
    missing = [name for name in REMOTE_CODE_FILES if not (folder / name).is_file()]
    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") != "albert" and (missing or "auto_map" not in config):
        raise RuntimeError(
            f"{folder} lacks {missing or 'an auto_map in config.json'}: the model would not load without albert_hf. "
            "Its class must be registered for the Auto classes (`import albert_hf` does it)."
        )
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)  # beside an albert_hf-format model, with its code (tokenization.py)
    card_kwargs.setdefault("tokenizer", tokenizer)  # what the card says of the tokenizer and of the folder's format
    write_model_card(folder, model, model_name=model_name or folder.resolve().name, **card_kwargs)
    return sorted(_relative_files(folder))


def push_to_hub(
    model: AlbertPreTrainedModel,
    repo_id: str,
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    commit_message: str = "Upload albert_hf model",
    private: bool | None = None,
    token: str | bool | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    **card_kwargs: Any,
) -> CommitInfo:
    """Upload model, tokenizer (stock or with their code: `save_for_hub`) and a generated model card to `repo_id` in one
    commit.

    Unlike `model.push_to_hub` (transformers' generic card, a separate commit for the tokenizer), the repository is
    complete and consistent after a single commit. `card_kwargs` go to `render_model_card` (`info`, `eval_metrics`,
    `training_args`).
    """
    api = HfApi()
    repo_id = api.create_repo(repo_id, private=private, token=token, exist_ok=True).repo_id
    if revision is not None and not revision.startswith("refs/pr"):
        api.create_branch(repo_id=repo_id, branch=revision, token=token, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        files = save_for_hub(model, folder, tokenizer=tokenizer, model_name=repo_id, **card_kwargs)
        operations = [
            CommitOperationAdd(path_in_repo=name, path_or_fileobj=os.path.join(folder, name)) for name in files
        ]
        logger.info("Uploading %d files to %s: %s", len(files), repo_id, ", ".join(files))
        return api.create_commit(
            repo_id=repo_id,
            operations=operations,
            commit_message=commit_message,
            token=token,
            revision=revision,
            create_pr=create_pr,
        )


__all__ = [
    "CardInfo",
    "latest_eval_metrics",
    "push_to_hub",
    "quality_metrics",
    "render_model_card",
    "save_for_hub",
    "training_recipe",
    "write_model_card",
]
