"""The test suite's two tiers, timed: for each, the tests run, their outcomes, the wall time of the whole pytest run
(collection included), the CPU seconds the tests used (tests/conftest.py records each test's in its JUnit report,
the processes it waited for included), the load average before and after, and the slowest tests.

    python benchmarks/suite_times.py                    # both tiers, as README and CI run them
    python benchmarks/suite_times.py --tiers fast       # the fast tier alone
    python benchmarks/suite_times.py --junit a.xml b.xml  # the table of runs already made (pytest --junitxml=...)

Run it on an idle machine: wall times grow with what else runs (the load average says how much did); CPU seconds far
less. Arguments after `--` go to pytest (`-- -n 1` to run on one core).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# What each tier's command adds to `python -m pytest` (README: the fast tier; .ci/run: the full tier).
TIERS = {"fast": [], "full": ["--full"]}


@dataclass
class Test:
    name: str
    wall: float
    cpu: float | None
    outcome: str


@dataclass
class Run:
    label: str
    tests: list[Test] = field(default_factory=list)
    wall: float | None = None
    load: tuple[float, float] | None = None
    status: int | None = None


def read_junit(path: Path, label: str) -> Run:
    run = Run(label)
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        cpu = next((float(p.get("value")) for p in case.iter("property") if p.get("name") == "cpu_s"), None)
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        run.tests.append(Test(name, float(case.get("time") or 0), cpu, outcome))
    return run


def run_tier(tier: str, extra: list[str]) -> Run:
    with tempfile.TemporaryDirectory() as folder:
        junit = Path(folder) / f"{tier}.xml"
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *TIERS[tier], f"--junitxml={junit}"]
        before = os.getloadavg()[0]
        started = time.monotonic()
        status = subprocess.run([*command, *extra], cwd=REPO_ROOT).returncode
        wall = time.monotonic() - started
        after = os.getloadavg()[0]
        run = read_junit(junit, tier)
    run.wall, run.load, run.status = wall, (before, after), status
    return run


def minutes(seconds: float | None) -> str:
    return "-" if seconds is None else f"{int(seconds // 60)}:{seconds % 60:04.1f}"


def report(runs: list[Run], slowest: int) -> str:
    lines = [
        "| tier | tests | passed | failed | skipped | wall (m:s) | sum of test times (m:s) | CPU (m:s) | load avg "
        "before, after | pytest status |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for run in runs:
        count = {outcome: sum(test.outcome == outcome for test in run.tests) for outcome in ("passed", "failed")}
        skipped = sum(test.outcome == "skipped" for test in run.tests)
        cpu = sum(test.cpu for test in run.tests if test.cpu is not None) if any(t.cpu for t in run.tests) else None
        load = "-" if run.load is None else f"{run.load[0]:.2f}, {run.load[1]:.2f}"
        lines.append(
            f"| {run.label} | {len(run.tests)} | {count['passed']} | {count['failed']} | {skipped} | "
            f"{minutes(run.wall)} | {minutes(sum(test.wall for test in run.tests))} | {minutes(cpu)} | {load} | "
            f"{'-' if run.status is None else run.status} |"
        )
    for run in runs:
        lines += [
            "",
            f"{run.label}: the {slowest} slowest tests",
            "",
            "| wall s | CPU s | test |",
            "| ---: | ---: | --- |",
        ]
        for test in sorted(run.tests, key=lambda test: -test.wall)[:slowest]:
            cpu = "-" if test.cpu is None else f"{test.cpu:.1f}"
            lines.append(f"| {test.wall:.1f} | {cpu} | {test.name} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiers", default="fast,full", help="comma-separated: fast, full")
    parser.add_argument("--junit", nargs="+", type=Path, help="report these JUnit files instead of running pytest")
    parser.add_argument("--slowest", type=int, default=15)
    args = parser.parse_args(argv)
    if args.junit:
        runs = [read_junit(path, path.stem) for path in args.junit]
    else:
        runs = [run_tier(tier, extra) for tier in args.tiers.split(",")]
    print(report(runs, args.slowest))
    return max((run.status or 0) for run in runs)


if __name__ == "__main__":
    sys.exit(main())
