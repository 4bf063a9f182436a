"""The wheel as a user installs it, in fresh virtual environments."""
