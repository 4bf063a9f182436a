"""Acting on alerts with real parts: commands to a real rank process over real ZeroMQ, dumps
back, evidence bundles on disk, and hung torchrun jobs ended by ``distmon run
--abort-on-hang`` (one node, and two "nodes" on a keyed TCP channel) whose bundle torch's own
``torchfrtrace`` reads, with a real HTTP server and a real command told of every change.
The parts that need no job: tests/unit/test_actions.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from distmon.actions.bundles import DUMP_PREFIX
from distmon.monitor.intake.receiver import Receiver
from distmon.wire import decode
from distmon.wire.sockets import END, Command
from tests.support.commands import DISTMON, TORCHRUN, distmon, free_port
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, start
from tests.support.waiting import wait_until
from tests.support.webhook import serving

JOB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "0.5"}
INJECTED = re.compile(r"\[train\] rank (\d+): injecting (\S+) at step \d+, t=([\d.]+)")

RANK = """
import time
import distmon.hooks
distmon.hooks.attach()
print("attached", flush=True)
time.sleep(60)
"""


def test_a_rank_obeys_only_its_own_jobs_end_command(tmp_path: Path, endpoint: str) -> None:
    """A real rank process: another job's command is ignored; its own ends it by SIGTERM,
    after a last report that says distmon ended it."""
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    receiver = Receiver(endpoint)
    env = {**os.environ, "DISTMON_ENDPOINT": endpoint, "DISTMON_INTERVAL": "0.2", "DISTMON_JOB_ID": "mine"}
    rank = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        reports = []
        deadline = time.monotonic() + 30
        while not reports and time.monotonic() < deadline:
            reports += [decode(raw) for batch in receiver.receive(0.2) for raw in batch.frames()]
        assert reports, "the rank never reported"
        assert receiver.send(Command(END, "someone-else", "not yours")) == 1
        time.sleep(1.0)
        assert rank.poll() is None
        receiver.send(Command(END, "mine", "the hang alert stood 5s"))
        assert rank.wait(10) == -signal.SIGTERM
        deadline = time.monotonic() + 5
        while not any(r.exit for r in reports) and time.monotonic() < deadline:
            reports += [decode(raw) for batch in receiver.receive(0.2) for raw in batch.frames()]
        assert reports[-1].exit is not None and reports[-1].exit.how == "ended"
        assert "distmon: ending rank 0: the hang alert stood 5s" in rank.stderr.read().decode()
    finally:
        rank.kill()
        rank.wait()
        receiver.close()


class RunningJob:
    """``distmon run`` and its job, stdout and stderr read as they come."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.process = start(
            [*DISTMON, "run", *argv],
            env=env or JOB_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self.out.extend, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self.err.extend, args=(self.process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def wait(self, timeout: float) -> tuple[int, float]:
        """The exit status, and the unix time it came."""
        try:
            status = self.process.wait(timeout)
        finally:
            kill_tree(self.process)
        ended = time.time()
        for reader in self._readers:
            reader.join(5)
        return status, ended

    def injected(self) -> float:
        found = [float(m.group(3)) for line in self.out if (m := INJECTED.search(line))]
        assert found, "".join(self.out)[-3000:]
        return found[0]

    def stderr(self) -> str:
        return "".join(self.err)


def train(*args: str) -> list[str]:
    return [str(TRAIN), "--timeout", "120", "--workers", "0", *args]


def test_a_hung_job_is_ended_early_with_its_evidence_kept_and_everyone_told(tmp_path: Path) -> None:
    out = tmp_path / "run.distmon"
    told = tmp_path / "told.jsonl"
    with serving() as webhook:
        job = RunningJob(
            [
                "--record",
                str(out),
                "--abort-on-hang",
                "5",
                "--notify",
                webhook.url,
                "--on-alert",
                f"cat >> {told}",
                "--",
                TORCHRUN,
                "--standalone",
                "--nproc_per_node=3",
                *train("--fault", "hang", "--fault-rank", "2"),
            ]
        )
        status, ended = job.wait(110)
        posts = list(webhook.bodies)
    err = job.stderr()
    assert status != 0, err[-3000:]
    assert ended - job.injected() < 60, "ended long after the fault"
    assert "distmon: ending the job: the hang alert stood" in err
    assert "distmon run: distmon ended the job (--abort-on-hang)" in err
    assert "did not end" not in err

    bundles = sorted((tmp_path / "run.evidence").iterdir())
    assert bundles and all(re.fullmatch(r"\d{8}-\d{6}-hang(-\d+)?", b.name) for b in bundles)
    final = bundles[-1]
    assert json.loads((final / "alert.json").read_text())["ranks"] == [2]
    assert sorted(f.name for f in final.glob(f"{DUMP_PREFIX}*")) == [f"{DUMP_PREFIX}{r}" for r in range(3)]
    stacks = (final / "stacks.txt").read_text()
    assert "rank 2" in stacks and "train.py" in stacks and "in inject" in stacks
    analysis = subprocess.run(
        [str(Path(sys.executable).parent / "torchfrtrace"), str(final)], capture_output=True, text=True, timeout=120
    )
    assert analysis.returncode == 0, analysis.stderr
    assert "missing ranks: {2}" in analysis.stdout + analysis.stderr

    report = distmon("report", out)
    assert "ended by distmon" in report.stdout and "distmon ended the job at" in report.stdout

    events = [(p["event"], p["alert"]["kind"]) for p in posts]
    assert ("raised", "hang") in events and ("updated", "hang") in events, events
    assert all(p["text"].startswith("distmon: ") and "\n" not in p["text"] for p in posts)
    assert any("distmon ended the job" in p["alert"]["detail"] for p in posts if p["event"] == "updated")
    assert [json.loads(line) for line in told.read_text().splitlines()] == posts


def test_every_nodes_ranks_end_over_the_keyed_channel(tmp_path: Path) -> None:
    """Two "nodes" (two torchruns, each under its own ``distmon run``) and one monitor on
    TCP with a job key. Rank 3, on the node without the monitor, holds the GIL: it can
    neither dump nor end itself. Every other rank ends at the monitor's command; rank 3
    goes with its launcher's teardown or distmon's kill."""
    key = tmp_path / "job.key"
    distmon("keygen", key, check=True)
    monitor, master = f"tcp://127.0.0.1:{free_port()}", str(free_port())
    out = tmp_path / "run.distmon"

    def node(rank: int, *monitoring: str) -> RunningJob:
        launcher = [TORCHRUN, "--nnodes=2", "--nproc_per_node=2", f"--node_rank={rank}"]
        launcher += ["--master_addr=127.0.0.1", f"--master_port={master}"]
        job = train("--fault", "gil", "--fault-rank", "3")
        return RunningJob([*monitoring, "--endpoint", monitor, "--key-file", str(key), "--", *launcher, *job])

    first = node(0, "--record", str(out), "--abort-on-hang", "5")
    wait_until(lambda: "listening on" in first.stderr(), 60, "the monitor listening first, as on a cluster")
    second = node(1)
    second_status, _ = second.wait(120)
    first_status, _ = first.wait(60)
    assert first_status != 0 and second_status != 0, first.stderr()[-3000:]
    assert "distmon: ending the job:" in first.stderr()
    report = distmon("report", out)
    ends = dict(re.findall(r"rank\s+(\d+)\s+\S+\s+step\s+\d+\s+(.*)", report.stdout))
    assert {r: ends.get(r) for r in "012"} == dict.fromkeys("012", "ended by distmon (--abort-on-hang)"), report.stdout
    assert "ended by distmon" not in ends.get("3", ""), report.stdout
    final = sorted((tmp_path / "run.evidence").iterdir())[-1]
    assert sorted(f.name for f in final.glob(f"{DUMP_PREFIX}*")) == [f"{DUMP_PREFIX}{r}" for r in range(3)]
    assert "No dump from ranks 3" in (final / "alert.txt").read_text()
    assert "holding the GIL" in (final / "stacks.txt").read_text()
