"""A node's eye and the monitor's sight of it in one process, for tests on real processes: what
the eye saw is handed over as a relay's batch hands it over, and what the rules asked goes back
as the monitor's ``look`` command would."""

from __future__ import annotations

from distmon.monitor.outside.sight import Sight
from distmon.node.eye import NodeEye
from distmon.node.looks import Looks


class Watching:
    def __init__(self, host: str) -> None:
        self.eye = NodeEye(host)
        self.sight = Sight()
        self.sight.saw([Looks(host)], 0.0)

    def pump(self) -> Sight:
        """The asking since the last pump handed to the eye, what it saw since to the sight."""
        self.eye.want(self.sight.wanted())
        self.sight.saw([self.eye.take()], 0.0)
        return self.sight
