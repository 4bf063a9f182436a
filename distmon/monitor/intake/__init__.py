"""Taking reports in: the live socket (:mod:`.receiver`) and the feeds the session's loop reads,
live or from a recording (:mod:`.feeds`); a screen attached to a live monitor has a feed of
its own (:mod:`distmon.monitor.attach.feed`). Of the monitor it imports the state, the rules'
own reason names and the recording; the session, the terminal UI and the commands import it."""
