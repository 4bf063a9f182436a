"""What several commands share, none a command itself: the options that act on alerts
(:mod:`~distmon.commands.shared.acting`), the metrics port
(:mod:`~distmon.commands.shared.metrics_port`), the live monitor as ``watch`` and ``record``
start it (:mod:`~distmon.commands.shared.live`), the options that find a job from outside
(:mod:`~distmon.commands.shared.finding`), and stopping cleanly on a signal
(:mod:`~distmon.commands.shared.signals`)."""
