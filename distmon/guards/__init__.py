"""Guards on what others hand distmon: a number a user gave (:mod:`~distmon.guards.values`),
a file someone else made (:mod:`~distmon.guards.files`), text from a file or a rank about to be
printed (:mod:`~distmon.guards.text`). Dependency-free and torch-free: the rank side and the
watch side read through them."""
