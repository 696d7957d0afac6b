"""Fixtures of the controller's end-to-end tests (``test_controller_e2e``, ``test_controller_events``): a
kubeconfig for the fake API server, and the seed's cluster on it with its world and clock (``Env``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controller.test_controller_e2e import Env, seed_objects
from tests.fakekube import FakeKube


@pytest.fixture
def kubeconfig(fk: FakeKube, tmp_path: Path) -> str:
    return str(fk.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
def env(fk: FakeKube, kubeconfig: str) -> Iterator[Env]:
    e = Env(fk, kubeconfig, seed_objects())
    try:
        yield e
    finally:
        e.close()
