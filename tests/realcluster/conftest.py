"""One real cluster for the whole test run (tests/realcluster/cluster.py), its logs attached to failures.

The tests of this folder carry the ``realcluster`` marker; without the binaries of hack/cluster/build.sh
they skip with one line saying so. ``pytest -m realcluster`` runs only them, ``-m 'not realcluster'`` none.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster.cluster import Cluster, missing

_clusters: list[Cluster] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _clusters and "real_cluster" in getattr(item, "fixturenames", ()):
        cluster = _clusters[-1]
        report.sections.append((f"real cluster logs (all in {cluster.logdir})", cluster.logs(60)))
