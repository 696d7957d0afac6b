"""``optplan place`` against the real vc-scheduler on seeded small clusters (differential tests).

Example::

    python benchmarks/volcano_diff.py --clusters 20 --seed 1            # a table on stdout
    python benchmarks/volcano_diff.py --clusters 300 --seed 1 --dir D --parallel 3 --solvers ""  # record
    python benchmarks/volcano_diff.py --clusters 300 --seed 1 --dir D --replan --json out.json   # plan, compare

Starts one real cluster (tests/realcluster/cluster.py; the binaries of hack/cluster/build.sh), then for
each case of ``tests.realcluster.vcdiff.generate(seed, i)``: creates it with vc-scheduler stopped, takes
``optplan snapshot`` of it, plans it with ``optplan place --solver greedy`` and ``auto`` (``--victim-tiers``,
the binpack weights of hack/cluster/volcano-scheduler.conf; ``--solvers ""``: later, ``--replan``),
starts vc-scheduler, waits until nothing changes and
compares (``vcdiff.compare``): admitted job sets, preempt and reclaim victim sets, the HyperNode of each
topology job both admitted, how many more pods each partly running gang gets, per pod the node.
``--parallel N`` runs N clusters at once (about 1 GiB each), the cases shared round-robin; each case's
documents (``NS.case.json``), snapshot and what Volcano did stay in ``--dir`` for ``--replan``. Prints
agreement per action and solver, and every disagreement with the case's seed and index (``--only I``
reruns one case; ``--repeat K`` runs each case K times, to tell Volcano's nondeterminism from a rule: the
summary then lists per action the cases where some run agrees or Volcano's own outcome varies, and those
where every run disagrees the same way; ``--scheduler-v 5`` keeps vc-scheduler's node list and every
action's node walk in its log, to see which order decided; the recorder then stores the node list each run began
with in its ``.volcano.json``, ``nodeList``). ``--partitions``: the partitioned cases of
``vcdiff.generate_partitioned(seed, i)`` instead (VCJobs with a ``partitionPolicy``; compared besides: each
partition's HyperNode); ``--partitions-more``: ``vcdiff.generate_partitioned_more(seed, i)`` (partly running
partitioned jobs, two partitioned tasks in a job, partitioned jobs without a topology that need preempt).
``--rotations`` (with ``--replan``): besides, ``greedy-rotated``, the greedy planned once per slot
vc-scheduler's node list may start at (``optplan place --node-list-start N`` for each of the case's nodes: its
cache hands the nodes over by name, rotated at a random slot each start) and, with HyperNodes, per draw of the
ties between the best ones (``--hypernode-tie-seed``: by name, then seeds 1-7; Volcano draws at random), the
plan agreeing on the most verdicts kept: what the greedy's rules give under the node order and draws Volcano
made.
``--drawn`` (with ``--replan``): besides, ``greedy-drawn``, the greedy planned with the node list vc-scheduler drew in
that very recording (``optplan place --node-list`` the whole list, as the recorder read it from vc-scheduler's log
at ``--scheduler-v 5``: ``nodeList`` in the case's ``.volcano.json``; HyperNode ties by name); a recording without it
is not counted in that column.
``--podgroups``: the bare-PodGroup cases of ``vcdiff.generate_podgroups(seed, i)``
(PodGroups and pods created directly, as Kubeflow or KubeRay create them: minMember, minTaskMember, a
subGroupPolicy with a topology per subgroup, some partly running; each subgroup's HyperNode compared as a
partition's).
``--more``: the cases of ``vcdiff.generate_more(seed, i)`` (a tenant parent's guarantee; a task template naming a
PriorityClass of preemptionPolicy Never; a running gang's workers beside its pending critical task; two partly
running gangs).
``--also DIR`` (with ``--replan``, repeatable): other folders holding recordings of the same cases (``--repeat``'s
``NS-xR`` namespaces or the case's own), each re-planned too; besides the table of the recording in ``--dir``, a
second one counts a case's action as agreeing when optplan agrees with one of Volcano's recordings of it (its
nondeterminism shown: the same cluster recorded again), the two never mixed.
``--vgpu``: the shared-GPU cases of ``vgpucase.generate_vgpu(seed, i)`` (vGPU nodes of 1-4 devices with share
counts, running shares, pending bare PodGroups of shares: cores, memory, spread, card types), vc-scheduler with the
device-share plugin's vGPU part on (``vgpucase.vgpu_conf_text``, also the cluster's ConfigMap so that the
snapshots carry it), started with the case's nodes held until its first session (``vgpucase.start_holding``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.realcluster, when run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from tests.realcluster.cluster import Cluster, missing  # noqa: E402
from tests.realcluster.vcdiff import (  # noqa: E402
    PLACE_ARGS,
    Case,
    Observed,
    Verdict,
    case_jobs,
    compare,
    conf_args,
    generate,
    generate_more,
    generate_partitioned,
    generate_partitioned_more,
    generate_podgroups,
    load,
    load_case,
    lowest_hypernode,
    planned,
    priority_classes,
    renamed,
    run_case,
    save_case,
    volcano_did,
)
from tests.realcluster.vclog import rotation  # noqa: E402
from tests.realcluster.vgpucase import generate_vgpu, start_holding, vgpu_conf_text  # noqa: E402

SOLVERS = ("greedy", "auto")
ROTATED = "greedy-rotated"
DRAWN = "greedy-drawn"


def summarise(verdicts: list[Verdict]) -> dict[str, Any]:
    """Agreement per action: agreeing cases / cases with something to compare."""
    out: dict[str, Any] = {}
    for action in ("allocate", "preempt", "reclaim"):
        vals = [getattr(v, action) for v in verdicts if not v.error and getattr(v, action) is not None]
        out[action] = (sum(vals), len(vals))
    topo = [t for v in verdicts if not v.error for t in v.topology]
    out["topology"] = (sum(topo), len(topo))
    part = [t for v in verdicts if not v.error for t in v.partial]
    out["partial"] = (sum(part), len(part))
    parts = [t for v in verdicts if not v.error for t in v.partitions]
    out["partitions"] = (sum(parts), len(parts))
    out["nodes"] = (sum(v.nodes[0] for v in verdicts), sum(v.nodes[1] for v in verdicts))
    out["fewer"] = sum(v.fewer for v in verdicts)
    out["errors"] = sum(bool(v.error) for v in verdicts)
    return out


def nondeterminism(records: list[dict[str, Any]], solver: str) -> str:
    """With ``--repeat``: per action, the cases where some run agrees with optplan or Volcano's own outcome
    differs between runs (its nondeterminism shown), and those where every run disagrees the same way."""
    runs: dict[int, list[dict[str, Any]]] = {}
    for rec in records:
        runs.setdefault(rec["index"], []).append(rec)
    parts = []
    for action, key in (("allocate", "admitted"), ("preempt", "preempt"), ("reclaim", "reclaim"),
                        ("topology", "topology"), ("partitions", "partitions")):
        shown: list[int] = []
        steady: list[int] = []
        for i, rs in sorted(runs.items()):
            verdicts = [r[solver].get(action) for r in rs if not r[solver]["error"]]
            bad = [v is False or (isinstance(v, list) and False in v) for v in verdicts]
            if not any(bad):
                continue
            seen = {_unnamed(json.dumps(r[solver]["details"].get(key), sort_keys=True), r) for r in rs}
            (shown if not all(bad) or len(seen) > 1 else steady).append(i)
        parts.append(f"{action} shown {shown or '-'}, steady {steady or '-'}")
    return "nondeterminism (some run agrees, or Volcano's outcome varies): " + "; ".join(parts)


def _unnamed(text: str, rec: dict[str, Any]) -> str:
    """A repeat's details without its namespace suffix (``-x<r>``), so that runs compare."""
    return text.replace(f"-x{rec['repeat']}", "")


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.1f}%)" if b else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--only", type=int, action="append", default=[], help="run only this case index (repeatable)")
    ap.add_argument("--repeat", type=int, default=1, help="run each case this many times")
    ap.add_argument("--json", type=Path, help="write every case's verdicts here (after each case)")
    ap.add_argument("--dir", type=Path, help="working folder (cluster, snapshots, what Volcano did); a temporary "
                                             "one by default")
    ap.add_argument("--replan", action="store_true",
                    help="no cluster: re-plan the snapshots --dir holds with this checkout's optplan and compare "
                         "them with what Volcano did then")
    ap.add_argument("--solvers", default=",".join(SOLVERS),
                    help="solvers to plan with; empty: only record the clusters and Volcano (plan later, --replan)")
    ap.add_argument("--parallel", type=int, default=1,
                    help="run this many clusters at once (one control plane each, about 1 GiB apiece), the "
                         "cases shared round-robin")
    ap.add_argument("--scheduler-v", type=int, default=0,
                    help="vc-scheduler's log level (its -v; 4 logs every node each predicate call tries, in order, "
                         "to WORKDIR/cluster*/logs/vc-scheduler.log); the cluster's own by default")
    ap.add_argument("--partitions", action="store_true",
                    help="the partitioned cases (vcdiff.generate_partitioned: VCJobs with a partitionPolicy, "
                         "namespaces vcp-SEED-I) instead of the plain ones")
    ap.add_argument("--rotations", action="store_true",
                    help="with --replan: also greedy-rotated, the greedy for each start of Volcano's node list, "
                         "the plan agreeing most kept")
    ap.add_argument("--drawn", action="store_true",
                    help="with --replan: also greedy-drawn, the greedy with the node list start vc-scheduler drew in "
                         "the recording (recorded at --scheduler-v 5); recordings without it not counted")
    ap.add_argument("--partitions-more", action="store_true",
                    help="the second partitioned flavour (vcdiff.generate_partitioned_more: partly running "
                         "partitions, two partitioned tasks in a job, preempt for partitions; namespaces vcq-SEED-I)")
    ap.add_argument("--podgroups", action="store_true",
                    help="the bare-PodGroup cases (vcdiff.generate_podgroups: PodGroups and their pods created "
                         "directly, no VCJob; namespaces vcg-SEED-I) instead of the plain ones")
    ap.add_argument("--more", action="store_true",
                    help="the cases vcdiff.generate_more draws (a parent queue's guarantee, preemptionPolicy Never by "
                         "task template, a running gang's own pods beside a starving task, two partly running gangs; "
                         "namespaces vcm-SEED-I) instead of the plain ones")
    ap.add_argument("--vgpu", action="store_true",
                    help="the shared-GPU cases (vgpucase.generate_vgpu: vGPU nodes, running shares, pending bare "
                         "PodGroups of shares; vc-scheduler with deviceshare.VGPUEnable; namespaces vgv-SEED-I)")
    ap.add_argument("--also", type=Path, action="append", default=[],
                    help="with --replan: a folder of other recordings of the same cases (--repeat's NS-xR too); a "
                         "second table counts an action as agreeing when optplan agrees with one of Volcano's "
                         "recordings of the case")
    ap.add_argument("--ceiling", action="store_true",
                    help="with --replan: per case, the greedy for every start of vc-scheduler's node list, weighted "
                         "by how often its informer's Go map hands that start over; per action, the agreement the "
                         "greedy by name may expect with Volcano's random start and the most any prediction may")
    ap.add_argument("--shard", default="", help=argparse.SUPPRESS)  # K/N: this worker's share (--parallel)
    args = ap.parse_args(argv)
    # a background run ignores SIGINT: SIGTERM ends it through the finally blocks (the cluster stopped)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.parallel > 1 and not args.replan:
        return _parallel(args, argv if argv is not None else sys.argv[1:])
    solvers = tuple(s for s in args.solvers.split(",") if s)
    if args.rotations:
        if not args.replan:
            print("--rotations needs --replan", file=sys.stderr)
            return 2
        solvers += (ROTATED,)
    if args.drawn:
        if not args.replan:
            print("--drawn needs --replan", file=sys.stderr)
            return 2
        solvers += (DRAWN,)
    if args.replan and not args.dir:
        print("--replan needs --dir", file=sys.stderr)
        return 2
    if (args.also or args.ceiling) and not args.replan:
        print("--also and --ceiling need --replan", file=sys.stderr)
        return 2
    args.also = [d for d in args.also if d.resolve() != args.dir.resolve()]  # the --dir recording counts once
    work = args.dir or Path(tempfile.mkdtemp(prefix="volcano-diff-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    cluster = None
    if not args.replan:
        absent = missing()
        if absent:
            print(f"real-cluster binaries missing (hack/cluster/build.sh): {absent[0]}", file=sys.stderr)
            return 2
        cluster = Cluster(work / ("cluster" + (f"-{args.shard.split('/')[0]}" if args.shard else "")))
        if args.scheduler_v:
            _log_level(cluster, args.scheduler_v)
        if args.vgpu:
            conf = work / "vgpu.conf"
            conf.write_text(vgpu_conf_text(), encoding="utf-8")
            cluster.scheduler_conf = conf
        cluster.start()
        cluster.apply(priority_classes())
        if args.vgpu:  # the cluster's ConfigMap too: `optplan snapshot` carries it, place decides under it
            cluster.apply([{"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                            "data": {"volcano-scheduler.conf": vgpu_conf_text()}}])
        print(f"cluster up in {time.monotonic() - started:.0f} s ({work})", file=sys.stderr)
    indices = args.only or list(range(args.start, args.start + args.clusters))
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        indices = indices[k::n]
    verdicts: dict[str, list[Verdict]] = {s: [] for s in solvers}
    anyrec: dict[str, list[Verdict]] = {s: [] for s in solvers}  # --also: agreeing with one of the recordings
    recordings: list[int] = []
    records: list[dict[str, Any]] = []
    try:
        for i in indices:
            for r in range(args.repeat):
                case = (generate_partitioned_more if args.partitions_more else generate_partitioned
                        if args.partitions else generate_podgroups if args.podgroups
                        else generate_more if args.more else generate_vgpu if args.vgpu else generate)(args.seed, i)
                if args.repeat > 1:
                    case = renamed(case, f"{case.ns}-x{r}")
                if cluster is not None:
                    save_case(case, work / f"{case.ns}.case.json")
                    obs = run_case(cluster, case, work, solvers=solvers, restart=False,
                                   start=start_holding if args.vgpu else None)
                else:
                    saved = work / f"{case.ns}.volcano.json"
                    if not saved.exists():
                        continue
                    if (work / f"{case.ns}.case.json").exists():  # the case as it was run (generator changes)
                        case = load_case(work / f"{case.ns}.case.json")
                    obs = load(saved)
                    replan(case, obs, work / f"{case.ns}.yaml", solvers)
                records.append(_record(args.seed, i, r, case, obs, solvers, verdicts, args.repeat > 1))
                if args.ceiling:
                    records[-1]["ceiling"] = ceiling(case, obs, work / f"{case.ns}.yaml")
                if args.also:
                    alts = other_recordings(case.ns, args.also)
                    recordings.append(1 + len(alts))
                    others = replanned(alts, solvers)  # once: each recording planned by every solver
                    for s in solvers:
                        seen = [verdicts[s][-1], *(verdict(c, o, s) for c, o in others)]
                        anyrec[s].append(agree_any(seen))
                    records[-1]["recordings"] = recordings[-1]
                    records[-1]["anyRecording"] = {s: _flags(anyrec[s][-1]) for s in solvers}
                if args.json:
                    args.json.write_text(json.dumps({"cases": records}, indent=1), encoding="utf-8")
    finally:
        if cluster is not None:
            cluster.stop()
    print("\n| action | " + " | ".join(solvers) + " |\n|---|" + "---|" * len(solvers))
    sums = {s: summarise(verdicts[s]) for s in solvers}
    for action in ("allocate", "preempt", "reclaim", "topology", "partial", "partitions", "nodes"):
        print(f"| {action} | " + " | ".join(pct(*sums[s][action]) for s in solvers) + " |")
    print("| fewer jobs than Volcano | " + " | ".join(str(sums[s]["fewer"]) for s in solvers) + " |")
    print("| errors | " + " | ".join(str(sums[s]["errors"]) for s in solvers) + " |")
    if args.also:
        anysums = {s: summarise(anyrec[s]) for s in solvers}
        print(f"\nagreeing with one of Volcano's recordings of the case ({sum(recordings)} recordings of "
              f"{len(recordings)} cases; {sum(n > 1 for n in recordings)} recorded more than once):")
        print("\n| action | " + " | ".join(solvers) + " |\n|---|" + "---|" * len(solvers))
        for action in ("allocate", "preempt", "reclaim", "topology", "partial", "partitions"):
            print(f"| {action} | " + " | ".join(pct(*anysums[s][action]) for s in solvers) + " |")
        sums = {**sums, **{f"{s} (one of the recordings)": anysums[s] for s in solvers}}
    if args.ceiling:
        sums = {**sums, "ceiling": ceiling_table([r["ceiling"] for r in records if "ceiling" in r])}
    if args.repeat > 1:
        for s in solvers:
            print(f"\n{s}: " + nondeterminism(records, s))
    print(f"\n{len(records)} cases in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({"summary": sums, "cases": records}, indent=1), encoding="utf-8")
    return 0


def _parallel(args: argparse.Namespace, argv: list[str]) -> int:
    """``--parallel N``: N workers of this script, each with its own cluster and every N-th case, their
    lines as they come; the JSON of each worker beside ``--json`` (``.K`` before the suffix)."""
    import subprocess

    rest: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("--parallel", "--json"):
            skip = True
            continue
        if a.startswith(("--parallel=", "--json=")):
            continue
        rest.append(a)
    work = args.dir or Path(tempfile.mkdtemp(prefix="volcano-diff-"))
    if not args.dir:
        rest += ["--dir", str(work)]
    procs = []
    for k in range(args.parallel):
        extra = ["--shard", f"{k}/{args.parallel}"]
        if args.json:
            extra += ["--json", str(args.json.with_suffix(f".{k}{args.json.suffix}"))]
        procs.append(subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *rest, *extra]))
        time.sleep(5)  # the control planes' start-ups, not both at once
    try:
        return max(p.wait() for p in procs)
    finally:
        for p in procs:  # ended early (SIGTERM): the workers stop their clusters
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait()


def other_recordings(ns: str, folders: list[Path]) -> list[tuple[Case, Observed, Path]]:
    """``--also``: the recordings of the case ``ns`` in ``folders`` (its own namespace or ``NS-xR``), sorted."""
    out = []
    for d in folders:
        for saved in sorted([*d.glob(f"{ns}.volcano.json"), *d.glob(f"{ns}-x*.volcano.json")]):
            stem = saved.name.removesuffix(".volcano.json")
            if (d / f"{stem}.case.json").exists() and (d / f"{stem}.yaml").exists():
                out.append((load_case(d / f"{stem}.case.json"), load(saved), d / f"{stem}.yaml"))
    return out


def replan(case: Case, obs: Observed, snap: Path, solvers: tuple[str, ...]) -> None:
    """``obs.plans``: the recording's snapshot ``snap`` planned by this checkout's solvers (none when taking the
    snapshot failed)."""
    if not obs.snapshot_error:
        obs.plans = {s: place_here(snap, s) for s in solvers if s not in (ROTATED, DRAWN)}
        if DRAWN in solvers and obs.node_list:
            obs.plans[DRAWN] = {**place_here(snap, "greedy", "--node-list", ",".join(obs.node_list)),
                                "nodeListStart": obs.node_list[0]}
        if ROTATED in solvers:
            obs.plans[ROTATED] = best_rotation(case, obs, snap)


def verdict(case: Case, obs: Observed, solver: str) -> Verdict:
    """``vcdiff.compare``; for ``greedy-drawn`` on a recording without vc-scheduler's node list, a verdict that
    counts nowhere (no action to compare, no error)."""
    if solver == DRAWN and not obs.snapshot_error and DRAWN not in obs.plans:
        return Verdict(solver, details={"drawn": "no node list recorded"})
    return compare(case, obs, solver)


def replanned(alts: list[tuple[Case, Observed, Path]], solvers: tuple[str, ...]) -> list[tuple[Case, Observed]]:
    """Each other recording planned by this checkout (its own snapshot: the same cluster under its namespace)."""
    for case, obs, snap in alts:
        replan(case, obs, snap, solvers)
    return [(case, obs) for case, obs, _snap in alts]


def agree_any(seen: list[Verdict]) -> Verdict:
    """One case's verdicts over several recordings of it (the first the ``--dir`` one): an action agrees when
    it agrees in some recording, disagrees when it disagrees in some and agrees in none; a list (topology,
    partial, partitions) is the recording's with the most agreeing entries (the first among equals)."""
    first = seen[0]
    ok = [v for v in seen if not v.error and "drawn" not in v.details]  # greedy-drawn: recordings with a node list
    if not ok:
        return first
    out = Verdict(first.solver, error="", details=ok[0].details, nodes=ok[0].nodes, fewer=all(v.fewer for v in ok))
    for action in ("allocate", "preempt", "reclaim"):
        vals = [getattr(v, action) for v in ok if getattr(v, action) is not None]
        setattr(out, action, any(vals) if vals else None)
    for action in ("topology", "partial", "partitions"):
        setattr(out, action, max((getattr(v, action) for v in ok), key=lambda xs: (sum(xs), -xs.count(False))))
    return out


def _flags(v: Verdict) -> dict[str, Any]:
    return {"allocate": v.allocate, "preempt": v.preempt, "reclaim": v.reclaim, "topology": v.topology,
            "partial": v.partial, "partitions": v.partitions, "error": v.error}


def _log_level(cluster: Cluster, level: int) -> None:
    """vc-scheduler started at log level ``level`` (every later ``start_scheduler``)."""
    plain = cluster.scheduler_args
    cluster.scheduler_args = lambda: [a if not a.startswith("-v=") else f"-v={level}" for a in plain()]  # type: ignore[method-assign]


def place_here(snapshot: Path, solver: str, *extra: str) -> dict[str, Any]:
    """``vcdiff.place`` in this process (the CLI's ``main``, its output captured): no interpreter start
    per plan when re-planning saved snapshots."""
    from optplan.cli import main as optplan_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = optplan_main(["place", str(snapshot), "--solver", solver, *conf_args(snapshot), *PLACE_ARGS, *extra])
    return json.loads(out.getvalue()) if code == 0 else {"error": err.getvalue().strip(), "exit": code}


TIE_SEEDS = (None, *range(1, 8))
"""``--rotations``: the HyperNode ties drawn by name, then with these seeds (``--hypernode-tie-seed``)."""


def best_rotation(case: Case, obs: Observed, snapshot: Path) -> dict[str, Any]:
    """The greedy's plan for the start of vc-scheduler's node list (each of the case's nodes) and the draw of
    its HyperNode ties (by name, then ``TIE_SEEDS``; a case without HyperNodes: by name only) whose verdicts
    agree most with what Volcano did (the first such, a plan agreeing on all ends the search); its
    ``nodeListStart`` and ``tieSeed`` added."""
    best: tuple[int, dict[str, Any]] | None = None
    seeds = TIE_SEEDS if case.hypernodes else (None,)
    for seed in seeds:
        for start in sorted(n["metadata"]["name"] for n in case.nodes):
            extra = ("--node-list-start", start) + (("--hypernode-tie-seed", str(seed)) if seed is not None else ())
            plan = place_here(snapshot, "greedy", *extra)
            obs.plans[ROTATED] = plan
            v = compare(case, obs, ROTATED)
            flags = [v.allocate, v.preempt, v.reclaim, *v.topology, *v.partial, *v.partitions]
            score = sum(f is True for f in flags) - sum(f is False for f in flags) - 100 * bool(v.error)
            if best is None or score > best[0]:
                best = (score, {**plan, "nodeListStart": start, "tieSeed": seed})
            if not v.error and False not in flags:
                return best[1]
    assert best is not None
    return best[1]


def start_weights(names: list[str]) -> dict[str, float]:
    """How often vc-scheduler's node list begins at each node (docs/benchmarks.md, "Where Volcano's node order
    comes from"): the informer hands the nodes over from a Go map, whose iteration over at most 8 entries (one
    group) begins at a random one of its 8 slots, the entries in the slots of insertion (by name), so the list is
    the names rotated and a start past the last entry wraps to the first: the first name with probability
    (9 - n)/8, each other with 1/8. Beyond 8 nodes (several groups, not in these cases) each start alike."""
    names = sorted(names)
    n = len(names)
    if n > 8:
        return {x: 1 / n for x in names}
    return {x: ((9 - n) if k == 0 else 1) / 8 for k, x in enumerate(names)}


def outcomes(plan: dict[str, Any]) -> dict[str, Any]:
    """A plan's outcome per action: the admitted jobs, the preempt and the reclaim victims (None: a plan error)."""
    if "error" in plan:
        return {"allocate": None, "preempt": None, "reclaim": None}
    jobs = plan.get("jobs", [])
    victims = [(v["name"], v["reason"]) for j in jobs for v in j.get("victims", [])]
    return {"allocate": tuple(sorted(j["name"] for j in jobs if j["admitted"])),
            "preempt": tuple(sorted(n for n, r in victims if r.endswith("preempt"))),
            "reclaim": tuple(sorted(n for n, r in victims if r.endswith("reclaim")))}


Read = tuple[dict[str, dict[str, str]], set[str], dict[str, tuple[str, str]]]
"""A plan as ``vcdiff.compare`` reads it (``vcdiff.planned``): per job its pods' nodes, the jobs admitted, the
victims."""


def hypernodes(case: Case, read: Read | None) -> dict[str, str | None]:
    """The lowest HyperNode holding each admitted job's pods, for the case's jobs with a ``networkTopology``, of a
    plan as read (None: a plan error)."""
    if read is None:
        return {}
    pods, admitted, _victims = read
    return {j: lowest_hypernode(case, pods[j].values()) for j, spec in case_jobs(case).items()
            if "networkTopology" in spec["spec"] and j in admitted}


def ceiling(case: Case, obs: Observed, snapshot: Path) -> dict[str, Any]:
    """``--ceiling``: the greedy planned for each start of the node list (``--node-list-start``, HyperNode ties by
    name), each start weighted as vc-scheduler draws it (``start_weights``); per action, the weight of the starts
    whose outcome is the greedy-by-name's (what it may expect to agree with Volcano, were Volcano the greedy with
    its start: ``greedy-drawn`` is, in most cases), the most weight one outcome has (the most any single
    prediction may expect), and whether some start's plan acts (evicts; allocate: always)."""
    weights = start_weights([n["metadata"]["name"] for n in case.nodes])
    plans = {x: place_here(snapshot, "greedy", "--node-list-start", x) for x in sorted(weights)}
    by_start = {x: outcomes(p) for x, p in plans.items()}
    reads = {x: None if "error" in p else planned(case, p) for x, p in plans.items()}
    first = min(weights)
    out: dict[str, Any] = {}
    # topology: per job with a networkTopology that the greedy by name admits, the weight of the starts that put
    # it in the same lowest HyperNode, and the most weight one HyperNode of it has over the starts admitting it
    hns = {x: hypernodes(case, r) for x, r in reads.items()}
    topo = []
    for job in sorted(hns[first]):
        mass = {}
        for x, h in hns.items():
            if job in h:
                mass[h[job]] = mass.get(h[job], 0.0) + weights[x]
        topo.append({"job": job, "byName": round(mass[hns[first][job]], 6), "best": round(max(mass.values()), 6),
                     "outcomes": len(mass)})
    out["topology"] = topo
    for action in ("allocate", "preempt", "reclaim"):
        mass: dict[Any, float] = {}
        for x, o in by_start.items():
            mass[o[action]] = mass.get(o[action], 0.0) + weights[x]
        acts = action == "allocate" or any(o[action] for o in by_start.values())
        out[action] = {"byName": round(mass[by_start[first][action]], 6), "best": round(max(mass.values()), 6),
                       "acts": acts, "outcomes": len(mass)}
    out["pods"] = scored_pods(case, obs, reads, first)
    return out


def scored_pods(case: Case, obs: Observed, reads: dict[str, Read | None], first: str) -> dict[str, int]:
    """Per pod of a job both the greedy by name and Volcano admit (as ``vcdiff.compare`` counts nodes): the node,
    where the scores decide it (every start of the node list puts the pod there), else its lowest HyperNode
    (the issue's "per pod the node where Volcano's choice is determined by its scores, otherwise the
    HyperNode"); counted apart."""
    out = {"decided": 0, "decidedSame": 0, "other": 0, "otherSame": 0}
    by_name = reads[first]
    if obs.snapshot_error or by_name is None:
        return out
    pods, admitted, _victims = by_name
    vol_pods, vol_admitted = volcano_did(case, obs)
    for j in sorted(admitted & vol_admitted):
        o, w = pods.get(j, {}), vol_pods[j]
        for pod in sorted(set(o) & set(w)):
            if len({r[0].get(j, {}).get(pod) if r else None for r in reads.values()}) == 1:
                out["decided"] += 1
                out["decidedSame"] += o[pod] == w[pod]
            else:
                out["other"] += 1
                out["otherSame"] += lowest_hypernode(case, [o[pod]]) == lowest_hypernode(case, [w[pod]])
    return out


def ceiling_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``--ceiling``'s table, printed: per action over the cases where some start acts, the expected agreement of
    the greedy by name and the most any prediction may expect, as a share of those cases."""
    print("\nunder vc-scheduler's random node-list start (--ceiling; the greedy with each start standing for "
          "Volcano):\n\n| action | cases | greedy by name may expect | any prediction at most | cases with more "
          "than one outcome |\n|---|---|---|---|---|")
    out: dict[str, Any] = {}
    for action in ("allocate", "preempt", "reclaim"):
        acted = [r[action] for r in rows if r[action]["acts"]]
        n = len(acted)
        by_name, best = sum(a["byName"] for a in acted), sum(a["best"] for a in acted)
        many = sum(a["outcomes"] > 1 for a in acted)
        out[action] = {"cases": n, "byName": round(by_name, 3), "best": round(best, 3), "several": many}
        print(f"| {action} | {n} | {by_name:.1f} ({100 * by_name / max(n, 1):.1f}%) | {best:.1f} "
              f"({100 * best / max(n, 1):.1f}%) | {many} |")
    topo = [t for r in rows for t in r.get("topology", [])]
    n = len(topo)
    by_name, best = sum(t["byName"] for t in topo), sum(t["best"] for t in topo)
    many = sum(t["outcomes"] > 1 for t in topo)
    out["topology"] = {"jobs": n, "byName": round(by_name, 3), "best": round(best, 3), "several": many}
    print(f"| topology (jobs) | {n} | {by_name:.1f} ({100 * by_name / max(n, 1):.1f}%) | {best:.1f} "
          f"({100 * best / max(n, 1):.1f}%) | {many} |")
    pods = {k: sum(r["pods"][k] for r in rows if "pods" in r) for k in ("decided", "decidedSame", "other", "otherSame")}
    out["pods"] = pods
    print(f"\nper pod of the jobs both admit (the greedy by name against this recording): the node where the scores "
          f"decide it (the same under every start) {pct(pods['decidedSame'], pods['decided'])}, else its lowest "
          f"HyperNode {pct(pods['otherSame'], pods['other'])}; together "
          f"{pct(pods['decidedSame'] + pods['otherSame'], pods['decided'] + pods['other'])}")
    return out


def _record(seed: int, i: int, r: int, case: Case, obs: Observed, solvers: tuple[str, ...],
            verdicts: dict[str, list[Verdict]], repeated: bool) -> dict[str, Any]:
    """One case's verdicts: printed as a line, added to ``verdicts``, returned for the JSON."""
    rec: dict[str, Any] = {"seed": seed, "index": i, "repeat": r, "kinds": case.kinds,
                           "seconds": {k: round(v, 1) for k, v in obs.seconds.items()},
                           "volcano": {"bound": obs.bound, "evicted": obs.evicted, "phases": obs.phases,
                                       **({"nodeList": obs.node_list, "nodeListRotation": rotation(obs.node_list)}
                                          if obs.node_list else {})}}
    line = [f"case {seed}/{i}" + (f"#{r}" if repeated else ""), f"{obs.seconds.get('total', 0):.0f}s"]
    for s in solvers:
        v = verdict(case, obs, s)
        verdicts[s].append(v)
        rec[s] = {"allocate": v.allocate, "preempt": v.preempt, "reclaim": v.reclaim, "topology": v.topology,
                  "partial": v.partial, "partitions": v.partitions,
                  "nodes": v.nodes, "fewer": v.fewer, "error": v.error, "details": v.details}
        bad = [a for a in ("allocate", "preempt", "reclaim") if getattr(v, a) is False]
        bad += ["topology"] if False in v.topology else []
        bad += ["partial"] if False in v.partial else []
        bad += ["partitions"] if False in v.partitions else []
        state = "-" if "drawn" in v.details else "ok" if not bad else "DIFF " + ",".join(bad)
        line.append(f"{s}: " + ("ERROR " + v.error[:160] if v.error else state))
        if bad:
            line.append(json.dumps(v.details, sort_keys=True))
    print("  ".join(line), flush=True)
    return rec


if __name__ == "__main__":
    sys.exit(main())
