"""Spot reclaim (seed 002 §6.5): the seed's example, greedy order and stop rule, optimal and whole-node
plans against brute force, --now, determinism, bad input, and the CLI adapter (driven through a local
parser built with ``spot_cli.add_arguments`` and through ``run()``)."""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import random
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import LoadedInput, load_files
from optplan.cli import reclaim_spot as spot_cli
from optplan.errors import InputError
from optplan.models.snapshot import Snapshot
from optplan.solvers.quota.spot import (
    SpotJob,
    SpotReclaim,
    job_names,
    parse_price,
    parse_time,
    reclaim_spot,
    validate_reclaim,
)
from tests.builders import GPU, load, node, pod, spot_job

NOW = "2025-06-01T12:00:00Z"
NOW_DT = datetime(2025, 6, 1, 12, tzinfo=UTC)


def ago(minutes: float) -> str:
    return (NOW_DT - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def nodes(n: int = 6, gpu: int = 8) -> list[dict[str, Any]]:
    return [node(f"n{i}", gpu) for i in range(n)]


def plan(loaded: LoadedInput, gpus: int, **kw: Any) -> SpotReclaim:
    kw.setdefault("now", NOW)
    kw.setdefault("time_limit", 5.0)
    return reclaim_spot(loaded.snapshot, gpus * 1000, GPU, **kw)


def keys(jobs: Any) -> list[str]:
    return [j.key for j in jobs]


def cli(loaded: LoadedInput | None, *argv: str) -> str:
    """``optplan reclaim-spot ARGV`` through a parser built with add_arguments, then run()."""
    ap = argparse.ArgumentParser(prog="optplan reclaim-spot")
    spot_cli.add_arguments(ap)
    args = ap.parse_args(list(argv) if loaded is None else ["inline", *argv])
    return spot_cli.run(args, load_files(args.snapshots) if loaded is None else loaded)


# ---- the seed's example (§6.5) --------------------------------------------------------------------

def seed_cluster() -> LoadedInput:
    """§6.5: A 0.1/4 GPUs/single/10 min, B 0.1/8/distributed/2 h, C 0.3/4/single/30 min, D 0.5/8/distributed/1 h."""
    return load(*nodes(),
                *spot_job("spot-a", [("n0", 4)], "0.1", started=ago(10)),
                *spot_job("spot-b", [("n1", 4), ("n2", 4)], "0.1", started=ago(120)),
                *spot_job("spot-c", [("n0", 4)], "0.3", started=ago(30)),
                *spot_job("spot-d", [("n3", 4), ("n4", 4)], "0.5", started=ago(60)))


def test_seed_example_needing_12_gpus() -> None:
    # The seed's numbers add up here: 4 (A) + 8 (B) = 12 >= 12, and C and D survive. What the seed leaves
    # open is the cost: with cost = price x GPUs x hours run, A+B (1/15 + 1.6) is also the cheapest set.
    rep = plan(seed_cluster(), 12)
    assert keys(rep.greedy.victims) == ["default/spot-a", "default/spot-b"]  # Step 1: A, Step 2: B, stop
    assert rep.greedy.freed == 12_000 and rep.greedy.reason is None
    assert rep.greedy.cost == Fraction(1, 10) * 4 * Fraction(10, 60) + Fraction(1, 10) * 8 * 2
    assert keys(rep.optimal.victims) == keys(rep.greedy.victims)
    assert rep.optimal.status == "OPTIMAL" and rep.selected == "optimal"
    assert validate_reclaim(seed_cluster().snapshot, rep) == []


def test_seed_rule_just_enough_cannot_be_exact_with_whole_jobs() -> None:
    # §6.5 rule 4 says "only kill until the need is just met". Jobs are deleted whole, so the seed's own
    # order overshoots when the need is not a sum of job sizes: 10 GPUs -> A (4) + B (8) = 12.
    rep = plan(seed_cluster(), 10)
    assert rep.greedy.freed == 12_000 and keys(rep.greedy.victims) == ["default/spot-a", "default/spot-b"]
    assert rep.optimal.freed >= 10_000 and rep.optimal.cost <= rep.greedy.cost


def test_bundled_demo_through_the_cli() -> None:
    doc = json.loads(cli(None, "instances/spot-demo.yaml", "--gpus", "12", "--now", NOW, "-o", "json"))
    assert list(doc) == ["needed", "resource", "selected", "greedy", "optimal", "wholeNodes"]
    assert (doc["needed"], doc["resource"], doc["selected"]) == (12, GPU, "optimal")
    for name in ("greedy", "optimal"):
        assert list(doc[name]) == ["freed", "cost", "victims", "status", "reason"]
        assert [v["name"] for v in doc[name]["victims"]] == ["spot-a", "spot-b"]
        assert doc[name]["victims"][0] == {"namespace": "tenant-alpha", "name": "spot-a", "units": 4, "price": 0.1}
        assert (doc[name]["freed"], doc[name]["cost"]) == (12, 1.666667)
    whole = doc["wholeNodes"]
    assert list(whole) == ["freed", "cost", "victims", "freedNodes", "status", "reason"]
    assert whole["freedNodes"] == ["gpu-node-0", "gpu-node-2"] and whole["freed"] == 16
    assert [v["name"] for v in whole["victims"]] == ["spot-a", "spot-b", "spot-c"] and whole["cost"] == 2.266667


def test_table_shows_every_plan_and_the_difference() -> None:
    text = cli(None, "instances/spot-demo.yaml", "--gpus", "12", "--now", NOW)
    assert "12 nvidia.com/gpu needed" in text
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith(("greedy", "optimal", "whole"))}
    assert "HEURISTIC" in lines["greedy"] and "1.666667" in lines["greedy"]
    assert "OPTIMAL" in lines["optimal"] and "optimal *" in text
    assert "wholeNodes empties: gpu-node-0, gpu-node-2 (allocatable 16 nvidia.com/gpu; its victims hold 16)" in text
    assert "optimal costs the same as greedy" in text
    assert "wholeNodes costs 0.6 more than optimal (+36%)" in text


# ---- greedy: the seed's order and stop rule --------------------------------------------------------

@pytest.mark.parametrize(("why", "first", "second"), [
    ("lower price first", ("b", [("n0", 4)], "0.1", 60), ("a", [("n1", 4)], "0.2", 60)),
    ("single-node before distributed", ("b", [("n0", 4)], "0.1", 60), ("a", [("n1", 1), ("n2", 1)], "0.1", 60)),
    ("fewer GPUs first", ("b", [("n0", 2)], "0.1", 60), ("a", [("n1", 4)], "0.1", 60)),
    ("shorter running first", ("b", [("n0", 4)], "0.1", 5), ("a", [("n1", 4)], "0.1", 60)),
    ("then by name", ("a", [("n0", 4)], "0.1", 60), ("b", [("n1", 4)], "0.1", 60)),
])
def test_greedy_victim_order(why: str, first: tuple[Any, ...], second: tuple[Any, ...]) -> None:
    objs = [o for name, where, price, minutes in (second, first)
            for o in spot_job(name, where, price, started=ago(minutes))]
    rep = plan(load(*nodes(), *objs), 1)
    assert keys(rep.greedy.victims) == [f"default/{first[0]}"], why
    assert keys(rep.jobs) == [f"default/{first[0]}", f"default/{second[0]}"], why


def test_greedy_stops_as_soon_as_enough_is_freed() -> None:
    rep = plan(load(*nodes(), *spot_job("a", [("n0", 4)], "0.1"), *spot_job("b", [("n1", 4)], "0.2"),
                    *spot_job("c", [("n2", 4)], "0.3")), 5)
    assert keys(rep.greedy.victims) == ["default/a", "default/b"] and rep.greedy.freed == 8_000


# ---- optimal ---------------------------------------------------------------------------------------

def test_greedy_overspends_where_optimal_does_not() -> None:
    # A is the cheapest bid but has run 100 hours (cost 0.1 x 1 x 100 = 10); B bids more but started
    # 6 minutes ago (0.2 x 4 x 0.1 = 0.08). Greedy deletes A, still lacks 3 GPUs, deletes B too.
    loaded = load(*nodes(), *spot_job("a", [("n0", 1)], "0.1", started=ago(6000)),
                  *spot_job("b", [("n1", 4)], "0.2", started=ago(6)))
    rep = plan(loaded, 4)
    assert keys(rep.greedy.victims) == ["default/a", "default/b"] and rep.greedy.cost == Fraction(1008, 100)
    assert keys(rep.optimal.victims) == ["default/b"] and rep.optimal.cost == Fraction(8, 100)
    text = spot_cli.reclaim_table(rep)
    assert "optimal costs 10 less than greedy (-99.206349%)" in text


def test_equal_cost_prefers_freeing_less() -> None:
    # Both started just now (cost 0): the seed's order takes the cheaper bid (8 GPUs); the exact plan
    # breaks the tie by freeing less (§6.5 rule 4, "no needless killing").
    rep = plan(load(*nodes(), *spot_job("big", [("n0", 8)], "0.1", started=NOW),
                    *spot_job("small", [("n1", 4)], "0.2", started=NOW)), 4)
    assert keys(rep.greedy.victims) == ["default/big"]
    assert keys(rep.optimal.victims) == ["default/small"] and rep.optimal.freed == 4_000


def _random_cluster(seed: int) -> tuple[LoadedInput, int]:
    rng = random.Random(seed)
    free = {f"n{i}": 8 for i in range(6)}
    objs: list[dict[str, Any]] = [*nodes()]
    for j in range(rng.randint(2, 8)):
        where: list[tuple[str, int | str]] = []
        for _ in range(rng.choice((1, 1, 2))):
            n = rng.choice([k for k, v in free.items() if v > 0])
            g = rng.randint(1, free[n])
            free[n] -= g
            where.append((n, g))
        if rng.random() < 0.2:  # a subscription job: its nodes can never be freed whole
            objs += spot_job(f"sub{j}", where, None, billing="subscription", started=ago(rng.randint(0, 600)))
        else:
            objs += spot_job(f"j{j}", where, rng.choice(("0.1", "0.2", "0.3", "0.5")), started=ago(rng.randint(0, 600)))
    return load(*objs), rng.randint(1, 24)


def _brute_force(snap: Snapshot, rep: SpotReclaim) -> tuple[Fraction | None, Fraction | None]:
    """Least cost freeing >= needed units, and least cost freeing whole nodes holding >= needed."""
    best: Fraction | None = None
    best_whole: Fraction | None = None
    jobs = list(rep.jobs)
    for k in range(len(jobs) + 1):
        for combo in itertools.combinations(jobs, k):
            cost = sum((j.cost for j in combo), Fraction(0))
            if sum(j.units for j in combo) >= rep.needed and (best is None or cost < best):
                best = cost
            deleted = {p for j in combo for p in j.pods}
            freed = 0
            for n in snap.providers(GPU):
                r_pods = [p.key for p in snap.pods_by_node.get(n.name, ()) if p.request(GPU) > 0]
                if any(p in deleted for p in r_pods) and all(p in deleted for p in r_pods):
                    freed += n.allocatable[GPU]
            if freed >= rep.needed and (best_whole is None or cost < best_whole):
                best_whole = cost
    return best, best_whole


@pytest.mark.parametrize("seed", range(20))
def test_optimal_and_whole_nodes_match_brute_force(seed: int) -> None:
    loaded, need = _random_cluster(seed)
    rep = plan(loaded, need)
    best, best_whole = _brute_force(loaded.snapshot, rep)
    if best is None:
        assert rep.optimal.status == "INFEASIBLE" and rep.optimal.reason and rep.selected == "greedy"
    else:
        assert rep.optimal.status == "OPTIMAL" and rep.optimal.cost == best
        assert rep.optimal.cost <= rep.greedy.cost
    if best_whole is None:
        assert rep.whole_nodes.status == "INFEASIBLE" and rep.whole_nodes.reason
    else:
        assert rep.whole_nodes.status == "OPTIMAL" and rep.whole_nodes.cost == best_whole
    assert validate_reclaim(loaded.snapshot, rep) == []


# ---- whole nodes -----------------------------------------------------------------------------------

def test_whole_nodes_free_entire_nodes_only() -> None:
    # n0: spot a (4) + spot b (4); n1: spot c (4) + a subscription pod (4); n2: spot d (2), 6 idle.
    # Costs (1 hour run unless said): a 0.4, b 0.8, c 0.1 x 4 x 1 min, d 0.2.
    loaded = load(*nodes(3), *spot_job("a", [("n0", 4)], "0.1"), *spot_job("b", [("n0", 4)], "0.2"),
                  *spot_job("c", [("n1", 4)], "0.1", started=ago(1)),
                  *spot_job("sub", [("n1", 4)], None, billing="subscription"),
                  *spot_job("d", [("n2", 2)], "0.1"))
    rep = plan(loaded, 8)
    snap = loaded.snapshot
    assert keys(rep.optimal.victims) == ["default/c", "default/a"]  # cheapest 8 GPUs, no node entirely free
    w = rep.whole_nodes
    assert w.status == "OPTIMAL" and w.freed == 8_000
    assert w.freed_nodes == ("n2",) and keys(w.victims) == ["default/d"]  # d frees n2 whole: 2 used + 6 idle
    deleted = {p for v in w.victims for p in v.pods}
    for n in w.freed_nodes:
        assert all(p.key in deleted for p in snap.pods_by_node[n] if p.request(GPU) > 0)
    rep16 = plan(loaded, 16)
    assert rep16.whole_nodes.freed_nodes == ("n0", "n2") and rep16.whole_nodes.freed == 16_000
    rep24 = plan(loaded, 24)  # n1 holds a subscription pod: it never frees
    assert rep24.whole_nodes.status == "INFEASIBLE" and rep24.whole_nodes.freed == 16_000
    assert "16" in (rep24.whole_nodes.reason or "") and rep24.greedy.reason is not None


def test_idle_and_cordoned_nodes_do_not_count_and_cpu_pods_do_not_block() -> None:
    loaded = load(node("idle", 8), node("cordoned", 8, unschedulable=True), *nodes(1),
                  *spot_job("a", [("cordoned", 8)], "0.1"), *spot_job("b", [("n0", 8)], "0.3"),
                  pod("sidecar", "n0", 0, group=None, cpu="2"))
    rep = plan(loaded, 8)
    assert keys(rep.optimal.victims) == ["default/a"]  # units are units, wherever they are
    assert rep.whole_nodes.freed_nodes == ("n0",) and keys(rep.whole_nodes.victims) == ["default/b"]


# ---- spot jobs in a snapshot -----------------------------------------------------------------------

@pytest.mark.parametrize("on", ["job", "podgroup", "pod"])
def test_label_and_price_on_the_job_its_podgroup_or_its_pods(on: str) -> None:
    rep = plan(load(*nodes(), *spot_job("x", [("n0", 2), ("n1", 2)], "0.25", on=on)), 1)
    [job] = rep.jobs
    assert (job.key, job.units, job.price, job.nodes) == ("default/x", 4_000, Fraction(1, 4), ("n0", "n1"))


def test_the_job_label_decides_over_its_pods() -> None:
    objs = spot_job("x", [("n0", 4)], "0.1", billing="subscription")
    objs[-1]["metadata"]["labels"]["platform.io/billing-type"] = "spot"  # the pod claims spot
    assert plan(load(*nodes(), *objs), 1).jobs == ()


def test_pods_without_podgroup_are_grouped_by_job_name_label() -> None:
    spot = {"platform.io/billing-type": "spot"}
    objs = [pod(f"w{i}", f"n{i}", 2, group=None, labels={**spot, "volcano.sh/job-name": "train"}) for i in range(3)]
    objs.append(pod("lonely", "n3", 1, group=None, labels=spot))
    for o in objs:
        o["metadata"]["annotations"] = {"platform.io/spot-price": "0.2"}
        o["status"]["startTime"] = ago(30)
    loaded = load(*nodes(), *objs, pod("done", "n4", 4, group=None, labels=spot, phase="Succeeded"))
    assert job_names(loaded.snapshot) == {"default/lonely": "lonely", "default/w0": "train", "default/w1": "train",
                                          "default/w2": "train"}
    rep = plan(loaded, 6)
    assert [(j.key, j.units) for j in rep.jobs] == [("default/lonely", 1_000), ("default/train", 6_000)]
    assert keys(rep.optimal.victims) == ["default/train"]


def test_running_time_from_the_earliest_pod_start_else_creation() -> None:
    objs = spot_job("x", [("n0", 1), ("n1", 1)], "1", started=ago(30))
    objs[-1]["status"]["startTime"] = ago(90)
    objs2 = spot_job("y", [("n2", 1)], "1", started=None)
    objs2[-1]["metadata"]["creationTimestamp"] = ago(45)
    rep = plan(load(*nodes(), *objs, *objs2), 1)
    assert {j.name: j.runtime_seconds for j in rep.jobs} == {"x": 5400, "y": 2700}


def test_unknown_or_future_start_counts_as_zero_with_a_warning() -> None:
    rep = plan(load(*nodes(), *spot_job("x", [("n0", 1)], started=None),
                    *spot_job("y", [("n1", 1)], started="2030-01-01T00:00:00Z")), 1)
    assert [j.runtime_seconds for j in rep.jobs] == [0, 0]
    assert len(rep.warnings) == 2 and "no startTime" in rep.warnings[0] and "after --now" in rep.warnings[1]


# ---- --now, determinism, output formats -------------------------------------------------------------

def test_now_makes_the_output_reproducible_and_moves_costs() -> None:
    loaded = seed_cluster()
    one = cli(loaded, "--gpus", "12", "--now", NOW, "-o", "json")
    assert one == cli(loaded, "--gpus", "12", "--now", NOW, "-o", "json")
    later = json.loads(cli(loaded, "--gpus", "12", "--now", "2025-06-01T13:00:00Z", "-o", "json"))
    # one hour later every job has lost an hour more: A+B cost 0.1 x 12 GPUs x 1 h more
    assert later["greedy"]["cost"] == pytest.approx(json.loads(one)["greedy"]["cost"] + 1.2)
    offset = json.loads(cli(loaded, "--gpus", "12", "--now", "2025-06-01T20:00:00+08:00", "-o", "json"))
    assert offset == json.loads(one)  # the same instant in another zone


def test_without_now_the_clock_is_the_current_time() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    rep = reclaim_spot(seed_cluster().snapshot, 1_000, GPU, None, time_limit=5)
    assert rep.now >= before and rep.jobs[0].runtime_seconds >= (before - NOW_DT).total_seconds()


def test_ties_are_broken_deterministically() -> None:
    objs = [o for i in range(8) for o in spot_job(f"t{i}", [(f"n{i % 6}", 1)], "0.1", started=ago(60))]
    loaded = load(*nodes(), *objs)
    first = cli(loaded, "--gpus", "3", "--now", NOW, "-o", "yaml")
    assert all(cli(loaded, "--gpus", "3", "--now", NOW, "-o", "yaml") == first for _ in range(3))
    doc = yaml.safe_load(first)
    assert [v["name"] for v in doc["greedy"]["victims"]] == ["t0", "t1", "t2"]
    assert len(doc["optimal"]["victims"]) == 3 and doc["optimal"]["cost"] == doc["greedy"]["cost"]


def test_yaml_and_json_carry_the_same_document() -> None:
    loaded = seed_cluster()
    assert yaml.safe_load(cli(loaded, "--gpus", "12", "--now", NOW, "-o", "yaml")) == json.loads(
        cli(loaded, "--gpus", "12", "--now", NOW, "-o", "json"))


def test_a_finer_resource_in_milli_units() -> None:
    loaded = load(*nodes(), *spot_job("a", [("n0", "500m")], "1", resource="cpu", started=ago(60)),
                  *spot_job("b", [("n1", "1")], "1", resource="cpu", started=ago(60)))
    doc = json.loads(cli(loaded, "--gpus", "1500m", "--resource", "cpu", "--now", NOW, "-o", "json"))
    assert (doc["needed"], doc["resource"], doc["optimal"]["freed"]) == ("1500m", "cpu", "1500m")
    assert [v["units"] for v in doc["optimal"]["victims"]] == ["500m", 1]


def test_nothing_needed_deletes_nothing() -> None:
    doc = json.loads(cli(seed_cluster(), "--gpus", "0", "--now", NOW, "-o", "json"))
    for name in ("greedy", "optimal", "wholeNodes"):
        assert (doc[name]["freed"], doc[name]["victims"], doc[name]["reason"]) == (0, [], None)


def test_not_enough_spot_is_a_result_with_a_reason() -> None:
    doc = json.loads(cli(seed_cluster(), "--gpus", "30", "--now", NOW, "-o", "json"))
    assert doc["selected"] == "greedy"
    assert doc["greedy"]["freed"] == 24 and len(doc["greedy"]["victims"]) == 4
    assert "24" in doc["greedy"]["reason"] and "6 short" in doc["greedy"]["reason"]
    assert doc["optimal"]["status"] == "INFEASIBLE" and doc["optimal"]["freed"] == 24
    # Whole nodes count their idle remnants: deleting B and D empties n1..n4 (32 GPUs, 16 of them idle now).
    assert doc["wholeNodes"]["status"] == "OPTIMAL" and doc["wholeNodes"]["freed"] == 32
    assert doc["wholeNodes"]["freedNodes"] == ["n1", "n2", "n3", "n4"]
    doc = json.loads(cli(seed_cluster(), "--gpus", "41", "--now", NOW, "-o", "json"))
    assert doc["wholeNodes"]["status"] == "INFEASIBLE" and doc["wholeNodes"]["freed"] == 40
    assert "40" in doc["wholeNodes"]["reason"] and len(doc["wholeNodes"]["victims"]) == 4
    assert "greedy: all spot jobs together hold only 24" in cli(seed_cluster(), "--gpus", "30", "--now", NOW)


def test_huge_costs_are_scaled_and_reported_feasible() -> None:
    ten_years = 10 * 365 * 24 * 60
    loaded = load(*nodes(), *spot_job("a", [("n0", 8)], "999999.999999", started=ago(ten_years)),
                  *spot_job("b", [("n1", 7)], "999999.999998", started=ago(ten_years + 1)),
                  *spot_job("c", [("n2", 5)], "999999.999997", started=ago(ten_years - 7)))
    rep = plan(loaded, 12)
    assert rep.optimal.status == "FEASIBLE" and rep.optimal.freed >= 12_000
    assert rep.optimal.cost <= rep.greedy.cost


# ---- bad input -------------------------------------------------------------------------------------

def test_missing_gpus_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli(seed_cluster(), "--now", NOW)
    assert e.value.code == 2 and "--gpus" in capsys.readouterr().err
    with pytest.raises(InputError, match="--gpus"):
        spot_cli.run(argparse.Namespace(snapshots=["x"], gpus=None), seed_cluster())


@pytest.mark.parametrize(("argv", "field", "message"), [
    (["--gpus", "-3"], "--gpus", "must not be negative"),
    (["--gpus", "many"], "--gpus", "not a quantity"),
    (["--gpus", "4", "--now", "yesterday"], "--now", "not an RFC 3339 time"),
    (["--gpus", "4", "--now", "2025-06-01"], "--now", "not an RFC 3339 time"),
    (["--gpus", "4", "--now", "2025-06-01T12:00:00"], "--now", "not an RFC 3339 time"),
    (["--gpus", "4", "--now", "2025-13-01T12:00:00Z"], "--now", "month"),
])
def test_bad_flags_are_input_errors(argv: list[str], field: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as e:
        cli(seed_cluster(), *argv)
    assert e.value.field == field


@pytest.mark.parametrize(("price", "message"), [
    ("cheap", "not a decimal number"), ("-0.1", "non-negative"), ("0.1234567", "more than 6 decimal places"),
    ("NaN", "non-negative"), (None, "has no platform.io/spot-price"),
])
def test_bad_prices_name_the_object_and_field(price: str | None, message: str) -> None:
    with pytest.raises(InputError, match=message) as e:
        plan(load(*nodes(), *spot_job("x", [("n0", 4)], price)), 1)
    assert e.value.obj == "Job/default/x" and e.value.field == "metadata.annotations.platform.io/spot-price"
    assert "Job/default/x: metadata.annotations.platform.io/spot-price" in str(e.value)


def test_pods_disagreeing_on_price_or_billing_are_input_errors() -> None:
    objs = spot_job("x", [("n0", 1), ("n1", 1)], "0.1", on="pod")
    objs[-1]["metadata"]["annotations"]["platform.io/spot-price"] = "0.2"
    with pytest.raises(InputError, match="disagree on the spot price") as e:
        plan(load(*nodes(), *objs), 1)
    assert e.value.obj == "Pod/default/x-0"
    objs = spot_job("x", [("n0", 1), ("n1", 1)], "0.1", on="pod")
    objs[-1]["metadata"]["labels"]["platform.io/billing-type"] = "payg"
    with pytest.raises(InputError, match="disagree on the billing type"):
        plan(load(*nodes(), *objs), 1)
    objs[-2]["metadata"]["labels"]["platform.io/billing-type"] = "subscription"  # neither is spot: no matter
    assert plan(load(*nodes(), *objs), 1).jobs == ()
    same = spot_job("x", [("n0", 1), ("n1", 1)], "0.1", on="pod")
    same[-1]["metadata"]["annotations"]["platform.io/spot-price"] = "0.100"  # the same price, spelt otherwise
    assert plan(load(*nodes(), *same), 1).jobs[0].price == Fraction(1, 10)


def test_a_bad_start_time_names_the_pod() -> None:
    with pytest.raises(InputError, match="RFC 3339") as e:
        plan(load(*nodes(), *spot_job("x", [("n0", 4)], started="last tuesday")), 1)
    assert (e.value.obj, e.value.field) == ("Pod/default/x-0", "status.startTime")


def test_parsers() -> None:
    assert parse_price("0.1") == 100_000 and parse_price("3") == 3_000_000 and parse_price("1e-6") == 1
    assert parse_time("2025-06-01T12:00:00.123456789Z") == NOW_DT + timedelta(microseconds=123456)
    assert parse_time("2025-06-01t20:00:00+08:00") == NOW_DT


# ---- the validator ---------------------------------------------------------------------------------

def test_validator_catches_broken_plans() -> None:
    loaded = load(*nodes(3), *spot_job("a", [("n0", 4)], "0.1"), *spot_job("b", [("n0", 4)], "0.2"),
                  *spot_job("sub", [("n1", 4)], None, billing="subscription"))
    snap = loaded.snapshot
    rep = plan(loaded, 4)
    assert validate_reclaim(snap, rep) == []
    a, b = rep.jobs
    fake = SpotJob("default", "sub", 4_000, 0, 0, ("default/sub-0",), ("n1",))
    partial = dataclasses.replace(a, pods=(), units=4_000)
    broken = {
        "not labelled": dataclasses.replace(rep, greedy=dataclasses.replace(rep.greedy, victims=(fake,))),
        "freed 1000 but": dataclasses.replace(rep, optimal=dataclasses.replace(rep.optimal, freed=1_000)),
        "did not stop": dataclasses.replace(rep, greedy=dataclasses.replace(rep.greedy, victims=(a, b),
                                                                           freed=8_000)),
        "still holds default/b-0": dataclasses.replace(rep, whole_nodes=dataclasses.replace(
            rep.whole_nodes, victims=(a,), freed_nodes=("n0",), freed=8_000)),
        "missing or not running": dataclasses.replace(rep, optimal=dataclasses.replace(rep.optimal,
                                                                                      victims=(partial,))),
        "reason None": dataclasses.replace(rep, optimal=dataclasses.replace(rep.optimal, victims=(), freed=0)),
        "not the first spot jobs": dataclasses.replace(rep, greedy=dataclasses.replace(rep.greedy, victims=(b,))),
        "but the victims empty ['n0']": dataclasses.replace(rep, whole_nodes=dataclasses.replace(
            rep.whole_nodes, victims=(a, b), freed_nodes=(), freed=0, reason="short")),
    }
    for needle, bad in broken.items():
        found = validate_reclaim(snap, bad)
        assert any(needle in v for v in found), (needle, found)
