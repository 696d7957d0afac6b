"""What vc-scheduler's log (``--scheduler-v 5``) says about the random draws of one of its runs, read for the
differential recordings (``vcdiff.run_case``, ``benchmarks/volcano_log.py``):

- ``node_list``: the node list its cache began with — the order in which its node workers first took the case's
  nodes (``started sync node``, klog level 5: the informer's initial list, a Go map's order, the names rotated at a
  random slot); ``rotation`` tells whether two workers swapped neighbours (the cache appends a node as its sync
  ends);
- ``hypernode_ties``: allocate's draws among HyperNodes of the same best score for a sub-job
  (``SelectBestHyperNodeAndScore``, ``rand.Intn``): the score map (``Prioritize hyperNode score map for subJob``,
  level 5) and the HyperNode chosen (``Allocate subJob to hyperNode success``, level 3);
- ``walks``: each scheduling session's preempt and reclaim walks — per pending pod the nodes considered in order
  (``Considering Task <T> on Node <N>``, level 3) and the victims tried (``Try to preempt|reclaim Task``) —,
  each distinct session once;
- ``runs``: a log shared by several runs (the cluster's, appended at each start) cut at each start line
  (``Cluster._spawn`` writes ``$ ARGS`` before the process), and ``run_of`` the last run that synced a case's nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

SYNC_NODE = re.compile(r"\] started sync node (\S+)")
"""vc-scheduler's node worker taking a node from its queue (``processSyncNode``, klog level 5)."""
SCORES = re.compile(r'"Prioritize hyperNode score map for subJob" subJob="([^"]+)" scoreMap=(\{[^}]*\})')
CHOSEN = re.compile(r'"Allocate subJob to hyperNode success" subJob="([^"]+)" hyperNode="([^"]+)" score=([\d.e+-]+)')
TRY_JOB = re.compile(r'"Try to allocate resource for job in hyperNode" job="([^"]+)" hyperNode="([^"]+)"')
JOB_FAILED = re.compile(r'"Find solution for job fail" job="([^"]+)"')
JOB_CHOSEN = re.compile(r'"Allocate job to hyperNode success" job="([^"]+)" hyperNode="([^"]+)"')
UID = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A PodGroup's UID in a VCJob's sub-job name (``NS/JOB-UID/TASK-K``)."""


def node_list(log: str, names: Iterable[str]) -> list[str]:
    """vc-scheduler's node list as it began, read from ``log`` (its log from one start on): the nodes ``names`` in
    the order its node workers first took them (later syncs of a node are its updates). Empty when the log has
    none of them (a log level below 5)."""
    wanted, out = set(names), []
    for m in SYNC_NODE.finditer(log):
        if m.group(1) in wanted and m.group(1) not in out:
            out.append(m.group(1))
    return out


def rotation(order: list[str]) -> bool:
    """Whether ``order`` is the names sorted, rotated (what the informer's Go map hands over; no swap)."""
    names = sorted(order)
    if not order:
        return False
    k = names.index(order[0])
    return order == names[k:] + names[:k]


def hypernode_ties(log: str, ns: str) -> list[tuple[str, str, tuple[str, ...], str]]:
    """The draws among HyperNodes of the same best score for the jobs and sub-jobs of namespace ``ns`` in ``log``:
    (``job`` or ``subJob``, its name without its PodGroup's UID, the tied HyperNodes sorted, the one chosen), each
    distinct draw once in log order (every session logs its dry runs again). A sub-job's: the score map allocate
    drew from (``SelectBestHyperNodeAndScore``, ``rand.Intn``). A job's: per HyperNode it tried (``Try to allocate
    resource for job in hyperNode``), the sum of its sub-jobs' scores there, the gradient's tries only (a ``Find
    solution for job fail`` starts over), the best of which allocate takes in Go map order
    (``selectBestHyperNodeForJob``); a HyperNode where the job would not be ready is not told apart."""
    subjobs: dict[str, dict[str, float]] = {}
    jobs: dict[str, tuple[str, dict[str, float]]] = {}  # job -> (the HyperNode tried now, score per HyperNode)
    out: list[tuple[str, str, tuple[str, ...], str]] = []

    def draw(kind: str, name: str, scores: dict[str, float], chosen: str) -> None:
        best = max(scores.values(), default=0.0)
        tied = tuple(sorted(h for h, v in scores.items() if v == best))
        d = (kind, UID.sub("", name), tied, chosen)
        if len(tied) > 1 and d not in out:
            out.append(d)

    for line in log.splitlines():
        if f'"{ns}/' not in line:
            continue
        if m := SCORES.search(line):
            subjobs[m.group(1)] = json.loads(m.group(2))
        elif m := CHOSEN.search(line):
            if m.group(1) in subjobs:
                draw("subJob", m.group(1), subjobs.pop(m.group(1)), m.group(2))
            job = next((j for j in jobs if m.group(1) == j or m.group(1).startswith(j + "/")), None)
            if job is not None:
                tried, sums = jobs[job]
                sums[tried] = sums.get(tried, 0.0) + float(m.group(3))
        elif m := TRY_JOB.search(line):
            jobs.setdefault(m.group(1), ("", {}))
            jobs[m.group(1)] = (m.group(2), jobs[m.group(1)][1])
        elif m := JOB_FAILED.search(line):
            jobs.pop(m.group(1), None)
        elif m := JOB_CHOSEN.search(line):
            draw("job", m.group(1), jobs.pop(m.group(1), ("", {}))[1], m.group(2))
    return out


OPEN = re.compile(r"\] Open Session (\S+)")


def walks(log: str, ns: str) -> list[list[str]]:
    """Per scheduling session that walked nodes for a pod of namespace ``ns`` (preempt or reclaim), its walk as
    lines: ``ACTION POD: NODE NODE ... `` with ``-> VICTIM`` after the node a victim was tried on (names without the
    namespace); each distinct session once, in log order."""
    out: list[list[str]] = []
    cur: list[str] = []

    def close() -> None:
        if cur and cur not in out:
            out.append(list(cur))
        cur.clear()

    short = re.compile(rf"^{re.escape(ns)}[/-]")
    for line in log.splitlines():
        if OPEN.search(line):
            close()
            continue
        if "preempt.go" not in line and "reclaim.go" not in line:
            continue
        m = re.search(r"(preempt|reclaim)\.go:\d+\] (.*)", line)
        if not m:
            continue
        action, text = m.groups()
        c = re.match(r"Considering Task <([^>]+)> on Node <([^>]+)>", text)
        t = re.match(r"Try to (?:preempt|reclaim) Task <([^>]+)> for Tasks? <([^>]+)>", text)
        hit = c or t
        if hit is None or hit.group(1).split("/")[0] != ns:
            continue  # another line, or another namespace's pod (``NS-x1``: the same prefix)
        if c:
            head = f"{action} {short.sub('', c.group(1))}:"
            if not cur or not cur[-1].startswith(head):
                cur.append(head)
            cur[-1] += " " + short.sub("", c.group(2))
        elif t and cur:
            cur[-1] += " -> " + short.sub("", t.group(1))
    close()
    return out


def runs(log: str) -> list[str]:
    """A log appended by several starts, cut at each start line (``$ ARGS``): one piece per run."""
    return [piece for piece in re.split(r"(?m)^\$ ", log) if piece]


def synced_runs(log: str) -> list[tuple[str, frozenset[str]]]:
    """Each run of ``log`` (``runs``) with the nodes its node workers synced (read once, for many cases)."""
    return [(piece, frozenset(m.group(1) for m in SYNC_NODE.finditer(piece))) for piece in runs(log)]


def last_synced(pieces: Sequence[tuple[str, frozenset[str]]], names: Iterable[str]) -> str:
    """The last of ``pieces`` (``synced_runs``) whose node workers synced one of ``names``, or ``""``."""
    wanted = set(names)
    return next((piece for piece, synced in reversed(pieces) if synced & wanted), "")


def run_of(log: str, names: Iterable[str]) -> str:
    """The last run in ``log`` whose node workers synced one of ``names`` (a case's nodes: its namespace in their
    names), or ``""``."""
    return last_synced(synced_runs(log), names)
