"""Seeded small clusters with pending gangs, for the goal planners' family tests (issue 15 §4)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from optplan.adapters.kubefile import load_objects
from optplan.models.queues import VCJob
from optplan.models.repack import RepackRun
from optplan.models.snapshot import Snapshot
from tests.builders import hypernode, job_task, node, pod, podgroup_in, queue, vcjob


@dataclass(frozen=True)
class Goals:
    """The resolved goals' fields (``solvers.goals.problem.Goals``), built by hand."""

    jobs: tuple[VCJob, ...]
    free_tier: int | None = None
    free_count: int = 0
    free_required: bool = False
    hyper_nodes: tuple[str, ...] = ()


def admit_run(jobs: list[str], *, free: dict[str, Any] | None = None, max_per_run: dict[str, Any] | None = None,
              name: str = "run") -> dict[str, Any]:
    goal: dict[str, Any] = {"resource": "nvidia.com/gpu"}
    if jobs:
        goal["admit"] = {"jobs": jobs}
    if free is not None:
        goal["freeHyperNodes"] = free
    spec: dict[str, Any] = {"mode": "DryRun", "goals": [goal]}
    if max_per_run is not None:
        spec["maxPerRun"] = max_per_run
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name}, "spec": spec}


def random_case(seed: int, *, topology: bool | None = None, gangs: int | None = None,
                free: bool = False) -> list[dict[str, Any]]:
    """4–6 nodes of 8 cards in racks of 2 or 3 (tier 1), running 1/2/4-card pods in PodGroups of 1–2 pods
    (about 55–75% of the cards), and 1–2 pending gangs of 2–3 pods of 2 or 4 cards, hard tier 1 or not."""
    rng = random.Random(seed)
    n = rng.randint(4, 6)
    names = [f"n{i}" for i in range(n)]
    objs: list[dict[str, Any]] = [node(x) for x in names] + [queue("default")]
    rack = rng.choice([2, 3])
    racks = [names[i:i + rack] for i in range(0, n, rack)]
    objs += [hypernode(f"r{i}", 1, ms) for i, ms in enumerate(racks)]
    objs.append(hypernode("top", 2, [f"r{i}" for i in range(len(racks))], kind="HyperNode"))
    free_cards = {x: 8 for x in names}
    target = rng.uniform(0.55, 0.75) * 8 * n
    used = 0
    g = 0
    while used < target:
        size = rng.choice([1, 1, 2])
        cards = rng.choice([1, 2, 2, 4])
        spots = [x for x in names if free_cards[x] >= cards]
        if len(spots) < 1:
            break
        objs.append(podgroup_in("default", f"pg{g}", 1))
        for k in range(size):
            spots = [x for x in names if free_cards[x] >= cards]
            if not spots:
                break
            where = rng.choice(spots)
            free_cards[where] -= cards
            used += cards
            objs.append(pod(f"p{g}-{k}", where, cards, group=f"pg{g}"))
        g += 1
    jobs = []
    for j in range(gangs if gangs is not None else rng.randint(1, 2)):
        hard = topology if topology is not None else rng.random() < 0.5
        replicas = rng.randint(2, 3)
        cards = rng.choice([2, 4, 4])
        objs.append(vcjob(f"job{j}", "default", [job_task("w", replicas, cards)], min_available=replicas,
                          network_topology={"mode": "hard", "highestTierAllowed": 1} if hard else None))
        jobs.append(f"default/job{j}")
    objs.append(admit_run(jobs, free={"tier": 1, "count": 1} if free else None))
    return objs


def load_case(objs: list[dict[str, Any]]) -> tuple[Snapshot, RepackRun]:
    loaded = load_objects(objs)
    return loaded.snapshot, next(iter(loaded.runs.values()))
