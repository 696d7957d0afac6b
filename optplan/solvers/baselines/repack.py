"""Peer baselines for Repack: what Karpenter, Cluster Autoscaler and the descheduler would do with the
same snapshot, implemented from the public descriptions in SPEC.md ("Peers (for baselines; implement
from these descriptions, never copy code)") — no project's code was consulted or copied.

Each is a function and a planner class (``core.planner.Planner`` on a ``RepackProblem``), registered in
``optplan.solvers.core.registry`` under their own family, ``baselines``, never ``repack``: a baseline follows
its own algorithm, not optplan's rules, so its plan may break them (scope, gangs, budgets, PDBs, moves off
nodes that are not vacated). The benchmark reports those breaks with
``optplan.solvers.repack.validate.plan_violations``; nothing here raises for them. Capacity and the static
predicates (NodeUnschedulable, nodeSelector, required node affinity, taints) always come from the
feasibility oracle (``optplan.solvers.core.oracle``), so every move fits where it lands.

Common approximations (all three):

- Only pods that request the target resource R move (optplan's plan model has no other moves); other
  pods on a vacated node (DaemonSets, cpu-only pods) are assumed to follow, as DaemonSet pods do.
- Receivers are providers of R (nothing else can host an R pod). Utilisation means R utilisation:
  requested R / allocatable R.
- No node is ever created: consolidation is deletion only (no Karpenter replacement, no CA scale-up).
- A pod's placement is searched in node-name order unless the peer's rule says otherwise.

``karpenter_multi_node`` — Karpenter multi-node consolidation (SPEC: "Karpenter multi-node
consolidation"). Candidates: occupied providers, except a node hosting any pod covered by a PDB with
``disruptionsAllowed`` 0 (PDBs block whole nodes; no accounting across nodes) or annotated
``karpenter.sh/do-not-disrupt: "true"``; scope, PodGroups and gangs are ignored. Each candidate's
disruption cost is the sum over its R pods of clamp(1 + deletionCost/2^27 + priority/2^25, −10, 10)
(deletionCost from ``controller.kubernetes.io/pod-deletion-cost``, priority from ``spec.priority``,
both default 0); candidates are sorted by cost (then name) and the first min(100, n) kept. A binary
search on the prefix length looks for the longest prefix whose R pods all fit on the other occupied
providers by first-fit decreasing (pods by cpu, then memory, descending; nodes in name order; the
oracle's predicates and capacity). As in Karpenter, the search assumes feasibility is monotone in the
prefix length, so it can miss a longer feasible prefix behind an infeasible one. One command: the
prefix found is freed and its pods moved where FFD put them. The 1-minute timeout of the peer becomes
min(60 s, options.time_limit); on timeout the last valid prefix is returned. Approximation: the peer's
emptiness consolidation runs before multi-node, so R-idle providers are deleted, not receivers.

``karpenter_balanced`` — Karpenter's ``Balanced`` consolidation policy (Karpenter's design
"Balanced Consolidation: Scoring Moves by Savings and Disruption", kubernetes-sigs/karpenter
designs/balanced-consolidation.md, read for the rule; no code consulted): a move is carried out only when
score = savings fraction / disruption fraction ≥ 1/k, k = ``consolidationThreshold`` (default 2). The
savings fraction is the price of the nodes deleted over the price of the pool, the disruption fraction the
disruption cost of the nodes deleted over the pool's; a node's disruption cost is 1 (per node) plus
Σ max(0, eviction cost) of its pods (``karpenter_pod_cost``). The pool is every provider of R; a node's
price is its allocatable R (the cards dominate a GPU node's price; the trace has no prices) — an
approximation, as is deletion only (no replacement node, as for ``karpenter``). As the design says: a
candidate whose own delete score is below 1/k is skipped, candidates are ranked by that score (highest
first, then name: score-based ranking), and Karpenter's multi-node search runs on the first 100, a prefix
accepted only when its pods fit elsewhere (FFD, as ``karpenter``) and its score is ≥ 1/k. Ranked so, a longer
prefix never scores higher, so the binary search stays on a monotone rule. When it finds nothing, Karpenter's
single-node consolidation (its next method, pkg/controllers/disruption/singlenodeconsolidation.go, read for
the rule): the ranked candidates in turn, the first whose pods fit on the other occupied nodes alone (FFD) is
deleted (its own score passed the filter). The binary search stops at its first candidate's failure; on a
saturated GPU cluster the best-ranked nodes each hold one whole-node pod (the fewest pods per card) that fits
on no other occupied node, so without the single-node pass the peer never moved anything.

``cluster_autoscaler_scale_down`` — Cluster Autoscaler scale-down (SPEC: "Cluster Autoscaler
scale-down"). Run in rounds (one CA loop each) until a round removes nothing. Each round, candidates
are the remaining providers under 50 % R utilisation in the simulated state, R-empty ones first, then
by utilisation, then name. Empty candidates are all "unneeded" in the simulation (never receivers) and
up to 10 are removed per round; then, if the round has room left, non-empty candidates are tried in
order until the first one drains (at most 1 non-empty node per round): its pods (largest R first) are
placed by first-fit over the remaining non-empty providers, each search starting one past the node
where the previous pod landed (rotating start index); PDBs are decremented across nodes (a drain that
would take any PDB below 0 fails). On success the simulated snapshot is committed and the node leaves
the receiver set. A node that received pods may be drained in a later round, moving those pods again:
the plan records each pod once, from its original node to its final one (``stats['re_moved_pods']``).
Only occupied providers are reported as freed (removed idle providers are in ``stats``).

``descheduler_high_node_utilization`` — descheduler HighNodeUtilization followed by the scheduler
with MostAllocated scoring (SPEC: "descheduler HighNodeUtilization"). Sources: occupied providers whose
R utilisation is under ``threshold`` (default 50 %), least utilised first. The free capacity of every
other provider is pooled into one number per resource (R, cpu, memory, pods). Pods are evicted from
the sources, lowest priority first (then largest R, then name), while every pooled number is still
positive (the pod evicted last may overdraw it, as in the peer), each eviction subtracting its
requests; the eviction API honours PDBs, so an eviction that a PDB (decremented across nodes) forbids
is skipped. The descheduler chooses no target: the evicted pods are then placed one by one (highest
priority first, then eviction order) on the feasible provider with the highest R utilisation after
placement (MostAllocated on R; ties by name) — which may be a source, even the pod's own node (a move
with from == to: the pod was still evicted). A source is freed only if all its R pods were evicted and
placed elsewhere; moves off sources that are not freed stay in the plan, as the disruption they are.
Approximation: the scheduler's MostAllocated is scored on R alone (cpu and memory only filter).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from optplan.models.repack import PodMove, RepackPlan, SolverRecord
from optplan.models.results import Disruption, PlanResult
from optplan.models.snapshot import Pod
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import POD_SLOT, Capacity, Predicates
from optplan.solvers.core.planner import Planner
from optplan.solvers.repack.rules import DO_NOT_DISRUPT, RepackProblem, disruption_protection

STATUS = "BASELINE"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
KARPENTER_MAX_CANDIDATES = 100
KARPENTER_TIMEOUT = 60.0
CA_UTILISATION_THRESHOLD = 0.5
CA_MAX_NODES_PER_ROUND = 10
CA_MAX_NON_EMPTY_PER_ROUND = 1
DESCHEDULER_THRESHOLD = 0.5


# ---- shared helpers ---------------------------------------------------------------------------

def _utilisation(problem: RepackProblem, node: str, r_used: int) -> float:
    alloc = problem.snapshot.nodes[node].allocatable.get(problem.resource, 0)
    return r_used / alloc if alloc > 0 else 1.0


def _lenient_disruption(problem: RepackProblem, plan: RepackPlan) -> Disruption:
    """plan_disruption when it works; for a plan it cannot read, what can be computed."""
    try:
        return problem.plan_disruption(plan)
    except Exception:  # a baseline's plan may be anything: report what we can
        moved = [problem.snapshot.pods[m.pod] for m in plan.moves if m.pod in problem.snapshot.pods]
        try:
            return problem.disruption(moved)
        except Exception:
            return Disruption(moved_pods=len(moved))


def _result(problem: RepackProblem, name: str, t0: float, moves: list[PodMove], freed: Iterable[str],
            stats: dict[str, int]) -> PlanResult:
    plan = RepackPlan.build(moves, sorted(freed))
    wall = time.perf_counter() - t0
    record = SolverRecord(name=name, status=STATUS, wall_seconds=round(wall, 3))
    return PlanResult(plan=plan, record=record, disruption=_lenient_disruption(problem, plan), stats=stats)


# ---- Karpenter multi-node consolidation -------------------------------------------------------

def _clamp(v: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, v))


def karpenter_pod_cost(pod: Pod) -> float:
    """Karpenter's per-pod eviction cost: clamp(1 + deletionCost/2^27 + priority/2^25, −10, 10)."""
    try:
        deletion_cost = float(pod.annotations.get(DELETION_COST_ANNOTATION, "0"))
    except ValueError:
        deletion_cost = 0.0
    priority = pod.priority or 0
    return _clamp(1.0 + deletion_cost / 2**27 + priority / 2**25, -10.0, 10.0)


def _karpenter_blocked(problem: RepackProblem, node: str) -> bool:
    pdbs = problem.budgets.pdbs
    for pod in problem.snapshot.pods_by_node.get(node, ()):
        if disruption_protection(pod, (DO_NOT_DISRUPT,)) is not None:  # Karpenter reads its own marker only
            return True
        if any(pdbs[k] <= 0 for k in problem.pdbs_charged(pod)):
            return True
    return False


def _ffd(problem: RepackProblem, base: Capacity, static: Predicates, pods: list[Pod],
         receivers: list[str]) -> list[tuple[Pod, str]] | None:
    """First-fit decreasing (cpu, then memory) of ``pods`` over ``receivers``; None if one does not fit."""
    cap = base.copy()
    for pod in pods:
        assert pod.node_name is not None
        cap.remove(pod, pod.node_name)
    order = sorted(pods, key=lambda p: (-p.request("cpu"), -p.request("memory"), p.key))
    out: list[tuple[Pod, str]] = []
    for pod in order:
        for r in receivers:
            if static.ok(pod, r) and cap.fit_reason(pod, r) is None:
                cap.add(pod, r)
                out.append((pod, r))
                break
        else:
            return None
    return out


def karpenter_multi_node(problem: RepackProblem, options: PlanOptions) -> PlanResult:
    """Karpenter multi-node consolidation, one command (see the module docstring)."""
    t0 = time.perf_counter()
    deadline = t0 + min(KARPENTER_TIMEOUT, options.time_limit)
    candidates = [n for n in problem.occupied if not _karpenter_blocked(problem, n)]
    cost = {n: sum(karpenter_pod_cost(p) for p in problem.r_pods[n]) for n in candidates}
    candidates.sort(key=lambda n: (cost[n], n))
    candidates = candidates[:min(KARPENTER_MAX_CANDIDATES, len(candidates))]
    best, best_k, probes, timed_out = _longest_prefix(problem, candidates, deadline, lambda prefix: True)
    moves = [PodMove(pod=p.key, from_node=p.node_name or "", to_node=r) for p, r in best]
    stats = {"candidates": len(candidates), "probes": probes, "prefix": best_k, "timed_out": int(timed_out)}
    return _result(problem, "karpenter", t0, moves, candidates[:best_k], stats)


def _drain(problem: RepackProblem, base: Capacity, static: Predicates, nodes: list[str]
           ) -> list[tuple[Pod, str]] | None:
    """The pods of ``nodes`` first-fit-decreasing onto the other occupied nodes (``_ffd``); None: some pod fits
    nowhere."""
    gone = set(nodes)
    return _ffd(problem, base, static, [p for n in nodes for p in problem.r_pods[n]],
                [m for m in problem.occupied if m not in gone])


def _longest_prefix(problem: RepackProblem, candidates: list[str], deadline: float,
                    passes: Callable[[list[str]], bool]) -> tuple[list[tuple[Pod, str]], int, int, bool]:
    """Karpenter's multi-node search: binary search for the longest prefix of ``candidates`` that ``passes``
    and whose pods first-fit-decreasing onto the other occupied nodes; (its moves, its length, probes, cut by
    the deadline)."""
    base = Capacity(problem.snapshot)
    static = Predicates(problem.snapshot)
    best: list[tuple[Pod, str]] = []
    best_k = probes = 0
    lo, hi = 1, len(candidates)
    while lo <= hi:
        if time.perf_counter() > deadline:
            return best, best_k, probes, True
        mid = (lo + hi) // 2
        probes += 1
        prefix = candidates[:mid]
        placed = None
        if passes(prefix):
            placed = _drain(problem, base, static, prefix)
        if placed is not None:
            best, best_k = placed, mid
            lo = mid + 1
        else:
            hi = mid - 1
    return best, best_k, probes, False


# ---- Karpenter Balanced -----------------------------------------------------------------------

BALANCED_K = 2.0
"""Karpenter's default ``consolidationThreshold``: a move passes when its score is at least 1/k."""


def balanced_score(savings: float, pool_cost: float, disruption: float, pool_disruption: float) -> float:
    """Karpenter's Balanced score: (savings / pool cost) / (disruption / pool disruption); 0 without savings."""
    if savings <= 0 or pool_cost <= 0 or pool_disruption <= 0:
        return 0.0
    if disruption <= 0:
        return float("inf")
    return (savings / pool_cost) / (disruption / pool_disruption)


def karpenter_balanced(problem: RepackProblem, options: PlanOptions, k: float = BALANCED_K) -> PlanResult:
    """Karpenter multi-node consolidation under the ``Balanced`` policy (see the module docstring)."""
    t0 = time.perf_counter()
    deadline = t0 + min(KARPENTER_TIMEOUT, options.time_limit)
    price = {n: float(problem.snapshot.nodes[n].allocatable.get(problem.resource, 0)) for n in problem.providers}
    cost = {n: 1.0 + sum(max(0.0, karpenter_pod_cost(p)) for p in problem.r_pods.get(n, ())) for n in price}
    pool_cost, pool_disruption = sum(price.values()), sum(cost.values())

    def score(nodes: list[str]) -> float:
        return balanced_score(sum(price[n] for n in nodes), pool_cost, sum(cost[n] for n in nodes), pool_disruption)

    threshold = 1.0 / k
    candidates = [n for n in problem.occupied if not _karpenter_blocked(problem, n) and score([n]) >= threshold]
    candidates.sort(key=lambda n: (-score([n]), n))
    rejected = 0

    def passes(prefix: list[str]) -> bool:
        nonlocal rejected
        if score(prefix) >= threshold:
            return True
        rejected += 1
        return False

    best, best_k, probes, timed_out = _longest_prefix(problem, candidates[:KARPENTER_MAX_CANDIDATES], deadline,
                                                      passes)
    freed = candidates[:best_k]
    single = tried = 0
    if not best and not timed_out:  # single-node consolidation: the first ranked candidate that drains alone
        best, freed, tried, timed_out = _first_alone(problem, candidates, deadline)
        single = len(freed)
    moves = [PodMove(pod=p.key, from_node=p.node_name or "", to_node=r) for p, r in best]
    stats = {"candidates": len(candidates[:KARPENTER_MAX_CANDIDATES]), "probes": probes, "prefix": best_k,
             "rejectedByScore": rejected, "singleNodeTried": tried, "singleNode": single,
             "timed_out": int(timed_out)}
    return _result(problem, "karpenter-balanced", t0, moves, freed, stats)


def _first_alone(problem: RepackProblem, candidates: list[str], deadline: float
                 ) -> tuple[list[tuple[Pod, str]], list[str], int, bool]:
    """Karpenter's single-node consolidation: the candidates in order, the first whose pods first-fit-decreasing
    onto the other occupied nodes; (its moves, [it] or [], candidates tried, cut by the deadline)."""
    base = Capacity(problem.snapshot)
    static = Predicates(problem.snapshot)
    for i, n in enumerate(candidates):
        if time.perf_counter() > deadline:
            return [], [], i, True
        placed = _drain(problem, base, static, [n])
        if placed is not None:
            return placed, [n], i + 1, False
    return [], [], len(candidates), False


# ---- Cluster Autoscaler scale-down ------------------------------------------------------------

def cluster_autoscaler_scale_down(problem: RepackProblem, options: PlanOptions) -> PlanResult:
    """Cluster Autoscaler scale-down, in rounds until nothing more can be removed (module docstring)."""
    t0 = time.perf_counter()
    deadline = t0 + options.time_limit
    snap = problem.snapshot
    cap = Capacity(snap)
    static = Predicates(snap)
    on: dict[str, list[Pod]] = {n: list(problem.r_pods[n]) for n in problem.providers}
    r_used = {n: sum(problem.request(p) for p in pods) for n, pods in on.items()}
    loc: dict[str, str] = {}  # pod key -> current node, for pods that moved
    pdb_left = dict(problem.budgets.pdbs)
    pdb_of: dict[str, list[str]] = {}
    present = set(problem.providers)
    removed: list[str] = []
    rounds = 0
    re_moved = 0
    timed_out = False

    def util(n: str) -> float:
        return _utilisation(problem, n, r_used[n])

    def drain(node: str, receivers: list[str]) -> list[tuple[Pod, str]] | None:
        need: Counter[str] = Counter()
        for pod in on[node]:
            if pod.key not in pdb_of:
                pdb_of[pod.key] = problem.pdbs_charged(pod)
            need.update(pdb_of[pod.key])
        if any(n > pdb_left[k] for k, n in need.items()):
            return None
        placed: list[tuple[Pod, str]] = []
        start = 0
        ok = True
        for pod in on[node]:
            for i in range(len(receivers)):
                idx = (start + i) % len(receivers)
                r = receivers[idx]
                if static.ok(pod, r) and cap.fit_reason(pod, r) is None:
                    cap.add(pod, r)
                    placed.append((pod, r))
                    start = (idx + 1) % len(receivers)
                    break
            else:
                ok = False
                break
        if not ok:
            for pod, r in placed:
                cap.remove(pod, r)
            return None
        for k, n in need.items():
            pdb_left[k] -= n
        return placed

    while True:
        if time.perf_counter() > deadline:
            timed_out = True
            break
        rounds += 1
        cands = sorted((n for n in present if util(n) < CA_UTILISATION_THRESHOLD),
                       key=lambda n: (bool(on[n]), util(n), n))
        empties = [n for n in cands if not on[n]]
        gone = empties[:CA_MAX_NODES_PER_ROUND]
        if len(gone) < CA_MAX_NODES_PER_ROUND and CA_MAX_NON_EMPTY_PER_ROUND > 0:
            unneeded = set(empties)
            for c in (n for n in cands if on[n]):
                receivers = sorted(n for n in present if n != c and n not in unneeded)
                placed = drain(c, receivers)
                if placed is None:
                    continue
                for pod, r in placed:
                    cap.remove(pod, c)
                    if pod.key in loc:
                        re_moved += 1
                    loc[pod.key] = r
                    on[r].append(pod)
                    on[r].sort(key=lambda p: (-problem.request(p), p.key))
                    r_used[r] += problem.request(pod)
                on[c] = []
                r_used[c] = 0
                gone.append(c)
                break  # at most one non-empty node per round
        if not gone:
            break
        for n in gone:
            present.discard(n)
            removed.append(n)
    occupied = set(problem.occupied)
    freed = [n for n in removed if n in occupied]
    moves = [PodMove(pod=k, from_node=snap.pods[k].node_name or "", to_node=r) for k, r in sorted(loc.items())]
    stats = {"rounds": rounds, "removed_nodes": len(removed), "removed_idle_providers": len(removed) - len(freed),
             "re_moved_pods": re_moved, "timed_out": int(timed_out)}
    return _result(problem, "cluster-autoscaler", t0, moves, freed, stats)


# ---- descheduler HighNodeUtilization ---------------------------------------------------------

_POOLED = ("cpu", "memory", "pods")


def _priority(pod: Pod) -> int:
    return pod.priority or 0


def descheduler_high_node_utilization(problem: RepackProblem, options: PlanOptions,
                                      threshold: float = DESCHEDULER_THRESHOLD) -> PlanResult:
    """descheduler HighNodeUtilization, then MostAllocated re-placement (see the module docstring)."""
    t0 = time.perf_counter()
    snap = problem.snapshot
    R = problem.resource
    r_used = {n: sum(problem.request(p) for p in problem.r_pods[n]) for n in problem.providers}
    sources = sorted((n for n in problem.occupied if _utilisation(problem, n, r_used[n]) < threshold),
                     key=lambda n: (_utilisation(problem, n, r_used[n]), n))
    source_set = set(sources)
    cap = Capacity(snap)
    resources = (R, *_POOLED)
    # A node without a pod limit pools NO_POD_LIMIT pods (``Capacity.room``): the pool never runs out of them.
    pool = {r: sum(max(cap.room(n, r), 0) for n in problem.providers if n not in source_set) for r in resources}
    pdb_left = dict(problem.budgets.pdbs)
    evicted: list[Pod] = []
    pdb_skipped = 0
    for node in sources:
        pods = sorted(problem.r_pods[node], key=lambda p: (_priority(p), -problem.request(p), p.key))
        for pod in pods:
            if any(pool[r] <= 0 for r in resources):
                break
            keys = problem.pdbs_charged(pod)
            if any(pdb_left[k] <= 0 for k in keys):
                pdb_skipped += 1
                continue
            for k in keys:
                pdb_left[k] -= 1
            for r in resources:
                pool[r] -= pod.request(r) if r != "pods" else POD_SLOT
            evicted.append(pod)
        if any(pool[r] <= 0 for r in resources):
            break
    for pod in evicted:
        assert pod.node_name is not None
        cap.remove(pod, pod.node_name)
        r_used[pod.node_name] -= problem.request(pod)
    static = Predicates(snap)
    order = sorted(range(len(evicted)), key=lambda i: (-_priority(evicted[i]), i))
    moves: list[PodMove] = []
    unplaced: set[str] = set()
    home: Counter[str] = Counter()
    for i in order:
        pod = evicted[i]
        best: tuple[float, str] | None = None
        for n in problem.providers:
            if not static.ok(pod, n) or cap.fit_reason(pod, n) is not None:
                continue
            score = -_utilisation(problem, n, r_used[n] + problem.request(pod))
            if best is None or (score, n) < best:
                best = (score, n)
        src = pod.node_name or ""
        if best is None:
            unplaced.add(src)
            continue
        dest = best[1]
        cap.add(pod, dest)
        r_used[dest] += problem.request(pod)
        moves.append(PodMove(pod=pod.key, from_node=src, to_node=dest))
        if dest == src:
            home[src] += 1
    evicted_keys = {p.key for p in evicted}
    received = {m.to_node for m in moves}
    freed = [n for n in sources
             if n not in unplaced and n not in home and n not in received
             and all(p.key in evicted_keys for p in problem.r_pods[n])]
    stats = {"sources": len(sources), "evicted": len(evicted), "unplaced": len(evicted) - len(moves),
             "returned_home": sum(home.values()), "pdb_skipped": pdb_skipped}
    return _result(problem, "descheduler", t0, moves, freed, stats)


# ---- the peers as planners (the registry's ``baselines`` family) -------------------------------------------

class KarpenterBaseline(Planner[RepackProblem, PlanResult]):
    """``karpenter``: ``karpenter_multi_node``."""

    name = "karpenter"

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        return karpenter_multi_node(problem, options)


class KarpenterBalancedBaseline(Planner[RepackProblem, PlanResult]):
    """``karpenter-balanced``: ``karpenter_balanced`` (k = 2, Karpenter's default)."""

    name = "karpenter-balanced"

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        return karpenter_balanced(problem, options)


class ClusterAutoscalerBaseline(Planner[RepackProblem, PlanResult]):
    """``cluster-autoscaler``: ``cluster_autoscaler_scale_down``."""

    name = "cluster-autoscaler"

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        return cluster_autoscaler_scale_down(problem, options)


class DeschedulerBaseline(Planner[RepackProblem, PlanResult]):
    """``descheduler``: ``descheduler_high_node_utilization``."""

    name = "descheduler"

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        return descheduler_high_node_utilization(problem, options)
