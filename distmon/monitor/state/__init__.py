"""The job as the monitor knows it: its facts, each defined once (columns over the ranks,
a rank's view, how the job ended, every status and its words, the thresholds, alerts and
their words). Imports the wire and the link, nothing of the monitor above it: every rule,
reader and surface formats these facts."""
