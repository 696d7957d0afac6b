"""A VCJob's running pod taken by another job's reclaim or preempt, and made again by its job controller.

Written from Volcano's rules (vc-scheduler and vc-controller-manager v1.15.1): reclaim and preempt hand the
plugins every Running pod of another job on the node, whatever that job's state, a job with pending pods of its
own too. The gang plugin offers only a gang's pods above minAvailable (ready > minAvailable); for a gang at
minAvailable it offers nothing, its tier ends without victims and the next tier decides (the capacity plugin:
a pod of a queue above its deserved goes). The VCJob's controller, with no lifecycle policy on PodEvicted (or
SyncJob), makes the evicted replica again under the same name, pending: one more replica of the job for a
later scheduling cycle (``jobs.remade``). Recorded on the real vc-scheduler as vcm-1-110 of the comparison
(docs/benchmarks.md). A policy that restarts or aborts the job on the event is not modelled: its pods stay out
of reach (the plan would have to restart the whole job).

The cluster: n0 runs ``g-worker-0`` (VCJob ``g`` of queue ``other``: 2 replicas, minAvailable 1, its replica 1
pending and fitting nowhere), n1 runs ``b-0`` (queue ``keep``, within its deserved); ``j`` (queue ``mine``)
needs a whole node."""

from __future__ import annotations

from typing import Any

import pytest

from optplan.models.placement import Binding, PlacementPlan
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.place import plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import job_task, load, node, place_validated, pod, podgroup, queue, vcjob
from tests.placement.test_victim_tiers import running_vcjob

OPTS = PlanOptions(time_limit=5, workers=1, seed=0)
NOW = "2025-06-01T12:00:00Z"
SOLVERS = ("greedy", "cpsat", "auto")


def cluster(deserved: int, policies: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    keep = podgroup("b", 1, owner=None)
    keep["spec"]["queue"] = "keep"
    return [node("n0"), node("n1"), queue("mine", deserved={"nvidia.com/gpu": 8}),
            queue("other", deserved={"nvidia.com/gpu": deserved}), queue("keep", deserved={"nvidia.com/gpu": 8}),
            keep, pod("b-0", "n1", 8, group="b"),
            *running_vcjob("g", "other", 2, 8, {0: "n0"}, 1, policies=policies),
            vcjob("j", "mine", [job_task("worker", 1, 8)], min_available=1)]


REMADE = [  # (what, other's deserved GPUs, PodEvicted policies of g, j admitted, j's victims)
    ("above deserved: the second tier gives the gang's pod up", 0, None, True, ["g-worker-0"]),
    ("within deserved: it stays", 8, None, False, []),
    ("SyncJob on PodEvicted: the controller makes the pod again too", 0,
     [{"event": "PodEvicted", "action": "SyncJob"}], True, ["g-worker-0"]),
    ("RestartJob on PodEvicted: not modelled, the pod stays", 0,
     [{"event": "PodEvicted", "action": "RestartJob"}], False, []),
]


@pytest.mark.parametrize(("what", "deserved", "policies", "admitted", "victims"), REMADE,
                         ids=[c[0] for c in REMADE])
def test_reclaim_takes_a_running_vcjobs_pod_at_min_available(what: str, deserved: int,
                                                             policies: list[dict[str, Any]] | None, admitted: bool,
                                                             victims: list[str]) -> None:
    plans: dict[str, PlacementPlan] = {s: place_validated(cluster(deserved, policies), s, OPTS, NOW)
                                       for s in SOLVERS}
    for solver, plan in plans.items():
        jp = plan.job("default/j")
        assert (jp.admitted, sorted(v.name for v in jp.victims)) == (admitted, victims), (solver, jp.reason)
        g = plan.job("default/g")
        assert not g.admitted, solver  # its replicas fit nowhere, the made-again one neither
        if victims:
            assert "its running pod default/g-worker-0 was evicted" in g.reason, (solver, g.reason)
            assert "its job controller makes the pod again" in g.reason, (solver, g.reason)


def test_the_made_again_replica_is_placed_by_a_later_cycle() -> None:
    """Room for ``g``'s made-again replica appears in the next cycle: ``g`` (queue ``other``, deserved 4 GPUs, 12
    allocated) runs ``g-worker-0`` (4 GPUs) on n0 beside ``f-0`` (queue ``keep``), n1 runs ``b-0`` (keep), n2 runs
    ``o-0`` (8 GPUs, queue ``other``). ``j`` and ``k`` (queue ``mine``, 4 GPUs each) reclaim: ``j`` on n0 takes
    ``g-worker-0`` (the gang plugin offers nothing for ``g`` at minAvailable, the capacity plugin gives it up),
    ``k`` on n2 takes ``o-0`` and leaves 4 GPUs there. The next cycle's allocate places ``j`` and ``k`` and one of
    ``g``'s two pending replicas (the made-again one, under its old name, or replica 1) in n2's other half: the
    gang (minAvailable 1) runs again. The validator replays the eviction before that binding."""
    keep = [podgroup(name, 1, owner=None) for name in ("b", "f")]
    for pg in keep:
        pg["spec"]["queue"] = "keep"
    other = podgroup("o", 1, owner=None)
    other["spec"]["queue"] = "other"
    objs = [node("n0"), node("n1"), node("n2"), queue("mine", deserved={"nvidia.com/gpu": 8}),
            queue("other", deserved={"nvidia.com/gpu": 4}), queue("keep", deserved={"nvidia.com/gpu": 12}),
            *keep, pod("b-0", "n1", 8, group="b"), pod("f-0", "n0", 4, group="f"),
            other, pod("o-0", "n2", 8, group="o"),
            *running_vcjob("g", "other", 2, 4, {0: "n0"}, 1),
            vcjob("j", "mine", [job_task("worker", 1, 4)], min_available=1),
            vcjob("k", "mine", [job_task("worker", 1, 4)], min_available=1)]
    snap = load(*objs).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert placement_violations(snap, jobs, plan) == []
    assert [v.name for v in plan.job("default/j").victims] == ["g-worker-0"]
    assert [v.name for v in plan.job("default/k").victims] == ["o-0"]
    g = plan.job("default/g")
    assert g.admitted and [b.node for b in g.bindings] == ["n2"], g.reason
    for solver in ("cpsat", "auto"):  # the exact model never takes a pod of a job it admits: its own plan or this one
        exact = plan_placement(snap, jobs, solver, OPTS, now=NOW)
        assert placement_violations(snap, jobs, exact) == []
        assert exact.job("default/j").admitted and exact.job("default/k").admitted, solver


def test_the_validator_refuses_a_job_admitted_before_its_pod_is_made_again() -> None:
    """A plan that admits ``g`` in the first cycle's allocate, before ``j``'s reclaim evicts ``g-worker-0``, is
    refused: the pod runs until it is evicted, and its controller makes it again only after (a later cycle's
    allocate may place it: the test before)."""
    snap = load(*cluster(0)).snapshot
    jobs = jobs_to_place(snap)
    plan = plan_placement(snap, jobs, "greedy", OPTS, now=NOW)
    assert plan.job("default/j").step > 0
    broken = plan.model_copy(update={"jobs": tuple(
        jp.model_copy(update={"admitted": True, "bindings": (Binding(task="worker", index=0, node="n0"),),
                              "after_evictions": False, "step": 0})
        if jp.name == "g" else jp for jp in plan.jobs)})
    assert ("job default/g is admitted at its running pod default/g-worker-0's eviction or before it"
            in placement_violations(snap, jobs, broken))


def random_remade(seed: int) -> list[dict[str, Any]]:
    """Three or four 8-GPU nodes; on each a running VCJob of queue ``other`` at its minAvailable with a replica
    pending (4 or 8 GPUs, maybe a lifecycle policy on PodEvicted), or a one-pod bare gang of ``other`` (old or
    new), a 4-GPU one beside maybe; one to three jobs of ``mine`` (4 or 8 GPUs, one or two replicas) wait.
    ``other`` above its deserved or not."""
    import random
    rng = random.Random(seed)
    n = rng.choice((3, 4))
    objs: list[dict[str, Any]] = [*(node(f"n{i}") for i in range(n)), queue("mine", deserved={"nvidia.com/gpu": 16}),
                                  queue("other", deserved={"nvidia.com/gpu": rng.choice((0, 0, 8))})]
    for i in range(n):
        gpu = rng.choice((4, 8))
        if rng.random() < 0.6:
            policies = rng.choice((None, None, [{"event": "PodEvicted", "action": "RestartJob"}]))
            objs += running_vcjob(f"g{i}", "other", 2, gpu, {0: f"n{i}"}, 1, policies=policies)
        else:
            pg = podgroup(f"o{i}", 1, owner=None)
            pg["spec"]["queue"] = "other"
            p = pod(f"o{i}-0", f"n{i}", gpu, group=f"o{i}")
            p["status"]["startTime"] = rng.choice(("2025-05-01T10:00:00Z", "2025-06-01T11:00:00Z"))
            objs += [pg, p]
        if gpu == 4 and rng.random() < 0.5:
            pg = podgroup(f"f{i}", 1, owner=None)
            pg["spec"]["queue"] = "other"
            objs += [pg, pod(f"f{i}-0", f"n{i}", 4, group=f"f{i}")]
    for k in range(rng.choice((1, 2, 3))):
        replicas = rng.choice((1, 1, 2))
        objs.append(vcjob(f"j{k}", "mine", [job_task("worker", replicas, rng.choice((4, 8)))], min_available=replicas))
    return objs


@pytest.mark.parametrize("seed", range(16))
def test_every_plan_with_remade_pods_is_valid_and_the_exact_model_never_admits_less(seed: int,
                                                                                   caplog: pytest.LogCaptureFixture
                                                                                   ) -> None:
    """Every solver's plan passes the validator (``place_validated``), the validator never refuses the exact
    model's own plan, and cpsat and auto never admit less weight than the greedy, nor at the same weight take
    dearer victims."""
    from datetime import datetime

    from optplan.models.placement import BinpackWeights
    from optplan.solvers.placement.context import Context
    from optplan.solvers.placement.model import plan_key
    objs = random_remade(seed)
    plans = {s: place_validated(objs, s, OPTS, NOW) for s in SOLVERS}
    assert "validator refuses" not in caplog.text
    snap = load(*objs).snapshot
    ctx = Context.build(snap, jobs_to_place(snap), BinpackWeights(), datetime.fromisoformat(NOW))
    greedy = plan_key(ctx, plans["greedy"])
    for solver in ("cpsat", "auto"):
        mine = plan_key(ctx, plans[solver])
        assert (mine.neg_admitted, mine.victim_cost) <= (greedy.neg_admitted, greedy.victim_cost), solver
