"""Stock by default: a model that transformers' own ALBERT describes is saved as transformers' ALBERT, by every job,
`save_pretrained` and `push_to_hub`; one that needs albert_hf's code keeps model_type "albert_hf", and the job says so.
`ner`, `classify` and `squad` also run on a Chinese ALBERT whose tokenizer is BERT's WordPiece (`helpers.wordpiece`;
the WordPiece loader and masking: tests/test_wordpiece.py).

The reference is transformers itself, in a process where albert_hf cannot be imported (`helpers.stock`): its Auto
classes load each job's output folder without `trust_remote_code`, and its outputs on the same texts must be those of
albert_hf's classes and exact tokenizer in this process. The stock tokenizer files are checked against
`AlbertHFTokenizer` (the original tokenization exactly: tests/test_tokenization.py) on generated text: they may differ
only on the texts where the exact tokenizer runs a Python step (the three rules `stock_pipeline` lists).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from helpers.data import FIXTURES, SPIECE_MODEL
from helpers.hub import TINY, tiny_config
from helpers.stock import albert_hf_outputs, load_without_albert_hf
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES, TINY_TWO_LAYER_OVERRIDES
from helpers.tokenization_reference import generated_texts
from helpers.wordpiece import chinese_paragraphs, train_chinese_wordpiece, wordpiece_job_argv, wordpiece_model_folder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import albert_hf
from albert_hf.cli import main as cli_main
from albert_hf.formats import pair_with_tokenizer, save_format_line, stock_format_problems
from albert_hf.modeling import ALBERT_AUTO_CLASSES
from albert_hf.tokenization import AlbertHFTokenizer

QUIET = ["--use_cpu", "true", "--report_to", "none", "--disable_tqdm", "true", "--save_strategy", "no"]
FINE_TUNING = [
    *["--tokenizer_name_or_path", str(SPIECE_MODEL), "--config_overrides", TINY_ONE_LAYER_OVERRIDES],
    *["--do_train", "--max_steps", "1", "--per_device_train_batch_size", "2", "--max_seq_length", "64", *QUIET],
]
STOCK_FILES = {"config.json", "model.safetensors", "spiece.model", "tokenizer.json", "tokenizer_config.json"}
CODE_FILES = {"modeling.py", "configuration.py", "tokenization.py"}


def job_argv(job: str, inputs: Path, output_dir: Path) -> list[str]:
    """A one-step run of `job` on the repository's excerpts, into `output_dir`."""
    out = ["--output_dir", str(output_dir)]
    return {
        "pretrain": [
            *["--train_files", str(inputs / "corpus.txt"), "--tokenizer_name_or_path", str(SPIECE_MODEL)],
            *["--config_overrides", TINY_TWO_LAYER_OVERRIDES, "--max_seq_length", "64", "--max_steps", "1"],
            *["--per_device_train_batch_size", "2", *QUIET, *out],
        ],
        "glue": ["--task_name", "rte", "--train_file", str(inputs / "rte.tsv"), *FINE_TUNING, *out],
        "classify": [
            *["--train_file", str(inputs / "rte.tsv"), "--text_column", "sentence1", "--text_pair_column"],
            *["sentence2", "--label_column", "label", *FINE_TUNING, *out],
        ],
        "ner": [
            "--train_file",
            str(FIXTURES / "conll2003" / "train.txt"),
            "--max_train_samples",
            "8",
            *FINE_TUNING,
            *out,
        ],
        "squad": [
            *["--train_file", str(FIXTURES / "squad" / "sample.json"), "--max_query_length", "16"],
            *["--doc_stride", "16", "--version_2_with_negative", *FINE_TUNING, *out],
        ],
        "multiple-choice": ["--train_file", str(FIXTURES / "hf-samples" / "swag" / "sample.json"), *FINE_TUNING, *out],
    }[job]


JOBS = ("pretrain", "glue", "classify", "ner", "squad", "multiple-choice")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    lines = (FIXTURES / "corpus" / "botchan.txt").read_text(encoding="utf-8").splitlines()[:200]
    (root / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rte = (FIXTURES / "glue" / "RTE" / "train.tsv").read_text(encoding="utf-8").splitlines()[:9]
    (root / "rte.tsv").write_text("\n".join(rte) + "\n", encoding="utf-8")
    return root


# The fine-tuning jobs run on a Chinese ALBERT whose tokenizer is BERT's WordPiece (`helpers.wordpiece`).
WORDPIECE_JOBS = ("ner", "classify", "squad")


@pytest.fixture(scope="module")
def job_folders(inputs, tmp_path_factory) -> dict[str, Path]:
    """Each job's output folder after one training step (the job run in this process, as `albert-hf <job>`)."""
    root = tmp_path_factory.mktemp("jobs")
    folders = {}
    for job in JOBS:
        folders[job] = root / job
        assert cli_main([job, *job_argv(job, inputs, folders[job])]) == 0, job
    return folders


@pytest.fixture(scope="module")
def wordpiece_model(tmp_path_factory) -> Path:
    """A tiny ALBERT on a Chinese WordPiece vocabulary, as `albert-hf import` writes a Chinese ALBERT."""
    vocab_file = train_chinese_wordpiece(tmp_path_factory.mktemp("vocabulary"))
    return wordpiece_model_folder(tmp_path_factory.mktemp("models") / "albert-zh-tiny", vocab_file)


@pytest.fixture(scope="module")
def wordpiece_job_folders(wordpiece_model, tmp_path_factory) -> dict[str, Path]:
    """`ner`, `classify` and `squad` fine-tuning the WordPiece model for two steps and evaluating it."""
    root = tmp_path_factory.mktemp("wordpiece_jobs")
    folders = {}
    for job in WORDPIECE_JOBS:
        folders[job] = root / f"{job}-zh"
        argv = [job, *wordpiece_job_argv(job, wordpiece_model, root), "--output_dir", str(folders[job])]
        assert cli_main(argv) == 0, job
    return folders


def assert_stock_folder(folder: Path) -> None:
    files = {path.name for path in folder.iterdir()}
    assert STOCK_FILES <= files and not files & CODE_FILES, files
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "albert" and "auto_map" not in config and "sharing" not in config
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert "auto_map" not in tokenizer_config and tokenizer_config["tokenizer_class"] == "AlbertHFTokenizer"


def assert_same_outputs(folder: Path, loaded: dict, tolerance: float = 1e-6) -> None:
    """transformers' outputs without albert_hf (`loaded`) are albert_hf's on the same texts, inputs first."""
    inputs, outputs = albert_hf_outputs(folder)
    assert set(loaded["inputs"]) == set(inputs)
    for key, value in inputs.items():
        assert torch.equal(loaded["inputs"][key], value), (folder.name, key)
    assert loaded["inputs"]["token_type_ids"].max() == 1  # pairs keep their segments
    assert set(loaded["outputs"]) == set(outputs), (folder.name, set(loaded["outputs"]), set(outputs))
    for key, value in outputs.items():
        difference = (loaded["outputs"][key] - value).abs().max().item()
        assert difference <= tolerance, (folder.name, key, difference)


def test_every_job_writes_transformers_albert_that_loads_without_albert_hf(
    job_folders, wordpiece_job_folders, tmp_path
):
    """Every job's output folder, and those of ner, classify and squad on a WordPiece model, in one process without
    albert_hf: transformers' own classes, and albert_hf's inputs and outputs."""
    for folder in job_folders.values():
        assert_stock_folder(folder)
    folders = {**job_folders, **{f"{job} (WordPiece)": folder for job, folder in wordpiece_job_folders.items()}}
    loaded = load_without_albert_hf(list(folders.values()), tmp_path)
    for job, folder in folders.items():
        result = loaded[folder.name]
        assert result["config_class"] == "transformers.models.albert.configuration_albert.AlbertConfig", job
        assert result["model_class"].startswith("transformers.models.albert.modeling_albert."), job
        # SentencePiece: transformers does not know the class the folder names, and reads the folder's tokenizer.json
        # with its backend; WordPiece: BERT's tokenizer, transformers' own.
        expected = "tokenization_bert.BertTokenizer" if job.endswith("(WordPiece)") else "TokenizersBackend"
        assert result["tokenizer_class"].endswith(expected), (job, result["tokenizer_class"])
        assert_same_outputs(folder, result)


def test_ner_classify_and_squad_fine_tune_a_wordpiece_model(wordpiece_job_folders, wordpiece_model):
    """The jobs used the folder's WordPiece tokenizer as such and saved it beside their model."""
    reference = albert_hf.load_tokenizer(wordpiece_model)
    assert isinstance(reference, transformers.BertTokenizer)
    texts = [paragraph[:50] for paragraph in chinese_paragraphs()[:5]] + ["He was PLAYING unaffordable games."]
    for job, folder in wordpiece_job_folders.items():
        tokenizer = albert_hf.load_tokenizer(folder)
        assert isinstance(tokenizer, transformers.BertTokenizer) and tokenizer.get_vocab() == reference.get_vocab(), job
        assert tokenizer(texts)["input_ids"] == reference(texts)["input_ids"], job
        assert json.loads((folder / "eval_results.json").read_text()), job
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == "albert" and not list(folder.glob("*.py")), job
    # SQuAD's answers are cut from the contexts by BERT's character offsets: each predicted answer is text of its
    # context (the model is two steps old: where it points does not matter).
    squad = json.loads((wordpiece_job_folders["squad"].parent / "squad.json").read_text(encoding="utf-8"))
    contexts = {qa["id"]: p["context"] for item in squad["data"] for p in item["paragraphs"] for qa in p["qas"]}
    predictions = json.loads((wordpiece_job_folders["squad"] / "predictions.json").read_text(encoding="utf-8"))
    assert set(predictions) == set(contexts)
    assert all(answer in contexts[key] for key, answer in predictions.items()), predictions


def test_with_albert_hf_imported_the_auto_classes_give_the_exact_tokenizer(job_folders):
    folder = job_folders["glue"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(tokenizer) is AlbertHFTokenizer and type(albert_hf.load_tokenizer(folder)) is AlbertHFTokenizer
    # The models are transformers' own ALBERT classes there too: the folder names no albert_hf class.
    assert type(transformers.AutoModelForSequenceClassification.from_pretrained(folder)).__module__.startswith(
        "transformers."
    )
    assert type(albert_hf.AlbertConfig.from_pretrained(folder)) is albert_hf.AlbertConfig


def test_a_job_whose_model_needs_albert_hf_keeps_its_format_and_says_why(inputs, tmp_path, caplog):
    output_dir = tmp_path / "attention"
    argv = job_argv("glue", inputs, output_dir)
    argv[argv.index(TINY_ONE_LAYER_OVERRIDES)] = TINY_ONE_LAYER_OVERRIDES + ",sharing=attention"
    with caplog.at_level(logging.INFO, logger="albert_hf"):
        assert cli_main(["glue", *argv]) == 0
    lines = [record.getMessage() for record in caplog.records if "Saved as" in record.getMessage()]
    assert len(lines) == 1 and "model_type albert_hf" in lines[0] and "sharing='attention'" in lines[0], lines
    files = {path.name for path in output_dir.iterdir()}
    assert CODE_FILES <= files
    config = json.loads((output_dir / "config.json").read_text())
    assert config["model_type"] == "albert_hf" and config["sharing"] == "attention" and "auto_map" in config
    assert "auto_map" in json.loads((output_dir / "tokenizer_config.json").read_text())  # the exact tokenizer's code


def test_save_pretrained_decides_by_the_one_predicate(tmp_path, tokenizer):
    """Stock: sharing "all" with any groups, "none"; albert_hf's: partial sharing, exits, a depth at inference, a head
    of one's own. The config alone decides (config.save_pretrained), and the model's save agrees."""
    tiny = dict(TINY, num_hidden_layers=2)
    cases = {
        "groups": (dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2), True),
        "none": (dict(num_hidden_layers=2, sharing="none"), True),
        "ffn": (dict(num_hidden_layers=2, sharing="ffn"), False),
        "exits": (dict(num_hidden_layers=2, early_exit=True), False),
        "depth": (dict(num_hidden_layers=2, num_layers_at_inference=1), False),
    }
    for name, (fields, stock) in cases.items():
        model = albert_hf.AlbertForSequenceClassification(albert_hf.AlbertConfig(**{**tiny, **fields}))
        assert (stock_format_problems(model, tokenizer) == []) is stock, name
        model.save_pretrained(tmp_path / name)
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert (config["model_type"] == "albert") is stock and ("auto_map" in config) is not stock, name
        assert (tmp_path / name / "modeling.py").exists() is not stock, name
        reloaded = albert_hf.AlbertForSequenceClassification.from_pretrained(tmp_path / name)
        assert reloaded.config.early_exit == fields.get("early_exit", False), name
        assert set(reloaded.state_dict()) == set(model.state_dict()), name

    class MyHead(albert_hf.AlbertForSequenceClassification):
        pass

    head = MyHead(albert_hf.AlbertConfig(**tiny))
    assert "MyHead is not one of transformers' ALBERT classes" in stock_format_problems(head)
    head.save_pretrained(tmp_path / "head")
    assert json.loads((tmp_path / "head" / "config.json").read_text())["model_type"] == "albert_hf"


class SegmentingTokenizer(AlbertHFTokenizer):
    """A tokenizer with a step transformers' tokenizer format has no place for (as a word segmenter run before
    SentencePiece would be): it answers so."""

    def stock_format_problem(self) -> str | None:
        return "a word segmenter runs before SentencePiece"


def test_a_tokenizer_the_stock_format_cannot_express_makes_the_model_albert_hf(tmp_path):
    model = albert_hf.AlbertForMaskedLM(tiny_config())
    segmenting = SegmentingTokenizer(vocab_file=str(SPIECE_MODEL))
    assert "a word segmenter runs before SentencePiece" in save_format_line(model, segmenting)
    from albert_hf.hub import save_for_hub

    save_for_hub(model, tmp_path / "paired", tokenizer=segmenting)
    config = json.loads((tmp_path / "paired" / "config.json").read_text())
    assert config["model_type"] == "albert_hf" and config["tokenizer_class"] == "SegmentingTokenizer"
    assert "auto_map" in json.loads((tmp_path / "paired" / "tokenizer_config.json").read_text())
    # Recorded in the config: a later save of the model alone decides alike, and pairing it with a tokenizer the
    # format can express makes it stock again.
    model.save_pretrained(tmp_path / "alone")
    assert json.loads((tmp_path / "alone" / "config.json").read_text())["model_type"] == "albert_hf"
    pair_with_tokenizer(model, AlbertHFTokenizer(vocab_file=str(SPIECE_MODEL)))
    model.save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text())["model_type"] == "albert"


def old_format_folder(model, tokenizer, folder: Path) -> None:
    """A folder as albert_hf wrote every model before saves were stock: model_type "albert_hf", an `auto_map` to the
    copied modeling.py and configuration.py, the tokenizer with its code."""
    model.save_pretrained(folder)
    config = model.config.to_dict()
    config["auto_map"] = {
        "AutoConfig": "configuration.AlbertConfig",
        **{name: f"modeling.{cls.__name__}" for name, cls in ALBERT_AUTO_CLASSES.items()},
    }
    config["architectures"] = [type(model).__name__]
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    package = Path(albert_hf.__file__).parent
    for name in ("modeling.py", "configuration.py"):
        shutil.copyfile(package / name, folder / name)
    tokenizer.save_pretrained(folder)  # beside model_type "albert_hf": with its code, as before


def test_folders_albert_hf_wrote_before_still_load_and_fine_tune_to_a_stock_folder(inputs, tmp_path, tokenizer):
    torch.manual_seed(0)
    model = albert_hf.AlbertForSequenceClassification(tiny_config(num_labels=2)).eval()
    old = tmp_path / "old"
    old_format_folder(model, tokenizer, old)
    assert {"tokenization.py", "modeling.py"} <= {path.name for path in old.iterdir()}
    assert type(transformers.AutoModelForSequenceClassification.from_pretrained(old)).__module__ == "albert_hf.modeling"
    assert type(transformers.AutoTokenizer.from_pretrained(old)) is AlbertHFTokenizer
    assert type(albert_hf.load_tokenizer(old)) is AlbertHFTokenizer
    reloaded = albert_hf.AlbertForSequenceClassification.from_pretrained(old).eval()
    encoded = tokenizer("ALBERT shares its layers.", return_tensors="pt")
    with torch.no_grad():
        assert torch.equal(reloaded(**encoded).logits, model(**encoded).logits)
    argv = job_argv("glue", inputs, tmp_path / "tuned")
    argv = [value for value in argv if value not in (str(SPIECE_MODEL), "--tokenizer_name_or_path")]
    argv[argv.index("--config_overrides") : argv.index("--config_overrides") + 2] = ["--model_name_or_path", str(old)]
    assert cli_main(["glue", *argv]) == 0
    assert_stock_folder(tmp_path / "tuned")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(generated_texts(special_strings=True), min_size=1, max_size=4))
def test_the_stock_tokenizer_differs_from_the_exact_one_only_where_its_python_steps_act(texts, stock_tokenizer):
    exact, stock = stock_tokenizer
    backend = exact.backend_tokenizer
    ours = exact(texts, return_offsets_mapping=True)
    theirs = stock(texts, return_offsets_mapping=True)
    for index, text in enumerate(texts):
        if ours["input_ids"][index] != theirs["input_ids"][index]:
            assert backend.needs_python_step(text), text
        else:
            assert ours["offset_mapping"][index] == theirs["offset_mapping"][index], text
            assert ours["token_type_ids"][index] == theirs["token_type_ids"][index], text


@pytest.fixture(scope="module")
def stock_tokenizer(tokenizer, tmp_path_factory) -> tuple[AlbertHFTokenizer, transformers.TokenizersBackend]:
    """(the exact tokenizer, what transformers without albert_hf loads from the folder it saves beside a stock
    model: `TokenizersBackend` on tokenizer.json, as the process of `helpers.stock` shows it resolves)."""
    folder = tmp_path_factory.mktemp("stock_tokenizer")
    albert_hf.AlbertModel(tiny_config()).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return tokenizer, transformers.TokenizersBackend.from_pretrained(folder)


def test_transformers_own_albert_tokenizer_would_differ_where_the_stock_files_agree(stock_tokenizer, tmp_path):
    """The counter-check: transformers' AlbertTokenizer class, on the same spiece.model, keeps "▁1990," whole and turns
    `` into ": texts the property above checks, where the files written agree with the exact tokenizer."""
    exact, stock = stock_tokenizer
    shutil.copyfile(SPIECE_MODEL, tmp_path / "spiece.model")
    theirs = transformers.AlbertTokenizer.from_pretrained(tmp_path)
    for text in ("In 1990, they came.", "He said ``yes'' twice."):
        assert stock(text)["input_ids"] == exact(text)["input_ids"] != theirs(text)["input_ids"], text


def test_the_question_answering_pipeline_reads_the_wordpiece_folder(wordpiece_job_folders):
    import albert_hf.pipelines

    qa = transformers.pipeline(albert_hf.pipelines.TASK, model=str(wordpiece_job_folders["squad"]), device="cpu")
    assert isinstance(qa.tokenizer, transformers.BertTokenizer)
    context = chinese_paragraphs()[1][:80]
    answer = qa(question="这段话里写的是什么？", context=context, max_seq_len=64, doc_stride=16, max_question_len=16)
    assert answer["answer"] and answer["answer"] == context[answer["start"] : answer["end"]]


# Slow: exports an ONNX graph (about 10 s on a busy 2-core machine) to check which files travel with it.
@pytest.mark.slow
@pytest.mark.needs("onnx", "onnxruntime", "onnxscript")
def test_the_onnx_export_of_a_wordpiece_folder_keeps_its_tokenizer(wordpiece_job_folders, tmp_path):
    from albert_hf.onnx_export import export

    export(wordpiece_job_folders["classify"], tmp_path / "onnx")
    tokenizer = albert_hf.load_tokenizer(tmp_path / "onnx")
    reference = albert_hf.load_tokenizer(wordpiece_job_folders["classify"])
    assert isinstance(tokenizer, transformers.BertTokenizer) and tokenizer.get_vocab() == reference.get_vocab()
