"""``optplan render SNAPSHOT... [--run RUN] [--resource R] -o cluster.png``: the cluster as a picture.

One cell per provider node of the target resource (sorted by name, near-square grid), coloured by
used / allocatable, written in the resource's unit (``quantity.unit_of``: cards, cores, bytes). With a
RepackRun that carries a status (what ``optplan repack`` prints), the grid is drawn twice: before, and
after the plan's moves (each moved pod's request leaves ``fromNode`` and arrives on ``toNode``), freed
nodes hatched and outlined, moves drawn as arrows (at most 40 pod moves) or listed in a side panel.
Without a status, the "before" grid only.

Rendering uses matplotlib's Agg canvas directly (no pyplot, no interactive backend, no global state),
matplotlib's default style (a user's matplotlibrc changes nothing), a fixed figure size and DPI, and no
Software metadata in the PNG: the same input gives the same bytes. The file is written atomically.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from optplan.adapters.output import png, write_atomic
from optplan.errors import InputError
from optplan.models.quantity import BYTES, MILLI, format_amount, to_milli, unit_of
from optplan.models.repack import RepackRun
from optplan.models.snapshot import Snapshot

DEFAULT_RESOURCE = "nvidia.com/gpu"
MAX_ARROWS = 40
"""Pod moves drawn as arrows up to this many; beyond it they are listed."""
MAX_LISTED = 30
"""Pod moves listed in the side panel (largest first)."""
NAMES_UP_TO = 64
"""Node names are written in the cells up to this many nodes."""
COUNTS_UP_TO = 256
"""used/allocatable counts are written in the cells up to this many nodes."""
DPI = 100
CMAP = "YlOrRd"
FREED_COLOUR = "#1a9850"


@dataclass(frozen=True)
class PodMoveView:
    name: str
    from_node: str
    to_node: str
    milli: int


@dataclass
class StatusView:
    """The parts of a RepackRun status the picture needs."""

    frag_before: Any = None
    frag_after: Any = None
    freed_count: int = 0
    freed_nodes: tuple[str, ...] = ()
    moves: list[PodMoveView] = field(default_factory=list)


def _status_error(run: RepackRun, path: str, message: str) -> InputError:
    return InputError(message, obj=f"RepackRun/{run.name}", field=path)


def read_status(run: RepackRun) -> StatusView | None:
    """The run's ``status.plan``, or None when it has none (a RepackRun as written, before planning)."""
    status = run.raw.get("status")
    if status is None:
        return None
    if not isinstance(status, dict):
        raise _status_error(run, "status", "expected a mapping")
    plan = status.get("plan")
    if plan is None:
        return None
    if not isinstance(plan, dict):
        raise _status_error(run, "status.plan", "expected a mapping")
    summary = plan.get("summary") or {}
    if not isinstance(summary, dict):
        raise _status_error(run, "status.plan.summary", "expected a mapping")
    freed = plan.get("freedNodes") or []
    if not isinstance(freed, list) or not all(isinstance(n, str) for n in freed):
        raise _status_error(run, "status.plan.freedNodes", "expected a list of node names")
    view = StatusView(frag_before=summary.get("fragBeforePercent"), frag_after=summary.get("fragAfterPercent"),
                      freed_nodes=tuple(freed))
    count = summary.get("freedNodeCount", len(freed))
    if not isinstance(count, int) or isinstance(count, bool):
        raise _status_error(run, "status.plan.summary.freedNodeCount", f"expected an integer, got {count!r}")
    view.freed_count = count
    moves = plan.get("moves") or []
    if not isinstance(moves, list):
        raise _status_error(run, "status.plan.moves", "expected a list")
    for i, mv in enumerate(moves):
        pods = mv.get("pods") if isinstance(mv, dict) else None
        if not isinstance(pods, list):
            raise _status_error(run, f"status.plan.moves[{i}].pods", "expected a list")
        for j, p in enumerate(pods):
            where = f"status.plan.moves[{i}].pods[{j}]"
            if not isinstance(p, dict):
                raise _status_error(run, where, "expected a mapping")
            for key in ("fromNode", "toNode"):
                if not isinstance(p.get(key), str) or not p[key]:
                    raise _status_error(run, f"{where}.{key}", "expected a node name")
            try:
                milli = to_milli(p.get("cards", 0))
            except (ValueError, TypeError):
                raise _status_error(run, f"{where}.cards", f"unparseable quantity {p.get('cards')!r}") from None
            ns = mv.get("namespace")
            name = f"{ns}/{p.get('name', '?')}" if ns else str(p.get("name", "?"))
            view.moves.append(PodMoveView(name, p["fromNode"], p["toNode"], milli))
    return view


def _amount(resource: str, milli: int) -> str:
    """An amount in the resource's unit as kubectl writes it (``quantity.format_amount``)."""
    return str(format_amount(resource, milli))


def _used(resource: str, used: int, total: int) -> str:
    """``12/16 cards used``, ``40/96 cores used``, ``64Gi/768Gi used`` (a binary suffix names the bytes)."""
    unit = unit_of(resource)
    a, b = _amount(resource, used), _amount(resource, total)
    return f"{a}/{b} used" if unit == BYTES and not (a.isdigit() and b.isdigit()) else f"{a}/{b} {unit} used"


def _short(text: str, width: int = 26) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _grid(n: int) -> tuple[int, int]:
    cols = max(1, math.ceil(math.sqrt(n)))
    return cols, max(1, math.ceil(n / cols))


def render_cluster(snapshot: Snapshot, run: RepackRun | None, resource: str, path: str) -> dict[str, Any]:
    """Draw the provider nodes of ``resource`` before (and, when ``run`` has a status, after) its plan
    into the PNG ``path``. Returns what was drawn: nodes, moves drawn as arrows or listed, freed nodes."""
    providers = snapshot.providers(resource)
    if not providers:
        offered = sorted({r for n in snapshot.nodes.values() for r, v in n.allocatable.items()
                          if v > 0 and r not in ("cpu", "memory", "pods", "ephemeral-storage")})
        hint = f" (nodes offer: {', '.join(offered)})" if offered else ""
        raise InputError(f"no node provides resource {resource!r}{hint}", field="--resource")
    names = [n.name for n in providers]
    index = {name: i for i, name in enumerate(names)}
    alloc = {n.name: n.allocatable[resource] for n in providers}
    used = {name: sum(p.request(resource) for p in snapshot.pods_by_node.get(name, ())) for name in names}

    status = read_status(run) if run is not None else None
    after: dict[str, int] | None = None
    if status is not None:
        after = dict(used)
        for mv in status.moves:
            for node, sign in ((mv.from_node, -1), (mv.to_node, 1)):
                if node not in after:
                    raise InputError(f"pod {mv.name} moves {'from' if sign < 0 else 'to'} node {node!r}, which is "
                                     f"not a provider of {resource} in the snapshot",
                                     obj=f"RepackRun/{run.name}" if run else None, field="status.plan.moves")
                after[node] += sign * mv.milli
        for node in status.freed_nodes:
            if node not in index:
                raise InputError(f"freed node {node!r} is not a provider of {resource} in the snapshot",
                                 obj=f"RepackRun/{run.name}" if run else None, field="status.plan.freedNodes")

    import matplotlib.style
    from matplotlib import colormaps, rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, Rectangle

    n = len(names)
    cols, rows = _grid(n)
    freed = set(status.freed_nodes) if status is not None else set()
    arrows = status is not None and len(status.moves) <= MAX_ARROWS
    listed = status is not None and not arrows
    panels = 1 if after is None else 2
    width = {1: 8.5, 2: 15.0}[panels] + (6.0 if listed else 0.0)
    height = 8.0
    cmap = colormaps[CMAP]
    norm = Normalize(vmin=0.0, vmax=1.0)
    name_size = max(4.0, min(9.0, 48.0 / cols))
    count_size = max(4.0, min(11.0, 60.0 / cols))

    def draw(ax: Any, load: dict[str, int], title: str, mark: str) -> None:
        ax.set_xlim(-0.1, cols + 0.1)
        ax.set_ylim(rows + 0.1, -0.1)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=12)
        for name in names:
            i = index[name]
            x, y = i % cols, i // cols
            frac = load[name] / alloc[name] if alloc[name] else 0.0
            face = cmap(norm(min(max(frac, 0.0), 1.0)))
            is_freed = name in freed
            ax.add_patch(Rectangle((x + 0.04, y + 0.04), 0.92, 0.92, facecolor=face, edgecolor="#555555",
                                   linewidth=0.6))
            if is_freed and mark == "after":
                ax.add_patch(Rectangle((x + 0.04, y + 0.04), 0.92, 0.92, facecolor="none", edgecolor=FREED_COLOUR,
                                       hatch="///", linewidth=2.4))
            elif is_freed:
                ax.add_patch(Rectangle((x + 0.04, y + 0.04), 0.92, 0.92, facecolor="none", edgecolor=FREED_COLOUR,
                                       linewidth=2.0, linestyle="--"))
            dark = frac > 0.6
            colour = "white" if dark else "black"
            if n <= NAMES_UP_TO:
                ax.text(x + 0.5, y + 0.2, name, ha="center", va="center", fontsize=name_size, color=colour,
                        clip_on=True)
            if n <= COUNTS_UP_TO:
                ax.text(x + 0.5, y + 0.55, f"{_amount(resource, load[name])}/{_amount(resource, alloc[name])}",
                        ha="center", va="center", fontsize=count_size, color=colour, fontweight="bold")
            if is_freed and mark == "after" and n <= NAMES_UP_TO:
                ax.text(x + 0.5, y + 0.82, "freed", ha="center", va="center", fontsize=name_size,
                        color=FREED_COLOUR, fontweight="bold")

    with matplotlib.style.context("default"), rc_context({"hatch.color": FREED_COLOUR, "hatch.linewidth": 1.2}):
        fig = Figure(figsize=(width, height), dpi=DPI)
        FigureCanvasAgg(fig)
        ratios = [1.0] * panels + [0.05] + ([0.12, 0.8] if listed else [])
        gs = fig.add_gridspec(1, len(ratios), width_ratios=ratios, left=0.02, right=0.94, top=0.86, bottom=0.06,
                              wspace=0.06)
        ax_before = fig.add_subplot(gs[0, 0])
        draw(ax_before, used, "before" if after is None else "before (dashed: to be freed)", "before")
        pair_cards: dict[tuple[str, str], int] = defaultdict(int)
        if status is not None and after is not None:
            ax_after = fig.add_subplot(gs[0, 1])
            draw(ax_after, after, "after (hatched: freed)", "after")
            for mv in status.moves:
                pair_cards[(mv.from_node, mv.to_node)] += mv.milli
            if arrows:
                for (src, dst), milli in sorted(pair_cards.items()):
                    (sx, sy), (dx, dy) = ((index[k] % cols + 0.5, index[k] // cols + 0.5) for k in (src, dst))
                    arrow = FancyArrowPatch((sx, sy), (dx, dy), arrowstyle="-|>", mutation_scale=14,
                                            connectionstyle="arc3,rad=0.2", color="#2166ac",
                                            linewidth=1.2 + 0.3 * min(milli / MILLI, 8.0),
                                            alpha=0.85, shrinkA=6, shrinkB=6, zorder=5)
                    ax_after.add_patch(arrow)
        cax = fig.add_subplot(gs[0, panels])
        bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=cax)
        bar.set_ticks([0.0, 0.25, 0.5, 0.75, 1.0], labels=["0%", "25%", "50%", "75%", "100%"])
        bar.set_label(f"used / allocatable {resource}", fontsize=10)
        if listed and status is not None:
            ax_list = fig.add_subplot(gs[0, panels + 2])
            ax_list.axis("off")
            top = sorted(status.moves, key=lambda m: (-m.milli, m.name))[:MAX_LISTED]
            lines = [f"{len(status.moves)} pod moves (largest {len(top)}):", ""]
            lines += [f"{_amount(resource, m.milli):>3}  {m.from_node} → {m.to_node}  {_short(m.name.split('/')[-1])}"
                      for m in top]
            if len(status.moves) > len(top):
                lines.append(f"… and {len(status.moves) - len(top)} more")
            ax_list.text(0.0, 1.0, "\n".join(lines), ha="left", va="top", fontsize=8, family="monospace",
                         transform=ax_list.transAxes)
        total_alloc = sum(alloc.values())
        occupied_before = sum(1 for v in used.values() if v > 0)
        head = f"{run.name}: " if run is not None else ""
        line1 = (f"{head}{resource} on {n} provider nodes — {_used(resource, sum(used.values()), total_alloc)}, "
                 f"{occupied_before} nodes occupied")
        if status is not None and after is not None:
            occupied_after = sum(1 for v in after.values() if v > 0)
            line2 = (f"fragmentation {status.frag_before}% → {status.frag_after}%, {status.freed_count} node(s) "
                     f"freed, {len(status.moves)} pod moves, occupied {occupied_before} → {occupied_after}")
            fig.suptitle(f"{line1}\n{line2}", fontsize=13)
        else:
            fig.suptitle(line1 + ("\n(no plan: run `optplan repack` and pass its output with --run)"
                                  if run is None or status is None else ""), fontsize=13)
        _save_atomic(fig, path)
    return {"path": path, "resource": resource, "nodes": n, "grid": [cols, rows], "after": after is not None,
            "moves": len(status.moves) if status else 0, "movesDrawn": len(pair_cards) if arrows else 0,
            "movesListed": min(len(status.moves), MAX_LISTED) if listed and status else 0,
            "freed": status.freed_count if status else 0}


def _save_atomic(fig: Any, path: str) -> None:
    write_atomic(path, png(fig, dpi=DPI))
