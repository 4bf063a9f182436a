"""The recording: its file format, written live and read back by ``replay`` and ``report``.
Imports only the state; the live loop and the commands import it."""
