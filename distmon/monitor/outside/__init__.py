"""Looking at a rank's process from outside it (``/proc``, py-spy): whether it is stopped,
asleep, blocked in I/O or working, without its cooperation. Imports only the state's words."""
