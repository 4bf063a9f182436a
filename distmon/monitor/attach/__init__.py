"""Screens attached to a live monitor (``distmon watch --attach``): the messages both ways
(:mod:`~distmon.monitor.attach.messages`), the monitor's side that serves them without ever
slowing it (:mod:`~distmon.monitor.attach.serve`), and the screen's side: its feed
(:mod:`~distmon.monitor.attach.feed`) and the monitor that follows the other's verdicts
(:mod:`~distmon.monitor.attach.follow`)."""
