"""Looking at a rank's process from outside it (``/proc``, py-spy): whether it is stopped,
asleep, blocked in I/O or working, without its cooperation. Imports the state's words, the
wire's frames and py-spy's wrapper; the rules and the monitor's core read it."""
