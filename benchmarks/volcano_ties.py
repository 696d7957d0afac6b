"""Where the greedy first puts a pod on another node than vc-scheduler did, and whether Volcano's node scores tied
there (the recordings of ``benchmarks/volcano_diff.py`` made with ``--scheduler-v 5``, whose log holds every score).

Example::

    python benchmarks/volcano_diff.py --replan --vgpu --clusters 40 --dir V5 --solvers greedy --json V5.json
    python benchmarks/volcano_ties.py --dir V5 --json V5.json

For each case whose greedy plan puts some pod on another node than Volcano, the pods Volcano bound are walked in
the order its log binds them ("Binding Task <ns/pod> to node <n>"); the first one ``optplan place --solver greedy``
(on the recorded snapshot, under the recorded configuration) puts elsewhere is printed with the two nodes' scores
from the last "Prioritize nodeScoreMap" Volcano logged for that pod: ``tie`` when they are equal (vc-scheduler
picks at random among its best nodes, ``SelectBestNode``; optplan the first by name), ``volcano higher`` or
``optplan higher`` otherwise, ``unscored`` when the log has no score for one of them. A case that differs only
in admissions is listed without a pod.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.realcluster.vcdiff import PLACE_ARGS, conf_args

SCORES = re.compile(r"Prioritize nodeScoreMap for task<([^>]+)> is: map\[(.*)\]")
BINDS = re.compile(r"Binding Task <([^>]+)> to node <([^>]+)>")


def plan_nodes(snapshot: Path) -> dict[str, str]:
    """Pod -> node of the greedy's plan on the recorded snapshot."""
    proc = subprocess.run([sys.executable, "-m", "optplan.cli", "place", str(snapshot), "--solver", "greedy",
                           *conf_args(snapshot), *PLACE_ARGS], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {}
    plan = json.loads(proc.stdout)
    return {str(b.get("pod")): b["node"] for jp in plan["jobs"] for b in jp["bindings"] if b.get("pod")}


def first_difference(logs: list[list[str]], ns: str, mine: dict[str, str]) -> dict[str, Any] | None:
    """The first pod (in Volcano's binding order) the plan puts elsewhere, with both nodes' scores."""
    for lines in logs:
        last: dict[str, dict[str, float]] = {}
        for line in lines:
            if (m := SCORES.search(line)) and m.group(1).startswith(ns + "/"):
                last[m.group(1)] = {k: float(v) for k, v in (x.split(":", 1) for x in m.group(2).split())}
            elif (m := BINDS.search(line)) and m.group(1).startswith(ns + "/"):
                pod, node = m.group(1).split("/", 1)[1], m.group(2)
                if mine.get(pod) != node:
                    scores = last.get(m.group(1), {})
                    return {"pod": pod, "volcano": node, "optplan": mine.get(pod), "volcano_score": scores.get(node),
                            "optplan_score": scores.get(mine.get(pod) or "")}
    return None


def verdict(d: dict[str, Any]) -> str:
    v, o = d["volcano_score"], d["optplan_score"]
    if v is None or o is None:
        return "unscored"
    return "tie" if v == o else "volcano higher" if v > o else "optplan higher"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, required=True, help="the recording (volcano_diff.py --dir)")
    ap.add_argument("--json", type=Path, required=True, help="its verdicts (volcano_diff.py --replan --json)")
    args = ap.parse_args()
    verdicts = json.loads(args.json.read_text())
    logs = [p.read_text(errors="replace").splitlines() for p in sorted(args.dir.glob("cluster*/logs/vc-scheduler.log"))]
    kinds: Counter[str] = Counter()
    for case in verdicts["cases"]:
        g = case.get("greedy") or {}
        nodes = g.get("nodes") or [0, 0]
        if nodes[0] == nodes[1]:
            continue
        found = sorted(args.dir.glob(f"*-{case['seed']}-{case['index']}.case.json"))
        if not found:
            continue
        ns = json.loads(found[0].read_text())["ns"]
        d = first_difference(logs, ns, plan_nodes(args.dir / f"{ns}.yaml"))
        kind = verdict(d) if d is not None else "admissions only"
        kinds[kind] += 1
        print(f"{ns}: nodes {nodes[0]}/{nodes[1]}: {kind}" + ("" if d is None else (
            f" at {d['pod']}: Volcano {d['volcano']} ({d['volcano_score']}), optplan {d['optplan']} "
            f"({d['optplan_score']})")))
    print(", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "no case puts a pod elsewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main())
