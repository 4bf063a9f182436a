"""A rank's process seen from outside it, as the monitor judges it: what the nodes' eyes
(:mod:`distmon.node`) saw of it (:mod:`~distmon.monitor.outside.sight`), and what that means:
stopped, asleep, blocked in I/O or working, in words with one next step
(:mod:`~distmon.monitor.outside.verdicts`). Imports the eye's data, the state's words, the
wire's frames and py-spy's wrapper; the rules and the monitor's core read it."""
