"""``distmon analyze`` scored on the real logs users pasted into public issues, forums and CI
views (``tests/data/logs/real``, each one's source, kind and truth in ``truths.json``): every
log read (exit 0 and JSON), and, on the logs whose truth is known (the culprit ranks, or
``none``), how many verdicts are right, wrong, or abstain, by kind.

A verdict naming ranks is right where the ranks it proves are all culprits and it names at
least one (the first proven, else the first suspected); one saying nobody is to blame is right
where the truth is ``none``. It abstains where it names nobody and does not clear everyone, or
where the command does not read the log (an exit other than 0, no JSON). The
logs found after the reader's rules were written (``"held_out"``) are also scored apart.

    .venv/bin/python benchmarks/bench_real_logs.py [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

from distmon.cli import main as distmon

REAL = Path(__file__).resolve().parent.parent / "tests" / "data" / "logs" / "real"
RIGHT, WRONG, ABSTAINED = "right", "wrong", "abstained"


def verdict(path: Path) -> tuple[int, dict[str, Any] | None]:
    """``distmon analyze --json PATH``'s exit code and JSON, run as the command runs."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = distmon(["analyze", "--json", str(path)])
    try:
        return code, json.loads(out.getvalue())
    except json.JSONDecodeError:
        return code, None


def outcome(found: dict[str, Any], truth: list[int] | str) -> str:
    culprits, suspects = found["culprits"], [s["rank"] for s in found["suspects"]]
    if truth == "none":
        return RIGHT if found["nobody"] else WRONG if culprits or suspects else ABSTAINED
    assert isinstance(truth, list)
    lead = culprits[:1] or suspects[:1]
    if not lead:
        return WRONG if found["nobody"] else ABSTAINED
    return RIGHT if lead[0] in truth and set(culprits) <= set(truth) else WRONG


def score() -> dict[str, Any]:
    truths: dict[str, dict[str, Any]] = json.loads((REAL / "truths.json").read_text())
    read, kinds, misses, held_out = 0, Counter[str](), [], Counter[str]()
    by_kind: dict[str, Counter[str]] = {}
    for name, told in sorted(truths.items()):
        code, found = verdict(REAL / name)
        read += code == 0 and found is not None
        kinds[told["kind"]] += 1
        if told["truth"] == "unknown":
            continue
        result = outcome(found, told["truth"]) if found is not None else ABSTAINED
        by_kind.setdefault(told["kind"], Counter())[result] += 1
        if told.get("held_out"):
            held_out[result] += 1
        if result != RIGHT:
            said = found["summary"][:120] if found is not None else f"exit {code}, no JSON"
            misses.append(f"{name}: {result} (truth {told['truth']}; said: {said})")
    totals = sum(by_kind.values(), Counter[str]())
    known = sum(totals.values())
    return {
        "logs": len(truths),
        "read": read,
        "kinds": dict(kinds),
        "known": known,
        RIGHT: totals[RIGHT],
        WRONG: totals[WRONG],
        ABSTAINED: totals[ABSTAINED],
        "right_share": round(totals[RIGHT] / known, 3) if known else None,
        "by_kind": {kind: dict(counts) for kind, counts in sorted(by_kind.items())},
        "held_out": {"logs": sum(1 for t in truths.values() if t.get("held_out")), **held_out},
        "misses": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    figures = score()
    if parser.parse_args().json:
        print(json.dumps(figures))
        return
    print(
        f"{figures['logs']} logs of {len(figures['kinds'])} kinds: {figures['read']} read (exit 0, JSON); "
        f"{figures['known']} with a known truth: {figures[RIGHT]} right ({figures['right_share']:.0%}), "
        f"{figures[WRONG]} wrong, {figures[ABSTAINED]} abstained"
    )
    held = figures["held_out"]
    print(
        f"  of them found after the rules were written: {held['logs']} logs, "
        f"{sum(held.get(k, 0) for k in (RIGHT, WRONG, ABSTAINED))} with a known truth: {held.get(RIGHT, 0)} right, "
        f"{held.get(WRONG, 0)} wrong, {held.get(ABSTAINED, 0)} abstained"
    )
    print(f"  {'kind':<30} {'logs':>4} {'known':>5} {RIGHT:>5} {WRONG:>5} {ABSTAINED:>9}")
    for kind, logs in sorted(figures["kinds"].items(), key=lambda item: (-item[1], item[0])):
        counts = figures["by_kind"].get(kind, {})
        known = sum(counts.values())
        print(
            f"  {kind:<30} {logs:>4} {known:>5} {counts.get(RIGHT, 0):>5} {counts.get(WRONG, 0):>5} "
            f"{counts.get(ABSTAINED, 0):>9}"
        )
    for miss in figures["misses"]:
        print(f"  not right: {miss}")


if __name__ == "__main__":
    main()
