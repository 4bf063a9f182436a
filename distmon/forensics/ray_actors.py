"""Ray's word on an actor whose process died (``ray/exceptions.py``'s ``ActorDiedError``, before
Ray 2.9 ``RayActorError``, its fields tab-indented under it), and which rank of a verl job that
actor was; and the raylet's on a worker process that died while it ran a task::

    ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
            class_name: create_colocated_worker_cls.<locals>.WorkerDict
            pid: 505292
            name: burXCcWorkerDict_0:2
            ip: 10.128.9.119
    The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR ...
    (raylet) A worker died or was killed while executing a task by an unexpected system error. ...
        Worker PID: 870287 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly
        by a signal. SystemExit is raised (sys.exit is called). Exit code: 1. The process receives a SIGTERM.
    ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
    Memory on the node (IP: 10.0.0.2, ID: ...) where the task (actor ID: ..., name=RayTrainWorker.__init__,
        pid=1942, memory used=23.49GB) was running was 718.15GB / 755.24GB (0.950882), which exceeds ...
    - (ip=10.0.0.2, pid=1942) world_rank=3, local_rank=1, node_rank=1      (Ray Train's workers, at start)

verl names each worker ``{prefix}{class}_{placement group}:{local rank}``
(``verl/single_controller/ray/base.py``), its ranks counted placement group by placement group:
in the first, the local rank is the rank. Ray says the actor's process died (killed by the OOM
killer, by a signal, or crashed), not why, nor whether it died first or because another did:
its rank is suspected, never proven. A worker whose exit detail says it received SIGTERM (Ray's
worker raises ``SystemExit`` on it, ``_raylet.pyx`` adds "The process receives a SIGTERM.") did
not fail: something outside stopped it (Ray shutting its workers down as the job ends, the
scheduler, a user). Ray's memory monitor kills a worker when its node runs low on host memory
(the most recently scheduled one): the node's memory, which that worker's rank was using. A dead
worker's rank is the one Ray Train's list of the workers it started gives its pid; else the log does
not say it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.guards.text import visible

MAX_ACTORS = 64
"""Dead actors kept from one log."""
FIELDS = 12
"""Lines after ``ActorDiedError`` its fields may stand in, or a worker's death its rest."""
MESSAGE = 4096
"""Characters of the raylet's word on a dead worker read."""

_DIED = re.compile(r"(?:ActorDiedError|RayActorError): The actor died")
_WORKER_DIED = "A worker died or was killed while executing a task"
_TERMINATED = "The process receives a SIGTERM"
_WORKER_PID = re.compile(r"Worker PID: ?(\d{1,12})")
_NAME = re.compile(r"^\s*name: ?(\S{1,300})\s*$")
_PID = re.compile(r"^\s*pid: ?(\d{1,12})\s*$")
_ACTOR_ID = re.compile(r"^\s*actor_id: ?[0-9a-f]{16,40}\s*$")
"""A field of ``ActorDiedError``'s: where a paste begins with it, the error's line above was cut."""
_CLASS = re.compile(r"^\s*class_name: ?(\S{1,300})\s*$")
"""The actor's class: its name where Ray's fields give no ``name`` (an actor nobody named)."""
_WORKER = re.compile(r"_(\d{1,6}):(\d{1,6})$")
"""verl's ``_{placement group}:{local rank}`` at the end of a worker's name."""
_EXIT = re.compile(r"Worker exit type: ?(\w{1,40})")
_DETAIL = re.compile(r"Worker exit detail: ?(.{1,200}?)(?:\. |$)")
_LOW_MEMORY = "killed due to the node running low on memory"
_KILLED_TASK = re.compile(r"\bname=([\w.<>:-]{1,300}), pid=(\d{1,12})")
"""The task Ray's memory monitor killed, in the lines after its first: its name and its worker's pid."""
_TRAIN_WORKER = re.compile(r"\bpid=(\d{1,12})\) world_rank=(\d{1,9})")
"""A worker of Ray Train's list, by its pid, and its rank."""
MAX_WORKERS = 1 << 17
"""Workers' pids kept from Ray Train's list."""


@dataclass(frozen=True)
class DeadActor:
    name: str
    rank: int | None
    """Its rank, where its name is verl's and its placement group the first."""
    pid: str | None
    exit: str | None
    terminated: bool = False
    """Its process received SIGTERM: stopped from outside, not failed."""


@dataclass
class RayActors:
    """The actors Ray says died, in the order the log says so."""

    dead: list[DeadActor] = field(default_factory=list)
    reading: int = 0
    """Lines left in which the fields of the last ``ActorDiedError`` may stand."""
    name: str | None = None
    kind: str | None = None
    """The dead actor's class, where its fields are being read."""
    pid: str | None = None
    cut: bool = False
    """The fields being read began below their error's line (cut from the paste): only Ray's reason
    (the exit type it gives) says the actor died."""
    terminated: list[str] = field(default_factory=list)
    """The worker processes (their pids, where the line gives them) Ray says received SIGTERM."""
    died: int = 0
    """Worker processes the raylet says died of anything else while running a task."""
    worker: str | None = None
    """The raylet's word on a dead worker being read: a terminal may have wrapped it over lines."""
    worker_lines: int = 0
    workers: list[tuple[str | None, str]] = field(default_factory=list)
    """Worker processes that died of something else than SIGTERM: their pid (where the log gives it)
    and how, in Ray's words."""
    low_memory: int = 0
    """Lines left in which the task Ray's memory monitor killed may be named."""
    ranks: dict[str, int] = field(default_factory=dict)
    """Ray Train's workers: pid -> rank."""

    def line(self, body: str) -> bool:
        """Reads ``body`` if it is Ray's word on a dead actor or one of its fields, or on a worker
        process that died."""
        if _WORKER_DIED in body:
            self._worker()
            self.worker, self.worker_lines = body[:MESSAGE], FIELDS
            return True
        if "world_rank=" in body and (listed := _TRAIN_WORKER.search(body)) is not None:
            if len(self.ranks) < MAX_WORKERS:
                self.ranks[listed.group(1)] = int(listed.group(2))
            return True
        if _LOW_MEMORY in body:
            self.low_memory = FIELDS
        if self.low_memory:
            self.low_memory -= 1
            if (task := _KILLED_TASK.search(body)) is not None:
                self.low_memory = 0
                killed = visible(task.group(1), 100)
                self._died(
                    task.group(2), f"was killed by Ray's memory monitor ({killed}): the node ran low on host memory"
                )
                return True
        if self.worker is not None:
            self.worker += body[:MESSAGE]
            self.worker_lines -= 1
            if _TERMINATED in self.worker or not self.worker_lines or len(self.worker) > MESSAGE:
                self._worker()
        if "The actor died" in body and _DIED.search(body):
            self.finish()
            self.reading, self.cut = FIELDS, False
            return True
        if not self.reading and "actor_id" in body and _ACTOR_ID.match(body):
            self.reading, self.cut = FIELDS, True
            return True
        if not self.reading:
            return False
        self.reading -= 1
        if (name := _NAME.match(body)) is not None:
            self.name = visible(name.group(1), 300)
        elif (kind := _CLASS.match(body)) is not None:
            self.kind = visible(kind.group(1), 300)
        elif (pid := _PID.match(body)) is not None:
            self.pid = pid.group(1)
        elif (exit := _EXIT.search(body)) is not None:
            self.finish(visible(exit.group(1), 40), terminated=_TERMINATED in body)
        else:
            return False
        return True

    def _worker(self) -> None:
        """Keeps the raylet's word on a worker process that died while it ran a task, once read."""
        said, self.worker = self.worker, None
        if said is None:
            return
        if _TERMINATED not in said:
            self.died += 1
            pid, kind, detail = _WORKER_PID.search(said), _EXIT.search(said), _DETAIL.search(said)
            how = ": ".join(visible(m.group(1), 200) for m in (kind, detail) if m)
            self._died(pid.group(1) if pid else None, f"died ({how})" if how else "died")
        elif len(self.terminated) < MAX_ACTORS:
            pid = _WORKER_PID.search(said)
            self.terminated.append(f"pid {pid.group(1)}" if pid else "its pid not in the log")

    def _died(self, pid: str | None, how: str) -> None:
        if len(self.workers) < MAX_ACTORS and all(p != pid or pid is None for p, _ in self.workers):
            self.workers.append((pid, how))

    def finish(self, exit: str | None = None, terminated: bool = False) -> None:
        """Keeps the actor whose fields were read (its exit where Ray's reason gave it), and the
        dead worker being read."""
        self._worker()
        named = self.name or self.kind
        if named is not None and (exit is not None or not self.cut) and len(self.dead) < MAX_ACTORS:
            worker = _WORKER.search(self.name or "")
            rank = int(worker.group(2)) if worker and worker.group(1) == "0" else None
            if all(d.name != named or d.pid != self.pid for d in self.dead):
                self.dead.append(DeadActor(named, rank, self.pid, exit, terminated))
        self.name = self.kind = self.pid = None
        self.reading = 0 if exit is not None else self.reading

    def stopped(self) -> str | None:
        """The Ray workers stopped by SIGTERM, in words, where no other worker or actor died."""
        pids = self.terminated + [f"pid {d.pid}" if d.pid else d.name for d in self.dead if d.terminated]
        if not pids or self.died or any(not d.terminated for d in self.dead):
            return None
        return f"{'a Ray worker' if len(pids) == 1 else f'{len(pids)} Ray workers'} ({', '.join(pids[:3])})"

    def unnamed(self) -> list[str]:
        """The dead workers whose rank the log does not say, in words."""
        workers = [
            f"a Ray worker{f' (pid {pid})' if pid else ''} {how}, as Ray says: its rank is not in the log"
            for pid, how in self.workers
            if pid not in self.ranks
        ]
        actors = [
            f"a Ray actor ({actor.name}{f', pid {actor.pid}' if actor.pid else ''}) died, as Ray says: its rank is "
            "not in the log"
            for actor in self.dead
            if actor.rank is None and not actor.terminated and actor.pid not in self.ranks
        ]
        return workers + actors

    def suspected(self, world: int) -> list[tuple[int, str]]:
        """The ranks (within ``world``) whose actors or workers died, with why."""
        found = [
            (
                rank,
                f"its Ray worker (pid {pid}) {how}, as Ray says; whether first or because another failed, it "
                "does not say",
            )
            for pid, how in self.workers
            if pid is not None and (rank := self.ranks.get(pid)) is not None and rank < world
        ]
        for actor in self.dead:
            if actor.rank is None or actor.rank >= world or actor.terminated:
                continue
            how = f" ({actor.exit})" if actor.exit else ""
            found.append(
                (
                    actor.rank,
                    f"its Ray actor {actor.name} died{how}, as Ray says: its process exited (killed, out of host "
                    "memory, or crashed); whether first or because another rank failed, Ray does not say",
                )
            )
        return found
