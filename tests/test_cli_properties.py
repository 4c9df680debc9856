"""A property of the whole command line: whatever is typed, `albert-hf <command>` either goes on to its work, or stops
with one error line and a documented exit status; never a traceback, never files left in the output folder.

Each example runs in process through `albert_hf.cli.main`, its stderr captured. The work of the command is replaced
by a sentinel that records that it was reached: for numeric options, the start of the job (before the data is read:
a huge valid `--dupe_factor` must not run), for files, the building of the model (after the data is read). What
the example should give is decided here, by hand-written rules of what each option accepts (an independent
statement of the documented ranges, not the code's declaration), and compared with what the command did.
A few examples run the real command in a subprocess to the end (`test_valid_edges_run_to_the_end`).
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import math
import re
import uuid
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.command_line import assert_one_line_error, run_cli
from helpers.data import FIXTURES, SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES, TINY_TWO_LAYER_OVERRIDES
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from albert_hf import cli

DOCUMENTED_STATUSES = {2, 3, 4}
QUIET = ["--use_cpu", "--report_to", "none", "--disable_tqdm", "true"]


class Reached(BaseException):
    """The command got past every check to its work (raised by the sentinel that replaces the work)."""


# ---- what each option accepts, stated by hand ------------------------------------------------------------------------

NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse reads these as values, other "-..." as options


def reads_as(text: str, kind: type):
    """The value argparse gives an option of `kind` for `text`, or None when it refuses the text."""
    if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        return None
    try:
        return kind(text)
    except ValueError:
        return None


def finite(value) -> bool:
    return value is not None and math.isfinite(value)


@dataclass(frozen=True)
class Option:
    name: str
    kind: type
    accepts: object  # value -> bool


TRAINING_OPTIONS = [
    Option("max_steps", int, lambda v: v == -1 or v >= 1),
    Option("per_device_train_batch_size", int, lambda v: v >= 1),
    Option("gradient_accumulation_steps", int, lambda v: v >= 1),
    Option("learning_rate", float, lambda v: finite(v) and v >= 0),
    Option("num_train_epochs", float, lambda v: finite(v) and v > 0),
    Option("warmup_steps", float, lambda v: finite(v) and v >= 0),
    Option("save_steps", float, lambda v: finite(v) and v > 0),
    Option("seed", int, lambda v: 0 <= v < 2**32),
]
PRETRAINING_OPTIONS = [
    Option("max_seq_length", int, lambda v: v >= 8),
    Option("masked_lm_prob", float, lambda v: finite(v) and 0 < v <= 1),
    Option("short_seq_prob", float, lambda v: finite(v) and 0 <= v <= 1),
    Option("dupe_factor", int, lambda v: v >= 1),
    Option("max_ngram", int, lambda v: v >= 1),
]
FINE_TUNING_OPTIONS = [
    Option("max_seq_length", int, lambda v: v >= 8),
    Option("max_train_samples", int, lambda v: v >= 1),
]
TOKENIZER_OPTIONS = [
    Option("vocab_size", int, lambda v: v >= 1),
    Option("character_coverage", float, lambda v: finite(v) and 0 < v <= 1),
    Option("input_sentence_size", int, lambda v: v >= 0),
    Option("num_threads", int, lambda v: v >= 1),
]
QUICKSTART_OPTIONS = [
    Option("max_steps", int, lambda v: v >= 1),  # its schedule is a share of the steps
    Option("held_out_fraction", float, lambda v: finite(v) and 0 < v < 1),
    Option("warmup_fraction", float, lambda v: finite(v) and 0 <= v < 1),
    Option("evaluations", int, lambda v: v >= 1),
]
SQUAD_OPTIONS = [
    Option("n_best_size", int, lambda v: v >= 1),
    Option("max_answer_length", int, lambda v: v >= 1),
]


# ---- the commands ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """Small valid inputs of every command, and broken ones."""
    root = tmp_path_factory.mktemp("inputs")
    lines = (FIXTURES / "corpus" / "botchan.txt").read_text(encoding="utf-8").splitlines()[:300]
    (root / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rte = (FIXTURES / "glue" / "RTE" / "train.tsv").read_text(encoding="utf-8").splitlines()[:20]
    (root / "rte.tsv").write_text("\n".join(rte) + "\n", encoding="utf-8")
    (root / "empty.txt").write_text("", encoding="utf-8")
    (root / "blank.txt").write_text("\n \n\t\n", encoding="utf-8")
    (root / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1") * 3)
    (root / "nul.txt").write_bytes(b"a line\n\x00\x00\x00\n")
    (root / "folder").mkdir()
    from albert_hf import AlbertConfig, AlbertModel
    from albert_hf.argument_parsing import parse_config_overrides

    AlbertModel(AlbertConfig.preset("base-v2", **parse_config_overrides(TINY_ONE_LAYER_OVERRIDES))).save_pretrained(
        root / "model"
    )
    return root


def base_argv(command: str, files: Path, output_dir: Path) -> list[str]:
    """A command line each command accepts as it is."""
    tiny = ["--tokenizer_name_or_path", str(SPIECE_MODEL), "--config_overrides", TINY_ONE_LAYER_OVERRIDES]
    fine_tuning = [*tiny, "--do_train", "--max_steps", "1", "--output_dir", str(output_dir), *QUIET]
    return {
        "pretrain": [
            "--train_files",
            str(files / "corpus.txt"),
            "--tokenizer_name_or_path",
            str(SPIECE_MODEL),
            "--config_overrides",
            TINY_TWO_LAYER_OVERRIDES,
            "--max_seq_length",
            "64",
            "--output_dir",
            str(output_dir),
            *QUIET,
        ],
        "quickstart": ["--fast", "--output_dir", str(output_dir), *QUIET],
        "glue": ["--task_name", "rte", "--train_file", str(files / "rte.tsv"), *fine_tuning],
        "squad": ["--train_file", str(FIXTURES / "squad" / "sample.json"), "--version_2_with_negative", *fine_tuning],
        "ner": ["--train_file", str(FIXTURES / "conll2003" / "train.txt"), *fine_tuning],
        "multiple-choice": ["--train_file", str(FIXTURES / "hf-samples" / "swag" / "sample.json"), *fine_tuning],
        "classify": [
            "--train_file",
            str(files / "rte.tsv"),
            "--text_column",
            "sentence1",
            "--label_column",
            "label",
            *fine_tuning,
        ],
        "train-tokenizer": [str(files / "corpus.txt"), "--output_dir", str(output_dir), "--vocab_size", "300"],
        "export": ["--model_name_or_path", str(files / "model"), "--output_dir", str(output_dir)],
    }[command]


OPTIONS = {
    "pretrain": TRAINING_OPTIONS + PRETRAINING_OPTIONS,
    "quickstart": [o for o in TRAINING_OPTIONS if o.name != "max_steps"] + QUICKSTART_OPTIONS,
    "glue": TRAINING_OPTIONS + FINE_TUNING_OPTIONS,
    "squad": TRAINING_OPTIONS + FINE_TUNING_OPTIONS + SQUAD_OPTIONS,
    "ner": TRAINING_OPTIONS + FINE_TUNING_OPTIONS,
    "multiple-choice": TRAINING_OPTIONS + FINE_TUNING_OPTIONS,
    "classify": TRAINING_OPTIONS + FINE_TUNING_OPTIONS,
    "train-tokenizer": TOKENIZER_OPTIONS,
    "export": [],
}
FINE_TUNING_JOBS = ("glue", "squad", "ner", "multiple-choice", "classify")
# Where the work starts: at the start of the job (options), or where the model is built (files, read before it).
JOB_START = {
    "pretrain": "albert_hf.pretraining.run.start_job",
    "quickstart": "albert_hf.scripts.quickstart.quickstart_documents",
    "train-tokenizer": "albert_hf.vocabulary.train_tokenizer",
    "export": "albert_hf.onnx_export.export",
    **{job: f"albert_hf.scripts.{job.replace('-', '_')}.start_job" for job in FINE_TUNING_JOBS},
}
MODEL_WORK = {
    "pretrain": "albert_hf.scripts.pretrain.build_pretraining_model",
    "train-tokenizer": "albert_hf.vocabulary.AlbertHFTokenizer",
    "export": "albert_hf.onnx_export.export_onnx",
    **{job: f"albert_hf.scripts.{job.replace('-', '_')}.build_model" for job in FINE_TUNING_JOBS},
}


def run_in_process(argv: list[str], sentinel: str, monkeypatch) -> tuple[int | None, str]:
    """(exit status, or None when the work was reached; stderr) of `albert-hf <argv>` with `sentinel` replaced."""

    module, name = sentinel.rsplit(".", 1)

    @functools.wraps(getattr(importlib.import_module(module), name))  # its docstring too, which some code reads
    def reached(*args, **kwargs):
        raise Reached

    stderr = io.StringIO()
    with monkeypatch.context() as patch:
        patch.setattr(sentinel, reached)
        try:
            with redirect_stderr(stderr), redirect_stdout(io.StringIO()):
                status = cli.main(argv)
        except Reached:
            status = None
        except SystemExit as exit_:  # argparse's --help, or an exit of a library
            status = exit_.code
    return status, stderr.getvalue()


def assert_refused(command: str, status, stderr: str, output_dir: Path, *culprits: str) -> None:
    """Stopped with a documented status and one error line naming one of `culprits` (the first problem argparse
    meets stops the parse), no traceback, no file in the output folder."""
    assert status in DOCUMENTED_STATUSES, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith(f"albert-hf {command}: error: ")]
    assert len(errors) == 1, stderr[-3000:]
    assert any(culprit in errors[0] for culprit in culprits), (culprits, errors[0])
    left = [p for p in output_dir.rglob("*") if p.is_file()] if output_dir.exists() else []
    assert left == [], left


# ---- numeric options: drawn across their types and edges ---------------------------------------------------------------

INT_TEXTS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([-1, 2**31, 2**63, -(2**63), 10**30]),
    st.integers(),
).map(str)
FLOAT_TEXTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["0", "-0.0", "1e-9", "1e309", "0.5", "1", "2"]),
)
WRONG_TEXTS = st.one_of(
    st.sampled_from(["", "abc", "1.5", "nan", "inf", "-inf", "1e3", "0x10", " 3", "٣", "None", "--", "-x"]),
    st.text(max_size=4),
)


@st.composite
def option_lines(draw):
    """(command, [(option, text)], misspelled option or None)."""
    command = draw(st.sampled_from(sorted(OPTIONS)))
    options = OPTIONS[command]
    chosen = draw(st.lists(st.sampled_from(options), max_size=3, unique_by=lambda o: o.name)) if options else []
    pairs = []
    for option in chosen:
        typed = INT_TEXTS if option.kind is int else FLOAT_TEXTS
        pairs.append((option, draw(st.one_of(typed, typed, typed, WRONG_TEXTS))))
    misspelled = None
    if draw(st.integers(0, 4)) == 0 or not options:
        name = draw(st.sampled_from([o.name for o in options] or ["output_dir", "quantize"]))
        cut = draw(st.integers(1, len(name) - 1))
        misspelled = "--" + name[:cut] + draw(st.sampled_from("xqz")) + name[cut:]
    return command, pairs, misspelled


@settings(
    max_examples=3 * settings().max_examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(line=option_lines())
def test_any_option_values_go_on_or_give_one_error_line(line, files, tmp_path, monkeypatch):
    command, pairs, misspelled = line
    output_dir = tmp_path / uuid.uuid4().hex
    argv = [command, *base_argv(command, files, output_dir)]
    for option, text in pairs:
        argv += [f"--{option.name}", text]
    if misspelled:
        argv += [misspelled, "1"]
    valid = misspelled is None and all(
        (value := reads_as(text, option.kind)) is not None and option.accepts(value) for option, text in pairs
    )
    if valid:
        # A length past the model's positions (64 in pretraining's tiny config, 512 in the fine-tuning jobs') is
        # refused with its own line, at the parse, once the config the job will have is known.
        values = {option.name: reads_as(text, option.kind) for option, text in pairs}
        assume(values.get("max_seq_length", 64) <= (64 if command == "pretrain" else 512))
    event(f"{command}: {'goes on' if valid else 'refused'}")
    status, stderr = run_in_process(argv, JOB_START[command], monkeypatch)
    if valid:
        assert status is None, f"{argv}\n{stderr[-3000:]}"
        return
    refused = [f"--{option.name}" for option, text in pairs if reads_as(text, option.kind) is None]
    refused += [
        f"--{o.name}" for o, t in pairs if reads_as(t, o.kind) is not None and not o.accepts(reads_as(t, o.kind))
    ]
    assert_refused(command, status, stderr, output_dir, *refused, *([misspelled] if misspelled else []))


# ---- files: empty, unreadable, missing, not files ----------------------------------------------------------------------

FILE_KINDS = ["good", "empty.txt", "blank.txt", "latin1.txt", "nul.txt", "folder", "missing.txt"]
FILE_OPTIONS = {  # command -> the option naming its input file, and the good file
    "pretrain": ("--train_files", "corpus.txt"),
    "train-tokenizer": (None, "corpus.txt"),
    "glue": ("--train_file", "rte.tsv"),
    "classify": ("--train_file", "rte.tsv"),
    "ner": ("--train_file", str(FIXTURES / "conll2003" / "train.txt")),
    "squad": ("--train_file", str(FIXTURES / "squad" / "sample.json")),
    "multiple-choice": ("--train_file", str(FIXTURES / "hf-samples" / "swag" / "sample.json")),
}


def with_input(argv: list[str], option: str | None, path: str) -> list[str]:
    """`argv` with its input file (the value of `option`, or the first positional item) replaced by `path`."""
    argv = list(argv)
    argv[argv.index(option) + 1 if option else 0] = path
    return argv


@settings(
    max_examples=settings().max_examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(command=st.sampled_from(sorted(FILE_OPTIONS)), kind=st.sampled_from(FILE_KINDS))
def test_any_input_file_goes_on_or_gives_one_error_line(command, kind, files, tmp_path, monkeypatch):
    option, good = FILE_OPTIONS[command]
    output_dir = tmp_path / uuid.uuid4().hex
    path = str(files / good) if kind == "good" else str(files / kind)
    argv = [command, *with_input(base_argv(command, files, output_dir), option, path)]
    status, stderr = run_in_process(argv, MODEL_WORK[command], monkeypatch)
    if kind == "good":
        assert status is None, stderr[-3000:]
    else:
        assert_refused(command, status, stderr, output_dir, path)


# ---- a few real runs, in a subprocess, to the end --------------------------------------------------------------------


def test_valid_edges_run_to_the_end(tmp_path, files):
    """The smallest valid values train and save what was asked; the refusals of the issue stop with status 2."""
    output_dir = tmp_path / "out"
    argv = ["pretrain", *base_argv("pretrain", files, output_dir), "--max_steps", "1"]
    argv += ["--per_device_train_batch_size", "1", "--config_overrides", TINY_TWO_LAYER_OVERRIDES + ",hidden_size=16"]
    result = run_cli(argv)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = json.loads((output_dir / "config.json").read_text(encoding="utf-8"))
    assert (saved["hidden_size"], saved["num_hidden_layers"]) == (16, 2) and "hiden_size" not in saved
    state = json.loads((output_dir / "trainer_state.json").read_text(encoding="utf-8"))
    assert state["global_step"] == 1

    refused = run_cli(["pretrain", *base_argv("pretrain", files, tmp_path / "r"), "--max_steps", "-5"])
    assert_one_line_error(refused, "pretrain", "--max_steps must be -1 (no limit) or at least 1, got -5")
    assert not (tmp_path / "r").exists()
