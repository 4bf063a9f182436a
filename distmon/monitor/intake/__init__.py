"""Taking reports in: the live socket (:mod:`.receiver`), the feeds the session's loop reads,
live or from a recording (:mod:`.feeds`), and a live monitor's stream to a screen attached
to it (:mod:`.attached`). Of the monitor it imports the state, the rules' own reason names,
the recording and the attached screens' messages (:mod:`distmon.monitor.viewing`); the
session, the terminal UI and the commands import it."""
