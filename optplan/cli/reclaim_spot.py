"""``optplan reclaim-spot``: arguments, and the output for people (a table) or programs (json/yaml).

The planning itself is ``optplan.solvers.quota.spot.reclaim_spot``.

The json/yaml document, keys in this order::

    {"needed", "resource", "selected": "greedy"|"optimal",
     "greedy":     {"freed", "cost", "victims": [{"namespace", "name", "units", "price"}], "status", "reason"},
     "optimal":    {... the same ...},
     "wholeNodes": {... the same, plus "freedNodes": [...]}}

Amounts are whole units as integers (``12``), finer ones as quantities (``"1500m"``); ``price`` is the
annotation's value as a number; ``cost`` is price × units × hours run, rounded to 6 decimals; victims are
in the seed's victim order (the order to Delete them in); ``reason`` is null unless ``freed < needed``.
"""

from __future__ import annotations

import argparse
import logging
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

from optplan.adapters.kubefile import LoadedInput
from optplan.adapters.output import dump, table
from optplan.cli import options
from optplan.cli.sources import load
from optplan.errors import InputError
from optplan.models.quantity import format_amount, format_milli, to_milli
from optplan.solvers.quota.spot import ReclaimPlan, SpotReclaim, reclaim_spot

log = logging.getLogger(__name__)

DEFAULT_RESOURCE = "nvidia.com/gpu"


# ---- arguments ------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every argument of ``reclaim-spot`` (snapshots, output and verbosity included)."""
    options.snapshot_source(p)
    p.add_argument("--gpus", required=True, metavar="N",
                   help="units of the resource to free (a quantity: 12, or 1500m for a finer resource)")
    p.add_argument("--resource", default=DEFAULT_RESOURCE, metavar="R",
                   help=f"the resource to free (default {DEFAULT_RESOURCE})")
    options.now(p, "the clock for running times, e.g. 2025-06-01T12:00:00Z (default: the current time; "
                   "fix it for reproducible output)")
    options.output_format(p, ("table", "yaml", "json"), "table")
    options.time_limit(p, 10.0, "time limit of each exact plan (optimal, wholeNodes; default 10)")
    options.workers(p)
    options.seed(p)
    options.verbose(p)


def needed_milli(value: object) -> int:
    """``--gpus`` as milli-units; InputError when missing or not a quantity (the planner refuses negatives)."""
    if value is None:
        raise InputError("required: how many units to free", field="--gpus")
    try:
        return to_milli(value)
    except ValueError as e:
        raise InputError(str(e), field="--gpus") from None


def run(args: argparse.Namespace, loaded: LoadedInput | None = None) -> str:
    """Plan with ``optplan.solvers.quota.spot.reclaim_spot`` and render as ``args.output`` asks; ``loaded``:
    the snapshot already read (default: read as ``args`` says)."""
    loaded = load(args) if loaded is None else loaded
    workers = getattr(args, "workers", 1)  # 1..64: checked by the flag's type
    rep = reclaim_spot(loaded.snapshot, needed_milli(getattr(args, "gpus", None)),
                      getattr(args, "resource", DEFAULT_RESOURCE), getattr(args, "now", None),
                      time_limit=getattr(args, "time_limit", 10.0), workers=workers, seed=getattr(args, "seed", 0))
    for w in rep.warnings:
        log.warning("%s", w)
    fmt = getattr(args, "output", "table")
    if fmt == "table":
        return reclaim_table(rep)
    return dump(reclaim_dict(rep), fmt)


# ---- json / yaml ----------------------------------------------------------------------------------

def _amount(milli: int) -> int | str:
    return format_milli(milli)


def _number(x: Fraction) -> float:
    return round(float(x), 6)


def plan_dict(plan: ReclaimPlan, *, nodes: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "freed": _amount(plan.freed), "cost": _number(plan.cost),
        "victims": [{"namespace": v.namespace, "name": v.name, "units": _amount(v.units), "price": _number(v.price)}
                    for v in plan.victims]}
    if nodes:
        out["freedNodes"] = list(plan.freed_nodes)
    out["status"] = plan.status
    out["reason"] = plan.reason
    return out


def reclaim_dict(rep: SpotReclaim) -> dict[str, Any]:
    return {"needed": _amount(rep.needed), "resource": rep.resource, "selected": rep.selected,
            "greedy": plan_dict(rep.greedy), "optimal": plan_dict(rep.optimal),
            "wholeNodes": plan_dict(rep.whole_nodes, nodes=True)}


# ---- the table ------------------------------------------------------------------------------------

def _dec(x: Fraction) -> str:
    """A cost for people: at most 6 decimals, no trailing zeros."""
    d = (Decimal(x.numerator) / Decimal(x.denominator)).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
    text = format(d, "f").rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def _duration(seconds: int) -> str:
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d:
        return f"{d}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m{s:02d}s" if s else f"{m}m"
    return f"{s}s"


def _compare(name: str, plan: ReclaimPlan, base_name: str, base: ReclaimPlan, r: str) -> str:
    diff = plan.cost - base.cost
    if diff == 0:
        cost = f"costs the same as {base_name} ({_dec(plan.cost)})"
    else:
        pct = f" ({'+' if diff > 0 else '-'}{_dec(abs(diff) * 100 / base.cost)}%)" if base.cost else ""
        cost = f"costs {_dec(abs(diff))} {'more' if diff > 0 else 'less'} than {base_name}{pct}"
    freed = f"frees {format_amount(r, plan.freed)} {r} ({base_name} {format_amount(r, base.freed)})"
    if plan.freed_nodes:
        freed += f" on {len(plan.freed_nodes)} whole node{'s' if len(plan.freed_nodes) != 1 else ''}"
    return f"{name} {cost} and {freed}"


def reclaim_table(rep: SpotReclaim) -> str:
    r = rep.resource
    plans = [("greedy", rep.greedy), ("optimal", rep.optimal), ("wholeNodes", rep.whole_nodes)]
    text = (f"Spot reclaim: {format_amount(r, rep.needed)} {r} needed, running times at {rep.now.isoformat()}\n"
            f"{len(rep.jobs)} spot job{'s' if len(rep.jobs) != 1 else ''} hold {format_amount(r, rep.spot_units)} {r}; "
            f"cost = price x units x hours run (the work lost)\n\n")
    rows = [["PLAN", "STATUS", "FREED", "COST", "VICTIMS"]]
    for name, p in plans:
        label = name + (" *" if name == rep.selected else "")
        rows.append([label, p.status, str(format_amount(r, p.freed)), _dec(p.cost),
                     ", ".join(v.key for v in p.victims) or "-"])
    text += table(rows)
    text += f"* selected ({'the exact plan' if rep.selected == 'optimal' else 'no exact plan was found'})\n"
    if rep.whole_nodes.freed_nodes:
        w = rep.whole_nodes
        text += (f"wholeNodes empties: {', '.join(w.freed_nodes)} (allocatable {format_amount(r, w.freed)} {r}; "
                 f"its victims hold {format_amount(r, w.released)})\n")
    for name, p in plans:
        if p.reason:
            text += f"{name}: {p.reason}\n"
    text += "\nDifference:\n"
    if rep.optimal.victims or rep.optimal.status in ("OPTIMAL", "FEASIBLE"):
        text += "  " + _compare("optimal", rep.optimal, "greedy", rep.greedy, r) + "\n"
    if rep.whole_nodes.victims or rep.whole_nodes.status in ("OPTIMAL", "FEASIBLE"):
        text += "  " + _compare("wholeNodes", rep.whole_nodes, "optimal", rep.optimal, r) + "\n"
    if not rep.jobs:
        return text + f"\nNo spot job holds {r}.\n"
    chosen = {name: {v.key for v in p.victims} for name, p in plans}
    jrows = [["NAMESPACE", "JOB", "PRICE", "UNITS", "NODES", "RUNNING", "COST", "GREEDY", "OPTIMAL", "WHOLENODES"]]
    for j in rep.jobs:
        marks = ["x" if j.key in chosen[name] else "" for name, _ in plans]
        jrows.append([j.namespace, j.name, _dec(j.price), str(format_amount(r, j.units)), str(len(j.nodes)),
                      _duration(j.runtime_seconds), _dec(j.cost), *marks])
    text += ("\nSpot jobs in victim order (price, single-node first, fewer units, shorter running time):\n"
             + table(jrows))
    return text
