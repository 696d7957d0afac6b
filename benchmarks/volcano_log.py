"""What vc-scheduler's log says about the random draws of each recording of ``benchmarks/volcano_diff.py``.

Example::

    python benchmarks/volcano_log.py DIR [DIR ...]            # per recording: node list start, rotation?, ties
    python benchmarks/volcano_log.py DIR --write              # backfill nodeList into .volcano.json lacking it

For each recording in a folder (``NS.volcano.json``, ``NS.case.json``), reads the folder's vc-scheduler log
(``cluster*/logs/vc-scheduler.log``, one for all its runs, at ``--scheduler-v 5``), cuts out the run that synced the
case's nodes (the last start that did: ``tests.realcluster.vclog.last_synced``), and prints the node list vc-scheduler
began with (its first node, whether it is the names rotated), whether that is the list the recorder stored
(``nodeList``: recordings made since it reads the log itself), and allocate's draws among HyperNodes of the same
best score (the sub-job, the tied HyperNodes, the one drawn); ``--walks``: each session's preempt and reclaim
walks (per pending pod the nodes considered in order, ``-> VICTIM`` where a victim was tried). ``--write`` adds
``nodeList``, ``nodeListStart`` and ``nodeListRotation`` to each ``.volcano.json`` without them (recordings made
at ``--scheduler-v 5`` before the recorder read it), so that ``volcano_diff.py --replan --drawn`` plans them with
the start Volcano drew.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # tests.realcluster, when run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from tests.realcluster.vcdiff import load_case, node_list_fields  # noqa: E402
from tests.realcluster.vclog import hypernode_ties, last_synced, node_list, rotation, synced_runs, walks  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", type=Path, nargs="+", help="folders of recordings (volcano_diff.py --dir)")
    ap.add_argument("--walks", action="store_true",
                    help="also each session's preempt and reclaim walks (per pod the nodes considered, in order, and "
                         "the victims tried; each distinct session once)")
    ap.add_argument("--only", action="append", default=[], help="only this recording (its namespace; repeatable)")
    ap.add_argument("--write", action="store_true",
                    help="add the node list read to each .volcano.json that has none")
    args = ap.parse_args(argv)
    total = {"recordings": 0, "listed": 0, "rotations": 0, "by name": 0, "stored differs": 0, "with ties": 0}
    for d in args.dirs:
        pieces = [p for log in sorted(d.glob("cluster*/logs/vc-scheduler.log"))
                  for p in synced_runs(log.read_text(encoding="utf-8", errors="replace"))]
        for saved in sorted(d.glob("*.volcano.json")):
            ns = saved.name.removesuffix(".volcano.json")
            if not (d / f"{ns}.case.json").exists() or (args.only and ns not in args.only):
                continue
            names = [n["metadata"]["name"] for n in load_case(d / f"{ns}.case.json").nodes]
            piece = last_synced(pieces, names)
            order, ties = node_list(piece, names), hypernode_ties(piece, ns)
            rec = json.loads(saved.read_text(encoding="utf-8"))
            stored = rec.get("nodeList")
            total["recordings"] += 1
            total["listed"] += bool(order)
            total["rotations"] += rotation(order)
            total["by name"] += bool(order) and order[0] == min(names)
            total["stored differs"] += stored is not None and stored != order
            total["with ties"] += bool(ties)
            short = [n.removeprefix(ns + "-") for n in order]
            print(f"{d.name}/{ns}: start {short[0] if short else '-'}"
                  f"{'' if not order or rotation(order) else ' NOT A ROTATION ' + ' '.join(short)}"
                  f"{'' if stored is None else ' (stored: same)' if stored == order else ' (stored: DIFFERS)'}"
                  + "".join(f"; {kind} tie {name.removeprefix(ns + '/')}: "
                            f"{' '.join(h.removeprefix(ns + '-') for h in tied)} -> {hn.removeprefix(ns + '-')}"
                            for kind, name, tied, hn in ties))
            if args.walks:
                for k, session in enumerate(walks(piece, ns)):
                    print(f"  session {k}: " + "\n             ".join(session))
            if args.write and stored is None and order:
                rec |= node_list_fields(order)
                saved.write_text(json.dumps(rec, indent=1), encoding="utf-8")
    print(", ".join(f"{k} {v}" for k, v in total.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
