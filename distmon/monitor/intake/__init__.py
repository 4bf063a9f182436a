"""Taking reports in: the live socket (:mod:`.receiver`) and the feeds the session's loop
reads, live or from a recording (:mod:`.feeds`). Imports the state, the rules' own reason
names and the recording format; nothing imports it but the session and the commands."""
