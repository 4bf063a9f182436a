"""The job as the monitor knows it: its facts, each defined once. ``job.py`` holds them over
the ranks (:class:`JobState`), ``ingest.py`` takes the ranks' reports in (what ``admission.py``
lets in, into the numbers of ``columns.py`` and the reports kept by ``reports.py``),
``ranks.py`` is one rank's view of them (:class:`RankState`), ``ending.py`` how the job and
each rank ended; beside them every status and its words, the thresholds, the alerts, and the
snapshots other threads read. Imports the wire and the link, nothing of the monitor above it:
every rule, reader and surface formats these facts."""

from distmon.monitor.state.job import JobState
from distmon.monitor.state.ranks import RankState

__all__ = ["JobState", "RankState"]
