"""PNG plots of replays (matplotlib, imported only here and only when plots are asked for): allocation
over time per policy, waiting-time CDFs (Kaplan–Meier: all gangs and gangs of 5–8 cards), and disruption
against the useful allocation gained over ``none``. Bytes are reproducible: no Software metadata, fixed
sizes and order."""

from __future__ import annotations

from collections.abc import Sequence

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
