"""One fine-tuning job run once per seed, and the spread of their results: `--seeds` of every fine-tuning job.

    albert-hf glue --task_name rte --data_dir glue_data/RTE --model_name_or_path <albert checkpoint> --preset rte \\
        --do_train --do_eval --do_predict --seeds 0,1,2,3,4 --output_dir out/rte

On the small GLUE tasks one run says little: from one seed to the next RTE moves by points, and the paper reports the
median of five runs (Lan et al., 2020, section 4.2.2). With `--seeds` the job runs once per seed, each run a whole run
of the job in a folder of its own, then the runs' results are summarized:

    out/rte/seed-0/ ... seed-4/   each seed's run: model, card, checkpoints, results, prediction files, and
                                  _seed_run.json (the options it ran with; "finished" once the job returned)
    out/rte/seeds_summary.json    each seed's dev results (and, with best-dev selection, the step kept and the
                                  metric at the last step); per metric the median, mean, sample standard deviation,
                                  min, max and range; the metric the seeds are ranked by and the median seed
    out/rte/seeds_summary.md      the same as a table
    out/rte/RTE.tsv               the median seed's prediction files (the leaderboard's), copied

The median seed is the middle one by the ranking metric (`metric_for_best_model`, else the task's own metric,
`albert_hf.metrics.task_metric`), ties broken by seed order; of an even number of seeds, the lower middle one. Its
model card gets a section with the table. Every figure is read back from the seeds' own files
(`summarize_seeds`), so a summary can be rebuilt from the folders alone.

Resumable per seed: the same command again skips the finished seeds, resumes a started one from its newest complete
checkpoint (`--resume_from_checkpoint latest`: the job checks its fingerprint), restarts one that left files but no
complete checkpoint (`--overwrite_output_dir` on its own folder), and runs the others. A seed folder written with other
options is refused, naming them, unless `--overwrite_output_dir` (then every seed is trained again). The output folder
is locked for the whole set, and each seed's folder by its job, with the guard of any job (`albert_hf.training.run_folder`).

A job script calls `run_seeds` in one line once its arguments are parsed (albert_hf/scripts/glue.py):

    if seed_runs_asked(data_args):
        return run_seeds(main, argv, model_args, data_args, task_args, training_args)

`run_seeds` then calls the script's `main` once per seed, with `--seed N --output_dir <output_dir>/seed-N` added to
its command line; inside those calls `seed_runs_asked` is False.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import json
import logging
import math
import os
import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .argument_parsing import is_given
from .arguments import ModelArguments
from .errors import OptionError, UserError
from .hub import quality_metrics
from .job_setup import setup_logging
from .metrics import task_metric
from .training.model_selection import logged_metric_name, training_log
from .training.reliability import latest_checkpoint
from .training.run_folder import (
    LOCK_NAME,
    OutputFolderError,
    acquire_lock,
    open_run_folder,
    removable_run_files,
    run_files,
)

logger = logging.getLogger(__name__)

SEED_FOLDER = "seed-{}"
SEED_RUN_NAME = (
    "_seed_run.json"  # in each seed folder (left out of Hub uploads, as "_" names are): its options, its status
)
SUMMARY_NAME = "seeds_summary.json"
SUMMARY_TABLE_NAME = "seeds_summary.md"
STARTED, FINISHED = "started", "finished"
CARD_SECTION = "## Results over seeds"

# How a seed's run starts (`seed_start`), and what the runner adds to its command line for it.
FRESH, RESUME, RESTART, SKIP = "fresh", "resume", "restart", "skip"
START_OPTIONS = {
    FRESH: [],
    RESUME: ["--resume_from_checkpoint", "latest"],
    RESTART: ["--overwrite_output_dir", "true"],
}

# Options that do not change what a seed's run trains and evaluates: where it writes, how it logs, the seed itself,
# how it starts. A finished seed run with other values of these still belongs to the set.
OPTIONS_OUTSIDE_THE_SET = frozenset(
    {
        "output_dir",
        "logging_dir",
        "run_name",
        "seed",
        "seeds",
        "resume_from_checkpoint",
        "overwrite_output_dir",
        "report_to",
        "disable_tqdm",
        "dataloader_pin_memory",
        "dataloader_num_workers",
        "logging_strategy",
        "logging_steps",
        "logging_first_step",
        "logging_nan_inf_filter",
        "log_level",
        "log_level_replica",
        "log_on_each_node",
        "local_rank",
        "hub_token",
        "trackio_space_id",
        "project",
    }
)

# The seed being run by `run_seeds` in this context (None outside a set): the script's `main` is called again for
# each seed, and must then run the job itself rather than a set of seeds.
_RUNNING_SEED: contextvars.ContextVar[int | None] = contextvars.ContextVar("albert_hf_running_seed", default=None)


def seed_runs_asked(data_args) -> bool:
    """Whether the job is to run once per seed of `--seeds` (`run_seeds`), rather than once: --seeds given, and not
    already inside one seed's run."""
    return bool(getattr(data_args, "seeds", None)) and _RUNNING_SEED.get() is None


def running_seed() -> int | None:
    """The seed whose run `run_seeds` is making in this context, or None."""
    return _RUNNING_SEED.get()


@contextlib.contextmanager
def _seed_context(seed: int) -> Iterator[None]:
    token = _RUNNING_SEED.set(seed)
    try:
        yield
    finally:
        _RUNNING_SEED.reset(token)


def seed_folder(output_dir: str, seed: int) -> str:
    return os.path.join(output_dir, SEED_FOLDER.format(seed))


# --------------------------------------------------------------------------------------------------------------------
# Running the set
# --------------------------------------------------------------------------------------------------------------------


def run_seeds(job_main: Callable[[list[str]], int | None], argv: list[str] | None, *arguments) -> int:
    """Run `job_main` (a job script's `main`) once per seed of `--seeds`, each into `<output_dir>/seed-<N>`, then
    write the summary (`summarize_seeds`), the median seed's prediction files and its card's section; see the module
    docstring. `arguments`: the job's parsed dataclasses (ModelArguments, the data arguments with `--seeds`, the
    task's, TrainingArguments). Returns the exit status (0, or the first seed run's that was not 0)."""
    import sys

    from transformers import TrainingArguments

    argv = list(sys.argv[1:] if argv is None else argv)
    training_args = next(each for each in arguments if isinstance(each, TrainingArguments))
    model_args = next(each for each in arguments if isinstance(each, ModelArguments))
    data_args = next(each for each in arguments if hasattr(each, "seed_list"))
    seeds = data_args.seed_list
    check_seed_options(data_args, training_args)
    setup_logging(training_args)
    options = set_options(arguments)
    overwrite = bool(model_args.overwrite_output_dir)
    output_dir = training_args.output_dir
    main_process = training_args.process_index == 0

    # The whole set's folder, with the guard and lock of any job's (and the model and tokenizer sources checked).
    open_run_folder(training_args, model_args)
    try:
        starts = {seed: seed_start(seed_folder(output_dir, seed), seed, options, overwrite) for seed in seeds}
        logger.info(
            "Seeds %s into %s: %s.",
            ",".join(map(str, seeds)),
            output_dir,
            ", ".join(f"seed {seed} {_START_WORDS[start]}" for seed, start in starts.items()),
        )
        for seed in seeds:
            folder = seed_folder(output_dir, seed)
            if starts[seed] == SKIP:
                logger.info("Seed %d: finished in %s; not run again.", seed, folder)
                continue
            logger.info("Seed %d: %s in %s.", seed, _START_WORDS[starts[seed]], folder)
            if main_process:
                write_seed_run(folder, seed, options, STARTED)
            with _seed_context(seed):
                status = job_main([*argv, "--seed", str(seed), "--output_dir", folder, *START_OPTIONS[starts[seed]]])
            if status:
                return int(status)
            if main_process:
                write_seed_run(folder, seed, options, FINISHED)
                acquire_lock(folder).release()  # this process's lease on the seed's folder: its job is done
        if main_process:
            summary = summarize_seeds(
                output_dir,
                seeds,
                metric=training_args.metric_for_best_model,
                greater_is_better=training_args.greater_is_better,
            )
            publish_summary(output_dir, summary)
    finally:
        if main_process:
            acquire_lock(output_dir).release()
    return 0


_START_WORDS = {
    FRESH: "to run",
    RESUME: "to resume from its newest complete checkpoint",
    RESTART: "to run again (it stopped before a complete checkpoint)",
    SKIP: "finished",
}


def check_seed_options(data_args, training_args) -> None:
    """Refuse, before any work, what a set of seeds cannot do: one --seed for all, a --resume_from_checkpoint (each
    seed resumes itself), --push_to_hub (five models to one repository), no training or no evaluation to compare."""
    seeds = data_args.seeds
    if is_given(training_args, "seed"):
        raise OptionError(
            f"--seed {training_args.seed} and --seeds {seeds}: each run takes its seed from --seeds; leave out --seed."
        )
    if training_args.resume_from_checkpoint:
        raise OptionError(
            f"--resume_from_checkpoint with --seeds {seeds}: each unfinished seed resumes from its own newest complete "
            "checkpoint by itself; run the same command again without --resume_from_checkpoint."
        )
    if training_args.push_to_hub:
        raise OptionError(
            f"--push_to_hub with --seeds {seeds}: each seed trains a model of its own. Run without --push_to_hub, then "
            "push the median seed's folder (seeds_summary.json names it) with albert_hf.hub.push_to_hub."
        )
    if not (training_args.do_train and training_args.do_eval):
        raise OptionError(
            f"--seeds {seeds} compares the seeds' trained models on the evaluation set: pass --do_train and --do_eval."
        )


def set_options(arguments: Sequence[Any]) -> dict[str, Any]:
    """The options of the job that every seed's run shares (all but `OPTIONS_OUTSIDE_THE_SET`), as JSON values."""
    from transformers import TrainingArguments

    values: dict[str, Any] = {}
    for each in arguments:
        fields = each.to_dict() if isinstance(each, TrainingArguments) else dataclasses.asdict(each)
        values.update({name: value for name, value in fields.items() if not name.startswith("_")})
    kept = {name: value for name, value in values.items() if name not in OPTIONS_OUTSIDE_THE_SET}
    return json.loads(json.dumps(kept, sort_keys=True, default=str))


def read_seed_run(folder: str) -> dict[str, Any] | None:
    """The `_seed_run.json` of a seed's folder, or None when there is none (a folder the runner never started)."""
    path = os.path.join(folder, SEED_RUN_NAME)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: unreadable ({error}); remove it to run that seed again.") from error
    if not isinstance(record, dict) or record.get("status") not in (STARTED, FINISHED):
        raise UserError(f"{path}: not a seed run record of albert_hf; remove it to run that seed again.")
    return record


def write_seed_run(folder: str, seed: int, options: dict[str, Any], status: str) -> None:
    """Write `_seed_run.json` atomically: the seed, its options, its status and when."""
    os.makedirs(folder, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record = {"seed": seed, "status": status, "options": options}
    previous = read_seed_run(folder) if status == FINISHED else None
    record["started"] = previous.get("started", now) if previous else now
    if status == FINISHED:
        record["finished"] = now
    _write_atomically(os.path.join(folder, SEED_RUN_NAME), json.dumps(record, indent=1, sort_keys=True) + "\n")


def option_differences(recorded: dict[str, Any], options: dict[str, Any]) -> list[str]:
    """'--name recorded (then) vs now' for each option whose value differs, sorted."""
    names = sorted(set(recorded) | set(options))
    return [
        f"--{name} {recorded.get(name)!r} then, {options.get(name)!r} now"
        for name in names
        if recorded.get(name) != options.get(name)
    ]


def seed_start(folder: str, seed: int, options: dict[str, Any], overwrite: bool = False) -> str:
    """How seed `seed`'s run starts in `folder`: SKIP (finished with these options), RESUME (started, with a complete
    checkpoint), RESTART (started, files but no complete checkpoint; or any run of ours with --overwrite_output_dir),
    FRESH (nothing of ours there). Refused unless `overwrite`, naming what is there: a run of ours with other options,
    and another run's model or checkpoints that no set started (never taken for a half-finished seed)."""
    record = read_seed_run(folder)
    if record is None:
        found = run_files(folder)
        if found and not overwrite:
            raise OutputFolderError(
                f"{folder} holds another run's files ({', '.join(found[:3])}), not a seed that --seeds started. Pass "
                "another --output_dir, or --overwrite_output_dir to remove them and run every seed."
            )
        return FRESH  # with --overwrite_output_dir, its job removes them
    if overwrite:
        return RESTART
    differences = option_differences(record.get("options", {}), options)
    if differences:
        shown = "; ".join(differences[:3]) + (f"; and {len(differences) - 3} more" if len(differences) > 3 else "")
        raise OptionError(
            f"{folder} holds seed {seed} of a run with other options ({shown}). Pass another --output_dir, or "
            "--overwrite_output_dir to train every seed again."
        )
    if record["status"] == FINISHED:
        return SKIP
    if latest_checkpoint(folder, marked=True) is not None:
        return RESUME
    return RESTART if run_files(folder) else FRESH


# --------------------------------------------------------------------------------------------------------------------
# The summary, from the seeds' files
# --------------------------------------------------------------------------------------------------------------------


def summarize_seeds(
    output_dir: str, seeds: Sequence[int], metric: str | None = None, greater_is_better: bool | None = None
) -> dict[str, Any]:
    """The summary of a set of seed runs, from the files each seed's job wrote in `<output_dir>/seed-<N>`:
    `eval*_results.json` (every quality metric; "eval_mismatched_accuracy" becomes "mismatched_accuracy"),
    `train_results.json` (the step best-dev selection kept) and `trainer_state.json` (the ranking metric at the last
    step, when an evaluation was logged there).

    The seeds are ranked by `metric` (`metric_for_best_model`; "loss" or None: the task's metric, read off the
    seeds' config.json by `task_metric`), higher being better unless `greater_is_better` is False (it counts only for
    a given `metric`). Statistics per metric every seed has: median, mean, sample standard deviation (n - 1; 0 for
    one seed), min, max and range (max - min)."""
    runs = [seed_results(output_dir, seed) for seed in seeds]
    metric, greater_is_better = ranking_metric(output_dir, seeds, runs, metric, greater_is_better)
    for run in runs:
        if metric not in run["metrics"]:
            raise UserError(
                f"{run['folder']}: its evaluation results have no {metric!r} to rank the seeds by (they hold "
                f"{sorted(run['metrics'])})."
            )
        last = last_step_value(os.path.join(output_dir, run["folder"]), metric)
        if last is not None:
            run[f"last_step_{metric}"] = last
    names = [name for name in runs[0]["metrics"] if all(name in run["metrics"] for run in runs)]
    statistics_ = {name: spread([run["metrics"][name] for run in runs]) for name in names}
    last_key = f"last_step_{metric}"
    if all(last_key in run for run in runs):
        statistics_[last_key] = spread([run[last_key] for run in runs])
    ranked = sorted(runs, key=lambda run: (_score(run["metrics"][metric], greater_is_better), seeds.index(run["seed"])))
    median_run = ranked[(len(ranked) - 1) // 2]
    return {
        "seeds": list(seeds),
        "metric": metric,
        "greater_is_better": greater_is_better,
        "median_seed": median_run["seed"],
        "median_folder": median_run["folder"],
        "runs": runs,
        "statistics": statistics_,
    }


def _score(value: float, greater_is_better: bool) -> float:
    """A value to sort ascending by, worst first (NaN, e.g. the correlation of constant predictions, is the worst)."""
    if math.isnan(value):
        return -math.inf
    return value if greater_is_better else -value


def seed_results(output_dir: str, seed: int) -> dict[str, Any]:
    """One seed's results from its folder's files (`summarize_seeds`)."""
    name = SEED_FOLDER.format(seed)
    folder = os.path.join(output_dir, name)
    metrics: dict[str, float] = {}
    files = sorted(entry for entry in _listing(folder) if entry.startswith("eval") and entry.endswith("_results.json"))
    if "eval_results.json" not in files:
        raise UserError(f"{folder}: no eval_results.json; the seed's run did not evaluate (pass --do_eval).")
    for entry in files:
        metrics.update(quality_metrics(_read_json(os.path.join(folder, entry))))
    run: dict[str, Any] = {"seed": seed, "folder": name, "metrics": metrics}
    train = _read_json(os.path.join(folder, "train_results.json"), missing_ok=True)
    for key in ("best_step", "best_of_evaluations"):
        if key in train:
            run[key] = train[key]
    return run


def ranking_metric(
    output_dir: str, seeds: Sequence[int], runs: list[dict[str, Any]], metric: str | None, greater: bool | None
) -> tuple[str, bool]:
    """(the metric name without "eval_", whether higher is better) the seeds are ranked by (`summarize_seeds`)."""
    if metric and metric != "loss" and not metric.endswith("_loss"):
        return metric.removeprefix("eval_"), greater is not False
    config = _read_json(os.path.join(seed_folder(output_dir, seeds[0]), "config.json"), missing_ok=True)
    named = task_metric(config.get("finetuning_task"), config.get("problem_type"))
    if named is None or named not in runs[0]["metrics"]:
        raise UserError(
            f"{seed_folder(output_dir, seeds[0])}: no metric of its task to rank the seeds by; pass "
            f"--metric_for_best_model (one of {sorted(runs[0]['metrics'])})."
        )
    return named, True


def last_step_value(folder: str, metric: str) -> float | None:
    """The value of `metric` the run logged at its last training step (`trainer_state.json`), or None when it
    logged no evaluation there: with best-dev selection, the last step's model against the kept one."""
    state = _read_json(os.path.join(folder, "trainer_state.json"), missing_ok=True)
    key = logged_metric_name(metric)
    last = state.get("global_step")
    values = [
        entry[key] for entry in training_log(state.get("log_history", [])) if key in entry and entry.get("step") == last
    ]
    return values[-1] if values else None


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, mean, sample standard deviation (0 for one value), min, max and range of `values`."""
    values = [float(value) for value in values]
    return {
        "median": statistics.median(values),
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
        "range": max(values) - min(values),
    }


# --------------------------------------------------------------------------------------------------------------------
# Writing it out: the summary files, the median seed's predictions, its card
# --------------------------------------------------------------------------------------------------------------------


def publish_summary(output_dir: str, summary: dict[str, Any]) -> None:
    """Write seeds_summary.json and seeds_summary.md, copy the median seed's prediction files beside them (never over
    a file of the folder a set did not write), and add the table to the median seed's model card."""
    previous = _read_json(os.path.join(output_dir, SUMMARY_NAME), missing_ok=True)
    median_folder = os.path.join(output_dir, summary["median_folder"])
    copied = []
    for name in prediction_files(median_folder):
        target = os.path.join(output_dir, name)
        if os.path.exists(target) and name not in previous.get("prediction_files", []):
            logger.warning(
                "%s was not written by a set of seeds: left as it is (the median seed's is in %s).",
                target,
                median_folder,
            )
            continue
        with open(os.path.join(median_folder, name), "rb") as handle:
            _write_atomically(target, handle.read())
        copied.append(name)
    summary = {**summary, "prediction_files": copied}
    table = spread_table(summary)
    _write_atomically(os.path.join(output_dir, SUMMARY_NAME), json.dumps(summary, indent=1) + "\n")
    _write_atomically(os.path.join(output_dir, SUMMARY_TABLE_NAME), table)
    add_spread_to_card(median_folder, summary, table)
    logger.info("Results over seeds (%s):\n%s", os.path.join(output_dir, SUMMARY_TABLE_NAME), table)


def prediction_files(folder: str) -> list[str]:
    """The files of a seed's folder that are its predictions (leaderboard files, predictions_test.*,
    predictions.json, ...): every plain file but the model, tokenizer, training state, results, card and records."""
    run_state = set(removable_run_files(folder)) | {"README.md", SEED_RUN_NAME, LOCK_NAME}
    return sorted(
        name
        for name in _listing(folder)
        if name not in run_state and not name.startswith((".", "_")) and os.path.isfile(os.path.join(folder, name))
    )


def _format(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4f}"
    return "" if value is None else str(value)


def spread_table(summary: dict[str, Any]) -> str:
    """The summary as Markdown: a row per seed, then the median, mean, standard deviation, min, max and range."""
    metric, runs, stats = summary["metric"], summary["runs"], summary["statistics"]
    others = sorted(name for name in stats if not name.startswith("last_step_") and name != metric)
    names = [metric, *(name for name in others if name != "loss"), *(["loss"] if "loss" in others else [])]
    last_key = f"last_step_{metric}"
    with_best = any("best_step" in run for run in runs)
    with_last = last_key in stats
    header = [
        "seed",
        *names,
        *(["step kept"] if with_best else []),
        *([f"{metric} at the last step"] if with_last else []),
    ]
    lines = [
        f"{len(runs)} runs of the same fine-tuning, seeds {', '.join(str(run['seed']) for run in runs)}, ranked by "
        f"{metric} ({'higher' if summary['greater_is_better'] else 'lower'} is better). The median run is seed "
        f"{summary['median_seed']} ({summary['median_folder']}/)"
        + (
            f"; its prediction files are copied beside this table: {', '.join(summary['prediction_files'])}."
            if summary.get("prediction_files")
            else "."
        ),
        "",
        "| " + " | ".join(header) + " |",
        "|" + " --- |" * len(header),
    ]
    for run in runs:
        mark = " (median)" if run["seed"] == summary["median_seed"] else ""
        cells = [f"{run['seed']}{mark}", *(_format(run["metrics"][name]) for name in names)]
        cells += [_format(run.get("best_step"))] if with_best else []
        cells += [_format(run.get(last_key))] if with_last else []
        lines.append("| " + " | ".join(cells) + " |")
    for statistic, label in (
        ("median", "median"),
        ("mean", "mean"),
        ("std", "standard deviation"),
        ("min", "min"),
        ("max", "max"),
        ("range", "range"),
    ):
        cells = [f"**{label}**", *(_format(stats[name][statistic]) for name in names)]
        cells += [""] if with_best else []
        cells += [_format(stats[last_key][statistic])] if with_last else []
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def add_spread_to_card(folder: str, summary: dict[str, Any], table: str) -> None:
    """Put the table into the README.md (model card) of the median seed's folder, before its list of files (replacing
    the section a previous summary wrote); nothing when the folder has no card."""
    path = os.path.join(folder, "README.md")
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    section = (
        f"{CARD_SECTION}\n\nThis model is the median run of a set of {len(summary['runs'])} fine-tuning runs that "
        "differ only in their seed; the spread below is what one run of this recipe can land on.\n\n"
        f"{table}\n"
    )
    start = text.find(CARD_SECTION)
    if start >= 0:
        end = text.find("\n## ", start + len(CARD_SECTION))
        text = text[:start] + section + (text[end + 1 :] if end >= 0 else "")
    else:
        files = text.find("\n## Files")
        text = text[: files + 1] + section + text[files + 1 :] if files >= 0 else text.rstrip("\n") + "\n\n" + section
    _write_atomically(path, text)


# --------------------------------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------------------------------


def _listing(folder: str) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def _read_json(path: str, missing_ok: bool = False) -> dict[str, Any]:
    if missing_ok and not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise UserError(f"{path}: unreadable ({error}).") from error


def _write_atomically(path: str, content: str | bytes) -> None:
    """Write a temporary file beside `path`, flush it to disk, then rename it over `path`."""
    temporary = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.tmp")
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(temporary, mode, **({} if isinstance(content, bytes) else {"encoding": "utf-8"})) as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


__all__ = [
    "run_seeds",
    "seed_runs_asked",
    "running_seed",
    "summarize_seeds",
    "spread",
    "spread_table",
    "seed_start",
]
