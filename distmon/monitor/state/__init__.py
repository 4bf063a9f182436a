"""The job as the monitor knows it: its facts, each defined once. ``job.py`` holds them over
the ranks (:class:`JobState`); ``ingest.py`` takes the ranks' reports in (those ``admission.py``
lets in) to the numbers of ``columns.py`` and the reports ``reports.py`` keeps, where
``consequences.py`` judges whether an exception is a consequence of another's failure;
``ranks.py`` is one rank's view (:class:`RankState`); ``ending.py`` tells how the job and each
rank ended. Beside them: every status and its words, the thresholds, the alerts, and the
snapshots other threads read. Imports the wire, nothing of the monitor above it:
every rule, reader and surface formats these facts."""

from distmon.monitor.state.job import JobState
from distmon.monitor.state.ranks import RankState

__all__ = ["JobState", "RankState"]
