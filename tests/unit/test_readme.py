"""The README's commands are real: every ``distmon`` line in its code blocks parses with the
real command line, every ``make`` target exists, every ``pip install`` names real extras.
What they do when run is proven elsewhere (tests/installed/test_installed.py runs the Install block,
``distmon run --record`` and ``distmon report``; the other commands have tests of their own)."""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess

import pytest
import tomllib

from distmon.cli import COMMANDS, Parser, build_parser
from tests.support.paths import REPO

README = (REPO / "README.md").read_text()


def command_lines() -> list[str]:
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith(("distmon ", "make ", "pip install "))]


def parse(line: str) -> None:
    """Parse as ``distmon`` would, running nothing; a mistake exits through Parser.error."""
    argv = shlex.split(line)[1:]
    parser, parsers = build_parser()
    name = argv[0]
    assert name in COMMANDS, line
    importlib.import_module(f"distmon.commands.{name}").add_arguments(parsers[name])
    parser.parse_args(argv)


def test_the_readme_shows_the_commands_it_promises() -> None:
    lines = command_lines()
    assert {"pip install .", "make demo", "make test"} <= set(lines), lines
    assert {line.split()[1] for line in lines if line.startswith("distmon ")} >= {"run", "watch", "record", "report"}


@pytest.mark.parametrize("line", [line for line in command_lines() if line.startswith("distmon ")])
def test_each_distmon_command_in_the_readme_parses(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Parser, message: str) -> None:
        raise AssertionError(f"{line}: {message}")

    monkeypatch.setattr(Parser, "error", refuse)
    parse(line)


def test_each_make_target_and_extra_in_the_readme_exists() -> None:
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for line in command_lines():
        if line.startswith("make "):
            dry = subprocess.run(["make", "-n", *line.split()[1:]], cwd=REPO, capture_output=True, text=True)
            assert dry.returncode == 0, f"{line}: {dry.stderr}"
        elif line.startswith("pip install "):
            named = re.findall(r"\[([a-z,]+)\]", line)
            assert {e for group in named for e in group.split(",")} <= extras, line


def test_the_readme_stays_a_front_door() -> None:
    """The reference lives in docs/; the README says what distmon is and how to start."""
    assert len(README.encode()) <= 15_000, len(README.encode())
