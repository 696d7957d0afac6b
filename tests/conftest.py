"""Fixtures shared by several test files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakekube import FakeKube


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    """A fake Kubernetes API server on 127.0.0.1 (tests/fakekube.py), stopped after the test."""
    server = FakeKube().start()
    try:
        yield server
    finally:
        server.stop()
