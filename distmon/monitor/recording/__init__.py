"""The recording: its file format (:mod:`.format`), written live (:mod:`.writer`), read
within limits (:mod:`.reader`, with :mod:`.batches` storing batches both ways), and read back
whole for ``report`` (:mod:`.readback`). Of the monitor it imports only the state. The monitor
records through it, the intake replays it, the screens attached to a live monitor take its
records (:mod:`distmon.monitor.attach.messages`, :mod:`distmon.monitor.attach.serve`), and the reports
and the commands read it."""
