"""benchmarks/fgd_ceiling.py's proofs on clusters small enough to check by hand: how many shares every
on-arrival, work-conserving policy must place (``forced_shares``), and the cap their holes put on the
allocation (``hole_cap``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from optplan.experiments.sim.online import SimNode, SimPod

ROOT = Path(__file__).resolve().parents[2]


def _ceiling() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fgd_ceiling", ROOT / "benchmarks" / "fgd_ceiling.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


ceiling = _ceiling()
ONE = [SimNode("n0", 64_000, 256_000, 2)]
"""One node: 64 cpus, 2 devices."""


def share(name: str, milli: int = 810, cpu: int = 1_000) -> SimPod:
    return SimPod(name, cpu, 1_000, 1, milli)


@pytest.mark.parametrize(("case", "nodes", "stream", "forced"), [
    # each 810 share takes a device of its own: two fit, the third finds none whatever the policy did
    ("one device each", ONE, [share("a"), share("b"), share("c")], 2),
    # a cpu-only pod before them may take the node's cpu: then no share is forced
    ("cpu taken first", ONE, [SimPod("cpu", 63_500, 1_000, 0, 0), share("a"), share("b")], 0),
    # 100 + 100 milli on one device leave it 800 free, below 810: both small shares may block one device
    ("small shares block together", [SimNode("n0", 64_000, 256_000, 1)],
     [share("s1", 100), share("s2", 100), share("a")], 0),
    # one 100-milli share leaves 900 free: the 810 share still fits on its device
    ("one small share does not block", [SimNode("n0", 64_000, 256_000, 1)], [share("s1", 100), share("a")], 1),
    # a share needing more cpu than a node has never counts that node
    ("too big for the node", [SimNode("n0", 64_000, 256_000, 2), SimNode("n1", 8_000, 256_000, 2)],
     [share("a", cpu=10_000), share("b", cpu=10_000), share("c", cpu=10_000)], 2),
])
def test_forced_shares_is_what_every_work_conserving_policy_places(case: str, nodes: list[SimNode],
                                                                    stream: list[SimPod], forced: int) -> None:
    assert ceiling.forced_shares(nodes, stream, 810) == forced, case


def test_the_hole_cap_counts_the_holes_that_smaller_shares_cannot_fill() -> None:
    # 10 devices; 4 shares of 810 leave 4 x 190 milli, 160 of which small shares may fill: 600 free at least
    assert ceiling.hole_cap(10_000, 190, 160, 4) == pytest.approx(94.0)
    assert ceiling.hole_cap(10_000, 190, 10_000, 4) == pytest.approx(100.0)
    assert ceiling.big_share([share("a"), share("b", 650), share("c", 650), share("d", 300)]) == 650
