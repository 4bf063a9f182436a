"""The ``distmon`` command. Each subcommand lives in :mod:`distmon.commands` and is
imported only when it runs, so ``distmon report`` never pays for Textual or torch."""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from typing import NoReturn

COMMANDS = {
    "watch": "live terminal UI: bind the endpoint and show every rank and alert",
    "record": "headless: bind the endpoint, detect, write a recording, print alerts",
    "replay": "play a recording through the terminal UI",
    "report": "post-mortem of a recording: the job, its ranks, the alerts and first cause",
    "look": "a job running without distmon, here or on its nodes: find its ranks, say from outside who holds it up",
    "analyze": "the culprit of a job that ran without distmon, from its Flight Recorder dumps or its log",
    "run": "run an unmodified training command with every rank monitored",
    "relay": "a node's relay: forward its ranks' reports to the monitor in one batch a second",
    "eye": "a node's eye, as look, watch --find and record --find start it on each node they reach (not typed)",
    "doctor": "check this machine, or a job about to start, for launch problems",
    "keygen": "write a job key file: the monitor hears only ranks holding it (TCP made safe)",
}


GC_THRESHOLDS = (100_000, 50, 100)
"""Python's defaults are (700, 10, 10)."""


def relax_gc() -> None:
    """Collect cyclic garbage rarely: every command but ``doctor`` runs a monitor.

    The monitor holds one decoded report per rank, many long-lived objects each, replaced
    every second. Under the default thresholds that churn sets off the cyclic collector's full
    passes often, and each rescans every one of those objects for nothing: reports hold no
    reference cycles, and reference counting frees them either way
    (``benchmarks/bench_detector.py`` measures the tick)."""
    gc.set_threshold(*GC_THRESHOLDS)


class Parser(argparse.ArgumentParser):
    """Reports a usage mistake as one line and exit code 2, never a traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> tuple[Parser, dict[str, Parser]]:
    parser = Parser(prog="distmon", description="Monitor distributed PyTorch jobs.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    parsers = {name: sub.add_parser(name, help=text, description=text) for name, text in COMMANDS.items()}
    return parser, parsers


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser, parsers = build_parser()
    name = next((a for a in argv if not a.startswith("-")), None)
    module = None
    if name in COMMANDS:
        module = importlib.import_module(f"distmon.commands.{name}")
        module.add_arguments(parsers[name])
    args = parser.parse_args(argv)
    if module is None:
        parser.print_help()
        return 2
    relax_gc()
    try:
        code = int(module.run(args) or 0)
        sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    return code


def _closed_pipe() -> int:
    """The reader of our output went away (``| head -1``): stop quietly, as a shell tool
    killed by SIGPIPE does, and keep the interpreter's last flush from raising again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
