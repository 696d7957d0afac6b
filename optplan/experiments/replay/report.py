"""One ``optplan replay`` as files: ``report.md`` (Markdown), ``results.json`` (raw) and PNG plots
(``plots``). Everything here is a function of the results, so the same trace and config give the same
bytes; planning wall seconds appear only when asked for (``timings``)."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from optplan.experiments.replay.config import STATIC
from optplan.experiments.replay.engine import ESTIMATOR, ReplayResult
from optplan.experiments.replay.oracle import ORACLE, shares
from optplan.experiments.replay.trace import bucket_labels


def _num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def minutes(v: float | None) -> str:
    return "-" if v is None else f"{v / 60:.1f}"


def document(results: Sequence[ReplayResult], trace_stats: Mapping[str, Any], timings: bool) -> dict[str, Any]:
    """The raw JSON: the trace's stats and every replay's metrics (timings only when asked for)."""
    runs = []
    for r in results:
        d = r.to_dict()
        if timings:
            d["timings"] = r.timings
        runs.append(d)
    return {"trace": dict(trace_stats), "replays": runs}


def to_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


def ceiling_section(results: Sequence[ReplayResult], base: ReplayResult, ceiling: ReplayResult) -> str:
    """Each policy's share of the oracle's gain over ``none`` (``oracle.shares``), with the restart cost."""
    out = io.StringIO()
    out.write("\n## Share of the oracle's gain\n\n"
              "What each policy captures of what free, instant repacking at every event gives over `none` (the "
              "`oracle`, a ceiling estimate: see docs/replay.md); `nobinpack` shows what binpack alone is worth. "
              "100% = the oracle's gain; above 100% = the policy beat the estimate on that metric.\n\n")
    out.write("| policy | useful GPU % | 8-card wait mean | 8-card wait p95 | 8-card completion mean | "
              "8-card wait mean (min) | 8-card completion mean (min) | GPU-hours lost to restarts % |\n"
              "|---|---|---|---|---|---|---|---|\n")
    b = base.summary()
    c = ceiling.summary()
    for r in results:
        sm = r.summary()
        sh = shares(sm, b, c)
        out.write(f"| {r.label} | {_pct(sh['usefulPercent'])} | {_pct(sh['waitMeanMinutes8'])} | "
                  f"{_pct(sh['waitP95Minutes8'])} | {_pct(sh['completionMeanMinutes8'])} | "
                  f"{_num(sm.get('waitMeanMinutes8'))} | {_num(sm.get('completionMeanMinutes8'))} | "
                  f"{sm['restartGpuHoursPercent']:.3f} |\n")
    return out.getvalue()


def _mean_change(f: Mapping[str, Any], b: Mapping[str, Any] | None, table: str) -> tuple[str, str]:
    """A queue type's restricted mean over all its gangs (``waitSeconds`` or ``completionSeconds``) in
    minutes, and its change from ``none``'s same type ("-" without ``none`` or where a mean is missing)."""
    v = f[table].get("all", {}).get("restrictedMean")
    w = None if b is None else b.get(table, {}).get("all", {}).get("restrictedMean")
    return minutes(v), "-" if v is None or w is None else f"{(v - w) / 60:+.1f}"


def queues_section(results: Sequence[ReplayResult], base: ReplayResult | None) -> str:
    """``--queues``: each policy per queue type (team, payg, spot): useful and held GPU %, waits and
    completions per gang size, evictions by cause, and the policy's effect on the type — the change from
    ``none`` of its useful GPU % and of its gangs' mean wait and mean completion (Kaplan–Meier restricted
    means over all its gangs)."""
    out = io.StringIO()
    q = results[0].queues or {}
    out.write(f"\n## Queues ({q.get('name', '')})\n\n")
    counts = "; ".join(f"{t} " + ", ".join(f"{c} {n}" for c, n in v.items())
                       for t, v in q.get("gangsByType", {}).items() if v)
    out.write(f"Gangs per queue type and PriorityClass: {counts}. Percent of the cluster's GPU time; waits and "
              f"completions in minutes ({ESTIMATOR} p50 / p95, \"-\": censoring hides it); evictions: pods "
              "placement's preempt and reclaim evicted, and pods Repack restarted.\n\n")
    out.write("Effect of a policy on a queue type: its change from `none` (vs none) in useful GPU % (points) and in "
              "the type's mean wait and mean completion over all its gangs (minutes; restricted means, negative = "
              "sooner).\n\n")
    out.write("| queue type | policy | gangs | useful GPU % | vs none (points) | held % | restore + lost % | "
              "wait mean (min) | vs none | completion mean (min) | vs none | "
              "wait p50 / p95 by gang cards | completion p50 / p95 all | censored waits | preempt | reclaim | "
              "repack |\n|" + "---|" * 17 + "\n")
    for t in ("team", "payg", "spot"):
        for r in results:
            f = (r.queues or {}).get("byType", {}).get(t)
            if f is None or not f["gangs"]:
                continue
            b = None if base is None or base.queues is None else base.queues["byType"][t]
            gain = "-" if b is None else f"{f['usefulPercent'] - b['usefulPercent']:+.2f}"
            cap = r.gpus * r.horizon
            wasted = 100 * (f["gpuSeconds"]["restore"] + f["gpuSeconds"]["lost"]) / cap if cap > 0 else 0.0
            w = f["waitSeconds"]
            waits = ", ".join(f"{k}: {minutes(w[k]['p50'])} / {minutes(w[k]['p95'])}"
                              for k in bucket_labels() if k in w)
            c = f["completionSeconds"]["all"]
            ev = f["evictions"]
            wait, dwait = _mean_change(f, b, "waitSeconds")
            done, ddone = _mean_change(f, b, "completionSeconds")
            out.write(f"| {t} | {r.label} | {f['gangs']} | {f['usefulPercent']:.2f} | {gain} | "
                      f"{f['heldPercent']:.2f} | {wasted:.2f} | {wait} | {dwait} | {done} | {ddone} | {waits} | "
                      f"{minutes(c['p50'])} / {minutes(c['p95'])} | "
                      f"{w['all']['censored']} | {ev['preempt']} | {ev['reclaim']} | {ev['repack']} |\n")
    return out.getvalue()


def markdown(results: Sequence[ReplayResult], trace_stats: Mapping[str, Any], timings: bool,
             plots: Sequence[str] = (), plot_note: str | None = None) -> str:
    out = io.StringIO()
    first = results[0]
    out.write(f"# Replay of {first.trace}\n\n")
    out.write(f"{first.nodes} nodes, {first.gpus} GPUs; {first.gangs} gangs ({first.pods} pods).\n\n")
    if trace_stats:
        out.write("Trace: " + ", ".join(f"{k} {v}" for k, v in sorted(trace_stats.items())) + ".\n\n")
    out.write("Measured window: from the first arrival (plus the warm-up) to the stated horizon, else to the last "
              "event; GPU time in it is useful (pods doing work they keep), restore (restarted pods holding "
              "cards before they work again), lost (work a restart threw away) or idle. Waiting time: created "
              "→ minMember placed; completion: created → the gang's last pod leaves. Gangs still waiting (or "
              f"running) at the window's end are censored; percentiles are {ESTIMATOR} estimates (\"-\": "
              "censoring hides them), the restricted mean is the mean truncated at the largest time seen.\n\n")
    base = next((r for r in results if r.config["policy"] == "none"), None)
    out.write("## Policies\n\n")
    out.write("| policy | window (hours) | offered load % | useful GPU % | vs none (points) | restore % | lost % | "
              "idle % | censored gangs | wait p95 all (min) | wait p95 8-card (min) | cards disrupted / day | "
              "pods moved / day | Repack runs | skipped | freed nodes | rule breaks (plans refused) |\n")
    out.write("|" + "---|" * 17 + "\n")
    for r in results:
        gain = "-" if base is None else f"{r.percent('useful') - base.percent('useful'):+.2f}"
        rp = r.repack
        skipped = rp["skippedUnchanged"] + rp["skippedPacked"]
        out.write(f"| {r.label} | {r.start / 3600:.2f}–{r.end / 3600:.2f} | {100 * r.offered_load:.1f} | "
                  f"{r.percent('useful'):.2f} | {gain} | {r.percent('restore'):.2f} | {r.percent('lost'):.2f} | "
                  f"{r.percent('idle'):.2f} | {r.waits['all']['censored']} | {minutes(r.waits['all']['p95'])} | "
                  f"{minutes(r.waits.get('8', {}).get('p95'))} | {r.per_day(r.cards_disrupted):.1f} | "
                  f"{r.per_day(r.pods_moved):.1f} | {rp['runs']} | {skipped} | {rp['freedNodes']} | "
                  f"{rp['ruleBreaks']} ({rp.get('refusedPlans', 0)}) |\n")
    ceiling = next((r for r in results if r.config["policy"] == ORACLE), None)
    if base is not None and ceiling is not None:
        out.write(ceiling_section(results, base, ceiling))
    for title, attr in (("Waiting time", "waits"), ("Completion time", "completions")):
        out.write(f"\n## {title} by gang size (minutes; {ESTIMATOR})\n\n")
        out.write("| policy | gang cards | gangs | censored | p50 | p95 | p99 | restricted mean (up to) |\n"
                  "|---|---|---|---|---|---|---|---|\n")
        for r in results:
            table = getattr(r, attr)
            for b in (*bucket_labels(), "all"):
                w = table.get(b)
                if w is None:
                    continue
                out.write(f"| {r.label} | {b} | {w['gangs']} | {w['censored']} | {minutes(w['p50'])} | "
                          f"{minutes(w['p95'])} | {minutes(w['p99'])} | {minutes(w['restrictedMean'])} "
                          f"({minutes(w['restrictedTo'])}) |\n")
    if first.queues is not None:
        out.write(queues_section(results, base))
    out.write("\n## Repack runs\n\n")
    for r in results:
        if r.config["policy"] in STATIC:
            continue
        rp = r.repack
        statuses = ", ".join(f"{k.removeprefix('status:')} {v}" for k, v in rp.items() if k.startswith("status:"))
        out.write(f"- {r.label}: {rp['runs']} planned ({rp['runsWithMoves']} with moves; {statuses or 'none'}), "
                  f"skipped {rp['skippedUnchanged']} (nothing changed since a run without moves) and "
                  f"{rp['skippedPacked']} (GPUs in use already packed)")
        if r.config["policy"] == "pending":
            out.write(f", {rp['pendingChecks']} pending checks, {rp['skippedCooldown']} in cooldown")
        if timings:
            out.write(f"; planning {r.timings.get('planSeconds', 0):.1f} s")
        out.write("\n")
    if plots:
        out.write("\n## Plots\n\n" + "".join(f"![{p}]({p})\n" for p in plots))
    elif plot_note:
        out.write(f"\n{plot_note}\n")
    return out.getvalue()
