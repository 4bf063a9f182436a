"""The terminal UI (Textual) of ``distmon watch`` and ``distmon replay``; build it with
:func:`distmon.tui.app.build_app`. It drains the feeds (intake) through the session, and
formats the monitor's facts and words (overview, state), never decides them; it never
imports torch."""
