"""auto: Repack's ``core.planner.Auto``: greedy-fast first, then the exact part (``RepackExact``) hinted with
its plan; the better plan wins, and on a tie the exact part's (which keeps the greedy's on its own ties).

greedy-fast runs to its end whatever the limit: auto never returns a plan below it (``AutoPlanner.keep_greedy``
then keeps the exact part's freed-node bound only), and a run that greedy-fast alone makes late says so in its
record (``plan_repack``). The exact part: (up to FAST_GREEDY_ABOVE candidates, and when its expected time fits in
half the limit) the seed's greedy as well; the better of the two is the hint. How starved the process is
(``PlanOptions.starved``: greedy-fast's wall over CPU seconds, measured by ``Auto``) scales the wall-clock setup
estimates of what follows.

"Better" is ``exact.better``, the exact model's lexicographic order on integers: more freed nodes,
then lower scaled disruption; a tie keeps the incumbent (the seed's greedy over greedy-fast, the
greedy's plan over CP-SAT's).
When CP-SAT finds nothing within the time left, or refuses its model although the greedy plan is a
valid hint (a bug, logged at error level: ``exact.model_bug``), the greedy plan is returned as FALLBACK.
Above MAX_ARCS (pod class, receiver) pairs (those the predicates admit, ``receiver_cap``) the model
is too large to solve whole; above SHAPES_FIRST_ABOVE candidates the parts by shape are tried first even when
it is not. When every independent part (node pool) has a model by pod shape
(``pools``: the exact model with pods counted by shape, every admitted receiver kept; not with a topology
PodGroup), auto solves the parts so, each from greedy-fast's plan there, with the whole limit but
POOLS_RESERVE, and the large-neighbourhood search (``lns``) lowers the cost in what they leave. When
the shape models prove every part optimal (both phases), the plan is the exact model's optimum: OPTIMAL,
and the LNS is skipped; else FEASIBLE, with the parts' bounds summed (each the exact model's: no
receiver is pruned there) when below the global freed bound. Otherwise auto takes greedy-fast's plan, the parts
that have a model by shape within POOLS_SHARE of the time left (hinted with the greedy plan), and the
LNS around the better plan on a model whose pod classes keep their best receivers (the greedy's always);
the record then says FEASIBLE, with the global freed bound (the budget relaxation's under maxPerRun or
PDBs). When GPU shares move (``RepackProblem.shares_move``), the exact part is CP-SAT's model at device level
alone (``cpsat.add_devices``; the models by shape, the LNS and the seed's greedy are skipped), hinted with
greedy-fast's plan, its receivers pruned above MAX_ARCS as ``cpsat`` prunes them. On the wall clock, when the
time left would not cover building that model (``LNS_SETUP_FACTOR``), the greedy plan is returned as FALLBACK,
so the run's limit holds as a deadline at any size.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import replace

from optplan.models.repack import RepackPlan, SolverRecord
from optplan.solvers.core.clock import EVALS_PER_SECOND
from optplan.solvers.core.exact import better, exact_record, gap_percent
from optplan.solvers.core.exact import rank as exact_rank
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.core.planner import AUTO, Auto, Planner
from optplan.solvers.repack.base import PlanResult
from optplan.solvers.repack.exact import cpsat, lns, pools
from optplan.solvers.repack.exact.model import (
    ModelData,
    build_data,
    data_stats,
    exact_score,
    plan_receivers,
    plan_score,
    receiver_cap,
    scaled_cost,
    stuck,
)
from optplan.solvers.repack.greedy import FastGreedyPlanner, GreedyPlanner
from optplan.solvers.repack.rules import RepackProblem, explain

log = logging.getLogger(__name__)

FAST_GREEDY_ABOVE = 1_500
"""Above this many vacate candidates, auto starts from greedy-fast instead of the exact greedy."""
LNS_SETUP_FACTOR = 3.0
"""On the wall clock, the LNS runs only when the time left is at least this many times what greedy-fast
took to build its tables: building and tightening the LNS model takes about twice that (measured at
10,000 nodes), and the search needs the rest."""
POOLS_RESERVE = 0.05
"""Share of the limit the shape models leave for validating their merged plan and reading it back
(10,000 nodes: about 1.5 s)."""
POOLS_SETUP_SECONDS_PER_CANDIDATE = 3e-4
"""Building the shape models, per vacate candidate (the large model's data and the models by shape:
2.0 s at 10,000 nodes, 7,322 candidates, on the reference machine)."""
POOLS_SETUP_FACTOR = 5.0
"""On the wall clock the shape models are built only when the time left is at least this many times
their expected building time: they need longer than that again to reach a plan (10,000 nodes, limit
8 s: none in time, and the greedy path then ran late; 15 s: a plan within the limit)."""
POOLS_CHECK_SECONDS_PER_CANDIDATE = 2e-4
"""At least this much of the limit per candidate is left for validating the merged plan (1.5 s at
10,000 nodes)."""
SHAPES_FIRST_ABOVE = 200
"""Above this many vacate candidates, auto solves the parts by shape (``pools``) even when the whole model
fits: the same optimum, proven far sooner (generated 500 nodes of 4 and 8 cards in four pools: the whole
model 185 of 188 freed unproven in 10 s; by shape, see docs/benchmarks.md)."""
POOLS_SHARE = 0.6
"""With a topology PodGroup, of the time left once the large model is built, what the shape models of the
parts without one (``pools``) may use; the LNS has the rest (and what they leave). Without, the shape
models may use all of it (they solve every part; the LNS only lowers the cost)."""


def rank(problem: RepackProblem, result: PlanResult) -> tuple[int, int]:
    """auto's key: the exact models' order (``exact.rank``) of a Repack plan."""
    return exact_rank(exact_score(problem, result.plan, result.disruption))


class AutoPlanner(Auto[RepackProblem, PlanResult]):
    """greedy-fast to its end, then the exact part (``RepackExact``) hinted with it; the better plan wins."""

    def __init__(self) -> None:
        fast = FastGreedyPlanner()
        super().__init__(fast, RepackExact(fast), rank)

    def keep_greedy(self, problem: RepackProblem, greedy: PlanResult, exact: PlanResult, *, tie: bool) -> PlanResult:
        """greedy-fast's plan, better than the exact part's: the freed-node bound the exact part proved (bounds hold
        whichever plan is kept), FEASIBLE unless it meets that bound; no cost bound (it was proven for the other
        plan)."""
        bound = exact.record.freed_nodes_bound
        freed = len(greedy.plan.freed_nodes)
        status = "FEASIBLE" if bound is None or freed < bound else exact.record.status
        if status == "OPTIMAL":  # the bound is met in freed nodes, but the cost was proven for the other plan
            status = "FEASIBLE"
        record = exact_record(AUTO, status, freed=freed, freed_bound=bound, objective=None, bound=None,
                              wall=exact.record.wall_seconds or 0.0)
        return replace(greedy, record=record, stats=exact.stats)


class RepackExact(Planner[RepackProblem, PlanResult]):
    """auto's exact part, from greedy-fast's plan (the hint): the seed's greedy when it fits, then CP-SAT, or
    the parts by shape (``pools``) and the LNS (see the module)."""

    name = AUTO

    def __init__(self, fast: FastGreedyPlanner) -> None:
        self.fast = fast
        """greedy-fast, whose table-building time (``setup_seconds``) sizes the LNS model's."""

    def plan(self, problem: RepackProblem, options: PlanOptions, hint: PlanResult | None = None) -> PlanResult:
        t0 = time.perf_counter()
        clock = options.timer()
        # the shares below (half for the seed's greedy, the reserve) are of auto's whole limit, from its start
        start = clock.now() - options.spent
        options = replace(options, clock=clock, time_limit=options.time_limit + options.spent, spent=0.0)
        greedy = hint if hint is not None else self.fast.plan(problem, replace(options, time_limit=math.inf))
        return self._plan(problem, options, greedy, self.fast, t0, start, options.starved)

    def _plan(self, problem: RepackProblem, options: PlanOptions, greedy: PlanResult, fast: FastGreedyPlanner,
              t0: float, start: float, starved: float = 1.0) -> PlanResult:
        clock = options.timer()
        small = len(problem.candidates) <= FAST_GREEDY_ABOVE
        cap = receiver_cap(problem)
        setup = POOLS_SETUP_SECONDS_PER_CANDIDATE * len(problem.candidates) * starved
        shapes_first = cap is not None or len(problem.candidates) > SHAPES_FIRST_ABOVE
        if problem.shares_move:  # shares move: the models by shape and the LNS do not model GPU devices
            return self._devices(problem, options, greedy, cap, t0, start)
        if shapes_first and not problem.topology_groups and (
            clock.deterministic or options.time_limit - (clock.now() - start) >= POOLS_SETUP_FACTOR * setup
        ):
            # Too large to solve whole, and no topology PodGroup: the shape models solve every part,
            # each from greedy-fast's plan there (on the wall clock only when the limit leaves time to
            # build them: else the greedy path, which keeps to a short limit).
            by_pool = self._by_pool(problem, options, cap, t0, start, greedy.plan, starved)
            if by_pool is not None:
                return by_pool
        left = options.time_limit / 2 - (clock.now() - start)
        # The seed's greedy evaluates about every candidate left in each of its rounds, a round per
        # freed node: when that would not fit in the time left, the time goes to CP-SAT instead.
        expected = len(greedy.plan.freed_nodes) * len(problem.candidates) / 2 / EVALS_PER_SECOND
        if small and expected > left:
            log.info("auto: the seed's greedy skipped (about %.1fs expected, %.1fs left)", expected, left)
        elif small:
            seed_greedy = GreedyPlanner().plan(problem, replace(options, time_limit=max(left, 0.1)))
            if not better(exact_score(problem, greedy.plan, greedy.disruption),
                          exact_score(problem, seed_greedy.plan, seed_greedy.disruption)):
                greedy = seed_greedy
        left = options.time_limit - (clock.now() - start)
        if cap is not None and not clock.deterministic and left < LNS_SETUP_FACTOR * fast.setup_seconds:
            # On the wall clock the limit is a deadline: building the LNS model would overrun it.
            log.info("auto: LNS skipped (its model takes about %.1fs to build, %.1fs left); the greedy plan stands",
                     LNS_SETUP_FACTOR * fast.setup_seconds, left)
            record = SolverRecord(name=self.name, status="FALLBACK", freed_nodes_bound=problem.freed_upper,
                                  wall_seconds=round(time.perf_counter() - t0, 3))
            return replace(greedy, record=record)
        if cap is not None:  # too large to solve whole
            data = build_data(problem, freed_upper=problem.freed_upper, max_receivers=cap,
                              keep=plan_receivers(problem, greedy.plan))
            return self._lns(problem, data, greedy, options, t0, start)
        out = cpsat.solve(problem, replace(options, time_limit=max(left, 0.5)), hint=greedy.plan)
        return self._better_of(problem, greedy, out, round(time.perf_counter() - t0, 3))

    def _devices(self, problem: RepackProblem, options: PlanOptions, greedy: PlanResult, cap: int | None,
                 t0: float, start: float) -> PlanResult:
        """When GPU shares move: CP-SAT's model at device level (``cpsat.add_devices``) hinted with the
        greedy's plan, in the time left, its receivers pruned as every exact planner prunes them
        (``receiver_cap``; the greedy's kept); the better plan wins, and without a CP-SAT plan the greedy's
        is returned as FALLBACK."""
        left = options.time_limit - (options.timer().now() - start)
        out = cpsat.solve(problem, replace(options, time_limit=max(left, 0.5)), hint=greedy.plan, max_receivers=cap)
        return self._better_of(problem, greedy, out, round(time.perf_counter() - t0, 3))

    def _better_of(self, problem: RepackProblem, greedy: PlanResult, out: cpsat.ExactOutcome,
                   wall: float) -> PlanResult:
        """CP-SAT's plan when it is better than the greedy's, else the greedy's with CP-SAT's record (FALLBACK
        without a CP-SAT plan)."""
        if out.plan is None:
            record = SolverRecord(name=self.name, status="FALLBACK", freed_nodes_bound=out.freed_bound,
                                  wall_seconds=wall)
            return replace(greedy, record=record, stats=cpsat.model_stats(out))
        g, e = plan_score(out.data, greedy.plan), plan_score(out.data, out.plan)
        log.info("auto: greedy freed %d cost %d; cpsat freed %d cost %d (%s)", g.freed, g.cost, e.freed, e.cost,
                 out.status)
        if better(e, g):
            # the gap is CP-SAT's own (its objective may price slack above the plan's cost when cut short)
            record = SolverRecord(name=self.name, status=out.status, freed_nodes_bound=out.freed_bound,
                                  objective=e.cost, best_bound=out.bound, wall_seconds=wall,
                                  gap_percent=gap_percent(out.objective, out.bound, e.freed, out.freed_bound))
            return PlanResult(plan=out.plan, record=record, disruption=problem.plan_disruption(out.plan),
                              rejections=explain(problem, out.plan, stuck(out.data)),
                              stats=cpsat.model_stats(out))
        # The greedy plan is as good (ties keep the greedy's seed-ordered receivers): when CP-SAT
        # proved its own equal plan optimal, the greedy plan is optimal too.
        status = out.status if e == g else "FEASIBLE"
        record = exact_record(self.name, status, freed=g.freed, freed_bound=out.freed_bound, objective=g.cost,
                              bound=out.bound, wall=wall)
        return replace(greedy, record=record, stats=cpsat.model_stats(out))

    def _by_pool(self, problem: RepackProblem, options: PlanOptions, cap: int | None, t0: float,
                 start: float, hint: RepackPlan, starved: float = 1.0) -> PlanResult | None:
        """Too large a model to solve whole, and no topology PodGroup: every part by shape (``pools``,
        each part from its own greedy's plan), then the LNS; None when some part has no model by shape
        or the merged plan broke a rule (the greedy path then runs)."""
        deadline = start + options.time_limit * (1 - cpsat.RESERVE)
        data = build_data(problem, freed_upper=problem.freed_upper, max_receivers=cap)
        prepared = pools.prepare(data)
        if any(sm is None for _, sm in prepared):
            return None
        cpsat.tighten(data, options, None)
        # the LNS has what they leave; the merged plan's validation, after them, what they may not use
        reserve = max(POOLS_RESERVE * options.time_limit,
                      POOLS_CHECK_SECONDS_PER_CANDIDATE * len(problem.candidates) * starved)
        pooled = pools.solve(data, hint, options, deadline - reserve, prepared)
        if pooled is None:
            return None
        return self._finish(problem, data, pooled.plan, pooled, options, t0, deadline)

    def _lns(self, problem: RepackProblem, data: ModelData, greedy: PlanResult, options: PlanOptions,
             t0: float, start: float) -> PlanResult:
        """Too large a model to solve whole: the parts solvable by shape (``pools``) so, then LNS around
        the better plan (``lns``)."""
        clock = options.timer()
        deadline = start + options.time_limit * (1 - cpsat.RESERVE)
        cpsat.tighten(data, options, greedy.plan)
        now = clock.now()
        pooled = pools.solve(data, greedy.plan, options, now + (deadline - now) * POOLS_SHARE)
        out = self._finish(problem, data, pooled.plan if pooled is not None else greedy.plan, pooled, options, t0,
                           deadline)
        if out.plan == greedy.plan:
            return replace(greedy, record=out.record, stats=out.stats)
        return out

    def _finish(self, problem: RepackProblem, data: ModelData, first: RepackPlan, pooled: pools.PoolsOutcome | None,
                options: PlanOptions, t0: float, deadline: float) -> PlanResult:
        """LNS from ``first`` until ``deadline`` unless the shape models proved it optimal; the record."""
        freed_bound = data.freed_upper
        if pooled is not None and pooled.all_solved:
            freed_bound = min(freed_bound, max(pooled.freed_bound, len(first.freed_nodes)))
        if (pooled is not None and pooled.optimal) or options.timer().left(deadline) <= lns.MIN_LEFT:
            plan, st = first, lns.LnsStats()  # proven, or no time for a step (its setup alone takes a second)
        else:
            plan, st = lns.improve(data, first, options, deadline)
        wall = round(time.perf_counter() - t0, 3)
        cost = scaled_cost(data, plan)
        freed = len(plan.freed_nodes)
        optimal = (pooled is not None and pooled.optimal) or freed == freed_bound == 0
        record = exact_record(self.name, "OPTIMAL" if optimal else "FEASIBLE", freed=freed, freed_bound=freed_bound,
                              objective=cost, bound=cost if optimal else None, wall=wall)
        stats = {**data_stats(data), "lnsSteps": st.steps, "lnsImproved": st.improved,
                 "lnsVariables": st.variables, "lnsConstraints": st.constraints,
                 "poolParts": len(pooled.parts) if pooled is not None else 0,
                 "poolPartsProven": sum(q.proven for q in pooled.parts) if pooled is not None else 0}
        log.info("auto: from %d freed, LNS %d in %d steps (%d improved)", len(first.freed_nodes), freed, st.steps,
                 st.improved)
        return PlanResult(plan=plan, record=record, disruption=problem.plan_disruption(plan),
                          rejections=explain(problem, plan, stuck(data)), stats=stats)

