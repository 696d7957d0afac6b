"""``networkTopology.highestTierName``: the tier named by the HyperNodes' ``spec.tierName``, as Volcano's session
translates it (``highestTierAllowed`` wins when both are written); a name no HyperNode carries, or one that
HyperNodes of two tiers carry, is one line (exit 2). Each case through greedy, cpsat and auto, and the
validator (``plan_placement`` validates every plan)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.errors import InputError
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.pending import pending_gangs
from optplan.solvers.placement.place import plan_placement
from tests.builders import GPU, hypernode, job_task, load, node, pod, podgroup, vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
SOLVERS = ("greedy", "cpsat", "auto")


def named(obj: dict[str, Any], tier_name: str) -> dict[str, Any]:
    obj["spec"]["tierName"] = tier_name
    return obj


def fabric() -> list[dict[str, Any]]:
    """n0..n3, two racks (tier 1, tierName rack) under one spine (tier 2, tierName spine); n2 is busy."""
    return [*(node(f"n{i}", 8) for i in range(4)), pod("busy", "n2", 8, group=None),
            named(hypernode("r0", 1, ["n0", "n1"]), "rack"), named(hypernode("r1", 1, ["n2", "n3"]), "rack"),
            named(hypernode("top", 2, ["r0", "r1"], "HyperNode"), "spine")]


def gang(name: str, pods: int, topology: dict[str, Any]) -> dict[str, Any]:
    return vcjob(name, tasks=[job_task("w", pods, 8)], network_topology=topology)


def place(solver: str, objs: list[dict[str, Any]]) -> dict[str, tuple[bool, str | None, int | None]]:
    s = load(*objs).snapshot
    plan = plan_placement(s, list(s.jobs.values()), solver, OPTS)
    return {jp.name: (jp.admitted, jp.hyper_node, jp.tier) for jp in plan.jobs}


# topology, expected (admitted, HyperNode, tier) of a 3-pod gang on the fabric (one rack holds 2 free nodes)
CASES: list[tuple[str, dict[str, Any], tuple[bool, str | None, int | None]]] = [
    ("rack: no rack holds 3 free nodes", {"mode": "hard", "highestTierName": "rack"}, (False, None, None)),
    ("spine: the whole spine", {"mode": "hard", "highestTierName": "spine"}, (True, "top", 2)),
    ("the number wins over the name", {"mode": "hard", "highestTierAllowed": 2, "highestTierName": "rack"},
     (True, "top", 2)),
    ("soft: the name bounds nothing", {"mode": "soft", "highestTierName": "rack"}, (True, "top", 2)),
]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("what", "topology", "expected"), CASES, ids=[c[0] for c in CASES])
def test_tier_name_is_the_tier_it_names(solver: str, what: str, topology: dict[str, Any],
                                        expected: tuple[bool, str | None, int | None]) -> None:
    got = place(solver, [*fabric(), gang("g", 3, topology)])["g"]
    assert got == expected
    by_number = {"mode": topology["mode"], "highestTierAllowed": {"rack": 1, "spine": 2}[topology["highestTierName"]]}
    if "highestTierAllowed" not in topology:
        assert place(solver, [*fabric(), gang("g", 3, by_number)])["g"] == expected


def test_a_two_pod_gang_fits_a_rack_by_name() -> None:
    assert place("auto", [*fabric(), gang("g", 2, {"mode": "hard", "highestTierName": "rack"})])["g"] == (
        True, "r0", 1)


BAD: list[tuple[str, list[dict[str, Any]], str]] = [
    ("a name no HyperNode carries", [*fabric(), gang("g", 2, {"mode": "hard", "highestTierName": "row"})],
     "no HyperNode has tierName row (tier names: rack, spine)"),
    ("a name two tiers carry", [*fabric()[:-1], named(hypernode("top", 2, ["r0", "r1"], "HyperNode"), "rack"),
                                gang("g", 2, {"mode": "hard", "highestTierName": "rack"})],
     "tierName rack names HyperNodes of tiers 1, 2"),
]


@pytest.mark.parametrize(("what", "objs", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_tier_name_that_names_no_tier_is_one_line(what: str, objs: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(InputError) as e:
        load(*objs)
    assert message in str(e.value) and "spec.networkTopology.highestTierName" in str(e.value)
    assert "\n" not in str(e.value)


def test_podgroup_tier_name_is_resolved_on_load() -> None:
    pg = podgroup("pg", 2)
    pg["spec"]["networkTopology"] = {"mode": "hard", "highestTierName": "rack"}
    s = load(*fabric(), pg).snapshot
    nt = s.pod_groups["default/pg"].network_topology
    assert nt is not None and nt.highest_tier_allowed == 1 and nt.highest_tier_name == "rack"


def test_job_file_names_resolve_on_the_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap, job = tmp_path / "snap.yaml", tmp_path / "job.yaml"
    snap.write_text(yaml.safe_dump_all(fabric()))
    job.write_text(yaml.safe_dump(gang("g", 2, {"mode": "hard", "highestTierName": "rack"})))
    assert main(["place", str(snap), "--job", str(job), "--solver", "greedy", "-o", "json"]) == 0
    assert '"hyperNode": "r0"' in capsys.readouterr().out
    job.write_text(yaml.safe_dump(gang("g", 2, {"mode": "hard", "highestTierName": "row"})))
    assert main(["place", str(snap), "--job", str(job), "--solver", "greedy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "VCJob default/g: spec.networkTopology.highestTierName" in err


def test_pending_by_fragmentation_reads_the_named_tier() -> None:
    # 2 racks, 1 GPU busy in each: the 2-pod gang of 8 GPUs fits the cluster's room but no rack.
    objs = [*(node(f"n{i}", 8) for i in range(4)), pod("b0", "n0", 1, group=None), pod("b1", "n2", 1, group=None),
            named(hypernode("r0", 1, ["n0", "n1"]), "rack"), named(hypernode("r1", 1, ["n2", "n3"]), "rack"),
            gang("g", 2, {"mode": "hard", "highestTierName": "rack"})]
    verdicts = {g.key: g for g in pending_gangs(load(*objs).snapshot, GPU)}
    assert verdicts["default/g"].verdict == "fragmentation"
