"""What the monitor knows about a job: each rank's latest numbers, a short history of them and
its latest report, and the facts read off them, each defined once (here, or over the columns in
:mod:`distmon.monitor.state.facts`: a rank's GPU memory, whether it is silent, how long ago a
moment on its clock was, whether it failed on its own). The rules, the terminal UI, the
reports and the exporters only format these.

The numbers are kept in columns, an array per field over the ranks (:class:`Columns`),
filled from a whole batch at once by the job's admission (:mod:`distmon.monitor.state.ingest`): frames straight from
ranks read as arrays (:mod:`distmon.wire.arrays`), or a relay's columns
(:mod:`distmon.wire.column_batch`), both the one way in (:meth:`JobState.ingest_batch`). Taking in
the reports of 131,072 ranks a second costs a few array operations per batch, and a rule that
looks at every rank looks at an array. A rank's whole report (its stack, its exception) is kept
as the bytes it came in and decoded only when someone asks (:mod:`distmon.monitor.state.reports`).
:class:`~distmon.monitor.state.ranks.RankState` is a view of one rank over the columns; how the
job ended is told in :mod:`distmon.monitor.state.ending`.

Memory is bounded by design: a fixed set of numbers and one report per rank, so a
4096-rank job costs the same after an hour as after a minute; and only reports that fit
the job are admitted (:mod:`distmon.monitor.state.admission`), so no sender can add ranks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.state import facts
from distmon.monitor.state.admission import MAX_WORLD
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import ALL, F8, I8, Columns
from distmon.monitor.state.ending import Ending, job_ending
from distmon.monitor.state.ingest import Admission
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.nodes import EyesTold, NodeLinks, SilentNode, blind_hosts, silent_nodes
from distmon.monitor.state.pace import Holdups
from distmon.monitor.state.ranks import Ranks, RankState
from distmon.monitor.state.reports import Reports
from distmon.node.torch_frames import waits_on_peers
from distmon.wire import GroupStatus, Report
from distmon.wire.column_batch import ColumnBatch
from distmon.wire.sockets import Batch, Relay


class JobState:
    """The ranks of the one job this monitor follows, judged by the monitor's thresholds
    (``limits``: its detector's; a report or a replay, without a detector, the defaults).

    What comes in is taken in by its :class:`~distmon.monitor.state.ingest.Admission`, which
    alone writes the columns, the reports kept and the counts (``dropped`` counts refusals by
    reason); the job reads them.
    """

    def __init__(
        self, limits: Thresholds, job: str | None = None, pinned: bool = False, max_world: int = MAX_WORLD
    ) -> None:
        self.limits = limits
        self.admission = Admission(job, pinned, max_world)
        self._unwatched: Counter[str] = Counter()
        self.ranks = Ranks(self)
        self.told = EyesTold()
        """What the nodes' eyes told of the job's nodes (taken in by
        :class:`distmon.monitor.outside.sight.Sight`)."""

    @property
    def eyes(self) -> Mapping[str, None]:
        """The nodes whose eye has spoken (:attr:`EyesTold.eyes`)."""
        return self.told.eyes

    @property
    def links(self) -> Mapping[str, NodeLinks]:
        """Per host, its network links as its eye last read them (:attr:`EyesTold.links`)."""
        return self.told.links

    @property
    def gone(self) -> Mapping[tuple[str, int], float]:
        """The processes the nodes' eyes saw end (:attr:`EyesTold.gone`)."""
        return self.told.gone

    # --- taking reports in ------------------------------------------------------------------

    def ingest(self, raw: bytes, now: float) -> RankState | None:
        """Take in one message (a frame, or a bare report); a bad or refused one is counted by
        reason, never raised. Returns the rank it was admitted for."""
        _, ranks = self.admission.take_in(Batch.of([raw]), now, None)
        return RankState(self, int(ranks[0])) if len(ranks) else None

    def apply(self, report: Report, now: float) -> bool:
        """Take in ``report`` as if it had just arrived (tests build states this way)."""
        return self.ingest(wire.encode(report), now) is not None

    def ingest_batch(self, batch: Batch | ColumnBatch, now: float, times: F8 | None = None) -> I8:
        """Take in a batch of frames, or a relay's columns (``times[i]`` when frame ``i``
        arrived, ``now`` for all by default), each admitted or counted by why not; returns the
        indices of the frames admitted."""
        return self.admission.take_in(batch, now, times)[0]

    # --- what the admission wrote -----------------------------------------------------------

    @property
    def job(self) -> str | None:
        return self.admission.job

    @property
    def job_world(self) -> int | None:
        return self.admission.job_world

    @property
    def max_world(self) -> int:
        return self.admission.max_world

    @property
    def cols(self) -> Columns:
        return self.admission.cols

    @property
    def reports(self) -> Reports:
        return self.admission.reports

    @property
    def dropped(self) -> Counter[str]:
        """Messages refused, by reason (a copy: :meth:`refused` counts them)."""
        return self.admission.dropped.copy()

    @property
    def unwatched(self) -> Counter[str]:
        """Seconds the monitor did not watch, by why (:mod:`distmon.monitor.state.unwatched`; a
        copy: :meth:`not_watched` counts them)."""
        return self._unwatched.copy()

    def admit_worlds_up_to(self, most: int) -> None:
        """Reports claiming a world of up to ``most`` ranks fit the job from now on (the
        monitor a screen follows admits so many)."""
        self.admission.max_world = most

    def refused(self, reasons: Mapping[str, int]) -> None:
        """Messages were refused before the state saw them, so many by reason (a feed's
        refusals, looks that were not looks, a recording's ``d`` record)."""
        self.admission.dropped.update(reasons)

    def not_watched(self, seconds: Mapping[str, int]) -> None:
        """The monitor did not watch so many seconds, by why (its loop stood still, its clock
        jumped; those of the monitor a recording or a screen follows)."""
        self._unwatched.update(seconds)

    @property
    def lost_on_the_way(self) -> Counter[str]:
        return self.admission.lost_on_the_way

    @property
    def received(self) -> int:
        return self.admission.received

    @property
    def last_message(self) -> float | None:
        return self.admission.last_message

    @property
    def retained(self) -> int:
        """Bytes of the ranks' reports kept, as received."""
        return self.admission.retained

    @property
    def reporting(self) -> int:
        return self.admission.reporting

    @property
    def relays(self) -> list[Relay]:
        return self.admission.relays

    @property
    def relay_heard(self) -> list[float]:
        return self.admission.relay_heard

    # --- reading ----------------------------------------------------------------------------

    def present(self) -> I8:
        """The ranks heard from, in order."""
        return np.flatnonzero(self.cols.present)

    def heard(self, ranks: I8) -> npt.NDArray[np.bool_]:
        """Which of ``ranks`` have been heard from: a rank another's log or group names may lie
        beyond every rank that reported."""
        inside = (ranks >= 0) & (ranks < self.cols.capacity)
        heard = np.zeros(len(ranks), dtype=bool)
        heard[inside] = self.cols.present[ranks[inside]]
        return heard

    def views(self, ranks: npt.NDArray[np.bool_] | I8) -> list[RankState]:
        """The ranks of a mask over ranks (or an array of ranks), as views, in order: the
        rules pick the few ranks worth a look off the columns, then read those."""
        chosen = np.flatnonzero(ranks) if ranks.dtype == np.bool_ else ranks
        return [RankState(self, rank) for rank in chosen.tolist()]

    def report_of(self, rank: int) -> Report:
        """Rank ``rank``'s latest report as of its latest numbers (see
        :mod:`distmon.monitor.state.reports`), decoded once and kept among the last few asked
        for; KeyError for a rank not heard from."""
        c = self.cols
        if not (0 <= rank < c.capacity and c.present[rank]):
            raise KeyError(rank)
        return self.reports.get(rank, c, self.job, self.world, self.dropped)

    def wanted(self) -> list[int]:
        """Ranks whose whole reports the monitor wants from their relays: those asked for since
        the last call, and those heard from whose report has not come (it started late)."""
        c = self.cols
        missing = np.flatnonzero(c.present & np.isnan(c.report_t) & (c.via >= 0))
        return sorted(self.reports.take_asked().union(missing.tolist()))

    def host_name(self, host: int) -> str:
        """A host's name, from a report of one of its ranks."""
        name = self.reports.names.get(host)
        if name is None:
            c = self.cols
            ranks = np.flatnonzero(c.present & (c.host == host))
            reported = ranks[~np.isnan(c.report_t[ranks])]
            ranks = reported if len(reported) else ranks
            name = self.report_of(int(ranks[0])).host if len(ranks) else "?"
        return name

    def process_of(self, rank: int) -> tuple[str, int]:
        """Rank ``rank``'s host and pid, from the columns: what asking about its process needs,
        without decoding its report (a rule may ask of thousands of ranks in a tick)."""
        return self.host_name(int(self.cols.host[rank])), int(self.cols.pid[rank])

    def group(self, gid: int) -> GroupStatus | None:
        """A group's description (its name, members, timeout), from a report of a member."""
        found = self.reports.groups.get(gid)
        if found is None:
            members = np.flatnonzero((self.cols.g_id == gid).any(axis=1) & self.cols.present)
            for rank in members[:1].tolist():
                self.report_of(rank)
            found = self.reports.groups.get(gid)
        return found

    def group_id(self, gid: int, rank: int | None = None) -> str:
        """The id of the group whose hash is ``gid``: from its description, else from the
        channels of ``rank``'s report (a group only point-to-point traffic names)."""
        found = self.group(gid)
        if found is not None:
            return found.id
        if rank is not None:
            for c in self.report_of(rank).p2p:
                if wire.name_hash(c.group) == gid:
                    return c.group
        return f"#{gid:x}"

    def blocked(self, ranks: I8) -> npt.NDArray[np.bool_]:
        """Per rank of ``ranks`` and channel slot: blocked in a send or receive."""
        c = self.cols
        rows = np.arange(c.channel_slots)[None, :] < c.channels[ranks, None]
        mask: npt.NDArray[np.bool_] = rows & (c.c_blocked[ranks] >= 0)
        return mask

    def ages(self, t: F8, now: float, ranks: I8 | None = None) -> F8:
        """:meth:`RankState.age` over ranks (all, or ``ranks``; ``t`` a value or a row of
        values per rank, on the rank's own clock)."""
        c = self.cols
        pick: I8 | slice = slice(None) if ranks is None else ranks
        offset = c.t[pick] + (now - c.received[pick])
        ages: F8 = (offset[:, None] if t.ndim == 2 else offset) - t
        return ages

    @property
    def world(self) -> int:
        return self.job_world or 0

    @property
    def hosts(self) -> list[str]:
        return sorted({self.host_name(int(h)) for h in distinct(self.cols.host[self.present()])})

    def rank_of_process(self, host: str, pid: int) -> int | None:
        """The rank whose process is ``pid`` on ``host``, if any has reported so."""
        for rank in np.flatnonzero(self.cols.present & (self.cols.pid == pid)).tolist():
            if self.host_name(int(self.cols.host[rank])) == host:
                return int(rank)
        return None

    def unwatched_hosts(self) -> list[str]:
        """The job's hosts no eye watches, so that their ranks are judged from their reports
        alone; none where no eye has spoken at all (a replay of a recording older than the
        eyes says nothing of them)."""
        return [host for host in self.hosts if host not in self.eyes] if self.eyes else []

    def gpu_used(self, ranks: I8 | slice = ALL) -> F8:
        """Per rank (of ``ranks``): :func:`~distmon.monitor.state.facts.gpu_used`."""
        return facts.gpu_used(self.cols, ranks)

    def gpu_allocated(self, ranks: I8 | slice = ALL) -> F8:
        return facts.gpu_allocated(self.cols, ranks)

    def gpu_total(self) -> F8:
        """Per rank: its GPU's memory (NaN: no GPU, or none reported)."""
        total: F8 = facts.gpu_total(self.cols.gpu_total)
        return total

    def gpu_util(self, ranks: I8) -> F8:
        """Of ``ranks``: the utilization of each one's GPU, 0 to 100, from its latest report
        (NaN: none). The header does not carry it; the reports are read for it, not kept
        decoded."""
        reports = self.reports.raw
        util = [wire.gpu_util(raw) if r < len(reports) and (raw := reports[r]) else None for r in ranks.tolist()]
        return np.array(util, dtype=np.float64)

    def raw_reports(self) -> tuple[bytes | None, ...]:
        """By rank: the report kept of each as received (immutable bytes), copied."""
        return tuple(self.reports.raw)

    def silent_for(self, now: float) -> F8:
        """Per rank: seconds since its latest report arrived."""
        since: F8 = now - self.cols.received
        return since

    def collective_age(self, now: float) -> F8:
        """Per rank: how long its oldest collective has been in flight, on its own clock (see
        :meth:`RankState.age`); NaN when none is."""
        age: F8 = self.ages(self.cols.collective_since, now)
        return age

    def freed(self, ranks: I8, now: float, lasted: float, within: float) -> npt.NDArray[np.bool_]:
        """Of ``ranks``, those that came out of a wait their reports showed lasting ``lasted``
        seconds at least, last seen less than ``within`` ago (by their reports' clocks): the peer
        they waited for moved on, and they catch up. Those still waited for are this incident's
        tail, not its culprits."""
        c = self.cols
        out: npt.NDArray[np.bool_] = (c.wait_ended[ranks] - c.wait_began[ranks] >= lasted) & (
            self.ages(c.wait_ended[ranks], now, ranks) < within
        )
        return out

    def flagged(self, flag: int, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]:
        """Per rank (of ``ranks``): :func:`~distmon.monitor.state.facts.flagged`."""
        return facts.flagged(self.cols, flag, ranks)

    def consequences(self, of: int, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]:
        """Per rank (of ``ranks``): :func:`~distmon.monitor.state.facts.consequences`."""
        return facts.consequences(self.cols, of, ranks)

    def silent_nodes(self, now: float, overdue: bool = False) -> list[SilentNode]:
        """The nodes silent as a whole (:func:`~distmon.monitor.state.nodes.silent_nodes`)."""
        return silent_nodes(self, now, overdue)

    def eye_on(self, host: str) -> str | None:
        """Whose eye watches ``host``, in words: its relay's, or the monitor's own; None where
        none does (no relay runs there, nor the monitor)."""
        if any(relay.host == host for relay in self.relays):
            return f"the eye on {host} (its distmon relay)"
        if host in self.eyes:
            return f"the monitor's own eye (the monitor runs on {host})"
        return None

    def blind_hosts(self, now: float) -> set[str]:
        """The hosts whose eye is lost (:func:`~distmon.monitor.state.nodes.blind_hosts`)."""
        return blind_hosts(self, now)

    def silent(self, now: float, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]:
        """Per rank (of ``ranks``): heard from, not exited, and silent longer than its reports
        allow (:func:`~distmon.monitor.state.facts.silent`)."""
        return facts.silent(self.cols, self.limits, now, ranks)

    def live(self, now: float) -> npt.NDArray[np.bool_]:
        mask: npt.NDArray[np.bool_] = self.cols.present & ~self.flagged(wire.FLAG_EXITED) & ~self.silent(now)
        return mask

    def found(self, ranks: I8 | slice = ALL) -> npt.NDArray[np.bool_]:
        """Per rank (of ``ranks``): found from outside, its reports its node's eye's (no hook in
        it: no steps, no sequence numbers; its stack and process are what is known)."""
        return facts.found(self.cols, ranks)

    def stackless(self, now: float) -> tuple[I8, str | None]:
        """The live ranks found from outside whose stacks could not be taken (nothing can be
        judged of them), and why, as the first of them says."""
        ranks = np.flatnonzero(self.found() & self.live(now) & (self.cols.stack == 0))
        if not len(ranks):
            return ranks, None
        outside = self.report_of(int(ranks[0])).outside
        return ranks, outside.stack_error if outside is not None else None

    def waiting_on_peers(self, now: float) -> npt.NDArray[np.bool_]:
        """Per rank: live and waiting on its peers: in a collective or a send or receive by its
        reports; found from outside, standing still where its stack shows such a wait (one
        stack classified per place)."""
        c = self.cols
        live = self.live(now)
        mask: npt.NDArray[np.bool_] = live & (c.in_collective | c.in_p2p)
        still = np.flatnonzero(live & self.found() & self.flagged(wire.FLAG_STALLED) & (c.stack != 0))
        hashes, first = np.unique(c.stack[still], return_index=True)
        peers = [h for h, i in zip(hashes.tolist(), first.tolist(), strict=True) if _at_peers(self, int(still[i]))]
        mask[still[np.isin(c.stack[still], peers)]] = True
        return mask

    def progress(self) -> tuple[int, int]:
        """The job's progress so far, the one measure of it: the steps and forward passes, and
        the collectives completed, summed over the ranks heard. It grows whenever any rank makes
        some (ranks found from outside count none: :meth:`moving_found`)."""
        c = self.cols
        present = self.present()
        rows = np.arange(c.g_comp.shape[1]) < c.groups[present, None]
        return int(c.steps[present].sum() + c.forwards[present].sum()), int(c.g_comp[present][rows].sum())

    def moving_found(self, now: float) -> bool:
        """A live rank found from outside makes progress, as far as the outside sees: its
        stack moves, or its thread works (the progress a job without the hook shows)."""
        return bool((self.found() & self.live(now) & ~self.flagged(wire.FLAG_STALLED)).any())

    def stalled(self, now: float) -> npt.NDArray[np.bool_]:
        """Per rank: live, no exception raised, and making no progress by its own account."""
        mask: npt.NDArray[np.bool_] = self.live(now) & ~self.flagged(wire.FLAG_RAISED) & self.flagged(wire.FLAG_STALLED)
        return mask

    def failed_on_their_own(self) -> npt.NDArray[np.bool_]:
        """Per rank: :func:`~distmon.monitor.state.facts.failed_on_their_own`."""
        return facts.failed_on_their_own(self.cols)

    def severities(self, ranks: I8, now: float) -> I8:
        """Each of ``ranks``' status, as its severity (:func:`~distmon.monitor.state.facts.severities`)."""
        return facts.severities(self.cols, self.limits, now, ranks)

    def first_failure(self) -> float | None:
        """When the first rank raised something that is not a consequence of another's death."""
        times = [s.report.exception.t for s in self.views(self.flagged(wire.FLAG_RAISED)) if not s.lost_a_peer()]  # type: ignore[union-attr]
        return min(times, default=None)

    def being_taken_down(self) -> bool:
        """Some rank was ended by a signal: the job is being taken down (killed while hung, or
        torn down after a failure), so its ranks leaving does not resolve what stood."""
        return bool(self.flagged(wire.FLAG_STOPPED_BY_SIGNAL).any())

    def interval(self) -> float:
        """The longest report interval among the ranks (1 s before any reports)."""
        intervals = self.cols.interval[self.present()]
        intervals = intervals[~np.isnan(intervals)]
        return float(intervals.max()) if len(intervals) else 1.0

    def pace(self) -> float | None:
        """The job's median step time; None before any rank has stepped."""
        times = self.cols.step_p50[self.present()]
        times = times[~np.isnan(times)]
        return float(np.median(times)) if len(times) else None

    def holdups(self) -> Holdups:
        """Who holds up whom at the job's pace (:mod:`distmon.monitor.state.pace`), as its
        admission last worked it out."""
        return self.admission.holdups

    def ending(self, standing: Iterable[Alert]) -> Ending | None:
        """How the job ended, given the alerts that stand; None while it runs
        (:func:`~distmon.monitor.state.ending.job_ending`)."""
        return job_ending(self, standing)

    def held_up(self, ranks: I8) -> npt.NDArray[np.bool_]:
        """Of ``ranks``, those whose latest report reached the monitor more than two of their
        intervals later than their reports usually take: held up on the way (a relay's queue,
        a sender behind), so it tells where they were, not where they are."""
        c = self.cols
        late = c.received[ranks] - c.t[ranks] - c.least_delay[ranks]
        held: npt.NDArray[np.bool_] = late > 2 * np.nan_to_num(c.interval[ranks], nan=1.0)
        return held

    def ended(self, now: float, quiet: float = 60.0) -> bool:
        """Every rank has exited, or nothing was heard for ``quiet`` seconds."""
        return self.admission.ended(now, quiet)


def _at_peers(job: JobState, rank: int) -> bool:
    """Rank ``rank``'s stack stands where a rank waits on its peers."""
    return waits_on_peers(job.report_of(rank).stack)
