"""``distmon analyze`` scored on the real logs users pasted into public issues
(``tests/data/logs/real``): how many it reads, how many of the threads' answers it gets right
(the answer leads, as the first culprit or, with none proven, the first suspect, and no other
rank is proven), and how many logs it makes prove a rank no line of theirs shows.

    .venv/bin/python benchmarks/bench_real_logs.py [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from distmon.forensics.analysis import analyze
from distmon.forensics.logs import read_log
from distmon.forensics.render import summary
from distmon.forensics.verdict import judge

REAL = Path(__file__).resolve().parent.parent / "tests" / "data" / "logs" / "real"


def score() -> dict[str, int]:
    answers: dict[str, int] = json.loads((REAL / "answers.json").read_text())
    logs = sorted(REAL.glob("*.log"))
    read = right = unseen_proven = 0
    for path in logs:
        analysis = analyze([str(path)])
        verdict = judge(analysis)
        read += analysis.logs == 1 and not summary(analysis).startswith("nothing to judge")
        with path.open(errors="replace") as f:
            facts = read_log(f)
        unseen_proven += bool(set(verdict.culprits) - (facts.seen | set(facts.named)))
        if path.name in answers:
            lead = verdict.culprits[:1] or [s.rank for s in verdict.suspects[:1]]
            right += lead == [answers[path.name]] and set(verdict.culprits) <= {answers[path.name]}
    return {
        "logs": len(logs),
        "read": read,
        "answers": len(answers),
        "answers_right": right,
        "proving_an_unseen_rank": unseen_proven,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a line")
    figures = score()
    if parser.parse_args().json:
        print(json.dumps(figures))
    else:
        print(
            f"{figures['logs']} logs: {figures['read']} read; {figures['answers_right']} of {figures['answers']} "
            f"threads' answers right; {figures['proving_an_unseen_rank']} prove a rank no line shows"
        )


if __name__ == "__main__":
    main()
