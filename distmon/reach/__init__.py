"""Reaching the other nodes of a job from one host: its hosts as the user names them (``--hosts``,
``--hostfile``), as Slurm lists them (``--slurm``), or as the job itself tells (its launcher, its
store: :mod:`distmon.node.jobhosts`); a node's eye started on each (:mod:`distmon.reach.eyes`),
over ssh or as a step of the job's Slurm allocation, reporting back with a key made for the
command. ``distmon look``, ``watch --find`` and ``record --find`` use it."""
