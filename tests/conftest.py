"""Fixtures shared by several test files."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from optplan.solvers.core import clock
from optplan.solvers.core.exact import STRICT_ENV
from tests.fakekube import FakeKube

# An exact model that refuses its own valid hint is a bug: in the tests it raises (``exact.model_bug``),
# in this process and in the CLI processes tests start.
os.environ.setdefault(STRICT_ENV, "1")


@pytest.fixture(autouse=True)
def _deterministic_uncapped(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deterministic limits count work alone in the tests: the wall-clock safety cap (3x the limit) moved out
    of the way, so that a test asserting what a deterministic run proves gives the same answer on a loaded
    machine (under load the cap was reached and a proof cut: OPTIMAL became FEASIBLE). The cap's own tests
    (named ``wall_clock_cap``) keep it."""
    if "wall_clock_cap" not in request.node.name:
        monkeypatch.setattr(clock, "WALL_CAP", 1000.0)


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    """A fake Kubernetes API server on 127.0.0.1 (tests/fakekube.py), stopped after the test."""
    server = FakeKube().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def fk() -> Iterator[FakeKube]:
    """The fake API server enforcing the shipped CRD's schema on every write, as an API server does."""
    server = FakeKube(crd_schemas=True).start()
    try:
        yield server
    finally:
        server.stop()
