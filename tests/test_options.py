"""Options checked before any work from one declaration (`albert_hf.options`, `argument_parsing.parse_args`), and the one
error boundary of `albert-hf` (`albert_hf.error_boundary.explain_failure`): each family of failure, one line, its exit status."""

from __future__ import annotations

import errno
import io
import json
import logging
import math
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import torch
from helpers.data import SPIECE_MODEL
from helpers.tiny import TINY_ONE_LAYER_OVERRIDES
from transformers import TrainingArguments

from albert_hf import cli, error_boundary
from albert_hf.argument_parsing import merge_config_overrides, parse_args, parse_config_overrides
from albert_hf.arguments import ModelArguments
from albert_hf.errors import MachineStateError, OptionError, UserError
from albert_hf.finetuning import FineTuningArguments
from albert_hf.job_setup import build_config
from albert_hf.options import COUNT, FRACTION, POSITIVE, STEPS, TRAINING_ARGUMENT_RANGES, Range, declared_range
from albert_hf.pretraining.arguments import ARGUMENT_CLASSES, parse_pretraining_args

# ---- the range vocabulary -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "accepted", "refused"),
    [
        (COUNT, [1, 2, 10**12], [0, -1, -5, math.inf, math.nan, 1.0e400, "3", True]),
        (STEPS, [-1, 1, 7], [0, -2, -5]),
        (POSITIVE, [1e-9, 3.0, 10], [0, 0.0, -1e-9, math.inf, math.nan]),
        (FRACTION, [0, 0.5, 0.999], [1, 1.0, -0.1, math.nan]),
        (Range(above=0, max=1), [1, 0.1], [0, 1.01]),
    ],
)
def test_each_range_accepts_exactly_its_values(declared, accepted, refused):
    assert [declared.problem(value) for value in [*accepted, None]] == [None] * (len(accepted) + 1)
    assert all(declared.problem(value) for value in refused), [v for v in refused if not declared.problem(v)]


def test_the_range_phrases_name_the_bounds_and_the_value():
    assert STEPS.problem(-5) == "must be -1 (no limit) or at least 1, got -5"
    assert FRACTION.problem(1.0) == "must be at least 0 and below 1, got 1.0"


def test_every_numeric_field_a_job_parses_declares_a_range():
    """A numeric option without a range would pass unchecked: every int/float field of the pretraining arguments has
    one (in its metadata, or TrainingArguments' table), but for ids and process bookkeeping listed here."""
    import dataclasses

    bookkeeping = {"local_rank", "torch_empty_cache_steps", "ddp_bucket_cap_mb", "neftune_noise_alpha"}
    missing = [
        f"{kind.__name__}.{f.name}"
        for kind in ARGUMENT_CLASSES
        for f in dataclasses.fields(kind)
        if any(word in str(f.type) for word in ("int", "float"))
        and "bool" not in str(f.type)
        and f.name not in bookkeeping
        and declared_range(kind, f) is None
    ]
    assert missing == []


def test_the_training_argument_table_names_real_fields():
    import dataclasses

    assert set(TRAINING_ARGUMENT_RANGES) <= {f.name for f in dataclasses.fields(TrainingArguments)}


# ---- parsing: refused before anything is built -----------------------------------------------------------------------


def pretrain(tmp_path, *options):
    return ["--output_dir", str(tmp_path / "out"), "--use_cpu", *options]


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        (["--max_steps", "-5"], ["--max_steps must be -1 (no limit) or at least 1, got -5"]),
        (["--max_steps", "0"], ["--max_steps must be"]),
        (["--per_device_train_batch_size", "0"], ["--per_device_train_batch_size must be at least 1, got 0"]),
        (["--learning_rate", "nan"], ["--learning_rate must be at least 0, got nan"]),
        (["--learning_rate", "-0.5"], ["--learning_rate must be at least 0, got -0.5"]),
        (["--learning_rate", "abc"], ["argument --learning_rate", "invalid float value: 'abc'"]),
        (["--masked_lm_prob", "0"], ["--masked_lm_prob must be above 0 and at most 1, got 0.0"]),
        (["--max_stepz", "3"], ["unknown option --max_stepz (did you mean --max_steps?)"]),
        (["--config_overrides", "hiden_size=32"], ["no field 'hiden_size'", "did you mean 'hidden_size'?"]),
        (["--config_overrides", "hidden_size=abc"], ["AlbertConfig.hidden_size is int, not 'abc'"]),
        (["--config_overrides", "hidden_size=-3"], ["--config_overrides", "hidden_size must be a positive integer"]),
        (["--config_preset", "bse-v2"], ["--config_preset 'bse-v2': did you mean 'base-v2'?"]),
        (["--global_batch_size", "64", "--gradient_accumulation_steps", "3"], ["64 does not split over", "x 3"]),
        (
            ["--global_batch_size", "64", "--gradient_accumulation_steps", "4", "--per_device_train_batch_size", "8"],
            [
                "--global_batch_size 64 and --per_device_train_batch_size 8 x --gradient_accumulation_steps 4",
                "disagree",
            ],
        ),
    ],
)
def test_pretraining_options_are_refused_before_any_work(tmp_path, options, fragments):
    with pytest.raises(OptionError) as refused:
        parse_pretraining_args(pretrain(tmp_path, *options))
    for fragment in fragments:
        assert fragment in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_every_range_problem_is_named_in_one_message(tmp_path):
    with pytest.raises(OptionError) as refused:
        parse_pretraining_args(pretrain(tmp_path, "--max_steps", "0", "--per_device_train_batch_size", "-2"))
    assert "--max_steps" in str(refused.value) and "--per_device_train_batch_size" in str(refused.value)


def test_a_json_file_of_arguments_is_checked_as_the_command_line(tmp_path):
    path = tmp_path / "args.json"
    path.write_text(json.dumps({"output_dir": str(tmp_path), "max_steps": -5}))
    with pytest.raises(OptionError, match="--max_steps must be"):
        parse_args((ModelArguments, FineTuningArguments, TrainingArguments), [str(path)])
    path.write_text(json.dumps({"output_dir": str(tmp_path), "max_stepz": 5}))
    with pytest.raises(OptionError, match="did you mean --max_steps"):
        parse_args((ModelArguments, FineTuningArguments, TrainingArguments), [str(path)])
    path.write_text("{not json")
    with pytest.raises(
        OptionError, match=r"args.json: not a YAML or JSON file of options \(expected ',' or '}', .* at line 1\)$"
    ):
        parse_args((ModelArguments, FineTuningArguments, TrainingArguments), [str(path)])


def test_arguments_built_in_python_are_checked_too():
    with pytest.raises(OptionError, match="--max_train_samples must be at least 1, got 0"):
        FineTuningArguments(max_train_samples=0)


def test_the_range_shows_in_the_help():
    help_text = io.StringIO()
    with pytest.raises(SystemExit), redirect_stderr(io.StringIO()):
        from contextlib import redirect_stdout

        with redirect_stdout(help_text):
            parse_pretraining_args(["--help"])
    assert "(at least 1)" in help_text.getvalue()


# ---- --config_overrides -----------------------------------------------------------------------------------------------


def test_config_overrides_are_typed_by_the_field():
    overrides = parse_config_overrides("hidden_size=32,hidden_dropout_prob=0.1,sharing=none,pad_token_id=null")
    assert overrides == {"hidden_size": 32, "hidden_dropout_prob": 0.1, "sharing": "none", "pad_token_id": None}
    assert type(overrides["hidden_size"]) is int
    with pytest.raises(OptionError, match="expected key=value"):
        parse_config_overrides("hidden_size")


def test_a_recipe_and_the_given_overrides_merge_key_by_key(tmp_path, caplog):
    merged, replaced = merge_config_overrides("hidden_size=128,num_hidden_layers=4", "hidden_size=64,sharing=none")
    assert parse_config_overrides(merged) == {"hidden_size": 64, "num_hidden_layers": 4, "sharing": "none"}
    assert replaced == ["hidden_size=64 (given) instead of hidden_size=128"]

    job = parse_pretraining_args(pretrain(tmp_path, "--recipe", "tiny", "--config_overrides", "hidden_size=64"))
    overrides = parse_config_overrides(job.config_overrides)
    assert (overrides["hidden_size"], overrides["num_hidden_layers"]) == (64, 4)  # the recipe's other fields stay
    kept = getattr(job.training, "_albert_hf_kept_values")
    assert "--config_overrides hidden_size=64 (given) instead of hidden_size=128 of --recipe tiny" in kept


def test_a_given_value_the_recipe_would_set_otherwise_is_logged_at_the_start(tmp_path, caplog):
    from albert_hf.job_setup import start_job

    job = parse_pretraining_args(pretrain(tmp_path, "--recipe", "tiny", "--max_steps", "70"))
    with caplog.at_level(logging.INFO, logger="albert_hf"):
        start_job(job.training, model_args=job.model)
    assert "--max_steps 70 (given) instead of 300 of --recipe tiny" in caplog.text


def test_an_override_the_job_would_replace_is_refused():
    model_args = ModelArguments(config_overrides="num_labels=5," + TINY_ONE_LAYER_OVERRIDES)
    with pytest.raises(OptionError, match=r"num_labels=5 \(the job sets 2\)"):
        build_config(model_args, num_labels=2)
    assert build_config(ModelArguments(config_overrides="num_labels=2"), num_labels=2).num_labels == 2


def test_an_override_of_a_checkpoint_weights_shape_is_refused(tmp_path):
    saved = {"model_type": "albert", "hidden_size": 32, "num_attention_heads": 4, "sharing": "all"}
    (tmp_path / "config.json").write_text(json.dumps(saved))
    argv = ["--output_dir", str(tmp_path / "out"), "--model_name_or_path", str(tmp_path)]
    with pytest.raises(OptionError, match=r"hidden_size=64 \(the checkpoint has 32\)"):
        parse_args((ModelArguments, TrainingArguments), [*argv, "--config_overrides", "hidden_size=64"])
    same_shape = ["--config_overrides", "hidden_size=32,hidden_dropout_prob=0.2"]
    parse_args((ModelArguments, TrainingArguments), [*argv, *same_shape])  # dropout is no shape


def test_a_preset_given_with_a_checkpoint_is_refused(tmp_path):
    argv = ["--output_dir", str(tmp_path), "--model_name_or_path", str(tmp_path), "--config_preset", "large-v2"]
    with pytest.raises(OptionError, match="--config_preset large-v2 has no effect with --model_name_or_path"):
        parse_args((ModelArguments, TrainingArguments), argv)


# ---- the error boundary -----------------------------------------------------------------------------------------------


def explain(error: BaseException, argv=()):
    try:
        raise error
    except BaseException as raised:  # give it a traceback, as a real failure has
        return error_boundary.explain_failure(raised, list(argv))


def test_user_errors_are_status_2():
    assert explain(UserError("--x is bad")) == (2, "--x is bad")


def full_device():
    """/dev/full opened for writing, never created: every write to it fails with ENOSPC, as on a full disk."""
    import os
    import stat

    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("no /dev/full device on this system")
    return os.fdopen(os.open("/dev/full", os.O_WRONLY), "wb", buffering=0)


def test_a_full_disk_is_status_3_with_the_free_space(tmp_path):
    """The real errors of a full disk: a write to /dev/full (ENOSPC), and torch.save's zip writer there, which says
    `unexpected pos` and nothing of space."""
    with pytest.raises(OSError) as written, full_device() as handle:
        handle.write(b"x" * 100_000)
    status, message = explain(written.value, ["--output_dir", str(tmp_path)])
    assert status == 3 and message.startswith("no space left on the device writing ")
    assert f"MiB free on the disk of --output_dir {tmp_path}" in message
    full_device().close()  # skips where there is no /dev/full (torch.save would create a file of that name)
    with pytest.raises(RuntimeError, match="unexpected pos") as saved:
        torch.save({"weights": torch.zeros(1000)}, "/dev/full")
    status, message = explain(saved.value)
    assert (status, message.split(" writing ")[0]) == (3, "no space left on the device")


@pytest.mark.parametrize(
    ("code", "fragment"),
    [(errno.EROFS, "read-only file system"), (errno.EACCES, "permission denied"), (errno.EDQUOT, "no space left")],
)
def test_the_machine_state_names_the_file(code, fragment):
    status, message = explain(OSError(code, "strerror", "/data/out/model.safetensors"))
    assert status == 3 and fragment in message and "/data/out/model.safetensors" in message


def test_no_network_is_status_3():
    import socket

    with pytest.raises(OSError) as refused:
        socket.create_connection(("127.0.0.1", 9), timeout=5)  # the discard port: nothing listens
    status, message = explain(ConnectionError("offline"))
    assert (status, message) == (3, "no network: cannot reach the Hub (offline)")
    assert explain(refused.value)[0] == 3
    assert explain(MachineStateError("no network: x"))[0] == 3


def test_a_hub_name_without_network_stops_at_once(tmp_path, monkeypatch):
    from albert_hf.job_setup import check_hub_reachable

    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)  # CI sets HF_HUB_OFFLINE=1
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(MachineStateError, match="--model_name_or_path albert/albert-base-v2 is a Hub name"):
        check_hub_reachable(ModelArguments(model_name_or_path="albert/albert-base-v2"))
    check_hub_reachable(ModelArguments(tokenizer_name_or_path=str(SPIECE_MODEL)))  # local: nothing asked
    with pytest.raises(MachineStateError, match="--dataset_name nyu-mll/glue is a Hub name"):
        check_hub_reachable(ModelArguments(), dataset_name="nyu-mll/glue")
    check_hub_reachable(ModelArguments(), dataset_name="csv")  # one of datasets' own builders: no network needed
    # A tokenizer's folder holds no weights, and needs none.
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "spiece.model").write_bytes(SPIECE_MODEL.read_bytes())
    check_hub_reachable(ModelArguments(tokenizer_name_or_path=str(tmp_path / "tokenizer")))


def test_a_missing_extra_gives_the_install_line():
    with pytest.raises(ImportError) as missing:
        import fugashi_not_installed  # noqa: F401
    missing.value.name = "fugashi"
    assert explain(missing.value) == (4, 'fugashi is not installed: pip install "albert_hf[ja]"')
    assert explain(ImportError("export needs onnx: pip install 'albert_hf[onnx]'"))[0] == 4
    assert explain(ImportError("cannot import name x", name="numpy")) is None  # a fault: keeps its traceback


def read_utf8(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def test_library_errors_from_user_data_name_the_file(tmp_path):
    broken = tmp_path / "tokenizer_config.json"
    broken.write_text('{"a": 1,\n "b": }')
    with pytest.raises(json.JSONDecodeError) as decoded:
        with open(broken, encoding="utf-8") as handle:
            json.load(handle)
    assert explain(decoded.value) == (2, f"{broken}: not valid JSON (line 2, column 7: Expecting value)")

    latin = tmp_path / "corpus.txt"
    latin.write_bytes(b"fine\ncaf\xe9\n")
    with pytest.raises(UnicodeDecodeError) as undecodable:
        read_utf8(latin)
    assert explain(undecodable.value) == (2, f"{latin}: not valid UTF-8 at line 2 (invalid continuation byte)")

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    from safetensors import safe_open

    with pytest.raises(Exception) as unreadable:
        safe_open(str(weights), "pt")
    status, message = explain(unreadable.value)
    assert status == 2 and "not a readable safetensors file" in message


def test_the_checks_of_the_remote_code_modules_are_user_errors():
    from albert_hf import AlbertConfig, AlbertModel

    with pytest.raises(ValueError) as refused:
        AlbertConfig(hidden_size=0)
    assert explain(refused.value) == (2, "AlbertConfig.hidden_size must be a positive integer, got 0.")
    with pytest.raises(ValueError) as unbuildable:
        AlbertModel(AlbertConfig(hidden_size=33, num_attention_heads=2, intermediate_size=8, num_hidden_layers=1))
    assert explain(unbuildable.value)[0] == 2
    assert explain(ValueError("a bug somewhere else")) is None


def test_debug_keeps_the_traceback(tmp_path):
    argv = ["pretrain", "--output_dir", str(tmp_path), "--max_steps", "-5"]
    assert cli.main(argv) == 2
    with pytest.raises(OptionError):
        cli.main(["--debug", *argv])


def test_the_exit_statuses_are_documented():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Output folders, the lock, and errors")[1].split("\n## ")[0]
    for status in ("status 2", "status 3", "status 4"):
        assert status in section
