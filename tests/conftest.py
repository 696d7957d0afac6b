"""Fixtures shared by several test files."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from optplan.solvers.core.exact import STRICT_ENV
from tests.fakekube import FakeKube

# An exact model that refuses its own valid hint is a bug: in the tests it raises (``exact.model_bug``),
# in this process and in the CLI processes tests start.
os.environ.setdefault(STRICT_ENV, "1")


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
