"""The ``freeGpus`` goal: leave ``count`` whole GPUs of a model free on one node, for a pending pod asking for that
many, by moving the shares and whole-card pods that hold parts of its devices onto other nodes' devices.

The choices (``choices``): a target node (``RepackProblem.gpu_targets``) and which of its busy devices to clear,
exactly as many as the goal still lacks there (its untouched devices count already). Clearing a device moves
every pod holding a part of it (a whole-card pod on several devices clears them all), so a choice is a set of
pods; moving more pods off the node never helps (the node receives nothing) and never costs less (every
disruption dimension grows with the moved set), so these sets are the only ones worth moving. Each is priced
with Repack's rules (``RepackProblem.disruption``: PodGroups, gangs, restart units, cards, pods) and kept when
its pods may move (``pod_block``) within the budgets and PDBs (``overruns``).

Where the pods go (``place``): the other occupied providers, each pod (largest first) on a receiver that passes the
static predicates, keeps a hard-topology PodGroup inside its HyperNode and fits at device level (the oracle's
``Capacity``): a whole-card pod on the first, by least free whole cards then name, its cards on untouched devices;
a share on the best-fitting device of the receiver whose device it fills most (least milli-GPU left there; ties
in the same order). ``fits_exactly`` asks CP-SAT instead: one variable per (pod, receiver), per (share, receiver,
device) and per (receiver, untouched device) taken by a whole card, with the receivers' totals and each device's
milli-GPU and memory, the oracle's device-level fit written as rows.

- ``greedy`` (and greedy-fast): the options by cost, then name; the first whose pods the greedy placement
  places. HEURISTIC.
- the exact planner (cpsat, auto, milp): the options by cost, then name; the first whose pods can be placed at
  all (``place``, else ``fits_exactly``). Every cheaper option was proven unplaceable, so the plan is optimal
  (OPTIMAL; FEASIBLE when the time ran out first, or a soft-topology PodGroup moves, whose widening depends on
  where its pods land and is not in the order).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations

from ortools.sat.python import cp_model

from optplan.models.devices import MILLI_PER_GPU, WHOLE_GPU
from optplan.models.repack import PodMove, RepackPlan, SolverRecord
from optplan.models.results import Disruption, PlanResult
from optplan.models.snapshot import Pod
from optplan.solvers.core import gpushare
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.oracle import Capacity, Predicates, gpu_ask, pod_demand
from optplan.solvers.core.planner import Planner
from optplan.solvers.repack.rules import RepackProblem

log = logging.getLogger(__name__)

MAX_CHOICES = 4_096
"""Device sets tried per target node at most (8 devices, 4 to clear: 70)."""


@dataclass(frozen=True)
class Option:
    """One way to meet the goal: the pods to move off ``node``, their disruption and its weighted cost."""

    node: str
    pods: tuple[Pod, ...]
    disruption: Disruption
    cost: float


def choices(problem: RepackProblem) -> list[Option]:
    """Every (target node, busy devices to clear) whose pods may move within the budgets, cheapest first
    (ties: node, then the moved pods' keys); a target that already has the GPUs is an option moving nothing."""
    goal = problem.free_gpus
    assert goal is not None
    cap = Capacity(problem.snapshot)
    movable = {p.key for pods in problem.r_pods.values() for p in pods}
    out: dict[tuple[str, frozenset[str]], Option] = {}
    for t in problem.gpu_targets:
        devices = problem.snapshot.nodes[t].devices
        free = cap.gpu_free[t]
        holders: dict[int, list[Pod]] = {}
        for key, (node, held, _milli, _mem) in cap.gpu_held.items():
            if node == t:
                for d in held:
                    holders.setdefault(d, []).append(problem.snapshot.pods[key])
        healthy = [d for d in range(len(devices)) if devices[d].healthy]
        whole = [d for d in healthy if free[d] == MILLI_PER_GPU]
        need = goal.count - len(whole)
        if need <= 0:
            out[t, frozenset()] = Option(t, (), Disruption(0, 0, 0, 0, 0), 0.0)
            continue
        if t in cap.gpu_over:  # its devices hold more than they can: the snapshot's own, not planned around
            continue
        busy = [d for d in healthy if free[d] < MILLI_PER_GPU]
        for k, chosen in enumerate(combinations(busy, need)):
            if k == MAX_CHOICES:
                break
            pods = {p.key: p for d in chosen for p in holders.get(d, ())}
            if (t, frozenset(pods)) in out or any(key not in movable or problem.pod_block(p) is not None
                                                 for key, p in pods.items()):
                continue
            moved = tuple(sorted(pods.values(), key=lambda p: (-problem.request(p), p.key)))
            if problem.overruns(moved):
                continue
            cost = problem.disruption(moved)
            out[t, frozenset(pods)] = Option(t, moved, cost, cost.weighted(problem.weights))
    return sorted(out.values(), key=lambda o: (o.cost, o.node, [p.key for p in o.pods]))


def receivers(problem: RepackProblem, option: Option, cap: Capacity) -> list[str]:
    """The occupied providers but the option's node, least free whole cards first, then by name."""
    return sorted((n for n in problem.occupied if n != option.node),
                  key=lambda n: (cap.free[n].get(WHOLE_GPU, 0), n))


def allowed(problem: RepackProblem, pod: Pod, r: str, predicates: Predicates) -> bool:
    """The static predicates, and a hard-topology PodGroup kept inside the HyperNode that encloses it now."""
    if not predicates.ok(pod, r):
        return False
    gk = pod.group_key
    if gk is not None and gk in problem.hard_topology:
        topo = problem.snapshot.topology
        found = topo.enclosing(set(problem.group_nodes(gk)), problem.hard_topology[gk])
        return bool(found) and r in topo.members[found[0]]
    return True


def place(problem: RepackProblem, option: Option, predicates: Predicates) -> list[PodMove] | None:
    """The greedy placement (module docstring), or None when some pod fits nowhere."""
    cap = Capacity(problem.snapshot)
    for p in option.pods:
        cap.remove(p, option.node)
    order = receivers(problem, option, cap)
    moves = []
    nodes = problem.snapshot.nodes
    for p in option.pods:
        best: tuple[int, int, str, tuple[int, ...] | None] | None = None  # (milli left on its device, rank, ...)
        for i, r in enumerate(order):
            if not allowed(problem, p, r, predicates) or not cap.fits(p, r):
                continue
            if p.key not in problem.share_milli:  # whole cards: the first receiver
                best = (0, i, r, None)
                break
            node = nodes[r]
            if not node.devices:
                continue
            ask = gpu_ask(p, node)
            chosen = gpushare.choose_devices(cap.gpu_free[r], ask, cap.gpu_memory[r], node.devices[0].model,
                                             free_slots=cap.slots_for(r, p), zero=cap.gpu_zero[r])
            if chosen is None:
                continue
            left = cap.gpu_free[r][chosen[0]] - ask.milli if ask.is_share else 0
            key = (left, i, r, tuple(node.devices[d].index for d in chosen))
            if best is None or key < best:
                best = key
            if not ask.is_share:
                break
        if best is None:
            return None
        _, _, r, devices = best
        cap.add(p, r, devices)
        moves.append(PodMove(pod=p.key, from_node=option.node, to_node=r, to_devices=devices))
    return moves


def fits_exactly(problem: RepackProblem, option: Option, predicates: Predicates, options: PlanOptions,
                 limit: float) -> tuple[list[PodMove] | None, bool]:
    """CP-SAT: a placement of the option's pods at device level (module docstring), or None; and whether
    that answer is proven (False when the limit cut the search)."""
    cap = Capacity(problem.snapshot)
    for p in option.pods:
        cap.remove(p, option.node)
    nodes = problem.snapshot.nodes
    m = cp_model.CpModel()
    at: dict[tuple[str, str], cp_model.IntVar] = {}  # at[pod, receiver]: the pod goes there
    on: dict[tuple[str, str, int], cp_model.IntVar] = {}  # on[share, receiver, device position]
    for p in option.pods:
        share = p.key in problem.share_milli
        for r in receivers(problem, option, cap):
            if not allowed(problem, p, r, predicates) or cap.fit_reason(p, r) is not None:
                continue  # alone it does not fit there now: never with others
            x = at[p.key, r] = m.new_bool_var(f"at[{p.key}->{r}]")
            if share:
                ask = gpu_ask(p, nodes[r])
                ds = gpushare.usable(cap.gpu_free[r], ask, cap.gpu_memory[r], cap.slots_for(r, p))
                ys = [on.setdefault((p.key, r, d), m.new_bool_var(f"on[{p.key}->{r}#{d}]")) for d in ds]
                m.add(sum(ys) == x)
        m.add_exactly_one([x for (k, _), x in at.items() if k == p.key])
    for r in sorted({r for _, r in at}):
        here = [(p, at[p.key, r]) for p in option.pods if (p.key, r) in at]
        demands = [(pod_demand(p), x) for p, x in here]
        for res in sorted({res for dem, _ in demands for res in dem}):
            if res == "pods" and not cap.limits_pods(r):
                continue
            m.add(sum(dem[res] * x for dem, x in demands if dem.get(res, 0)) <= max(cap.room(r, res), 0))
        free = cap.gpu_free.get(r)
        if free is None:
            continue
        memory, slots = cap.gpu_memory[r], cap.gpu_slots[r]
        untouched = gpushare.usable(free, gpushare.GpuAsk(whole=1), memory, slots)
        whole = m.new_int_var(0, len(untouched), f"whole[{r}]")
        taken = {d: m.new_bool_var(f"whole_on[{r}#{d}]") for d in untouched}
        m.add(sum(taken.values()) == whole)
        m.add(whole == sum(gpu_ask(p, nodes[r]).whole * x for p, x in here))
        for d in range(len(free)):
            shares = [(on[p.key, r, d], gpu_ask(p, nodes[r])) for p, _ in here if (p.key, r, d) in on]
            if not shares:
                continue
            m.add(sum(a.milli * y for y, a in shares) + (MILLI_PER_GPU * taken[d] if d in taken else 0) <= free[d])
            if memory is not None:
                m.add(sum(a.memory_mib * y for y, a in shares) <= memory[d])
            if slots is not None:  # the register's share count
                m.add(sum(y for y, _ in shares) <= slots[d])
            spread: dict[str, list[cp_model.IntVar]] = defaultdict(list)  # vgpu-podgroup-policy spread
            for p, _ in here:
                if (p.key, r, d) in on and p.gpu_share is not None and p.gpu_share.spread and p.group_key:
                    spread[p.group_key].append(on[p.key, r, d])
            for ys in spread.values():  # one pod of the PodGroup a device
                if len(ys) > 1:
                    m.add(sum(ys) <= 1)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = max(limit, 0.05)
    s.parameters.num_workers = options.workers
    s.parameters.random_seed = options.seed
    st = s.solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, st == cp_model.INFEASIBLE
    moves = []
    for p in option.pods:
        r = next(r for (k, r), x in at.items() if k == p.key and s.value(x))
        devices = None
        if p.key in problem.share_milli:
            d = next(d for (k, rr, d), y in on.items() if k == p.key and rr == r and s.value(y))
            devices = (nodes[r].devices[d].index,)
        moves.append(PodMove(pod=p.key, from_node=option.node, to_node=r, to_devices=devices))
    return moves, True


class FreeGpusPlanner(Planner[RepackProblem, PlanResult]):
    """The ``freeGpus`` goal's planner: greedy, or exact (module docstring)."""

    def __init__(self, name: str, exact: bool) -> None:
        self.name = name
        self.exact = exact

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        t0 = time.perf_counter()
        clock = options.timer()
        deadline = clock.now() + options.time_limit
        predicates = Predicates(problem.snapshot)
        found: tuple[Option, list[PodMove]] | None = None
        proven = True
        tried = 0
        for option in choices(problem):
            if clock.over(deadline):
                proven = False
                break
            tried += 1
            moves = place(problem, option, predicates)
            if moves is None and self.exact:
                moves, sure = fits_exactly(problem, option, predicates, options, clock.left(deadline))
                proven = proven and sure
            if moves is not None:
                found = (option, moves)
                break
        plan = RepackPlan.build(found[1], []) if found is not None else RepackPlan()
        widens = found is not None and any(p.group_key in problem.soft_topology for p in found[0].pods)
        status = "HEURISTIC" if not self.exact else ("OPTIMAL" if proven and not widens else "FEASIBLE")
        wall = round(time.perf_counter() - t0, 3)
        log.info("freeGpus %s: %s after %d option(s) in %.3fs", self.name,
                 f"{len(plan.moves)} pod(s) off {found[0].node}" if found else "no plan", tried, wall)
        record = SolverRecord(name=self.name, status=status, wall_seconds=wall)
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan),
                          rejections={}, stats={"options": tried})

