"""Numbers users give, checked where they are read: a bad environment variable never fails a
rank (one line, then the default); a bad option is one line and exit code 2."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from distmon.cli import main
from distmon.guards import values
from distmon.hooks import DEFAULT_INTERVAL, INTERVALS

BAD = ["0", "-1", "nan", "inf", "abc", "1e9"]


@pytest.mark.parametrize("text", BAD)
def test_a_bad_interval_in_the_environment_falls_back_to_the_default_with_one_line(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    got = values.from_environment("DISTMON_INTERVAL", DEFAULT_INTERVAL, *INTERVALS, env={"DISTMON_INTERVAL": text})
    assert got == DEFAULT_INTERVAL
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"distmon: DISTMON_INTERVAL={text}: ") and "from 0.05 to 600" in line


def test_a_good_interval_is_taken_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"DISTMON_INTERVAL": " 0.5 "}
    assert values.from_environment("DISTMON_INTERVAL", DEFAULT_INTERVAL, *INTERVALS, env=env) == 0.5
    assert values.from_environment("DISTMON_INTERVAL", DEFAULT_INTERVAL, *INTERVALS, env={}) == DEFAULT_INTERVAL
    assert capsys.readouterr().err == ""


def test_a_rank_with_a_bad_interval_still_trains_and_reports_why_once(endpoint: str) -> None:
    script = textwrap.dedent(
        """
        import torch
        import distmon.hooks

        model = torch.nn.Linear(4, 1)
        agent = distmon.hooks.attach(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            optimizer.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            optimizer.step()
        print("trained", agent is not None, agent.interval, flush=True)
        """
    )
    env = {"DISTMON_ENDPOINT": endpoint, "DISTMON_INTERVAL": "nan", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["trained", "True", "1.0"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("distmon:")]
    assert warnings == ["distmon: DISTMON_INTERVAL=nan: nan is not a number from 0.05 to 600; using 1"], done.stderr


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["relay", "--upstream", "ipc:///tmp/x", "--interval", "0"], "--interval: 0 is not a number from 0.01 to 60"),
        (["relay", "--upstream", "ipc:///tmp/x", "--batch", "many"], "--batch: 'many' is not a whole number"),
        (["record", "--max-world", "0"], "--max-world: 0 is not a whole number from 1"),
        (["record", "--metrics-port", "70000"], "--metrics-port: 70000 is not a whole number from 1 to 65535"),
        (["record", "--abort-on-hang", "nan"], "--abort-on-hang: nan is not a number from 0"),
        (["doctor", "--workers", "-2"], "--workers: -2 is not a whole number from 0 to 1024"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert says in line and line.startswith(f"distmon {argv[0]}: "), line
