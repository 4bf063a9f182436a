"""The launch examples in ``hooks/``: the Slurm script parses, and the Kubernetes file is a
Service, a Pod and a ``PyTorchJob`` whose containers run ``distmon run`` beside the monitor.
Neither is run on a cluster here."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.paths import REPO

HOOKS = REPO / "hooks"


def test_the_slurm_script_parses() -> None:
    done = subprocess.run(["bash", "-n", str(HOOKS / "slurm" / "train.sbatch")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_kubernetes_example_is_a_pytorchjob_beside_its_monitor() -> None:
    yaml = pytest.importorskip("yaml")
    documents = list(yaml.safe_load_all((HOOKS / "kubernetes" / "pytorchjob.yaml").read_text()))
    kinds = [d["kind"] for d in documents]
    assert kinds == ["Service", "Pod", "PyTorchJob"]
    replicas = documents[2]["spec"]["pytorchReplicaSpecs"]
    for spec in replicas.values():
        [container] = spec["template"]["spec"]["containers"]
        assert container["command"][:2] == ["distmon", "run"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["DISTMON_ENDPOINT"] == "tcp://distmon:5599"
    monitor = documents[1]["spec"]["containers"][0]
    assert "--metrics-port" in monitor["command"]
