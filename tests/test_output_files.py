"""One writer for every file a job writes (`albert_hf.output_files`): staged and atomic, never through a symlink,
never over a file no job wrote; a user's file in the way is kept (the job's file going beside it, logged) or, for a
file that must keep its name, refused before any work; `train-tokenizer` and `export` publish their folder whole.

Each case compares the bytes of the user's files before and after (and the target of a symlink), and what a job left
with what a rerun of the same command needs: the reference is the folder as the test laid it out by hand.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
from pathlib import Path

import pytest
from helpers import processes
from helpers.command_line import CLI_ENV
from helpers.data import FIXTURES, SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES

from albert_hf import output_files
from albert_hf.cli import main
from albert_hf.output_files import (
    MANIFEST_NAME,
    STAGING_PREFIX,
    OutputFileError,
    OutputWriteError,
    beside_name,
    destination,
    publish_folder,
    staged_folder,
    write_file,
    write_with,
)
from albert_hf.training.run_folder import finished_files

CORPUS = FIXTURES / "corpus" / "botchan.txt"


def files_of(folder: Path) -> dict[str, bytes]:
    """Every regular file under `folder` (relative name -> bytes), symlinks left out."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


# --------------------------------------------------------------------------------------------------------------------
# The writer
# --------------------------------------------------------------------------------------------------------------------


def test_a_new_file_is_written_and_recorded_and_the_jobs_own_file_is_replaced(tmp_path):
    path = write_file(tmp_path / "out" / "eval_results.json", '{"a": 1}\n')
    assert path == tmp_path / "out" / "eval_results.json" and path.read_text() == '{"a": 1}\n'
    manifest = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    assert manifest["files"]["eval_results.json"]["size"] == len('{"a": 1}\n')
    assert write_file(path, '{"a": 2}\n') == path and path.read_text() == '{"a": 2}\n'  # its own: replaced
    assert sorted(os.listdir(tmp_path / "out")) == [MANIFEST_NAME, "eval_results.json"]  # no staging file left


def test_a_users_file_stays_and_the_jobs_goes_beside_it_named_in_the_log(tmp_path, caplog):
    (tmp_path / "README.md").write_text("my notes\n")
    with caplog.at_level(logging.WARNING, logger="albert_hf.output_files"):
        written = write_file(tmp_path / "README.md", "the card\n")
    assert written == tmp_path / "README.albert_hf.md" and written.read_text() == "the card\n"
    assert (tmp_path / "README.md").read_text() == "my notes\n"
    assert f"{tmp_path / 'README.md'} is a file that this job did not write" in caplog.text
    assert "writes README.albert_hf.md beside it" in caplog.text
    # Written again (a resumed run): the file beside is the job's own, so it is the one replaced.
    assert write_file(tmp_path / "README.md", "card 2\n") == written and written.read_text() == "card 2\n"
    # A file the job wrote and the user edited since is the user's now.
    written.write_text("edited by hand\n")
    assert write_file(tmp_path / "README.md", "card 3\n") == tmp_path / beside_name("README.md", 2)
    assert written.read_text() == "edited by hand\n" and (tmp_path / "README.md").read_text() == "my notes\n"


def test_a_symlink_at_the_name_is_never_written_through(tmp_path):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not the job's\n")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "RTE.tsv").symlink_to(outside)
    (folder / "dangling.tsv").symlink_to(tmp_path / "nothing-there")
    assert write_file(folder / "RTE.tsv", "index\tprediction\n") == folder / "RTE.albert_hf.tsv"
    assert write_file(folder / "dangling.tsv", "x\n") == folder / "dangling.albert_hf.tsv"
    assert outside.read_text() == "not the job's\n" and not (tmp_path / "nothing-there").exists()
    assert (folder / "RTE.tsv").is_symlink() and (folder / "dangling.tsv").is_symlink()
    with pytest.raises(OutputFileError, match=r"RTE\.tsv is a symlink to .*elsewhere\.txt that this job did not"):
        write_file(folder / "RTE.tsv", "x", keep_name=True)


def test_a_file_that_must_keep_its_name_is_refused_and_nothing_is_written(tmp_path):
    (tmp_path / "spiece.model").write_bytes(b"the user's")
    (tmp_path / "config.json").mkdir()  # a folder where the job's file goes
    with pytest.raises(OutputFileError, match=r"spiece\.model is a file that this job did not write.*must have that"):
        write_file(tmp_path / "spiece.model", b"model", keep_name=True)
    assert destination(tmp_path / "config.json") == tmp_path / "config.albert_hf.json"
    with pytest.raises(OutputFileError, match=r"config\.json is a folder"):
        destination(tmp_path / "config.json", keep_name=True)
    assert (tmp_path / "spiece.model").read_bytes() == b"the user's"
    assert sorted(os.listdir(tmp_path)) == ["config.json", "spiece.model"]


def test_a_write_that_fails_halfway_leaves_the_name_as_it_was(tmp_path):
    target = tmp_path / "learning_curves.png"
    write_file(target, b"old curves")

    def half_then_full_disk(staging: Path) -> None:
        staging.write_bytes(b"half of the new")
        raise OSError(errno.ENOSPC, "No space left on device")  # as a full disk reports it: no file name

    with pytest.raises(OutputWriteError) as raised:
        write_with(target, half_then_full_disk)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(target)
    assert target.read_bytes() == b"old curves"
    assert not [name for name in os.listdir(tmp_path) if name.startswith(STAGING_PREFIX)]


def test_an_os_error_names_the_file_of_the_output_folder_not_a_file_the_code_held(tmp_path):
    """A full disk while `save_pretrained` copies the installed tokenization.py: the message names the destination."""
    source = tmp_path / "site-packages" / "tokenization.py"  # stands for the installed module being copied
    source.parent.mkdir()
    source.write_text("# remote code\n")
    out = tmp_path / "out"

    def copy_to_a_full_disk(src: Path, dst: Path) -> None:
        with open(src, "rb") as reading, open(dst, "wb") as writing:
            writing.write(reading.read()[:3])
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OutputWriteError) as raised, staged_folder(out) as staging:
        (staging.path / "spiece.model").write_bytes(b"model")
        copy_to_a_full_disk(source, staging.path / "tokenization.py")
    assert raised.value.filename == str(out / "tokenization.py")
    assert not out.exists()  # made for the files, none published: gone again
    from albert_hf.error_boundary import explain_failure

    status, message = explain_failure(raised.value, [])
    assert status == 3 and message.startswith(f"no space left on the device writing {out / 'tokenization.py'}")


def test_a_folder_is_published_whole_or_not_at_all(tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    (folder / "tokenizer_config.json").write_text("{}")  # the user's, and the tokenizer's file must have the name
    staging = tmp_path / "staging"
    staging.mkdir()
    for name in ("spiece.model", "spiece.vocab", "tokenizer_config.json"):
        (staging / name).write_text(name)
    with pytest.raises(OutputFileError, match=r"tokenizer_config\.json"):
        publish_folder(staging, folder)
    assert files_of(folder) == {"notes.txt": b"mine\n", "tokenizer_config.json": b"{}"}  # nothing moved in
    os.remove(folder / "tokenizer_config.json")
    published = publish_folder(staging, folder)
    assert sorted(published) == ["spiece.model", "spiece.vocab", "tokenizer_config.json"]
    assert (folder / "spiece.vocab").read_text() == "spiece.vocab" and not staging.exists()


def test_a_publish_killed_halfway_is_no_finished_work(tmp_path, monkeypatch):
    """The kill is planted between two renames of a publish: the names moved in are recorded as pending, so the
    folder guard does not count them as finished work and the same command run again replaces them."""
    folder = tmp_path / "tok"
    staging = tmp_path / "staging"
    staging.mkdir()
    for name in ("spiece.model", "spiece.vocab"):
        (staging / name).write_text(name)
    moves = []
    real_move = output_files._move

    def killed_after_one(source, target):
        if moves:
            raise KeyboardInterrupt  # stands for the kill: nothing after it runs
        moves.append(target)
        real_move(source, target)

    monkeypatch.setattr(output_files, "_move", killed_after_one)
    folder.mkdir()
    with pytest.raises(KeyboardInterrupt):
        publish_folder(staging, folder)
    assert (folder / "spiece.model").exists() and output_files.pending_files(folder) == {"spiece.model"}
    assert finished_files(str(folder), writes=("spiece.model", "spiece.vocab")) == []
    (folder / "spiece.model").write_text("the user's now")  # changed by hand: no longer the job's, so finished work
    assert finished_files(str(folder), writes=("spiece.model",)) == ["spiece.model"]


# --------------------------------------------------------------------------------------------------------------------
# The jobs: every file they write goes through the writer
# --------------------------------------------------------------------------------------------------------------------


def glue_argv(output_dir: Path, *extra: str) -> list[str]:
    return [
        "glue",
        "--task_name",
        "rte",
        "--data_dir",
        str(FIXTURES / "glue" / "RTE"),
        "--tokenizer_name_or_path",
        str(SPIECE_MODEL),
        "--config_overrides",
        TINY_ONE_LAYER_OVERRIDES,
        "--do_train",
        "--do_eval",
        "--do_predict",
        "--max_train_samples",
        "8",
        "--max_eval_samples",
        "4",
        "--max_predict_samples",
        "4",
        "--max_steps",
        "1",
        "--per_device_train_batch_size",
        "4",
        "--max_seq_length",
        "32",
        "--save_strategy",
        "no",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--output_dir",
        str(output_dir),
        *extra,
    ]


def test_a_job_keeps_every_file_of_the_user_and_writes_its_own_beside(tmp_path, caplog):
    """The folder the docs call "used as it is": a user's README.md, a file named like the leaderboard file
    (RTE.tsv), results and a README.md that is a symlink out of the folder in another. Nothing of theirs changes."""
    folder, linked = tmp_path / "notes", tmp_path / "linked"
    folder.mkdir()
    linked.mkdir()
    users = {"README.md": b"# my notes\n", "RTE.tsv": b"my own table\n", "all_results.json": b'{"mine": 1}\n'}
    for name, content in users.items():
        (folder / name).write_bytes(content)
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"outside the folder\n")
    (linked / "README.md").symlink_to(outside)

    with caplog.at_level(logging.WARNING, logger="albert_hf.output_files"):
        assert main(glue_argv(folder)) == 0
        assert main(glue_argv(linked)) == 0
    for name, content in users.items():
        assert (folder / name).read_bytes() == content
    assert outside.read_bytes() == b"outside the folder\n" and (linked / "README.md").is_symlink()
    card = (folder / "README.albert_hf.md").read_text()
    assert "RTE" in card and "albert_hf" in card
    assert (folder / "RTE.albert_hf.tsv").read_text().startswith("index\tprediction\n")
    assert set(json.loads((folder / "all_results.albert_hf.json").read_text())) >= {"eval_accuracy", "train_loss"}
    assert (linked / "README.albert_hf.md").is_file()
    for name in users:
        assert f"{folder / name} is a file that this job did not write" in caplog.text
    assert f"{linked / 'README.md'} is a symlink to {outside}" in caplog.text


def test_a_file_the_model_needs_by_name_is_refused_before_any_work(tmp_path, capsys):
    for name in ("spiece.model", "modeling.py"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / name).write_bytes(b"the user's")
        assert main(glue_argv(folder)) == 2
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert line == (
            f"albert-hf glue: error: --output_dir {folder} holds {name}, which no albert_hf job wrote: the job's "
            "model files have these names (they are read by name). Move them, pass another --output_dir, or "
            "--overwrite_output_dir to remove them first."
        )
        assert os.listdir(folder) == [name] and (folder / name).read_bytes() == b"the user's"


def test_push_to_hub_refuses_a_users_readme_before_any_work(tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "README.md").write_text("# my notes\n")
    assert main(glue_argv(folder, "--push_to_hub", "--hub_model_id", "someone/tiny")) == 2
    assert (
        "holds a README.md that no job wrote: --push_to_hub would upload it as the model card"
        in capsys.readouterr().err
    )
    assert os.listdir(folder) == ["README.md"]


def test_train_tokenizer_out_of_space_names_the_destination_and_leaves_nothing_a_rerun_trips_on(
    tmp_path, monkeypatch, capsys
):
    """A full disk planted in the last file `save_pretrained` writes (transformers' tokenizer.json): the line names
    the destination, not the staging folder nor an installed file, and the same command then succeeds."""
    from albert_hf.tokenization import AlbertHFTokenizer

    out = tmp_path / "tok"
    argv = ["train-tokenizer", str(CORPUS), "--output_dir", str(out), "--vocab_size", "300", "--quiet"]
    real_save = AlbertHFTokenizer._save_stock_files

    def full_disk(self, save_directory, filename_prefix):
        with open(os.path.join(save_directory, "tokenizer.json"), "w", encoding="utf-8") as writing:
            writing.write("{")  # what fitted on the disk
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(AlbertHFTokenizer, "_save_stock_files", full_disk)
    assert main(argv) == 3
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(
        f"albert-hf train-tokenizer: error: no space left on the device writing {out / 'tokenizer.json'}"
    )
    assert not out.exists()  # the job made the folder, and nothing of it was published

    monkeypatch.setattr(AlbertHFTokenizer, "_save_stock_files", real_save)
    assert main(argv) == 0
    assert sorted(os.listdir(out)) == [
        MANIFEST_NAME,
        "spiece.model",
        "spiece.vocab",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


@pytest.mark.slow  # two train-tokenizer runs in subprocesses, the first killed with SIGKILL mid-write: about 15 s
def test_train_tokenizer_killed_mid_write_leaves_nothing_a_rerun_trips_on(tmp_path):
    out = tmp_path / "tok"
    argv = ["train-tokenizer", str(CORPUS), "--output_dir", str(out), "--vocab_size", "300", "--quiet"]
    killer = (
        "import os, signal, sys\n"
        "from albert_hf.tokenization import AlbertHFTokenizer\n"
        "def dying(self, save_directory, filename_prefix):\n"  # the last file save_pretrained writes, half written
        "    open(os.path.join(save_directory, 'tokenizer.json'), 'w').write('{')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "AlbertHFTokenizer._save_stock_files = dying\n"
        "from albert_hf.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    killed = processes.run([sys.executable, "-c", killer, *argv], capture_output=True, text=True, env=CLI_ENV)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not {"spiece.model", "tokenizer.json"} & set(os.listdir(out))  # only the lock and the staging folder
    again = processes.run(
        [sys.executable, "-m", "albert_hf.cli", *argv], capture_output=True, text=True, env=CLI_ENV, timeout=600
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(os.listdir(out)) == [
        MANIFEST_NAME,
        "spiece.model",
        "spiece.vocab",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


@pytest.mark.needs("onnx", "onnxruntime", "onnxscript")
def test_export_failing_mid_write_publishes_nothing_and_a_rerun_succeeds(tmp_path, monkeypatch, capsys):
    """The export of the graph is replaced by a write that stops halfway on a full disk, then by one that succeeds:
    the first leaves no config.json without its model.onnx, the second publishes the whole folder."""
    from albert_hf import AlbertConfig, AlbertForSequenceClassification, onnx_export
    from albert_hf.argument_parsing import parse_config_overrides

    model = tmp_path / "model"
    config = AlbertConfig.preset("base-v2", **parse_config_overrides(TINY_ONE_LAYER_OVERRIDES))
    AlbertForSequenceClassification(config).save_pretrained(model)
    (model / "README.md").write_text("card of the model\n")
    out = tmp_path / "onnx"
    out.mkdir()
    (out / "README.md").write_text("# my export notes\n")

    def half_graph(_, path, *args, **kwargs):
        Path(path).write_bytes(b"half a graph")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(onnx_export, "export_onnx", half_graph)
    argv = ["export", "--model_name_or_path", str(model), "--output_dir", str(out)]
    assert main(argv) == 3
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"albert-hf export: error: no space left on the device writing {out / 'model.onnx'} (")
    assert os.listdir(out) == ["README.md"]

    monkeypatch.setattr(onnx_export, "export_onnx", lambda _, path, *a, **k: Path(path).write_bytes(b"a graph"))
    assert main(argv) == 0
    assert (out / "model.onnx").read_bytes() == b"a graph" and (out / "config.json").is_file()
    assert (out / "README.md").read_text() == "# my export notes\n"
    assert (out / "README.albert_hf.md").read_text() == "card of the model\n"
