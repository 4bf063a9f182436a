"""The package as a user installs it: the wheel, built once, in fresh virtual environments.

First with no extra and no torch (the monitor side on a login node or a laptop), then the same
environment with torch alone (a training node), then each extra on its own. Nothing here sees
the checkout: the commands run from a scratch directory, with no ``PYTHONPATH``. The tests run
in file order, because the torch stage adds torch to the environment the first stage proved
works without it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from distmon.cli import COMMANDS
from tests.support.paths import DATA, TRAIN
from tests.support.venvs import Venv

RECORDING = DATA / "hang-rank2.distmon"


def no_traceback(result: subprocess.CompletedProcess[str]) -> str:
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    return output


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scratch")


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory, wheel: Path, scratch: Path) -> Venv:
    """``pip install distmon``: no extra, no torch."""
    venv = Venv(tmp_path_factory.mktemp("venv") / "user", scratch, pip=False)
    venv.install(str(wheel))
    return venv


def extra(tmp_path_factory: pytest.TempPathFactory, wheel: Path, scratch: Path, name: str) -> Venv:
    venv = Venv(tmp_path_factory.mktemp("venv") / name, scratch, pip=False)
    venv.install(f"distmon[{name}] @ {wheel.as_uri()}")
    return venv


def test_every_command_and_its_help_start_without_any_extra(user: Venv) -> None:
    top = user.run("distmon", "--help")
    assert top.returncode == 0, top.stderr
    for name in COMMANDS:
        assert name in top.stdout
        result = user.run("distmon", name, "--help")
        assert result.returncode == 0, f"distmon {name} --help: {result.stderr}"
        assert result.stdout.startswith("usage: distmon " + name), result.stdout


def test_the_monitor_side_imports_no_torch_and_needs_none(user: Venv) -> None:
    assert user.python("import torch").returncode != 0, "this stage must run before torch is installed"
    code = (
        "import sys, importlib, pkgutil, distmon.cli, distmon.monitor, distmon.tui, distmon.export\n"
        "for package in (distmon.monitor, distmon.tui, distmon.export):\n"
        "    for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "for name in ('watch', 'record', 'replay', 'report', 'analyze', 'relay', 'keygen'):\n"
        "    importlib.import_module('distmon.commands.' + name)\n"
        "assert 'torch' not in sys.modules\n"
        "print('ok')\n"
    )
    result = user.python(code)
    assert result.stdout.strip() == "ok", result.stderr


def test_report_and_replay_read_a_real_recording(user: Venv) -> None:
    report = user.run("distmon", "report", str(RECORDING))
    assert report.returncode == 0, report.stderr
    assert "rank 2" in report.stdout
    replay = user.run("distmon", "replay", "--headless", "--json", str(RECORDING))
    assert replay.returncode == 0, replay.stderr
    assert any(2 in alert["ranks"] for alert in json.loads(replay.stdout))


def test_a_feature_without_its_extra_names_the_extra_in_one_line(user: Venv, scratch: Path) -> None:
    result = user.run("distmon", "report", str(RECORDING), "--html", str(scratch / "page.html"))
    assert result.returncode == 2 and result.stdout == ""  # the one line, not the text report before it
    assert no_traceback(result).strip().splitlines() == [
        "distmon report: --html needs the html extra (plotly): pip install '.[html]' in distmon's checkout"
    ]


def test_doctor_and_keygen_run_without_torch(user: Venv, scratch: Path) -> None:
    doctor = user.run("distmon", "doctor", timeout=180)
    output = no_traceback(doctor)
    assert "torch" in output
    key = scratch / "job.key"
    keygen = user.run("distmon", "keygen", str(key))
    assert keygen.returncode == 0, keygen.stderr
    assert key.exists()


@pytest.fixture(scope="module")
def trainer(user: Venv) -> Venv:
    """The same environment plus torch alone: a training node."""
    user.install("torch")
    return user


def test_a_stalled_rank_of_a_real_job_is_named_by_report_json(trainer: Venv, scratch: Path) -> None:
    recording = scratch / "run.distmon"
    job = trainer.run(
        *("distmon", "run", "--record", str(recording), "--"),
        *("torchrun", "--standalone", "--nproc-per-node=2", str(TRAIN)),
        *("--steps", "40", "--step-time", "0.02", "--workers", "0", "--timeout", "60"),
        *("--fault", "hang@10:1:12"),
        timeout=240,
    )
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    report = trainer.run("distmon", "report", "--json", str(recording))
    alerts = json.loads(report.stdout)
    hangs = [a for a in alerts if a["kind"] == "hang"]
    assert hangs and hangs[0]["ranks"] == [1], alerts


def test_the_integrations_extra_names_the_libraries_its_callbacks_need(wheel: Path) -> None:
    """The wheel's extra asks for Lightning, Transformers and Accelerate, and holds the callbacks:
    installing those libraries (minutes of pip on a small machine) is theirs to test; the callbacks
    run against them in tests/jobs/test_integrations.py, on the checkout with every extra."""
    with zipfile.ZipFile(wheel) as built:
        names = built.namelist()
        metadata = next(built.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "Provides-Extra: integrations" in metadata
    extra = re.findall(r'^Requires-Dist: ([a-z]+)[^;]*; extra == ["\']integrations["\']$', metadata, re.MULTILINE)
    assert sorted(extra) == ["accelerate", "lightning", "transformers"], metadata
    assert {"distmon/integrations/lightning.py", "distmon/integrations/transformers.py"} <= set(names)


def test_the_html_extra_writes_a_page(tmp_path_factory: pytest.TempPathFactory, wheel: Path, scratch: Path) -> None:
    venv = extra(tmp_path_factory, wheel, scratch, "html")
    page = scratch / "report.html"
    result = venv.run("distmon", "report", str(RECORDING), "--html", str(page))
    assert result.returncode == 0, result.stderr
    assert page.read_text().lower().startswith("<!doctype html>")


@pytest.fixture
def sleeper(scratch: Path) -> Iterator[subprocess.Popen[str]]:
    """A Python process sitting in a function whose name py-spy should report, until the test
    ends (the extra's install before the first look takes minutes on a loaded machine)."""
    code = "import time\ndef waiting_for_the_stack():\n    time.sleep(3600)\nwaiting_for_the_stack()\n"
    process = subprocess.Popen([sys.executable, "-c", code], text=True)
    yield process
    process.kill()
    process.wait()


def test_the_stacks_extra_takes_a_stack_from_outside(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path, scratch: Path, sleeper: subprocess.Popen[str]
) -> None:
    venv = extra(tmp_path_factory, wheel, scratch, "stacks")
    assert shutil.which("py-spy", path=str(venv.bin))
    deadline = time.monotonic() + 30
    while True:
        result = venv.python(
            f"from distmon.node.pyspy import dump\nstack = dump({sleeper.pid})\n"
            "print(stack.error or ' '.join(f.func for f in stack.frames or []))"
        )
        if "waiting_for_the_stack" in result.stdout or time.monotonic() > deadline:
            break
    assert "waiting_for_the_stack" in result.stdout, result.stdout + result.stderr
