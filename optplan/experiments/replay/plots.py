"""PNG plots of replays (matplotlib, imported only here and only when plots are asked for): allocation
over time per policy, waiting-time CDFs (Kaplan–Meier: all gangs and gangs of 5–8 cards), and disruption
against the useful allocation gained over ``none``; and a sweep's frontier per trace (``frontier``: benefit
against disruption, from ``sweep.frontier_panels``). Bytes are reproducible: no Software metadata, fixed
sizes and order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from optplan.adapters.output import png
from optplan.experiments.replay.engine import ReplayResult
from optplan.experiments.replay.survival import kaplan_meier
from optplan.experiments.replay.trace import gang_bucket

NO_MATPLOTLIB = "Plots skipped: matplotlib is not installed (`pip install matplotlib`)."


def plots(results: Sequence[ReplayResult]) -> dict[str, bytes] | str:
    """File name -> PNG bytes, or why there are none."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return NO_MATPLOTLIB
    plt.rcParams["svg.hashsalt"] = "optplan"
    out: dict[str, bytes] = {}

    def save(fig: object, name: str) -> None:
        out[name] = png(fig, dpi=100)
        plt.close(fig)  # type: ignore[arg-type]

    fig, ax = plt.subplots(figsize=(8, 4))
    for r in results:
        ax.plot([s[0] / 86400 for s in r.series], [s[1] for s in r.series], label=r.label, linewidth=1)
    ax.set_xlabel("days")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_title("GPU allocation over time")
    ax.legend(fontsize=7)
    save(fig, "allocation.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (title, keep) in zip(axes, (("all gangs", None), ("gangs of 5-8 cards", "8")), strict=True):
        drawn = False
        for r in results:
            km = kaplan_meier((w, not c) for cards, w, c in r.gang_waits if keep is None or gang_bucket(cards) == keep)
            if km.times:  # the Kaplan-Meier estimate: censored gangs are not taken as done
                ax.step([t / 60 for t in km.times], [1 - s for s in km.surv], where="post", label=r.label,
                        linewidth=1)
                drawn = True
        ax.set_xscale("symlog")
        ax.set_xlabel("waiting time (minutes)")
        ax.set_ylabel("share of gangs started (Kaplan-Meier)")
        ax.set_title(f"Waiting time CDF, {title}")
        if drawn:
            ax.legend(fontsize=7)
    save(fig, "waiting_cdf.png")

    base = next((r for r in results if r.config["policy"] == "none"), None)
    if base is not None and len(results) > 1:
        fig, ax = plt.subplots(figsize=(6, 4))
        for r in results:
            if r is base:
                continue
            gain = r.percent("useful") - base.percent("useful")
            ax.scatter([r.per_day(r.cards_disrupted)], [gain], s=20)
            ax.annotate(r.label, (r.per_day(r.cards_disrupted), gain),
                        fontsize=7)
        ax.axhline(0, color="grey", linewidth=0.5)
        ax.set_xlabel("cards disrupted per day")
        ax.set_ylabel("useful allocation gain over none (points)")
        ax.set_title("Disruption against gain")
        save(fig, "disruption_vs_gain.png")
    return out


AXIS_LABELS = {"completionMeanMinutes8": "8-card gangs' mean completion time (min, KM restricted mean)",
               "usefulPercent": "useful GPU allocation (%)", "cardsDisruptedPerDay": "cards restarted per day",
               "restartGpuHoursPercent": "GPU-hours lost to restarts (%)"}
_MARKERS = {"none": "s", "interval": "o", "pending": "^"}


def frontier(trace: str, panels: Sequence[Mapping[str, Any]]) -> bytes | str:
    """One PNG of a sweep's frontier on ``trace`` (``sweep.frontier_panels``: a panel per benefit ×
    disruption): every setting's point (marker by policy; peers' planners hollow) with its number, the
    frontier as a line through its points, the oracle's benefit as a dashed line, and under the panels the
    key from number to setting (numbered by disruption in the first panel, so a number is one setting in
    every panel; a name beside each point overlapped where settings crowd); or why there is no plot."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return NO_MATPLOTLIB
    first = panels[0]["points"] if panels else []
    order = [p["setting"] for p in sorted(first, key=lambda p: (p["x"], p["setting"]))]
    order += sorted({p["setting"] for panel in panels for p in panel["points"]} - set(order))
    number = {name: i + 1 for i, name in enumerate(order)}
    rows = (len(panels) + 1) // 2
    key_lines = (len(order) + 1) // 2
    key_inches = 0.3 + 0.16 * key_lines
    fig, axes = plt.subplots(rows, 2, figsize=(12, 4.5 * rows + key_inches), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=False):
        pts = panel["points"]
        for p in pts:
            peer = p["planner"] not in (None, "greedy", "auto")
            colour = "tab:red" if p["frontier"] else "tab:grey"
            ax.scatter([p["x"]], [p["y"]], s=28, marker=_MARKERS.get(p["policy"], "o"),
                       facecolors="none" if peer else colour, edgecolors=colour, linewidths=1, clip_on=False)
            note = ax.annotate(str(number[p["setting"]]), (p["x"], p["y"]), fontsize=7, color=colour,
                               xytext=(4, 3), textcoords="offset points", clip_on=True)
            note.set_in_layout(False)
        on = sorted((p for p in pts if p["frontier"]), key=lambda p: (p["x"], p["setting"]))
        if on:
            ax.plot([p["x"] for p in on], [p["y"] for p in on], color="tab:red", linewidth=0.8)
        if panel.get("oracle") is not None:
            ax.axhline(panel["oracle"], color="tab:blue", linestyle="--", linewidth=0.8,
                       label="oracle (ceiling estimate)")
            ax.legend(fontsize=7, loc="best")
        ax.set_xscale("symlog", linthresh=1 if panel["disruption"] == "cardsDisruptedPerDay" else 0.001)
        most = max((p["x"] for p in pts), default=0)
        ax.set_xlim(left=0, right=most * 3 if most > 0 else None)  # disruption is never negative
        ax.set_xlabel(AXIS_LABELS.get(panel["disruption"], panel["disruption"]))
        ax.set_ylabel(AXIS_LABELS.get(panel["benefit"], panel["benefit"]), fontsize=8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"{trace}: benefit against disruption (red: the Pareto frontier; ^ pending, o interval, "
                 "s none; hollow: a peer's planner)", fontsize=9)
    height = 4.5 * rows + key_inches
    names = [f"{number[n]}: {n}" for n in order]
    for col, chunk in enumerate((names[:key_lines], names[key_lines:])):
        fig.text(0.02 + 0.5 * col, (key_inches - 0.15) / height, "\n".join(chunk), fontsize=7, va="top",
                 ha="left")
    fig.tight_layout(rect=(0, key_inches / height, 1, 1))
    data = png(fig, dpi=100)
    plt.close(fig)
    return data
