"""A task of unlike pods in the exact placement model. A bare PodGroup's pods of one role may differ: KubeRay puts
a cpu-only head and its GPU workers under one PodGroup, without ``volcano.sh/task-spec``, so they are one task
(``placement.jobs.pod_group_job``). The exact model counts such a task's pods per shape (``model.Unit``: requests,
the oracle's constraint signature, GPU share), each shape with its own variables, the task's rules over all of them.

Written from the rule, not from the model: every plan passes the validator; cpsat's plan is proven (OPTIMAL) and
ranks no worse than the greedy's by ``plan_key`` (it admits at least what the greedy admits); on instances small
enough, a brute force over every assignment of the pending pods finds no valid plan better than cpsat's."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optplan.models.placement import Binding, BinpackWeights, JobPlacement, PlacementPlan
from optplan.models.repack import SolverRecord
from optplan.models.schedconf import SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement import cpsat
from optplan.solvers.placement.context import Context
from optplan.solvers.placement.cycles import greedy_cycles
from optplan.solvers.placement.jobs import jobs_to_place
from optplan.solvers.placement.model import PlanKey, plan_key
from optplan.solvers.placement.place import name_pods, plan_placement
from optplan.solvers.placement.validate import placement_violations
from tests.builders import GPU, load, node, priority_class, queue
from tests.placement.test_bare_podgroups import bare, member
from tests.placement.test_gang_actions import conf

OPTS = PlanOptions(time_limit=10, workers=1, seed=0, deterministic=True)
NOW = "2025-06-01T12:00:00Z"


def ray(min_member: int = 3, *, queue_name: str = "default", pc: str | None = None,
        workers: int = 2) -> list[dict[str, Any]]:
    """A KubeRay-like PodGroup ``ray``: a cpu-only head (16 CPUs) and 8-GPU workers (16 CPUs each), one task."""
    return [bare("ray", min_member, queue_name=queue_name, priority_class_name=pc),
            member("ray-head", "ray", 0, cpu="16"),
            *(member(f"ray-worker-{i}", "ray", 8, cpu="16") for i in range(workers))]


def gpu_nodes(c0_cpu: str) -> list[dict[str, Any]]:
    """Two GPU nodes with 24 CPUs (a worker and a head do not fit one together) and a cpu-only node ``c0``."""
    return [node("n0", 8, cpu="24"), node("n1", 8, cpu="24"), node("c0", 0, cpu=c0_cpu)]


def victim_node() -> list[dict[str, Any]]:
    """n2: 8 GPUs but 8 CPUs (no worker fits), running ``o-1`` of ``o`` beside ``o-0`` (slack 1 for preempt)."""
    return [node("n2", 8, cpu="8"), member("o-1", "o", 8, on="n2", cpu="4")]


def unlike_sizes() -> list[dict[str, Any]]:
    """The former FALLBACK case: pods of 4, 2 and 6 GPUs on 6, 4 and 2 GPUs free; they fit only as (6, 4, 2), not in
    Volcano's pod order."""
    return [node("n0", 8), node("n1", 8), node("n2", 4),
            bare("g", 3), member("g-0", "g", 4), member("g-1", "g", 2), member("g-2", "g", 6),
            bare("h", 1), member("h-0", "h", 2, on="n0"), bare("k", 1), member("k-0", "k", 4, on="n1"),
            bare("m", 1), member("m-0", "m", 2, on="n2")]


def subgroups_of_unlike_pods() -> list[dict[str, Any]]:
    """Two subgroups (subGroupSize 2, minSubGroups 1) of a head-like pod and a 8-GPU pod each, one task: the
    partitions hold pods of two shapes."""
    pg = bare("g", 2, sub_groups=[{"name": "g", "subGroupSize": 2, "minSubGroups": 1, "matchLabelKeys": ["grp"]}])
    return [node("n0", 8, cpu="24"), node("c0", 0, cpu="16"), pg,
            *(member(f"g-{g}{i}", "g", 8 * i, cpu="16", labels={"grp": g}) for g in "ab" for i in (0, 1))]


def running_head() -> list[dict[str, Any]]:
    """The head runs (on c0); a worker runs on n0; the other worker and a 2-GPU sidecar are pending."""
    return [node("n0", 8, cpu="24"), node("n1", 8, cpu="24"), node("c0", 0, cpu="16"), bare("ray", 4),
            member("ray-head", "ray", 0, cpu="16", on="c0"), member("ray-worker-0", "ray", 8, cpu="16", on="n0"),
            member("ray-worker-1", "ray", 6, cpu="16"), member("ray-side", "ray", 2, cpu="4")]


def busy_n1() -> dict[str, Any]:
    return member("busy-0", "busy", 8, on="n1", cpu="4")


CASES = [  # (what, objects, the greedy admits ray/g, cpsat admits it, with victims)
    ("the greedy's plan is optimal: the head on the cpu node", [*gpu_nodes("16"), *ray()], True, True, False),
    ("the greedy puts the head on a GPU node and waits; the exact model does not",
     [*gpu_nodes("64"), *ray()], False, True, False),
    ("unlike sizes that fit only in another order than Volcano's", unlike_sizes(), False, True, False),
    ("reclaim: a worker's room is another queue's pod above its deserved",
     [*gpu_nodes("64"), queue("mine", deserved={GPU: 16, "cpu": "100", "memory": "100Gi"}),
      queue("other", deserved={GPU: 0}), bare("o", 1, queue_name="other"), member("o-0", "o", 8, on="n1", cpu="4"),
      *ray(queue_name="mine")], False, True, True),
    ("preempt: a worker's room is a lower-priority pod of a gang above its minMember",
     [priority_class("high", 1000), priority_class("low", 10), *gpu_nodes("64"), *victim_node(),
      bare("o", 1, priority_class_name="low"), member("o-0", "o", 8, on="n1", cpu="4"), *ray(pc="high")],
     False, True, True),
    ("minMember below the pods: the head and one worker make the gang", [*gpu_nodes("64"), busy_n1(), *ray(2)],
     True, True, False),
    ("subgroups of unlike pods: one whole subgroup", subgroups_of_unlike_pods(), True, True, False),
    ("a running head: the pending worker and sidecar join it", running_head(), True, True, False),
]


def solved(objs: list[dict[str, Any]], c: SchedulerConf | None = None) -> tuple[Context, PlacementPlan, PlacementPlan]:
    """The greedy's plan (Volcano's scheduling cycles) and cpsat's on one context (the scheduler configuration
    ``c``, else the default), both validated."""
    snap = load(*objs).snapshot
    jobs = jobs_to_place(snap)
    extra: dict[str, Any] = {} if c is None else {"actions": c.actions, "scheduler": c}
    ctx = Context.build(snap, jobs, BinpackWeights(), datetime.fromisoformat(NOW), **extra)
    greedy = greedy_cycles(ctx)
    exact = cpsat.solve(ctx, OPTS, greedy)
    for plan in (greedy, exact):
        assert placement_violations(snap, jobs, plan, scheduler=c) == []
    return ctx, greedy, exact


def unlike(ctx: Context, key: str) -> bool:
    """Some task of the job has pending pods of different requests."""
    job = next(j for j in ctx.jobs if j.key == key)
    return any(len({tuple(sorted(ctx.pods[key][t.name][i].requests.items())) for i in ctx.pending(job, t.name)}) > 1
               for t in job.tasks)


def brute_best(ctx: Context) -> PlanKey:
    """The best ``plan_key`` over every valid plan of the one job to place: each pending pod on a node or not."""
    snap = ctx.snapshot
    (job,) = ctx.jobs
    slots = [(t.name, i) for t in job.tasks for i in ctx.pending(job, t.name)]
    best: PlanKey | None = None
    for where in itertools.product([None, *sorted(snap.nodes)], repeat=len(slots)):
        bindings = tuple(Binding(task=t, index=i, node=n) for (t, i), n in zip(slots, where, strict=True) if n)
        jp = JobPlacement(namespace=job.namespace, name=job.name, queue=job.queue, admitted=bool(bindings),
                          reason="brute force", bindings=bindings)
        plan = name_pods(PlacementPlan(jobs=(jp,), solver=SolverRecord(name="brute", status="FEASIBLE")), ctx.jobs)
        if placement_violations(snap, ctx.jobs, plan) == []:
            key = plan_key(ctx, plan)
            best = key if best is None or key < best else best
    assert best is not None  # placing nothing is always valid
    return best


@pytest.mark.parametrize(("what", "objs", "greedy_admits", "exact_admits", "victims"), CASES,
                         ids=[c[0] for c in CASES])
def test_the_exact_model_plans_a_task_of_unlike_pods(what: str, objs: list[dict[str, Any]], greedy_admits: bool,
                                                     exact_admits: bool, victims: bool,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    ctx, greedy, exact = solved(objs)
    key = next(j.key for j in ctx.jobs if j.name in ("ray", "g"))
    assert any(unlike(ctx, j.key) for j in ctx.jobs)
    assert greedy.job(key).admitted == greedy_admits
    assert exact.job(key).admitted == exact_admits, exact.job(key).reason
    assert bool(exact.job(key).victims) == victims
    assert exact.solver.status == "OPTIMAL"
    assert "validator refuses" not in caplog.text  # the exact plan is cpsat's own, not the greedy's after a refusal
    assert plan_key(ctx, exact) <= plan_key(ctx, greedy)
    auto = plan_placement(ctx.snapshot, jobs_to_place(ctx.snapshot), "auto", OPTS, now=NOW)  # validated, named
    assert auto.job(key).admitted == exact_admits and auto.solver.status == "OPTIMAL"
    for b in auto.job(key).bindings:  # the original task and pod index
        assert b.pod == ctx.pods[key][b.task][b.index].name


BRUTE = ["the greedy's plan is optimal: the head on the cpu node",
         "the greedy puts the head on a GPU node and waits; the exact model does not",
         "unlike sizes that fit only in another order than Volcano's",
         "minMember below the pods: the head and one worker make the gang",
         "a running head: the pending worker and sidecar join it"]


@pytest.mark.parametrize("what", BRUTE)
def test_the_exact_models_proof_holds_against_a_brute_force(what: str) -> None:
    """Where main answered FALLBACK (a task of unlike pods, no proof), cpsat's OPTIMAL plan is the best valid plan
    of every assignment of the pending pods, by the whole lexicographic ``plan_key``."""
    objs = next(c[1] for c in CASES if c[0] == what)
    ctx, _greedy, exact = solved(objs)
    assert exact.solver.status == "OPTIMAL"
    assert plan_key(ctx, exact) == brute_best(ctx)


SHAPES = [(0, "4"), (0, "16"), (2, "4"), (4, "8"), (8, "8"), (8, "16")]
"""(GPUs, CPUs) of a pod drawn by the property."""


@st.composite
def unlike_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Two or three nodes (0, 4 or 8 GPUs; 8, 16 or 32 CPUs), each likely running a one-pod gang of queue
    ``other``; one or two pending bare PodGroups of queue ``mine`` (or both queues ``default``) of two to four
    pods of at least two shapes in one task, minMember from one to all; ``other`` above its deserved (reclaim may
    take its pods) or not; priorities so that preempt may too."""
    reclaim = draw(st.booleans())
    objs: list[dict[str, Any]] = [priority_class("high", 1000), priority_class("low", 10)]
    if reclaim:
        objs += [queue("mine", deserved={GPU: 32, "cpu": "200", "memory": "200Gi"}),
                 queue("other", deserved={GPU: draw(st.sampled_from((0, 8)))})]
    for n in range(draw(st.integers(2, 3))):
        gpu = draw(st.sampled_from((0, 4, 8)))
        cpu = draw(st.sampled_from((8, 16, 32)))
        objs.append(node(f"n{n}", gpu, cpu=str(cpu)))
        if draw(st.integers(0, 2)):
            g = draw(st.sampled_from(sorted({0, gpu // 2, gpu})))
            objs += [bare(f"o{n}", 1, queue_name="other" if reclaim else "default", priority_class_name="low"),
                     member(f"o{n}-0", f"o{n}", g, on=f"n{n}", cpu=str(cpu // 2))]
    for j in range(draw(st.integers(1, 2))):
        head = draw(st.sampled_from(SHAPES))
        shapes = [head, *draw(st.lists(st.sampled_from([x for x in SHAPES if x != head]), min_size=1, max_size=3))]
        shapes = draw(st.permutations(shapes))
        objs.append(bare(f"p{j}", draw(st.integers(1, len(shapes))), queue_name="mine" if reclaim else "default",
                         priority_class_name=draw(st.sampled_from(("high", "low")))))
        objs += [member(f"p{j}-{i}", f"p{j}", g, cpu=c) for i, (g, c) in enumerate(shapes)]
    return objs


GANG_CONF = conf(gangpreempt={"allowWholeBundle": True}, gangreclaim={"allowWholeBundle": True})
"""gangpreempt and gangreclaim instead of preempt and reclaim (``gang_cpsat``), whole bundles allowed."""


@settings(max_examples=100, deadline=None, derandomize=True)
@given(unlike_clusters(), st.sampled_from((None, GANG_CONF)))
def test_cpsat_on_unlike_pods_is_valid_and_never_worse_than_the_greedy(objs: list[dict[str, Any]],
                                                                       c: SchedulerConf | None) -> None:
    ctx, greedy, exact = solved(objs, c)  # both validated
    assert exact.solver.status in ("OPTIMAL", "FEASIBLE")
    assert plan_key(ctx, exact) <= plan_key(ctx, greedy)
