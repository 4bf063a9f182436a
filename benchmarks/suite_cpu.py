"""Where the test suite's CPU goes, file by file: a pytest plugin, and the table it makes.

    PYTHONPATH=benchmarks .venv/bin/pytest -p suite_cpu -n 4 --dist loadfile -q   # writes /tmp/suite-cpu
    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite-cpu                      # the table

Each test's CPU is its worker's own (user and system) and that of the processes it started and
waited for (a torchrun job, a recorder, a fresh environment's pip), from ``getrusage``: the
measure that decides how long the suite takes on two cores, where four workers share them.
A process the test left to another to reap is not counted.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

OUT = Path(os.environ.get("SUITE_CPU_OUT", "/tmp/suite-cpu"))


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    own, waited = _cpu()
    start = time.monotonic()
    try:
        return (yield)
    finally:
        own_after, waited_after = _cpu()
        OUT.mkdir(parents=True, exist_ok=True)
        row = {"id": item.nodeid, "own": own_after - own, "waited": waited_after - waited}
        row["wall"] = time.monotonic() - start
        with (OUT / f"{os.getpid()}.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")


def table(directory: Path, top: int = 30) -> str:
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            row: dict[str, Any] = json.loads(line)
            figures = files[row["id"].split("::")[0]]
            for i, value in enumerate((row["own"] + row["waited"], row["own"], row["wall"], 1)):
                figures[i] += value
    by_part: dict[str, float] = defaultdict(float)
    for name, figures in files.items():
        by_part["/".join(name.split("/")[:2])] += figures[0]
    lines = [f"CPU in all: {sum(by_part.values()) / 60:.1f} min"]
    lines += [f"  {part}: {cpu / 60:.1f} min" for part, cpu in sorted(by_part.items(), key=lambda kv: -kv[1])]
    lines += ["", "| CPU s | of it the worker's | wall s | tests | file |", "|---:|---:|---:|---:|---|"]
    ranked = sorted(files.items(), key=lambda kv: -kv[1][0])[:top]
    lines += [f"| {c:.0f} | {o:.0f} | {w:.0f} | {n:.0f} | {name} |" for name, (c, o, w, n) in ranked]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
