"""``distmon run``'s job (:mod:`distmon.launch.supervisor`): a signal sent to ``distmon run``
reaches the job's process group, even one that came while the job was being started."""

from __future__ import annotations

import os
import signal
import sys

from distmon.launch.supervisor import Job


def test_a_signal_that_came_while_the_job_started_reaches_it() -> None:
    """A fresh-clone CI run, on a loaded machine: the job printed its first line and the test sent
    SIGTERM to ``distmon run`` before ``Popen`` had returned in it; the signal was dropped and the
    job slept on. It is now sent once the job's process is known."""
    job = Job([sys.executable, "-c", "import time; time.sleep(60)"], os.environ)
    job._forward(signal.SIGTERM, None)  # as the handler does, before the process is started
    assert job.run() == 128 + signal.SIGTERM
