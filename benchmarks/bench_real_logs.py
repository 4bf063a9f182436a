"""``distmon analyze`` scored on the real logs users pasted into public issues, forums and CI
views (``tests/data/logs/real``, each one's source, kind and truth in ``truths.json``): every
log read (exit 0 and JSON), and, on the logs whose truth is known (the culprit ranks, or
``none``), how many verdicts are right, wrong, or abstain, by kind.

A verdict naming ranks is right where the ranks it proves are all culprits and it names at
least one (the first proven, else the first suspected); one saying nobody is to blame is right
where the truth is ``none``. It abstains where it names nobody and does not clear everyone, or
where the command does not read the log (an exit other than 0, no JSON). A verdict that proves
a rank the truth clears names an innocent. The held-out logs (``"held_out"``: no rule was
written against them) are scored first and apart: they are the fair measure. The logs once held
out (``"held_out_once"``: round 61's 42, drawn at random as ``tests/data/logs/real/NOTES.md``
says, and all of rounds 62 to 68) were scored once as found (``benchmarks/README.md``
keeps those figures) and are development logs since; each round's are still scored apart, as
the rounds are, to follow how the reader does on them.

``--pasted`` scores the same logs re-pasted the ways people paste them
(``tests/support/pastes.py``: wrapped by a terminal, stamped by a logger or a collector,
labelled by srun, coloured, with CR LF ends, quoted, indented, the ranks' lines interleaved
otherwise, cut to their first or last 60%): for each pair of a log and a paste, whether it is
read and its verdict stays what the log as found gets (the same culprits, suspects and
nobody), and, where the truth is known, right, wrong or abstained as above, and whether it
misnames (a culprit the truth clears, or everyone cleared where the truth names a rank). Then
the logs with a known truth cut anywhere (their first and last 10%, 15%, ... 95%, mid-line),
and the time to read a 10 MB log, pasted each way.

    .venv/bin/python benchmarks/bench_real_logs.py [--json] [--pasted]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from distmon.cli import main as distmon
from distmon.forensics.inputs import read_log_file
from distmon.forensics.logfacts import LogFacts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.pastes import CUTTING, KEEPING, PASTES  # noqa: E402

REAL = ROOT / "tests" / "data" / "logs" / "real"
RIGHT, WRONG, ABSTAINED = "right", "wrong", "abstained"
KEPT, UNREAD, MISNAMED = "kept", "not read", "misnamed"
INNOCENT = "innocent"
"""A verdict proving a rank the truth clears."""
HELD_OUT = "held out (no rule written against them)"
SHARES = [share / 20 for share in range(2, 20)]
"""Where the logs are cut, anywhere: their first and last 10%, 15%, ... 95%."""
BIG = 10_000_000
"""Characters of the log read in time: the corpus again and again."""


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
    read, kinds, misses = 0, Counter[str](), []
    by_kind: dict[str, Counter[str]] = {}
    sets: dict[str, Counter[str]] = {}
    innocent = 0
    for name, told in sorted(truths.items()):
        code, found = verdict(REAL / name)
        readable = code == 0 and found is not None
        read += readable
        kinds[told["kind"]] += 1
        held = bool(told.get("held_out"))
        groups = [HELD_OUT] if held else []
        groups += [f"round {told['round']}"]
        groups += [f"round {told['round']}'s once held out"] if told.get("held_out_once") else []
        for group in groups:
            sets.setdefault(group, Counter())["logs"] += 1
            sets[group]["read"] += readable
        if told["truth"] == "unknown":
            continue
        result = outcome(found, told["truth"]) if found is not None else ABSTAINED
        named = found is not None and misnamed_culprit(found, told["truth"])
        innocent += named
        by_kind.setdefault(told["kind"], Counter())[result] += 1
        for group in groups:
            sets[group][result] += 1
            sets[group]["known"] += 1
            sets[group][INNOCENT] += named
        if result != RIGHT and not held:  # a held-out miss is counted, not shown: no rule is to be written for it
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
        INNOCENT: innocent,
        "right_share": round(totals[RIGHT] / known, 3) if known else None,
        "by_kind": {kind: dict(counts) for kind, counts in sorted(by_kind.items())},
        "sets": {
            group: {"logs": 0, "read": 0, "known": 0, RIGHT: 0, WRONG: 0, ABSTAINED: 0, INNOCENT: 0, **counts}
            for group, counts in sorted(sets.items(), key=lambda item: (item[0] != HELD_OUT, item[0]))
        },
        "misses": misses,
    }


def misnamed_culprit(found: dict[str, Any], truth: list[int] | str) -> bool:
    """A culprit the truth clears (a suspect list may hold one: it proves nothing)."""
    return bool(set(found["culprits"]) - (set() if truth == "none" else set(truth)))


def said(found: dict[str, Any]) -> tuple[list[int], list[int], bool]:
    """What a verdict says: its culprits, its suspects in order, whether it clears everyone."""
    return found["culprits"], [s["rank"] for s in found["suspects"]], found["nobody"] is not None


def misnamed(found: dict[str, Any], truth: list[int] | str) -> bool:
    """A culprit the truth clears, or everyone cleared where the truth names a rank."""
    culprits = set(found["culprits"])
    if truth == "none":
        return bool(culprits)
    return bool(culprits - set(truth)) or found["nobody"] is not None


def score_pasted() -> dict[str, Any]:
    """Every log re-pasted each way: read or not, the verdict kept or not; where the truth is
    known, right, wrong or abstained, and misnamed or not. An excerpt
    (:data:`~tests.support.pastes.CUTTING`) need not keep the verdict."""
    truths: dict[str, dict[str, Any]] = json.loads((REAL / "truths.json").read_text())
    by_paste: dict[str, Counter[str]] = {name: Counter() for name in PASTES}
    cut, misses = Counter[str](), []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pasted.log"
        for name, told in sorted(truths.items()):
            text, truth = (REAL / name).read_text(), told["truth"]
            _, found = verdict(REAL / name)
            assert found is not None, name
            for paste_name, paste in PASTES.items():
                path.write_bytes(paste(text).encode())
                code, pasted = verdict(path)
                counts = by_paste[paste_name]
                kept = pasted is not None and said(pasted) == said(found)
                counts[KEPT] += kept
                counts[UNREAD] += pasted is None
                result = None
                if truth != "unknown":
                    result = outcome(pasted, truth) if pasted is not None else ABSTAINED
                    counts[result] += 1
                    counts[MISNAMED] += pasted is not None and misnamed(pasted, truth)
                if told.get("held_out"):
                    continue  # counted, not shown
                if result == WRONG or not (kept or paste_name in CUTTING):
                    summary = pasted["summary"][:100] if pasted is not None else f"exit {code}, no JSON"
                    misses.append(f"{paste_name}: {name}: {result or 'changed'} (truth {truth}; said: {summary})")
            if truth != "unknown":
                _cut_anywhere(name, text, truth, path, cut, misses if not told.get("held_out") else [])
    totals = sum(by_paste.values(), Counter[str]())
    return {
        "logs": len(truths),
        "known": sum(1 for told in truths.values() if told["truth"] != "unknown"),
        **{k: totals[k] for k in (KEPT, RIGHT, WRONG, ABSTAINED, UNREAD, MISNAMED)},
        "by_paste": {name: dict(counts) for name, counts in by_paste.items()},
        "cut_anywhere": dict(cut),
        "misses": misses,
        "seconds_10mb": timed_pastes(),
    }


def _cut_anywhere(
    name: str, text: str, truth: list[int] | str, path: Path, cut: Counter[str], misses: list[str]
) -> None:
    """The log's first and last :data:`SHARES` of its characters, each judged."""
    for share in SHARES:
        kept = int(len(text) * share)
        for end, excerpt in (("first", text[:kept]), ("last", text[len(text) - kept :])):
            path.write_text(excerpt)
            _, found = verdict(path)
            cut["excerpts"] += 1
            cut[UNREAD] += found is None
            if found is None:
                continue
            result = outcome(found, truth)
            cut[result] += 1
            if misnamed(found, truth):
                cut[MISNAMED] += 1
                misses.append(f"{end} {share:.0%}: {name}: misnamed (truth {truth}; said: {found['summary'][:100]})")


def timed_pastes() -> dict[str, float]:
    """Seconds of CPU to read a log of :data:`BIG` characters (the corpus again and again), as
    found and pasted each way that keeps its lines, through the command's file reader."""
    corpus = "".join(path.read_text() for path in sorted(REAL.glob("*.log")))
    big = corpus * (BIG // len(corpus) + 1)
    seconds = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.log"
        for name, paste in {"as found": str, **KEEPING}.items():
            path.write_bytes(paste(big).encode())
            started = time.process_time()
            read_log_file(str(path), LogFacts(), [])
            seconds[name] = round(time.process_time() - started, 2)
    return seconds


def print_pasted(figures: dict[str, Any]) -> None:
    pastes, logs, known = len(figures["by_paste"]), figures["logs"], figures["known"]
    print(
        f"{logs} logs x {pastes} pastes = {logs * pastes} pairs: {logs * pastes - figures[UNREAD]} read, "
        f"verdict kept {figures[KEPT]}; {known * pastes} with a known truth: {figures[RIGHT]} right, "
        f"{figures[WRONG]} wrong, {figures[ABSTAINED]} abstained, {figures[MISNAMED]} misnamed"
    )
    print(f"  {'paste':<18} {UNREAD:>8} {KEPT:>5} {RIGHT:>5} {WRONG:>5} {ABSTAINED:>9} {MISNAMED:>8}")
    for name, counts in figures["by_paste"].items():
        print(
            f"  {name:<18} {counts.get(UNREAD, 0):>8} {counts.get(KEPT, 0):>5} {counts.get(RIGHT, 0):>5} "
            f"{counts.get(WRONG, 0):>5} {counts.get(ABSTAINED, 0):>9} {counts.get(MISNAMED, 0):>8}"
        )
    cut = figures["cut_anywhere"]
    print(
        f"{known} logs with a known truth cut anywhere ({SHARES[0]:.0%} to {SHARES[-1]:.0%} of their first and last "
        f"characters): {cut.get('excerpts', 0)} excerpts, {cut.get(UNREAD, 0)} not read, {cut.get(RIGHT, 0)} right, "
        f"{cut.get(WRONG, 0)} wrong, {cut.get(ABSTAINED, 0)} abstained, {cut.get(MISNAMED, 0)} misnamed"
    )
    print(
        f"a log of {BIG / 1e6:.0f} MB read (CPU seconds): "
        + ", ".join(f"{name} {seconds:.1f}" for name, seconds in figures["seconds_10mb"].items())
    )
    for miss in figures["misses"]:
        print(f"  miss: {miss}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.add_argument("--pasted", action="store_true", help="the logs re-pasted the ways people paste them")
    args = parser.parse_args()
    figures = score_pasted() if args.pasted else score()
    if args.json:
        print(json.dumps(figures))
        return
    if args.pasted:
        print_pasted(figures)
        return
    if HELD_OUT not in figures["sets"]:
        print(f"{HELD_OUT}: none now")
    for group, counts in figures["sets"].items():
        share = f" ({counts[RIGHT] / counts['known']:.0%})" if counts["known"] else ""
        print(
            f"{group}: {counts['logs']} logs, {counts['read']} read (exit 0, JSON); {counts['known']} with a known "
            f"truth: {counts[RIGHT]} right{share}, {counts[WRONG]} wrong, {counts[ABSTAINED]} abstained; "
            f"{counts[INNOCENT]} proving a rank the truth clears"
        )
    print(
        f"all {figures['logs']} logs of {len(figures['kinds'])} kinds: {figures['read']} read (exit 0, JSON); "
        f"{figures['known']} with a known truth: {figures[RIGHT]} right ({figures['right_share']:.0%}), "
        f"{figures[WRONG]} wrong, {figures[ABSTAINED]} abstained; {figures[INNOCENT]} proving a rank the truth clears"
    )
    width = max(map(len, figures["kinds"]), default=4)
    print(f"  {'kind':<{width}} {'logs':>4} {'known':>5} {RIGHT:>5} {WRONG:>5} {ABSTAINED:>9}")
    for kind, logs in sorted(figures["kinds"].items(), key=lambda item: (-item[1], item[0])):
        counts = figures["by_kind"].get(kind, {})
        known = sum(counts.values())
        print(
            f"  {kind:<{width}} {logs:>4} {known:>5} {counts.get(RIGHT, 0):>5} {counts.get(WRONG, 0):>5} "
            f"{counts.get(ABSTAINED, 0):>9}"
        )
    for miss in figures["misses"]:
        print(f"  not right: {miss}")


if __name__ == "__main__":
    main()
