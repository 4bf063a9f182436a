"""A real Slurm cluster on this machine's nodes (:mod:`tests.support.nodes`): Debian's munged,
slurmctld on the head (the bridge's address) and a slurmd inside each node's namespace under its
host name, every file of theirs in a folder of the test's, stopped and removed on leaving
(``shared/multi-node.md``). Slurm's commands find it through ``SLURM_CONF``, which
:func:`slurm` sets in this process's environment while it runs."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil

from tests.support.nodes import Node

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "squeue")
HEAD = "dmhead"


def can_run_slurm() -> str | None:
    """Why a Slurm cluster cannot be run here, or None where it can."""
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    return (
        f"needs Debian's slurmctld, slurmd, slurm-client and munge (missing: {', '.join(missing)})" if missing else None
    )


def _config(folder: Path, head: str, made: Sequence[Node], port: int) -> str:
    nodes = "".join(f"NodeName={n.name} NodeAddr={n.address} CPUs={os.cpu_count() or 1} State=UNKNOWN\n" for n in made)
    return f"""ClusterName=dmtest
SlurmctldHost={HEAD}({head})
SlurmUser=root
SlurmdUser=root
SlurmctldPort={port}
SlurmdPort={port + 1}
AuthType=auth/munge
AuthInfo=socket={folder / "munge.sock"}
CredType=cred/munge
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}/%n
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd-%n.pid"}
SlurmctldLogFile={folder / "slurmctld.log"}
SlurmdLogFile={folder / "slurmd-%n.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
{nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@contextlib.contextmanager
def slurm(head: str, made: Sequence[Node], folder: Path, port: int) -> Iterator[Path]:
    """The cluster, its controller listening on ``head`` and ``port`` (and ``port`` + 1 for
    the slurmds); yields its configuration file, set as ``SLURM_CONF`` while it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    for sub in ("state", "spool", *(f"spool/{n.name}" for n in made)):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o600)
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, head, made, port))
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        munge = ["munged", "-F", "-f", f"--socket={folder / 'munge.sock'}", f"--key-file={key}"]
        munge += [f"--pid-file={folder / 'munged.pid'}", f"--seed-file={folder / 'munged.seed'}"]
        munge += [f"--log-file={folder / 'munged.log'}"]
        daemons.append(_start(munge, folder / "munged.out"))
        _wait(lambda: (folder / "munge.sock").exists(), "munged's socket", folder / "munged.out")
        controller = ["unshare", "--uts", "sh", "-c", f"hostname {HEAD} && exec slurmctld -D -i"]
        daemons.append(_start(controller, folder / "slurmctld.out"))
        for node in made:
            inside = (
                f"mount --bind /etc/netns/{node.namespace}/hosts /etc/hosts && hostname {node.name} && "
                f"exec slurmd -D -N {node.name}"
            )
            argv = ["nsenter", f"--net=/run/netns/{node.namespace}", "unshare", "--mount", "--uts", "sh", "-c", inside]
            daemons.append(_start(argv, folder / f"slurmd-{node.name}.out"))
        _wait(lambda: _idle(len(made)), "every node idle in sinfo", folder / "slurmctld.log")
        yield conf
    finally:
        with contextlib.suppress(subprocess.SubprocessError, OSError, AssertionError):
            subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=10)
            _wait(lambda: not _jobs(), "the jobs to end", folder / "slurmctld.log", 15)
        for daemon in reversed(daemons):
            daemon.terminate()
        for daemon in daemons:
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        _kill_left(conf)
        if before is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = before


def _jobs() -> list[str]:
    return subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=10).stdout.split()


def _kill_left(conf: Path) -> None:
    """Whatever this cluster started that outlived its daemons (a step's slurmstepd waits for a
    slurmd that is gone): the processes whose environment names its configuration."""
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("SLURM_CONF") == str(conf) and process.pid != os.getpid():
                process.kill()


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)


def _idle(nodes: int) -> bool:
    done = subprocess.run(["sinfo", "-h", "-o", "%T %D"], capture_output=True, text=True, timeout=10)
    return done.returncode == 0 and done.stdout.split() == ["idle", str(nodes)]


def _wait(ready: object, what: str, log: Path, seconds: float = 60.0) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not come within {seconds:.0f}s: {log.read_text(errors='replace')[-2000:]}")
