"""The greedy's incremental caching must not change its answer: compare it with a plain
re-evaluation of every candidate in every round, written straight from the seed."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from optplan.models.repack import PodMove, RepackPlan
from optplan.models.results import Disruption
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.repack import checks
from optplan.solvers.repack.base import get_planner
from optplan.solvers.repack.greedy import _Greedy
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.validate import plan_violations
from tests.builders import GPU, load_with_run, node, pod, podgroup, repack_run, vcjob


def reference_greedy(p: RepackProblem) -> RepackPlan:
    snap = p.snapshot
    cap = Capacity(snap)
    w = p.weights
    fcost = {c: p.disruption(p.r_pods[c]).weighted(w) for c in p.candidates}
    ranks = {v: i + 1 for i, v in enumerate(sorted({-v for v in fcost.values()}))}
    alive = list(p.candidates)
    receivers = set(p.occupied)
    stay = set(p.occupied) - set(p.candidates)
    moved: list[Any] = []
    moves: list[tuple[str, str, str]] = []
    freed: list[str] = []
    pdb_left = {k: b.disruptions_allowed for k, b in snap.pdbs.items()}
    mpr = p.run.spec.max_per_run

    def tier(n: str) -> int:
        return 0 if n in stay else ranks[-fcost[n]]

    def place(c: str) -> list[tuple[Any, str]] | None:
        out = []
        for pod_ in p.r_pods[c]:
            best = None
            for r in sorted(receivers - {c}):
                if static_reason(pod_, snap.nodes[r]) or cap.fit_reason(pod_, r):
                    continue
                key = (tier(r), cap.free[r].get(p.resource, 0) - p.request(pod_), r)
                if best is None or key < best[0]:
                    best = (key, r)
            if best is None:
                for q, r in out:
                    cap.remove(q, r)
                return None
            cap.add(pod_, best[1])
            out.append((pod_, best[1]))
        for q, r in out:
            cap.remove(q, r)
        return out

    while True:
        feasible = []
        for c in alive:
            d = p.disruption(moved + p.r_pods[c])
            if mpr.pod_groups is not None and d.affected_pod_groups > mpr.pod_groups:
                continue
            if any(sum(q.request(r) for q in moved + p.r_pods[c]) > b for r, b in mpr.resources.items()):
                continue
            use = Counter(k for q in p.r_pods[c] for k in p.pdb_cover.get(q.key, ()))
            if any(n > pdb_left[k] for k, n in use.items()):
                continue
            placement = place(c)
            if placement is not None:
                feasible.append((c, d.as_tuple(), placement))
        if not feasible:
            break
        lo = [min(f[1][i] for f in feasible) for i in range(5)]
        hi = [max(f[1][i] for f in feasible) for i in range(5)]
        wt = w.as_tuple()
        keyed = []
        for f in feasible:
            s = sum(wt[i] * ((f[1][i] - lo[i]) / (hi[i] - lo[i]) if hi[i] > lo[i] else 0.0) for i in range(5))
            keyed.append(((round(s, 9), -snap.nodes[f[0]].allocatable[p.resource], f[0]), f))
        c, _, placement = min(keyed, key=lambda kf: kf[0])[1]
        for pod_, r in placement:
            cap.remove(pod_, c)
            cap.add(pod_, r)
            moves.append((pod_.key, c, r))
            moved.append(pod_)
            stay.add(r)
            if r in alive:
                alive.remove(r)
        for q in p.r_pods[c]:
            for k in p.pdb_cover.get(q.key, ()):
                pdb_left[k] -= 1
        alive.remove(c)
        receivers.discard(c)
        freed.append(c)
    return RepackPlan.build([PodMove(pod=k, from_node=a, to_node=b) for k, a, b in moves], freed)


def random_cluster(seed: int, n_nodes: int = 14) -> RepackProblem:
    rng = random.Random(seed)
    objs: list[dict[str, Any]] = []
    sizes = {f"n{i:02d}": rng.choice([4, 8, 8, 16]) for i in range(n_nodes)}
    for name, size in sizes.items():
        pool = rng.choice(["x", "y"])
        tainted = pool == "y" and rng.random() < 0.5
        taints = [{"key": "dedicated", "value": "y", "effect": "NoSchedule"}] if tainted else None
        objs.append(node(name, size, labels={"pool": pool}, taints=taints, cpu=str(size * 4),
                         unschedulable=rng.random() < 0.05))
    free = dict(sizes)
    cpu_free = {n: s * 4 for n, s in sizes.items()}
    gid = 0
    while sum(free.values()) > 0.45 * sum(sizes.values()):
        gid += 1
        size = rng.choice([1, 1, 2, 3, 4])
        per = rng.choice([1, 1, 2, 4])
        gname = f"g{gid:03d}"
        labels = {"protected": "true"} if rng.random() < 0.1 else {}
        placed = 0
        for k in range(size):
            options = [n for n in sizes if free[n] >= per and cpu_free[n] >= per * 2]
            if not options:
                break
            n = rng.choice(options)
            free[n] -= per
            cpu_free[n] -= per * 2
            objs.append(pod(f"{gname}-{k}", n, per, group=gname, cpu=str(per * 2),
                            phase="Running" if rng.random() > 0.03 else "Pending",
                            tolerations=[{"key": "dedicated", "operator": "Exists"}] if rng.random() < .7 else None,
                            labels={"app": gname}))
            placed += 1
        if placed:
            objs.append(podgroup(gname, max(1, placed - rng.choice([0, 1, 2])), labels=labels))
            if rng.random() < 0.1:
                from tests.builders import pdb

                objs.append(pdb(f"pdb-{gname}", {"app": gname}, rng.choice([0, 1])))
    mpr: dict[str, Any] | None = rng.choice([None, {"podGroups": 3}, {"resources": {GPU: 6}}])
    objs.append(repack_run(scope={"podGroups": {"exclude": {"selector": {"matchLabels": {"protected": "true"}}}}},
                           max_per_run=mpr))
    loaded, run = load_with_run(*objs)
    return RepackProblem(loaded.snapshot, run)


@pytest.mark.parametrize("seed", range(40))
def test_greedy_equals_plain_reevaluation(seed: int) -> None:
    p = random_cluster(seed)
    got = get_planner("greedy").plan(p, PlanOptions())
    assert plan_violations(p, got.plan, claimed=got.disruption) == []
    assert got.plan == reference_greedy(p)


def test_some_random_clusters_free_nodes() -> None:
    """The family above is not trivial: most instances free something."""
    freed = [len(get_planner("greedy").plan(random_cluster(s), PlanOptions()).plan.freed_nodes) for s in range(40)]
    assert sum(1 for f in freed if f > 0) >= 20


@pytest.mark.parametrize("seed", range(0, 40, 5))
def test_fast_greedy_plans_are_valid_and_match_on_small_rounds(seed: int) -> None:
    """With fewer than 20 feasible candidates a round commits one candidate, as the seed's greedy."""
    p = random_cluster(seed)
    fast = get_planner("greedy-fast").plan(p, PlanOptions())
    assert plan_violations(p, fast.plan, claimed=fast.disruption) == []
    assert fast.plan == get_planner("greedy").plan(p, PlanOptions()).plan


def test_fast_greedy_stays_close_on_a_large_cluster() -> None:
    from optplan.adapters.generate import GenConfig, generate
    from optplan.adapters.kubefile import load_objects

    loaded = load_objects(generate(GenConfig(nodes=300, occupancy=0.6, seed=3)))
    p = RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))
    exact = get_planner("greedy").plan(p, PlanOptions())
    fast = get_planner("greedy-fast").plan(p, PlanOptions())
    assert plan_violations(p, fast.plan, claimed=fast.disruption) == []
    assert len(fast.plan.freed_nodes) >= 0.97 * len(exact.plan.freed_nodes)


# ---- the greedy's incremental bookkeeping against the checks (``checks``) --------------------------------

def _with_workloads(objs: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The generated cluster plus the VCJobs and ModelServings its PodGroups name, each with a random
    restart policy, so that restart units wider than one pod occur."""
    owners = {(o["metadata"]["namespace"], ref["kind"], ref["name"])
              for o in objs if o["kind"] == "PodGroup" for ref in o["metadata"].get("ownerReferences", ())}
    extra: list[dict[str, Any]] = []
    for ns, kind, name in sorted(owners):
        if kind == "Job":
            job = vcjob(name, ns=ns)
            action = rng.choice([None, "RestartJob", "RestartTask"])
            if action is not None:
                job["spec"]["policies"] = [{"event": "PodEvicted", "action": action}]
            extra.append(job)
        elif kind == "ModelServing":
            policy = rng.choice([None, "ServingGroupRecreate", "RoleRecreate", "None"])
            extra.append({"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
                          "metadata": {"name": name, "namespace": ns},
                          "spec": {"replicas": 1, **({"recoveryPolicy": policy} if policy else {})}})
    return [*objs, *extra]


def generated_problem(seed: int) -> RepackProblem:
    from optplan.adapters.generate import GenConfig, generate
    from optplan.adapters.kubefile import load_objects

    rng = random.Random(seed)
    cfg = GenConfig(nodes=rng.choice([12, 24, 40]), seed=seed, occupancy=rng.choice([0.3, 0.5]),
                    pdb_share=rng.choice([0.0, 0.4]), cpu_pressure=rng.choice([0.0, 0.3]),
                    rack_size=rng.choice([0, 4]), topology_share=rng.choice([0.0, 0.6]),
                    max_pod_groups=rng.choice([None, 4]), max_cards=rng.choice([None, 12]), serving_share=0.4)
    loaded = load_objects(_with_workloads(generate(cfg), rng))
    return RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))


class _Checked(_Greedy):
    """The greedy, checked before every commit: for every live candidate its budget verdict is the
    budget and PDB checks' on plan-so-far-plus-candidate; the chosen one's placement passes every check,
    and the plan so far plus its delta is the disruption ``rules`` recomputes."""

    steps = 0

    def _plan(self, extra: list[PodMove], node: str | None) -> RepackPlan:
        freed = [*self.led.freed, *([node] if node else [])]
        return RepackPlan(moves=(*self.led.moves, *extra), freed_nodes=tuple(freed))

    def _commit(self, ci: int) -> None:
        p = self.p
        for other in np.flatnonzero(self.alive).tolist():
            cand = self.ct.cands[other]
            plan = self._plan([PodMove(pod=q.key, from_node=cand.node, to_node=cand.node) for q in cand.pods],
                              cand.node)
            budgets, pdbs = checks.check_budgets(p, plan), checks.check_pdbs(p, plan)
            reason = self.budget_reason(other)
            assert (reason is None) == (not budgets and not pdbs), (reason, budgets, pdbs)
            if reason == "pdb-disruptions-allowed":
                assert pdbs and not budgets
        moves = self.placement(ci)
        assert moves is not None
        plan = self._plan(moves, self.ct.cands[ci].node)
        assert [v.message for check in checks.CHECKS for v in check(p, plan)] == []
        assert p.plan_disruption(plan) == Disruption(*(int(x) for x in self.led.totals + self.delta[ci]))
        super()._commit(ci)
        self.steps += 1


@pytest.mark.parametrize("lazy", [False, True], ids=["greedy", "greedy-fast"])
@pytest.mark.parametrize("seed", range(10))
def test_greedy_bookkeeping_agrees_with_the_checks(seed: int, lazy: bool) -> None:
    p = generated_problem(seed)
    g = _Checked(p, lazy=lazy)
    moves, freed = g.run()
    plan = RepackPlan(moves=tuple(moves), freed_nodes=tuple(freed))
    assert [v.message for check in checks.CHECKS for v in check(p, plan)] == []
    assert p.plan_disruption(plan) == Disruption(*(int(x) for x in g.led.totals))
    assert g.steps == len(freed)


def test_the_generated_family_exercises_the_bookkeeping() -> None:
    """Not trivial: the problems above free nodes, hit budgets and PDBs, and restart more than they move."""
    seen: Counter[str] = Counter()
    for seed in range(10):
        p = generated_problem(seed)
        res = get_planner("greedy").plan(p, PlanOptions())
        seen["freed"] += bool(res.plan.freed_nodes)
        seen.update(k for k in res.rejections if k.startswith(("budget", "pdb")))
        moved = {m.pod for m in res.plan.moves}
        restarted = p.restarted(p.snapshot.pods[k] for k in moved)
        seen["wider restarts"] += any(r.pods - moved for r in restarted.values())
    assert seen["freed"] >= 8 and seen["wider restarts"] >= 2, seen
    assert seen["pdb-disruptions-allowed"] + seen["budget-podGroups"] + seen["budget-resources"] >= 3, seen


class _Unshared(_Greedy):
    share = False


def benchmark_mix(nodes: int, seed: int) -> RepackProblem:
    """``benchmarks/greedy_scale.py``'s snapshot: nearly full nodes of mostly identical 1-card pods, where
    candidates share their placements most."""
    from optplan.adapters.generate import GenConfig, generate
    from optplan.adapters.kubefile import load_objects

    cfg = GenConfig(nodes=nodes, cards_per_node=(8,), occupancy=0.88, pod_sizes=((1, 0.9), (2, 0.07), (4, 0.03)),
                    gang_sizes=((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1)), cpu_pressure=0.008, pdb_share=0.1,
                    seed=seed)
    loaded = load_objects(generate(cfg))
    return RepackProblem(loaded.snapshot, next(iter(loaded.runs.values())))


@pytest.mark.parametrize("lazy", [False, True], ids=["greedy", "greedy-fast"])
@pytest.mark.parametrize(("nodes", "seed"), [(30, 0), (60, 1), (150, 2)])
def test_shared_placements_change_nothing(nodes: int, seed: int, lazy: bool) -> None:
    """Candidates with pods alike share placements within a round; each one placing its own pods gives
    the same plan after the same number of evaluations, and (greedy) the plain re-evaluation's plan."""
    p = benchmark_mix(nodes, seed)
    shared, alone = _Greedy(p, lazy=lazy), _Unshared(p, lazy=lazy)
    plan = shared.run()
    assert plan == alone.run() and plan[1]
    assert (shared.rounds, shared.evaluations) == (alone.rounds, alone.evaluations)
    if not lazy and nodes <= 60:
        assert RepackPlan.build(*plan) == reference_greedy(p)
