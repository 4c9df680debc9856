"""Bad inputs and faults against the real `albert-hf` command line: what a user sees for each, in one table.

    PYTHONPATH=. python benchmarks/bad_inputs.py [--keep DIR] [--only CASE ...]

Each case sets up a small folder (tiny models, files of a few lines, the repository's fixtures), runs `albert-hf` in a
subprocess and classifies what came back:

    clear error      the case's documented exit status (2 input, 3 the machine's state, 4 a missing extra), one
                     `albert-hf <command>: error: ...` line, no traceback
    skipped          the machine's state the case needs could not be made here (mounting a small disk needs root)
    traceback shown  the run failed with a Python traceback
    silent success   exit status 0 where the input should have been refused
    run lost         the run or checkpoint the case protects (a model, another run's checkpoints), or a file of the
                     user's it keeps (a README.md, a symlink's target), was changed
    secret written   a planted secret (a Hub token) is in a file of the case's --output_dir or in its output
    wrong message    the expected exit status and one error line, but the line does not say what the case expects
    ok               exit status 0 where success is what should happen (relaunching a finished run)
    other            anything else (its exit status and last stderr line are shown)

The first 22 cases took about 4 minutes of CPU (2 cores), the 10 finished-work, secrets and load cases 155 s wall
run on their own, the 17 cases of the output writer, the folder's kind and lease, the messages and the reader contract
361 s (the whole set was not timed in one run): refusals stop before any model work; only the finished run the
cases share, the runs a case's setup makes (a finished quickstart, a run whose data then changes), the runs that
should succeed and the inputs accepted by mistake train (a step or two of a tiny model). docs/reliability.md holds the
last run's table.
"""

from __future__ import annotations

import argparse
import codecs
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.command_line import CLI_ENV, error_lines, run_cli

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SPIECE = FIXTURES / "spiece" / "albert-30k-clean.model"
TINY = "hidden_size=32,num_attention_heads=2,intermediate_size=64,num_hidden_layers=1,embedding_size=16"
TINY_64 = TINY + ",max_position_embeddings=64"
QUIET = ["--report_to", "none", "--disable_tqdm", "true", "--use_cpu"]
POISONED = "albert.encoder.embedding_hidden_mapping_in.weight"
# Planted Hub tokens: two spellings on the command line and the environment's.
PLANTED = ("hf_plantedUnderscoreAAAA1111", "hf_plantedDashBBBB2222", "hf_plantedEnvironmentCCCC3333")


def fine_tuning(command: str, output_dir: Path, *options: str) -> list[str]:
    return [
        command,
        "--tokenizer_name_or_path",
        str(SPIECE),
        "--config_overrides",
        TINY,
        "--do_train",
        "--max_steps",
        "1",
        "--output_dir",
        str(output_dir),
        *QUIET,
        *options,
    ]


def pretrain(output_dir: Path, corpus: Path, *options: str) -> list[str]:
    return [
        "pretrain",
        "--train_files",
        str(corpus),
        "--tokenizer_name_or_path",
        str(SPIECE),
        "--config_overrides",
        TINY_64,
        "--max_seq_length",
        "64",
        "--per_device_train_batch_size",
        "4",
        "--max_steps",
        "2",
        "--save_steps",
        "2",
        "--validation_documents",
        "0",
        "--output_dir",
        str(output_dir),
        *QUIET,
        *options,
    ]


def glue_from(model: Path, output_dir: Path, *options: str) -> list[str]:
    """Fine-tuning from the model in `model` (its own config: no --config_overrides)."""
    return [
        "glue",
        "--task_name",
        "rte",
        "--data_dir",
        str(output_dir.parent / "rte"),
        "--model_name_or_path",
        str(model),
        "--tokenizer_name_or_path",
        str(SPIECE),
        "--do_train",
        "--max_steps",
        "1",
        "--max_seq_length",
        "32",
        "--output_dir",
        str(output_dir),
        *QUIET,
        *options,
    ]


def identity(path: Path) -> tuple[str, str]:
    """What a kept file is: a symlink's target, or a file's sha256 ("missing" once gone)."""
    if path.is_symlink():
        return "symlink", os.readlink(path)
    return ("file", hashlib.sha256(path.read_bytes()).hexdigest()) if path.is_file() else ("missing", "")


def fingerprint(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `folder` (what "unchanged" is compared on)."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@dataclass
class Case:
    name: str
    expected: str
    argv: Callable[[Path], list[str]]
    succeeds: bool = False  # success (exit 0) is the right outcome
    protected: Callable[[Path], Path] | None = None  # a folder the run must leave as it was
    holder: bool = False  # another process holds the lock of <work>/locked while the case runs
    env: dict[str, str] | Callable[[Path], dict[str, str]] = field(default_factory=dict)
    status: int = 2  # the exit status of the expected clear error (2 input, 3 the machine's state, 4 a missing extra)
    # Makes the machine's state the case needs (a full or read-only disk); returns why it cannot, or None.
    setup: Callable[[Path], str | None] | None = None
    cleanup: Callable[[Path], None] | None = None
    says: str = ""  # what the error line must hold (a clear error that names something else is a wrong message)
    # Secrets no file under the case's --output_dir, nor its stdout/stderr, may hold after the run.
    forbidden_text: tuple[str, ...] = ()
    # Files of the user (or symlinks) the run must leave as they were, also where the job writes beside them.
    kept: Callable[[Path], list[Path]] | None = None


@dataclass
class Outcome:
    case: Case
    status: int
    verdict: str
    message: str
    seconds: float


# --------------------------------------------------------------------------------------------------------------------
# The inputs
# --------------------------------------------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def prepare(work: Path) -> None:
    """The files the cases share: corpora, task files, a tiny pretrained model, a finished pretraining run."""
    text = (FIXTURES / "corpus" / "botchan.txt").read_text(encoding="utf-8").splitlines()[:400]
    write(work / "corpus.txt", "\n".join(text) + "\n")
    write(work / "empty.txt", "")
    rte = (FIXTURES / "glue" / "RTE" / "train.tsv").read_text(encoding="utf-8").splitlines()
    write(work / "rte" / "train.tsv", "\n".join(rte[:40]) + "\n")
    write(work / "rte_short_row" / "train.tsv", "\n".join([*rte[:5], "17\tonly one sentence", *rte[5:20]]) + "\n")
    write(work / "stsb_nan.tsv", "sentence1\tsentence2\tscore\na\tb\t2.5\nc\td\tnan\n")
    write(work / "stsb_range.tsv", "sentence1\tsentence2\tscore\na\tb\t2.5\nc\td\t-42\n")
    conll = "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\n"
    write(work / "conll" / "train.txt", conll)
    write(work / "conll_missing.txt", conll.replace("rejects VBZ B-VP O", "rejects VBZ B-VP"))
    write(work / "conll_tab.txt", conll.replace("German JJ", "Ger\tman JJ"))
    write(work / "conll" / "valid.txt", "Peter NNP B-NP B-PER\nParis NNP I-NP B-LOC\n")
    qa = {"id": "q1", "question": "Which city?", "answers": [{"text": "", "answer_start": 0}]}
    squad = {"data": [{"title": "t", "paragraphs": [{"context": "Paris is in France.", "qas": [qa]}]}]}
    write(work / "squad_empty_answer.json", json.dumps(squad))
    squad["data"][0]["paragraphs"][0]["qas"][0]["answers"] = [{"text": "Paris", "answer_start": 0}]
    write(work / "squad.json", json.dumps(squad))
    swag = {"sent1": "She opens", "sent2": "the", "ending0": "door.", "ending1": "window.", "label": 0}
    write(work / "swag.jsonl", "\n".join(json.dumps(swag) for _ in range(8)) + "\n")
    write(work / "blank.txt", "\n \n\t\n")
    (work / "latin1.txt").write_bytes("caf\xe9 au lait.\n".encode("latin-1") * 5)
    # fugashi as if it were not installed (an import of it fails as a missing module does)
    write(
        work / "no_fugashi" / "fugashi.py", "raise ModuleNotFoundError(\"No module named 'fugashi'\", name='fugashi')\n"
    )
    save_tiny_model(work / "pre")
    finished = run_cli(pretrain(work / "finished", work / "corpus.txt"))
    if finished.returncode != 0:
        raise SystemExit(f"the finished run the cases need failed:\n{finished.stderr[-3000:]}")
    incomplete = work / "incomplete"
    shutil.copytree(work / "finished", incomplete)
    (incomplete / "checkpoint-2" / "model.safetensors").unlink()
    truncated = work / "truncated"
    shutil.copytree(work / "finished", truncated)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a final save killed halfway
    # A finished model without checkpoints (as the quickstart and smoke recipes leave one), a copy per case.
    for name in ("done_tokenizer", "done_resume"):
        shutil.copytree(work / "finished", work / name, ignore=shutil.ignore_patterns("checkpoint-*"))
    write(work / "config_only" / "config.json", (work / "pre" / "config.json").read_text(encoding="utf-8"))
    save_tiny_model(work / "nan_model", poison=POISONED)
    save_tiny_model(work / "vocab_1000", vocab_size=1000)  # trained with a 1,000-piece vocabulary


def save_tiny_model(folder: Path, poison: str | None = None, **fields) -> None:
    """A tiny ALBERT saved in `folder`; with `poison`, that parameter's first value NaN."""
    import torch

    from albert_hf import AlbertConfig, AlbertForPreTraining
    from albert_hf.argument_parsing import parse_config_overrides

    model = AlbertForPreTraining(AlbertConfig.preset("base-v2", **{**parse_config_overrides(TINY), **fields}))
    if poison is not None:
        with torch.no_grad():
            dict(model.named_parameters())[poison].view(-1)[0] = float("nan")
    model.save_pretrained(folder)


def cases() -> list[Case]:
    rte = ["--task_name", "rte"]
    return [
        Case(
            "missing train file",
            "clear error",
            lambda w: fine_tuning("glue", w / "o1", *rte, "--train_file", str(w / "nope.tsv")),
        ),
        Case(
            "missing --model_name_or_path folder",
            "clear error",
            lambda w: fine_tuning("glue", w / "o2", *rte, "--data_dir", str(w / "rte"), "--model_name_or_path", "./x"),
        ),
        Case(
            "missing --tokenizer_name_or_path file",
            "clear error",
            lambda w: [*pretrain(w / "o3", w / "corpus.txt"), "--tokenizer_name_or_path", "./none/spiece.model"],
        ),
        Case(
            "GLUE tsv row with a wrong column count",
            "clear error",
            lambda w: fine_tuning("glue", w / "o4", *rte, "--data_dir", str(w / "rte_short_row")),
        ),
        Case(
            "CoNLL row missing its NER column",
            "clear error",
            lambda w: fine_tuning("ner", w / "o5", "--train_file", str(w / "conll_missing.txt")),
        ),
        Case(
            "CoNLL token holding a tab",
            "clear error",
            lambda w: fine_tuning("ner", w / "o6", "--train_file", str(w / "conll_tab.txt")),
        ),
        Case(
            "NER dev tag never seen in training",
            "clear error",
            lambda w: fine_tuning("ner", w / "o7", "--data_dir", str(w / "conll"), "--do_eval"),
        ),
        Case(
            "STS-B label nan",
            "clear error",
            lambda w: fine_tuning("glue", w / "o8", "--task_name", "stsb", "--train_file", str(w / "stsb_nan.tsv")),
        ),
        Case(
            "STS-B label -42",
            "clear error",
            lambda w: fine_tuning("glue", w / "o9", "--task_name", "stsb", "--train_file", str(w / "stsb_range.tsv")),
        ),
        Case(
            "SQuAD answer with empty text",
            "clear error",
            lambda w: fine_tuning("squad", w / "o10", "--train_file", str(w / "squad_empty_answer.json")),
        ),
        Case("empty corpus", "clear error", lambda w: pretrain(w / "o11", w / "empty.txt")),
        Case(
            "pretrain --max_seq_length above the positions",
            "clear error",
            lambda w: [*pretrain(w / "o12", w / "corpus.txt"), "--max_seq_length", "128"],
        ),
        *(
            Case(
                f"{command} --max_seq_length 1024 (512 positions)",
                "clear error",
                lambda w, command=command, options=options: fine_tuning(
                    command, w / f"o13-{command}", *options(w), "--max_seq_length", "1024"
                ),
            )
            for command, options in (
                ("glue", lambda w: [*rte, "--data_dir", str(w / "rte")]),
                ("ner", lambda w: ["--train_file", str(w / "conll" / "train.txt")]),
                ("squad", lambda w: ["--train_file", str(w / "squad.json")]),
                ("multiple-choice", lambda w: ["--train_file", str(w / "swag.jsonl")]),
            )
        ),
        Case(
            "fine-tune into the pretrained model's folder",
            "clear error",
            lambda w: fine_tuning(
                "glue", w / "pre", *rte, "--data_dir", str(w / "rte"), "--model_name_or_path", str(w / "pre")
            ),
            protected=lambda w: w / "pre",
        ),
        Case(
            "reused folder: a new run into a finished run",
            "clear error",
            lambda w: pretrain(w / "finished", w / "corpus.txt", "--seed", "7"),
            protected=lambda w: w / "finished",
        ),
        Case(
            "two writers on one folder",
            "clear error",
            lambda w: pretrain(w / "locked", w / "corpus.txt"),
            holder=True,
        ),
        Case(
            "resume from an incomplete checkpoint",
            "clear error",
            lambda w: pretrain(
                w / "incomplete", w / "corpus.txt", "--resume_from_checkpoint", str(w / "incomplete" / "checkpoint-2")
            ),
        ),
        Case(
            "fine-tune from a model whose final save was killed",
            "clear error",
            lambda w: fine_tuning(
                "glue", w / "o14", *rte, "--data_dir", str(w / "rte"), "--model_name_or_path", str(w / "truncated")
            ),
        ),
        *option_cases(),
        *file_cases(),
        *machine_cases(),
        *finished_work_cases(),
        *load_cases(),
        *writer_cases(),
        *boundary_cases(),
        *reader_cases(),
        *combination_cases(),
        *resume_identity_cases(),
        Case(
            "finished run relaunched with --resume_from_checkpoint latest",
            "ok",
            lambda w: pretrain(w / "finished", w / "corpus.txt", "--resume_from_checkpoint", "latest"),
            succeeds=True,
            protected=lambda w: w / "finished" / "checkpoint-2",
        ),
    ]


def option_cases() -> list[Case]:
    """Options refused before any work, from their declared ranges and names (albert_hf/options.py)."""
    rte = ["--task_name", "rte"]

    def corpus_run(folder: str, *options: str):
        return lambda w: [*pretrain(w / folder, w / "corpus.txt"), *options]

    return [
        Case("pretrain --max_steps -5", "clear error", corpus_run("o20", "--max_steps", "-5")),
        Case("pretrain --max_steps 0", "clear error", corpus_run("o21", "--max_steps", "0")),
        Case(
            "glue --per_device_train_batch_size 0",
            "clear error",
            lambda w: fine_tuning(
                "glue", w / "o22", *rte, "--data_dir", str(w / "rte"), "--per_device_train_batch_size", "0"
            ),
        ),
        Case("pretrain --learning_rate nan", "clear error", corpus_run("o23", "--learning_rate", "nan")),
        Case("misspelled option --max_stepz", "clear error", corpus_run("o24", "--max_stepz", "3")),
        Case(
            "--config_overrides hiden_size=32 (a typo)",
            "clear error",
            corpus_run("o25", "--config_overrides", TINY_64 + ",hiden_size=32"),
        ),
        Case(
            "--config_overrides hidden_size=abc",
            "clear error",
            corpus_run("o26", "--config_overrides", TINY_64 + ",hidden_size=abc"),
        ),
        Case("unknown --config_preset", "clear error", corpus_run("o27", "--config_preset", "bse-v2")),
        Case(
            "--global_batch_size and --gradient_accumulation_steps disagree",
            "clear error",
            corpus_run("o28", "--global_batch_size", "64", "--gradient_accumulation_steps", "3"),
        ),
        Case(
            "--config_overrides num_labels=5 on a 2-class task (the job sets it)",
            "clear error",
            lambda w: fine_tuning(
                "glue", w / "o29", *rte, "--data_dir", str(w / "rte"), "--config_overrides", TINY + ",num_labels=5"
            ),
        ),
    ]


def file_cases() -> list[Case]:
    """Files a library would stop on with a traceback: each named, with its line."""
    return [
        Case(
            "train-tokenizer on an empty file",
            "clear error",
            lambda w: ["train-tokenizer", str(w / "empty.txt"), "--output_dir", str(w / "o30"), "--vocab_size", "100"],
        ),
        Case(
            "train-tokenizer on a blank file",
            "clear error",
            lambda w: ["train-tokenizer", str(w / "blank.txt"), "--output_dir", str(w / "o31"), "--vocab_size", "100"],
        ),
        Case(
            "train-tokenizer on a non-UTF-8 file",
            "clear error",
            lambda w: ["train-tokenizer", str(w / "latin1.txt"), "--output_dir", str(w / "o32"), "--vocab_size", "100"],
        ),
        Case("pretraining corpus with a bad byte", "clear error", lambda w: pretrain(w / "o33", w / "latin1.txt")),
        Case(
            "squad --train_file that is a folder",
            "clear error",
            lambda w: fine_tuning("squad", w / "o34", "--train_file", str(w / "rte")),
        ),
    ]


def users_folder(work: Path) -> None:
    """A folder of the user's (notes, a file named like the leaderboard file, results), and one whose README.md is
    a symlink to a file outside it; RTE's dev and test splits for --do_eval and --do_predict."""
    for split in ("dev", "test"):
        rows = (FIXTURES / "glue" / "RTE" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        write(work / "rte" / f"{split}.tsv", "\n".join(rows[:9]) + "\n")
    write(work / "notes" / "README.md", "# my notes\n")
    write(work / "notes" / "RTE.tsv", "my own table\n")
    write(work / "notes" / "all_results.json", '{"mine": 1}\n')
    write(work / "outside.md", "outside the folder\n")
    (work / "linked").mkdir(exist_ok=True)
    if not (work / "linked" / "README.md").is_symlink():
        (work / "linked" / "README.md").symlink_to(work / "outside.md")
    write(work / "user_spiece" / "spiece.model", "the user's\n")
    write(work / "push_notes" / "README.md", "# my notes\n")
    write(work / "export_notes" / "README.md", "# my export notes\n")
    shutil.copytree(work / "pre", work / "pre_card", dirs_exist_ok=True)  # a model with its card, which export copies
    write(work / "pre_card" / "README.md", "# the model's card\n")


def nearly_full_disk(folder: Path, free_kib: int) -> str | None:
    """A 1 MiB disk at `folder` with about `free_kib` KiB left free; why not, when it cannot be mounted."""
    why = mount_small_disk(folder)
    if why is None:
        free = shutil.disk_usage(folder).free
        (folder / "filler").write_bytes(b"\0" * max(free - free_kib * 1024, 0))
    return why


def damaged_checkpoint(work: Path) -> None:
    """A run killed in its first checkpoint save: checkpoint-2 without its weights, and no final model."""
    shutil.copytree(work / "finished" / "checkpoint-2", work / "damaged" / "checkpoint-2", dirs_exist_ok=True)
    (work / "damaged" / "checkpoint-2" / "model.safetensors").unlink(missing_ok=True)


def future_lock(work: Path) -> None:
    """A lock of another host, stamped three hours ahead of this machine's clock."""
    holder = {"lease_id": "x", "pid": 4242, "host": "node-ahead", "command": "albert-hf pretrain", "lease_seconds": 600}
    holder["started"] = "2026-12-01T00:00:00+00:00"
    write(work / "future" / "_albert_hf.lock", json.dumps(holder))
    ahead = time.time() + 3 * 3600
    os.utime(work / "future" / "_albert_hf.lock", (ahead, ahead))


def writer_cases() -> list[Case]:
    """One writer for every file a job writes: a user's file in the way is kept (the job's goes beside it) or, for
    a file the model needs by name, refused before any work; a full disk is named at the destination."""
    predict = ["--task_name", "rte", "--do_eval", "--do_predict", "--max_seq_length", "32"]
    return [
        Case(
            "glue --do_predict into a folder holding the user's README.md, RTE.tsv and all_results.json",
            "ok",
            lambda w: fine_tuning("glue", w / "notes", *predict, "--data_dir", str(w / "rte")),
            succeeds=True,
            setup=lambda w: users_folder(w),
            kept=lambda w: [w / "notes" / name for name in ("README.md", "RTE.tsv", "all_results.json")],
        ),
        Case(
            "glue into a folder whose README.md is a symlink out of it",
            "ok",
            lambda w: fine_tuning("glue", w / "linked", *predict, "--data_dir", str(w / "rte")),
            succeeds=True,
            setup=lambda w: users_folder(w),
            kept=lambda w: [w / "linked" / "README.md", w / "outside.md"],
        ),
        Case(
            "glue into a folder holding the user's spiece.model",
            "clear error",
            lambda w: fine_tuning("glue", w / "user_spiece", *predict, "--data_dir", str(w / "rte")),
            setup=lambda w: users_folder(w),
            kept=lambda w: [w / "user_spiece" / "spiece.model"],
            says="holds spiece.model, which no albert_hf job wrote",
        ),
        Case(
            "glue --push_to_hub into a folder holding the user's README.md",
            "clear error",
            lambda w: fine_tuning(
                "glue",
                w / "push_notes",
                *predict,
                "--data_dir",
                str(w / "rte"),
                "--push_to_hub",
                "--hub_model_id",
                "a/b",
            ),
            setup=lambda w: users_folder(w),
            kept=lambda w: [w / "push_notes" / "README.md"],
            says="--push_to_hub would upload it as the model card",
        ),
        Case(
            "export of a model with its card into a folder holding the user's README.md",
            "ok",
            lambda w: ["export", "--model_name_or_path", str(w / "pre_card"), "--output_dir", str(w / "export_notes")],
            succeeds=True,
            setup=lambda w: users_folder(w),
            kept=lambda w: [w / "export_notes" / "README.md"],
        ),
        Case(
            "train-tokenizer onto a disk that fills up mid-write",
            "clear error",
            lambda w: (
                ["train-tokenizer", str(w / "corpus.txt"), "--output_dir", str(w / "fills" / "tok")]
                + ["--vocab_size", "300", "--quiet"]
            ),
            status=3,
            setup=lambda w: nearly_full_disk(w / "fills", free_kib=280),
            cleanup=lambda w: unmount(w / "fills"),
            says="/fills/tok/",
        ),
    ]


def boundary_cases() -> list[Case]:
    """The output folder's kind and state, and the messages built from what failed."""
    return [
        Case(
            "--output_dir that is a file",
            "clear error",
            lambda w: fine_tuning("glue", w / "corpus.txt", "--task_name", "rte", "--data_dir", str(w / "rte")),
            kept=lambda w: [w / "corpus.txt"],
            says="is a file, not a folder",
        ),
        Case(
            "--output_dir ''",
            "clear error",
            lambda w: [
                *fine_tuning("glue", w / "x", "--task_name", "rte", "--data_dir", str(w / "rte")),
                "--output_dir",
                "",
            ],
            says="--output_dir '' is empty",
        ),
        Case(
            "latest over a damaged checkpoint and no model",
            "clear error",
            lambda w: pretrain(w / "damaged", w / "corpus.txt", "--resume_from_checkpoint", "latest"),
            setup=lambda w: damaged_checkpoint(w),
            protected=lambda w: w / "damaged",
            says="checkpoint-2 is damaged (",
        ),
        Case(
            "a lock of another host dated 3 h ahead",
            "clear error",
            lambda w: pretrain(w / "future", w / "corpus.txt"),
            setup=lambda w: future_lock(w),
            says="s ahead of this machine's clock",
        ),
        Case(
            "read-only datasets cache",
            "clear error",
            lambda w: pretrain(w / "o60", w / "corpus.txt"),
            env=lambda w: {"HF_DATASETS_CACHE": str(w / "ro_cache")},
            status=3,
            setup=lambda w: mount_small_disk(w / "ro_cache", read_only=True),
            cleanup=lambda w: unmount(w / "ro_cache"),
            says="it is in the datasets cache folder",
        ),
    ]


def reader_files(work: Path) -> None:
    """One bad text per reader, each on a known line."""
    squad = {"data": [{"title": "t", "paragraphs": [{"context": "Paris is in France.", "qas": []}]}]}
    answer = [{"text": "Paris", "answer_start": 0}]  # answerable: only its question is missing
    squad["data"][0]["paragraphs"][0]["qas"] = [{"id": "q1", "question": "", "answers": answer}]
    write(work / "squad_empty_question.json", json.dumps(squad))
    write(work / "nul.jsonl", '{"text": "One. Two."}\n{"text": "Three\\u0000 four."}\n')
    write(work / "reviews.csv", "review,stars\nA fine film.,good\n,bad\nDull.,bad\n")
    rte = (FIXTURES / "glue" / "RTE" / "train.tsv").read_text(encoding="utf-8").splitlines()
    rows = rte[:3] + ["99\tA\x00B.\tC.\tentailment"] + rte[3:10]
    write(work / "rte_nul" / "train.tsv", "\n".join(rows) + "\n")
    write(work / "conll_nul.txt", "EU NNP B-NP B-ORG\n\nGer\x00man JJ B-NP B-MISC\n")
    swag = {"sent1": "She opens", "sent2": "the", "ending0": "door.", "ending1": "window.", "label": 0}
    write(work / "swag_empty.jsonl", json.dumps(swag) + "\n" + json.dumps({**swag, "ending1": ""}) + "\n")


def reader_cases() -> list[Case]:
    """The one reader contract: the same checks and message form in every job's readers."""
    return [
        Case(
            "squad: an empty question",
            "clear error",
            lambda w: fine_tuning("squad", w / "o61", "--train_file", str(w / "squad_empty_question.json")),
            setup=lambda w: reader_files(w),
            says="qas[0]: field 'question': empty",
        ),
        Case(
            "pretrain on jsonl rows holding a NUL byte",
            "clear error",
            lambda w: pretrain(w / "o62", w / "nul.jsonl"),
            setup=lambda w: reader_files(w),
            says="nul.jsonl:2: column 'text': holds a NUL byte",
        ),
        Case(
            "classify a csv row with an empty text",
            "clear error",
            lambda w: (
                fine_tuning("classify", w / "o63", "--train_file", str(w / "reviews.csv"))
                + ["--text_column", "review", "--label_column", "stars"]
            ),
            setup=lambda w: reader_files(w),
            says="reviews.csv:3: column 'review': empty",
        ),
        Case(
            "GLUE tsv sentence holding a NUL byte",
            "clear error",
            lambda w: fine_tuning("glue", w / "o64", "--task_name", "rte", "--data_dir", str(w / "rte_nul")),
            setup=lambda w: reader_files(w),
            says="train.tsv:4: column 2 (sentence1): holds a NUL byte",
        ),
        Case(
            "CoNLL word holding a NUL byte",
            "clear error",
            lambda w: fine_tuning("ner", w / "o65", "--train_file", str(w / "conll_nul.txt")),
            setup=lambda w: reader_files(w),
            says="conll_nul.txt:3: the word: holds a NUL byte",
        ),
        Case(
            "multiple-choice ending left empty",
            "clear error",
            lambda w: fine_tuning("multiple-choice", w / "o66", "--train_file", str(w / "swag_empty.jsonl")),
            setup=lambda w: reader_files(w),
            says="swag_empty.jsonl:2: field 'ending1': empty",
        ),
    ]


def combination_cases() -> list[Case]:
    """Options that cannot hold together, or with the recipe, the data or the model: refused before any work, naming
    both options and where each value came from (albert_hf/options.py `check_combinations`, the model's config as
    soon as it is known)."""
    rte = ["--task_name", "rte"]

    def glue(folder: str, *options: str):
        return lambda w: fine_tuning("glue", w / folder, *rte, "--data_dir", str(w / "rte"), *options)

    def corpus_run(folder: str, *options: str):
        return lambda w: [*pretrain(w / folder, w / "corpus.txt"), *options]

    def bad_checkpoint_config(work: Path) -> None:
        shutil.copytree(work / "pre", work / "heads_5", dirs_exist_ok=True)
        config = json.loads((work / "pre" / "config.json").read_text(encoding="utf-8"))
        write(work / "heads_5" / "config.json", json.dumps({**config, "num_attention_heads": 5}))

    return [
        Case(
            "a recipe's warm-up longer than the --max_steps given",
            "clear error",
            corpus_run("o70", "--recipe", "tiny", "--max_steps", "6", "--config_overrides", TINY_64),
            says="--warmup_steps 30 (from --recipe tiny) is more than --max_steps 6 (on the command line)",
        ),
        Case(
            "a preset's warm-up longer than a run counted in epochs",
            "clear error",
            glue("o71", "--preset", "rte", "--max_steps", "-1", "--num_train_epochs", "1", "--max_seq_length", "32"),
            says="--warmup_steps 200 (from --preset rte) is more than the",
        ),
        Case(
            "pretrain --eval_strategy steps without held-out text",
            "clear error",
            corpus_run("o72", "--eval_strategy", "steps"),
            says="asks for evaluation data, but none is given",
        ),
        Case(
            "glue --eval_strategy steps with a train file only",
            "clear error",
            lambda w: (
                fine_tuning("glue", w / "o73", *rte, "--train_file", str(w / "rte" / "train.tsv"))
                + ["--eval_strategy", "steps"]
            ),
            says="asks for evaluation data, but none is given",
        ),
        Case(
            "classify --do_predict without a test table",
            "clear error",
            lambda w: (
                fine_tuning("classify", w / "o74", "--train_file", str(w / "rte" / "train.tsv"))
                + ["--text_column", "sentence1", "--do_predict"]
            ),
            says="asks for test data, but none is given",
        ),
        Case(
            "glue with nothing to do (no --do_train, --do_eval, --do_predict)",
            "clear error",
            lambda w: [item for item in glue("o75")(w) if item != "--do_train"],
            says="nothing to do",
        ),
        Case(
            "glue --data_dir with --train_file",
            "clear error",
            glue("o76", "--train_file", "mine.tsv"),
            says="both give data",
        ),
        Case(
            "multiple-choice --data_dir (not read by the job)",
            "clear error",
            lambda w: (
                fine_tuning("multiple-choice", w / "o77", "--train_file", str(w / "swag.jsonl"))
                + ["--data_dir", "swag"]
            ),
            says="is not read by this job",
        ),
        Case(
            "hidden size not divisible by the heads",
            "clear error",
            corpus_run("o78", "--config_overrides", TINY_64 + ",hidden_size=30,num_attention_heads=4"),
            says="must be divisible by num_attention_heads",
        ),
        Case(
            "a checkpoint's config.json with 5 heads for hidden size 32",
            "clear error",
            lambda w: glue_from(w / "heads_5", w / "o79"),
            setup=lambda w: bad_checkpoint_config(w),
            says="heads_5/config.json): AlbertConfig.hidden_size (32) must be divisible",
        ),
        Case(
            "--num_layers_at_inference beyond the layers",
            "clear error",
            glue("o80", "--num_layers_at_inference", "4"),
            says="AlbertConfig.num_layers_at_inference must be",
        ),
        Case(
            "--hub_model_id that is no repository id",
            "clear error",
            glue("o82", "--push_to_hub", "--hub_model_id", "me/my model"),
            says="is no Hub repository id",
        ),
        Case(
            "--push_to_hub into a folder whose name is no repository name",
            "clear error",
            lambda w: fine_tuning("glue", w / "my run", *rte, "--data_dir", str(w / "rte"), "--push_to_hub"),
            says="is no Hub repository name",
        ),
        Case(
            "--resume_from_checkpoint naming a missing folder",
            "clear error",
            glue("o83", "--resume_from_checkpoint", "o83/checkpoint-4"),
            says="no such folder",
        ),
        Case(
            "--resume_from_checkpoint latest with --overwrite_output_dir",
            "clear error",
            glue("o84", "--resume_from_checkpoint", "latest", "--overwrite_output_dir"),
            says="removes the run that --resume_from_checkpoint latest",
        ),
        Case(
            "--metric_for_best_model the evaluation does not report",
            "clear error",
            lambda w: fine_tuning(
                "glue",
                w / "o85",
                *rte,
                "--data_dir",
                str(FIXTURES / "glue" / "RTE"),  # with its dev.tsv
                *("--do_eval", "--max_steps", "2", "--eval_strategy", "steps", "--eval_steps", "1"),
                *("--save_steps", "1", "--load_best_model_at_end", "--metric_for_best_model", "f1_score"),
                *("--max_seq_length", "32", "--max_eval_samples", "4"),
            ),
            says="the evaluation reports no 'f1_score'",
        ),
        Case(
            "--enable_jit_checkpoint (Trainer's own SIGTERM handling)",
            "clear error",
            glue("o86", "--enable_jit_checkpoint"),
            says="--enable_jit_checkpoint (on the command line) handles SIGTERM too",
        ),
    ]


def copy_finished_run(work: Path, name: str, edit: Callable[[Path], None] | None = None) -> None:
    """A copy of the finished 2-step run (its checkpoint-2 complete) for a case that resumes it, edited by `edit`."""
    shutil.rmtree(work / name, ignore_errors=True)
    shutil.copytree(work / "finished", work / name)
    if edit is not None:
        edit(work / name / "checkpoint-2")


def edit_global_step(checkpoint: Path) -> None:
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    write(checkpoint / "trainer_state.json", json.dumps({**state, "global_step": 1}))


def rename_with_its_step(checkpoint: Path) -> None:
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    write(checkpoint / "trainer_state.json", json.dumps({**state, "global_step": 3}))
    checkpoint.rename(checkpoint.parent / "checkpoint-3")


def resume_identity_cases() -> list[Case]:
    """A resume is the same run: what decides the next step's data is in the fingerprint, and a checkpoint whose
    files disagree about its step is refused, naming them."""

    def resumed(name: str, *options: str):
        return lambda w: (
            pretrain(w / name, w / "corpus.txt", "--max_steps", "4", "--resume_from_checkpoint", "latest") + [*options]
        )

    return [
        Case(
            "resume with another --seed",
            "clear error",
            resumed("seed_changed", "--seed", "7"),
            setup=lambda w: copy_finished_run(w, "seed_changed"),
            protected=lambda w: w / "seed_changed",
            says="--seed: 42 in the checkpoint, 7 now",
        ),
        Case(
            "resume with another --masked_lm_prob",
            "clear error",
            resumed("masking_changed", "--masked_lm_prob", "0.3"),
            setup=lambda w: copy_finished_run(w, "masking_changed"),
            protected=lambda w: w / "masking_changed",
            says="--masked_lm_prob: 0.15 in the checkpoint, 0.3 now",
        ),
        Case(
            "resume with another --max_ngram",
            "clear error",
            resumed("ngram_changed", "--max_ngram", "1"),
            setup=lambda w: copy_finished_run(w, "ngram_changed"),
            protected=lambda w: w / "ngram_changed",
            says="--max_ngram: 3 in the checkpoint, 1 now",
        ),
        Case(
            "resume from a checkpoint whose trainer_state.json step was edited",
            "clear error",
            resumed("step_edited"),
            setup=lambda w: copy_finished_run(w, "step_edited", edit_global_step),
            protected=lambda w: w / "step_edited",
            says="trainer_state.json says global step 1, but the folder is named for step 2",
        ),
        Case(
            "resume from a checkpoint renamed, its state's step edited to match",
            "clear error",
            resumed("renamed"),
            setup=lambda w: copy_finished_run(w, "renamed", rename_with_its_step),
            protected=lambda w: w / "renamed",
            says="run_fingerprint.json recorded step 2 when it was written",
        ),
    ]


def mount_small_disk(folder: Path, read_only: bool = False) -> str | None:
    """A 1 MiB tmpfs at `folder` (read-only if asked); why not, when it cannot be mounted here."""
    folder.mkdir(parents=True, exist_ok=True)
    options = "size=1m" + (",ro" if read_only else "")
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    except OSError as error:
        return f"cannot mount a small disk here ({error})"
    return None if result.returncode == 0 else f"cannot mount a small disk here ({result.stderr.decode().strip()})"


def unmount(folder: Path) -> None:
    subprocess.run(["umount", str(folder)], capture_output=True)


def machine_cases() -> list[Case]:
    """The machine's state (exit status 3) and a missing extra (exit status 4)."""
    japanese = FIXTURES / "corpus" / "ja" / "wagahai_wa_neko_de_aru.txt"
    return [
        Case(
            "Hub name with no network",
            "clear error",
            lambda w: fine_tuning(
                "glue",
                w / "o40",
                "--task_name",
                "rte",
                "--data_dir",
                str(w / "rte"),
                "--model_name_or_path",
                "albert/albert-base-v2",
            ),
            env={"HF_HUB_OFFLINE": "", "HF_ENDPOINT": "http://127.0.0.1:9"},  # nothing listens on port 9
            status=3,
        ),
        Case(
            "disk full during a checkpoint save (1 MiB disk)",
            "clear error",
            lambda w: pretrain(w / "full" / "out", w / "corpus.txt", "--save_steps", "1"),
            status=3,
            setup=lambda w: mount_small_disk(w / "full"),
            cleanup=lambda w: unmount(w / "full"),
        ),
        Case(
            "read-only output folder",
            "clear error",
            lambda w: pretrain(w / "read_only" / "out", w / "corpus.txt"),
            status=3,
            setup=lambda w: mount_small_disk(w / "read_only", read_only=True),
            cleanup=lambda w: unmount(w / "read_only"),
        ),
        Case(
            "Japanese corpus without fugashi (the ja extra)",
            "clear error",
            lambda w: pretrain(w / "o41", japanese),
            env=lambda w: {"PYTHONPATH": f"{w / 'no_fugashi'}:{REPO}"},
            status=4,
        ),
    ]


def finish_quickstart(work: Path) -> None:
    """A finished `quickstart --fast` folder (its tokenizer, model and report), for the case that runs it again."""
    done = run_cli(["quickstart", "--fast", "--output_dir", str(work / "done_quickstart")])
    if done.returncode != 0:
        raise SystemExit(f"the finished quickstart the case needs failed:\n{done.stderr[-3000:]}")


def change_corpus_after_a_checkpoint(work: Path) -> None:
    """Two steps with a checkpoint at each, then the corpus rewritten at its path: the same size and modification
    time, other text (ROT13 of its letters), so that only the content tells the two apart."""
    corpus = work / "changing.txt"
    text = (work / "corpus.txt").read_text(encoding="utf-8")
    corpus.write_text(text, encoding="utf-8")
    first = run_cli(pretrain(work / "identity", corpus, "--save_steps", "1", "--max_steps", "2"))
    if first.returncode != 0:
        raise SystemExit(f"the first run the case needs failed:\n{first.stderr[-3000:]}")
    stat = corpus.stat()
    corpus.write_text(codecs.encode(text, "rot13"), encoding="utf-8")
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert corpus.stat().st_size == stat.st_size and corpus.read_text(encoding="utf-8") != text


def finished_work_cases() -> list[Case]:
    """Finished work is never overwritten (one guard for every command that writes a folder); data identified by
    content; no secret in any file a job writes."""
    return [
        Case(
            "train-tokenizer into a finished model's folder",
            "clear error",
            lambda w: (
                ["train-tokenizer", str(w / "corpus.txt"), "--output_dir", str(w / "done_tokenizer")]
                + ["--vocab_size", "500"]
            ),
            protected=lambda w: w / "done_tokenizer",
            says="holds another run's files",
        ),
        Case(
            "export into the folder of --model_name_or_path",
            "clear error",
            lambda w: ["export", "--model_name_or_path", str(w / "pre"), "--output_dir", str(w / "pre")],
            protected=lambda w: w / "pre",
            says="is the folder of --model_name_or_path",
        ),
        Case(
            "latest over a finished model without a checkpoint",
            "clear error",
            lambda w: pretrain(w / "done_resume", w / "corpus.txt", "--resume_from_checkpoint", "latest"),
            protected=lambda w: w / "done_resume",
            says="holds a finished model",
        ),
        Case(
            "quickstart --fast over a finished quickstart",
            "clear error",
            lambda w: ["quickstart", "--fast", "--output_dir", str(w / "done_quickstart")],
            protected=lambda w: w / "done_quickstart",
            setup=lambda w: finish_quickstart(w),
            says="holds another run's files",
        ),
        Case(
            "resume after the corpus changed at its path (same size and time)",
            "clear error",
            lambda w: (
                pretrain(w / "identity", w / "changing.txt", "--save_steps", "1", "--max_steps", "4")
                + ["--resume_from_checkpoint", "latest"]
            ),
            setup=lambda w: change_corpus_after_a_checkpoint(w),
            says="the content of",
        ),
        Case(
            "Hub token as --hub_token=X, --hub-token X and HF_TOKEN",
            "ok",
            lambda w: (
                pretrain(w / "secrets", w / "corpus.txt", "--save_steps", "1")
                + [f"--hub_token={PLANTED[0]}", "--hub-token", PLANTED[1]]
            ),
            succeeds=True,
            env={"HF_TOKEN": PLANTED[2]},
            forbidden_text=PLANTED,
        ),
    ]


def load_cases() -> list[Case]:
    """The weights and the tokenizer checked at load, and a corpus the vocabulary does not cover."""
    japanese = FIXTURES / "corpus" / "ja" / "wagahai_wa_neko_de_aru.txt"
    return [
        Case(
            "glue from a model folder with only config.json",
            "clear error",
            lambda w: glue_from(w / "config_only", w / "o50"),
            says="holds no weights file",
        ),
        Case(
            "export of a model with a NaN weight",
            "clear error",
            lambda w: ["export", "--model_name_or_path", str(w / "nan_model"), "--output_dir", str(w / "o51")],
            says=f"holds NaN or inf in 1 tensor(s): {POISONED}",
        ),
        Case(
            "glue with a tokenizer larger than the embeddings",
            "clear error",
            lambda w: glue_from(w / "vocab_1000", w / "o52"),
            says="have no embedding row",
        ),
        Case(
            "pretrain on Japanese text with the English 30k vocabulary",
            "clear error",
            lambda w: pretrain(w / "o53", japanese),
            says="above --max_unknown_share",
        ),
    ]


# --------------------------------------------------------------------------------------------------------------------
# Running and classifying
# --------------------------------------------------------------------------------------------------------------------

LOCK_HOLDER = "import sys; from albert_hf.training.run_folder import acquire_lock; acquire_lock(sys.argv[1]); print('locked', flush=True); sys.stdin.read()"


def run_case(case: Case, work: Path) -> Outcome:
    skipped = case.setup(work) if case.setup else None  # first: a setup may make the protected folder
    protected = case.protected(work) if case.protected else None
    before = fingerprint(protected) if protected else None
    kept = case.kept(work) if case.kept else []
    kept_before = [identity(path) for path in kept]
    holder = None
    if case.holder:
        holder = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, str(work / "locked")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=CLI_ENV,
        )
        holder.stdout.readline()
    started = time.time()
    try:
        env = case.env(work) if callable(case.env) else case.env
        result = None if skipped else run_cli(case.argv(work), **env)
    finally:
        if holder is not None:
            holder.communicate(input="", timeout=300)
        if case.cleanup:
            case.cleanup(work)
    if skipped:
        return Outcome(case, 0, "skipped", skipped, 0.0)
    seconds = time.time() - started
    command = case.argv(work)[0]
    lost = protected is not None and fingerprint(protected) != before
    lost = lost or [identity(path) for path in kept] != kept_before
    errors = error_lines(result, command)
    last = (errors or result.stderr.strip().splitlines() or [""])[-1]
    leaks = secrets_written(case, work, result)
    if leaks:
        verdict, last = "secret written", "in " + ", ".join(leaks)
    elif lost:
        verdict = "run lost"
    elif "Traceback" in result.stderr:
        verdict = "traceback shown"
    elif result.returncode == 0:
        verdict = "ok" if case.succeeds else "silent success"
    elif result.returncode == case.status and len(errors) == 1:
        verdict = "clear error" if case.says in errors[0] else "wrong message"
    else:
        verdict = "other"
    return Outcome(case, result.returncode, verdict, last, seconds)


def secrets_written(case: Case, work: Path, result: subprocess.CompletedProcess) -> list[str]:
    """Where a forbidden text of the case is: files under its --output_dir (relative paths), stdout, stderr."""
    if not case.forbidden_text:
        return []
    argv = case.argv(work)
    output_dir = Path(argv[len(argv) - 1 - argv[::-1].index("--output_dir") + 1])
    places = {str(p.relative_to(output_dir)): p.read_bytes() for p in output_dir.rglob("*") if p.is_file()}
    places.update({"stdout": result.stdout.encode(), "stderr": result.stderr.encode()})
    return [where for where, content in places.items() if any(t.encode() in content for t in case.forbidden_text)]


def table(outcomes: list[Outcome]) -> str:
    rows = ["| case | expected | exit | outcome | message (last line) | s |", "| --- | --- | --- | --- | --- | --- |"]
    for o in outcomes:
        message = o.message.replace("|", "\\|")
        message = message if len(message) <= 160 else message[:157] + "..."
        rows.append(f"| {o.case.name} | {o.case.expected} | {o.status} | {o.verdict} | {message} | {o.seconds:.0f} |")
    counts = Counter(o.verdict for o in outcomes)
    as_expected = sum(o.verdict == o.case.expected for o in outcomes)
    skipped = sum(o.verdict == "skipped" for o in outcomes)
    rows.append("")
    # Every verdict, zeros included: "silent success 0, run lost 0" is the claim the table backs.
    verdicts = (
        "clear error",
        "ok",
        "traceback shown",
        "silent success",
        "run lost",
        "secret written",
        "wrong message",
        "other",
        "skipped",
    )
    rows.append(
        f"{len(outcomes)} cases, {as_expected} as expected ({skipped} skipped): "
        + ", ".join(f"{verdict} {counts[verdict]}" for verdict in verdicts)
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", help="work in this folder and keep it (default: a temporary folder, removed)")
    parser.add_argument("--only", nargs="*", help="run only the cases whose name contains one of these words")
    args = parser.parse_args(argv)
    work = Path(args.keep or tempfile.mkdtemp(prefix="albert_hf_bad_inputs_"))
    started = time.time()
    try:
        prepare(work)
        selected = [c for c in cases() if not args.only or any(word in c.name for word in args.only)]
        outcomes = []
        for case in selected:
            outcomes.append(run_case(case, work))
            print(f"{outcomes[-1].verdict:>16}  {case.name}", flush=True)
        print()
        print(table(outcomes))
        print(f"\n{time.time() - started:.0f} s in all")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
