"""One real cluster for the whole test run (tests/realcluster/cluster.py), its logs attached to failures.

The tests of this folder carry the ``realcluster`` marker; without the binaries of hack/cluster/build.sh
they skip with one line saying so. ``pytest -m realcluster`` runs only them, ``-m 'not realcluster'`` only
those of a module that says ``CLUSTER = False`` (pure tests of the tier's helpers, e.g. reading vc-scheduler's log).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import ROOT, Cluster, kubeconfig, missing

SA = ("optplan-system", "optplan-controller")  # deploy/10-serviceaccount.yaml

_clusters: list[Cluster] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and getattr(item.module, "CLUSTER", True):
            item.add_marker(pytest.mark.realcluster)


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster, started once for the session and stopped (every process by its PID) at its end."""
    absent = missing()
    if absent:
        pytest.skip(f"real-cluster binaries not built (hack/cluster/build.sh): {len(absent)} missing, e.g. {absent[0]}")
    cluster = Cluster(tmp_path_factory.mktemp("realcluster"))
    _clusters.append(cluster)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def sa_kubeconfig(real_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """deploy/ applied; a kubeconfig holding a TokenRequest token of the controller's ServiceAccount."""
    real_cluster.kubectl("apply", "-f", str(ROOT / "crds"), "-f", str(ROOT / "deploy"))
    real_cluster.wait_for("ServiceAccount optplan-controller", lambda: real_cluster.kubectl(
        "get", "serviceaccount", SA[1], "-n", SA[0], check=False).returncode == 0)
    token = real_cluster.kubectl("create", "token", SA[1], "-n", SA[0], "--duration=1h").stdout.strip()
    assert token.count(".") == 2  # a JWT signed with the API server's service-account key
    path = tmp_path_factory.mktemp("sa") / "controller.kubeconfig"
    return kubeconfig(path, real_cluster.server, real_cluster.certs / "ca.crt", token=token,
                      user="optplan-controller")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line saying why the tier did not run, when its binaries are not built."""
    absent = missing()
    if absent and terminalreporter.stats.get("skipped"):
        terminalreporter.write_line(f"tests/realcluster skipped: the real-cluster binaries are not built "
                                    f"(hack/cluster/build.sh; {len(absent)} missing, e.g. {absent[0]})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _clusters and "real_cluster" in getattr(item, "fixturenames", ()):
        cluster = _clusters[-1]
        report.sections.append((f"real cluster logs (all in {cluster.logdir})", cluster.logs(60)))
