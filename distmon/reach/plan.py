"""Which nodes to reach, and how: the hosts the user names, the Slurm job named, or, given
neither, the hosts the job found here says it runs on; then more, as the nodes reached tell
of the job's hosts they know (the store's host knows every node that connects to it)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from distmon.node.jobhosts import hostfile_hosts, hostlist, is_here
from distmon.node.proc import read_text
from distmon.reach import slurm
from distmon.reach.eyes import Eyes

MAX_ROUNDS = 3
"""Rounds of reaching the hosts that nodes reached tell of."""
MAX_HOSTS_FILE = 1 << 20


class ReachError(Exception):
    """A way of reaching nodes that cannot be used, in one line."""


@dataclass
class Plan:
    """Where to reach: a Slurm job's nodes (``srun``), hosts over ssh, and whether to go on to
    the hosts the nodes reached tell of (where none were named)."""

    slurm: tuple[str, list[str]] | None = None
    ssh: list[str] = field(default_factory=list)
    widen: bool = False

    def __bool__(self) -> bool:
        return bool(self.slurm and self.slurm[1]) or bool(self.ssh)


def given(slurm_job: str | None, hosts: str | None, hostfile: str | None) -> Plan | None:
    """The nodes the user named (``--slurm [JOBID]``, ``--hosts``, ``--hostfile``), this host
    left out; None where they named none. Raises :class:`ReachError`."""
    if slurm_job is None and hosts is None and hostfile is None:
        return None
    plan = Plan()
    if slurm_job is not None:
        try:
            job, nodes = slurm.job_nodes(slurm_job or None)
        except slurm.SlurmError as e:
            raise ReachError(str(e)) from None
        plan.slurm = (job, [n for n in nodes if not is_here(n)])
    named: list[str] = []
    if hosts is not None:
        try:
            named += hostlist(hosts)
        except ValueError as e:
            raise ReachError(f"--hosts: {e}") from None
    if hostfile is not None:
        text = read_text(hostfile, MAX_HOSTS_FILE)
        if not text:
            raise ReachError(f"--hostfile: cannot read {hostfile}, or it is empty")
        named += hostfile_hosts(text)
    plan.ssh = [h for h in dict.fromkeys(named) if not is_here(h)]
    return plan


def from_job(job: str, hosts: list[str]) -> Plan:
    """The job's other hosts as its ranks here tell (:meth:`~distmon.node.finder.Finder.hosts_of`):
    a Slurm job's through Slurm where its commands are, the others over ssh; and on to those
    the nodes reached tell of."""
    if job.startswith("slurm-") and shutil.which("srun"):
        return Plan(slurm=(job.removeprefix("slurm-"), hosts), widen=True)
    return Plan(ssh=hosts, widen=True)


def from_launcher(launchers: dict[int, list[str]], pid: int | None) -> Plan | None:
    """The hosts of the ``mpirun`` on this host (``pid``, where several run here), whose ranks
    run on other hosts; None where there is none, or several and none picked."""
    only = next(iter(launchers.values())) if len(launchers) == 1 else None
    hosts = launchers.get(pid) if pid is not None else only
    others = [h for h in hosts or [] if not is_here(h)]
    return Plan(ssh=others, widen=True) if others else None


def reach(eyes: Eyes, plan: Plan) -> None:
    """Start the eyes ``plan`` names, wait for their answers, and, where it widens, reach the
    hosts they tell of in turn (a few rounds at most)."""
    if plan.slurm is not None and plan.slurm[1]:
        eyes.over_slurm(*plan.slurm)
    eyes.over_ssh(plan.ssh)
    eyes.wait()
    for _ in range(MAX_ROUNDS if plan.widen else 0):
        told = [h for n in list(eyes.nodes.values()) for h in _told(n.jobs, eyes.job)]
        new = [h for h in dict.fromkeys(told) if h not in eyes.nodes and not is_here(h) and not _known(eyes, h)]
        if not new:
            return
        eyes.over_ssh(new)
        eyes.wait()


def _told(jobs: dict[str, dict[str, object]], job: str | None) -> list[str]:
    hosts: list[str] = []
    for name, facts in jobs.items():
        told = facts.get("hosts")
        if (job is None or name == job) and isinstance(told, list):
            hosts += [h for h in told if isinstance(h, str)]
    return hosts


def _known(eyes: Eyes, host: str) -> bool:
    """Whether ``host`` is a node already reached under another name (its eye's own)."""
    short = host.partition(".")[0]
    for node in eyes.nodes.values():
        addresses = node.answer.get("addresses")
        if str(node.answer.get("host", "")).partition(".")[0] == short:
            return True
        if isinstance(addresses, list) and host in addresses:
            return True
    return False
