"""``distmon analyze PATH...``: the culprit of a job that ran without distmon, from what it
left behind: Flight Recorder dumps (one per rank, pickle or JSON, the rank in the file name's
trailing number) and job logs holding the NCCL watchdog's lines, or both; PATH is a file or
a folder, or ``-`` for what is piped in (``kubectl logs POD | distmon analyze -``).

It prints what ``distmon report`` prints for a live incident (the culprit ranks alone, what
each rank waits in, what happened, what to do), judged by the live monitor's own rules
(:mod:`distmon.forensics.analysis`). ``--json`` prints an object with ``culprits``,
``summary``, ``ranks`` (per rank: its groups, last started and completed work, oldest work
pending), ``missing`` (ranks with no file, or an empty dump), ``alerts``, ``problems``.
A file that cannot be read gets one line; the rest of the set is still analysed, and exit
code 2 says no dump nor job log could be (``--json`` still prints its object, saying why). A
log that names no rank is still judged: it may say that no rank is to blame, or which node
was lost; a text named on the command line is judged whatever it holds, an excerpt that
proves nothing said so. A ``--world`` the files contradict (fewer ranks than they hold) gets
one line, and the files win.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from distmon.forensics.analysis import analyze
from distmon.forensics.render import analysis_json, render_analysis
from distmon.guards.text import MAX_LINE, visible
from distmon.monitor.state.admission import MAX_WORLD


def world_size(value: str) -> int:
    try:
        world = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of ranks: {value!r}") from None
    if not 0 < world <= MAX_WORLD:
        raise argparse.ArgumentTypeError(f"a world of 1 to {MAX_WORLD} ranks, not {world}")
    return world


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="Flight Recorder dumps, job logs, or folders of them; - reads stdin"
    )
    parser.add_argument(
        "--world", type=world_size, metavar="N", help="the job's number of ranks, when the files cannot tell it"
    )
    parser.add_argument("--json", action="store_true", help="print the analysis as JSON for other tools")


MAX_STDIN_BYTES = 1 << 30
"""What is read from stdin; a pipe that has not ended by then is cut (said in one line)."""


def run(args: argparse.Namespace) -> int:
    if "-" not in args.paths:
        return _judge(args, args.paths)
    with tempfile.TemporaryDirectory(prefix="distmon-analyze-") as folder:
        piped = os.path.join(folder, "stdin")
        with open(piped, "wb") as out:
            left = MAX_STDIN_BYTES
            while left and (chunk := sys.stdin.buffer.read(min(left, 1 << 20))):
                left -= out.write(chunk)
        if not left:
            print(f"distmon analyze: stdin: more than {MAX_STDIN_BYTES >> 20} MiB: the rest left out", file=sys.stderr)
        return _judge(args, [piped if p == "-" else p for p in args.paths], piped)


def _judge(args: argparse.Namespace, paths: list[str], piped: str = "") -> int:
    analysis = analyze(paths, args.world)
    if piped:  # the file stdin was copied to is named as the user named it
        analysis.problems = [p.replace(piped, "stdin") for p in analysis.problems]
    if args.world is not None and analysis.world_from != "--world":
        print(
            f"distmon analyze: --world {args.world} is fewer ranks than the files hold: "
            f"judged as {analysis.world} ranks (from {analysis.world_from})",
            file=sys.stderr,
        )
    if not analysis.ranks and not analysis.logs:
        if args.json:  # a tool reading stdout still gets an object: no culprit, and why
            json.dump(analysis_json(analysis), sys.stdout, indent=2)
            print()
        _say(analysis.problems)
        named = " ".join(visible(p) for p in args.paths)
        print(f"distmon analyze: no Flight Recorder dump nor job log found in {named}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(analysis_json(analysis), sys.stdout, indent=2)
        print()
        _say(analysis.problems)
    else:
        print(render_analysis(analysis))
    return 0


def _say(problems: list[str]) -> None:
    for problem in problems:
        print(f"distmon analyze: {visible(problem, MAX_LINE)}", file=sys.stderr)
