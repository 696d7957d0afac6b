"""The synthetic snapshot generator: deterministic, loadable, never over-committed, constraints and
shares as configured, and plannable end to end."""

from __future__ import annotations

import argparse
import math
from collections import Counter
from fractions import Fraction

import pytest

from optplan.adapters.generate import (
    POOL_LABEL,
    PROTECTED_LABEL,
    GenConfig,
    generate,
)
from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.adapters.output import to_yaml
from optplan.cli.generate import add_arguments, config_from_args
from optplan.errors import InputError
from optplan.models.snapshot import Pod, Snapshot
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.repack.rules import RepackProblem
from optplan.solvers.repack.run import INSUFFICIENT, NO_FRAGMENTATION, RECOMMENDED, plan_repack

GPU = "nvidia.com/gpu"


def dump(cfg: GenConfig) -> str:
    return to_yaml({"apiVersion": "v1", "kind": "List", "items": generate(cfg)})


def load(cfg: GenConfig) -> LoadedInput:
    return load_objects(generate(cfg))


def gpu_pods(snap: Snapshot, resource: str = GPU) -> list[Pod]:
    return [p for p in snap.pods.values() if p.request(resource) > 0]


def occupancy(snap: Snapshot, resource: str = GPU) -> float:
    total = sum(n.allocatable[resource] for n in snap.nodes.values())
    return sum(p.request(resource) for p in snap.pods.values() if p.occupying) / total


# ---- determinism ------------------------------------------------------------------------------

def test_same_seed_gives_identical_bytes() -> None:
    cfg = GenConfig(nodes=40, seed=7, pdb_share=0.3, cpu_pressure=0.2, pending_share=0.05)
    assert dump(cfg) == dump(GenConfig(nodes=40, seed=7, pdb_share=0.3, cpu_pressure=0.2, pending_share=0.05))


def test_other_seed_gives_other_snapshot() -> None:
    assert dump(GenConfig(nodes=40, seed=1)) != dump(GenConfig(nodes=40, seed=2))


def test_output_is_sorted_and_names_are_zero_padded() -> None:
    objs = generate(GenConfig(nodes=12, seed=3))
    order = {"Node": 0, "PodGroup": 1, "PodDisruptionBudget": 2, "Pod": 3, "RepackRun": 4}
    keys = [(order[o["kind"]], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objs]
    assert keys == sorted(keys)
    nodes = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    assert nodes == [f"node-{i:04d}" for i in range(1, 13)]
    assert [o["kind"] for o in objs].count("RepackRun") == 1


def test_pdb_share_does_not_move_pods() -> None:
    """Placement has its own random stream: attributes can change without reshuffling pods."""
    def bindings(cfg: GenConfig) -> dict[str, str]:
        return {p.key: str(p.node_name) for p in load(cfg).snapshot.pods.values()}
    assert bindings(GenConfig(nodes=50, seed=4)) == bindings(GenConfig(nodes=50, seed=4, pdb_share=0.5))


# ---- loadable and consistent ------------------------------------------------------------------

CONFIGS = [
    GenConfig(nodes=30, seed=0),
    GenConfig(nodes=60, seed=1, cards_per_node=(8, 4), pools=3, occupancy=0.8, cpu_pressure=0.3),
    GenConfig(nodes=25, seed=2, pools=1, occupancy=0.95, pod_sizes=((1, 1.0),), pending_share=0.2,
              daemonset_pods=False),
    GenConfig(nodes=40, seed=3, cards_per_node=(16,), resource="huawei.com/ascend-1980", tainted_pools=False,
              cpu_pressure=0.6, pdb_share=0.5),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"seed{c.seed}")
def test_loads_without_warnings_and_never_over_commits(cfg: GenConfig) -> None:
    snap = load(cfg).snapshot
    assert snap.warnings == ()
    assert len(snap.nodes) == cfg.nodes
    cap = Capacity(snap)
    for name in snap.nodes:
        assert cap.over(name, cap.free[name]) == [], name


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"seed{c.seed}")
def test_every_pod_passes_static_predicates_on_its_node(cfg: GenConfig) -> None:
    snap = load(cfg).snapshot
    for pod in snap.pods.values():
        assert pod.node_name is not None
        assert static_reason(pod, snap.nodes[pod.node_name]) is None, pod.key


@pytest.mark.parametrize("occ", [0.3, 0.6, 0.85])
def test_occupancy_is_met(occ: float) -> None:
    for seed in range(3):
        snap = load(GenConfig(nodes=80, seed=seed, occupancy=occ)).snapshot
        assert occ - 0.02 <= occupancy(snap) <= occ + 1e-9


def test_node_sizes_and_resources_follow_the_config() -> None:
    cfg = GenConfig(nodes=200, seed=5, cards_per_node=(8, 4), cpu_per_card="6", memory_per_card="32Gi")
    snap = load(cfg).snapshot
    sizes = Counter(n.allocatable[GPU] // 1000 for n in snap.nodes.values())
    assert set(sizes) == {8, 4} and min(sizes.values()) > 60
    for n in snap.nodes.values():
        cards = n.allocatable[GPU] // 1000
        assert n.allocatable["cpu"] == cards * 12_000
        assert n.allocatable["memory"] == cards * 128 * 2**30 * 1000
    for p in gpu_pods(snap):
        cards = p.request(GPU) // 1000
        assert p.requests["cpu"] == cards * 6000 and p.requests["memory"] == cards * 32 * 2**30 * 1000
        assert cards in (1, 2, 4, 8)


# ---- pools ------------------------------------------------------------------------------------

def test_pods_are_pinned_to_their_pool() -> None:
    snap = load(GenConfig(nodes=90, seed=6, pools=3)).snapshot
    pool_of = {n.name: n.labels[POOL_LABEL] for n in snap.nodes.values()}
    assert Counter(pool_of.values()) == {"pool-0": 30, "pool-1": 30, "pool-2": 30}
    for n in snap.nodes.values():
        tainted = [t.key for t in n.taints]
        assert tainted == ([] if pool_of[n.name] == "pool-0" else [POOL_LABEL])
    seen_pools = set()
    for p in gpu_pods(snap):
        pool = p.node_selector[POOL_LABEL]
        assert pool_of[str(p.node_name)] == pool
        seen_pools.add(pool)
        # A pod never passes the predicates on a node of another pool.
        other = next(n for n in snap.nodes.values() if n.labels[POOL_LABEL] != pool)
        assert static_reason(p, other) is not None
    assert seen_pools == {"pool-0", "pool-1", "pool-2"}


def test_untainted_pools() -> None:
    snap = load(GenConfig(nodes=20, seed=1, tainted_pools=False)).snapshot
    assert all(not n.taints for n in snap.nodes.values())


# ---- shares -----------------------------------------------------------------------------------

def test_shares_are_roughly_honoured() -> None:
    cfg = GenConfig(nodes=600, seed=8, protected_share=0.3, pdb_share=0.4, pending_share=0.1,
                    non_volcano_share=0.1, serving_share=0.25)
    snap = load(cfg).snapshot
    groups = list(snap.pod_groups.values())
    protected = sum(g.labels[PROTECTED_LABEL] == "true" for g in groups) / len(groups)
    assert 0.22 <= protected <= 0.38
    assert 0.34 <= len(snap.pdbs) / len(groups) <= 0.46
    pods = gpu_pods(snap)
    assert 0.07 <= sum(p.phase == "Pending" for p in pods) / len(pods) <= 0.13
    non_volcano = [p for p in pods if p.scheduler_name != "volcano"]
    assert 0.05 <= len(non_volcano) / len(pods) <= 0.15
    assert all(p.group_name is None for p in non_volcano)
    serving = [g for g in groups if g.owner is not None and g.owner.kind == "ModelServing"]
    assert 0.15 <= len(serving) / len(groups) <= 0.40


def test_gangs_pdbs_and_owners_are_consistent() -> None:
    snap = load(GenConfig(nodes=300, seed=9, pdb_share=1.0, min_member_ratio=0.75)).snapshot
    by_group = Counter(p.group_key for p in snap.pods.values() if p.group_key)
    assert set(by_group) == set(snap.pod_groups)
    for key, g in snap.pod_groups.items():
        size = by_group[key]
        assert g.owner is not None and g.owner.name
        if g.owner.kind == "Job":
            assert g.owner.api_version == "batch.volcano.sh/v1alpha1"
            assert g.name.startswith(f"{g.owner.name}-") and g.name.endswith(g.owner.uid)
            assert g.min_member == max(1, math.ceil(Fraction(3, 4) * size))
        else:
            assert g.owner.api_version == "workload.serving.volcano.sh/v1alpha1"
            assert g.owner.kind == "ModelServing"
            assert g.min_member == size
            assert g.labels["modelserving.volcano.sh/group-name"] == g.name
        pdb = snap.pdbs[f"{key}-pdb"]
        covered = [p for p in snap.pods.values() if pdb.covers(p)]
        assert len(covered) == size
        assert 0 <= pdb.disruptions_allowed <= size - g.min_member


def test_cpu_pressure_takes_roughly_its_share() -> None:
    snap = load(GenConfig(nodes=200, seed=2, occupancy=0.3, cpu_pressure=0.2)).snapshot
    cpu_only = sum(p.requests["cpu"] for p in snap.pods.values() if p.namespace == "services")
    total = sum(n.allocatable["cpu"] for n in snap.nodes.values())
    assert 0.17 <= cpu_only / total <= 0.23


def test_repack_run_spec() -> None:
    loaded = load(GenConfig(nodes=10, seed=0, min_improvement=5, max_pod_groups=3, max_cards=16,
                            resource="huawei.com/ascend-1980"))
    (run,) = loaded.runs.values()
    spec = run.spec
    assert spec.mode == "DryRun" and spec.resource == "huawei.com/ascend-1980"
    assert spec.goal.min_improvement == 5
    assert spec.max_per_run.pod_groups == 3
    assert spec.max_per_run.resources == {"huawei.com/ascend-1980": 16000}
    assert not spec.scope.pod_groups.admits("ns/x", {PROTECTED_LABEL: "true"})
    assert spec.scope.pod_groups.admits("ns/x", {PROTECTED_LABEL: "false"})
    problem = RepackProblem(loaded.snapshot, run)
    protected = {k for k, g in loaded.snapshot.pod_groups.items() if g.labels[PROTECTED_LABEL] == "true"}
    assert problem.pod_groups_in_scope == frozenset(loaded.snapshot.pod_groups) - protected


# ---- planning ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_plan_repack_returns_a_valid_plan(seed: int) -> None:
    cfg = GenConfig(nodes=24, seed=seed, pools=2, cards_per_node=(8, 4), occupancy=0.5, pdb_share=0.3,
                    pending_share=0.05, cpu_pressure=0.2, max_pod_groups=None if seed % 2 else 6)
    loaded = load(cfg)
    (run,) = loaded.runs.values()
    out = plan_repack(loaded.snapshot, run)  # raises PlanInvalidError on a broken plan
    assert out.reason in (RECOMMENDED, INSUFFICIENT, NO_FRAGMENTATION)
    assert out.status.plan.summary.provider_node_count == cfg.nodes


def test_spread_placement_leaves_something_to_repack() -> None:
    loaded = load(GenConfig(nodes=40, seed=0, occupancy=0.5))
    (run,) = loaded.runs.values()
    out = plan_repack(loaded.snapshot, run)
    assert out.reason == RECOMMENDED and out.status.plan.summary.freed_node_count > 0


# ---- configuration and flags ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    {"nodes": 0}, {"pools": 5, "nodes": 4}, {"occupancy": 1.5}, {"pod_sizes": ()}, {"pod_sizes": ((0, 1.0),)},
    {"gang_sizes": ((2, 0.0),)}, {"cpu_per_card": "lots"}, {"cards_per_node": ()}, {"min_improvement": 101},
    {"max_cards": -1}, {"cards_per_node": (2,), "pod_sizes": ((4, 1.0),)},
])
def test_bad_config_is_an_input_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        GenConfig(**kwargs)  # type: ignore[arg-type]


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_flags_map_to_config() -> None:
    ns = parse("-o", "out.yaml", "--nodes", "12", "--cards-per-node", "8,4", "--occupancy", "0.7",
               "--seed", "3",
               "--pools", "3", "--pdb-share", "0.2", "--cpu-pressure", "0.1", "--protected-share", "0",
               "--min-improvement", "10", "--max-pod-groups", "4", "--max-cards", "32",
               "--pod-sizes", "1:0.7,2:0.3", "--no-tainted-pools", "--no-daemonset-pods")
    assert ns.output == "out.yaml"
    cfg = config_from_args(ns)
    assert cfg == GenConfig(nodes=12, cards_per_node=(8, 4), occupancy=0.7, seed=3, pools=3, pdb_share=0.2,
                            cpu_pressure=0.1, protected_share=0.0, min_improvement=10, max_pod_groups=4,
                            max_cards=32, pod_sizes=((1, 0.7), (2, 0.3)), tainted_pools=False,
                            daemonset_pods=False)


def test_unset_flags_keep_defaults() -> None:
    assert config_from_args(parse("-o", "x.yaml")) == GenConfig()


def test_output_flag_is_required_and_values_are_checked() -> None:
    bad: list[list[str]] = [[], ["-o", "x", "--occupancy", "2"], ["-o", "x", "--pod-sizes", "1:a"],
                            ["-o", "x", "--nodes", "0"]]
    for argv in bad:
        with pytest.raises(SystemExit) as e:
            parse(*argv)
        assert e.value.code == 2
    with pytest.raises(InputError, match="--pools"):
        config_from_args(parse("-o", "x", "--nodes", "2", "--pools", "3"))


# ---- queues, PriorityClasses and pending jobs --------------------------------------------------

FAMILY = GenConfig(nodes=24, seed=5, rack_size=4, racks_per_spine=2, topology_share=0.5, queues=4,
                   priority_classes=True, pending_jobs=6, occupancy=0.7)


def test_new_options_at_their_defaults_change_nothing() -> None:
    base = GenConfig(nodes=24, seed=5, rack_size=4, racks_per_spine=2, topology_share=0.5, occupancy=0.7)
    assert dump(base) == dump(GenConfig(nodes=24, seed=5, rack_size=4, racks_per_spine=2, topology_share=0.5,
                                        occupancy=0.7, queues=0, priority_classes=False, pending_jobs=0))
    objs = generate(FAMILY)
    assert dump(FAMILY) == dump(GenConfig(**{f: getattr(FAMILY, f) for f in FAMILY.__dataclass_fields__}))
    placed = {o["metadata"]["name"]: o["spec"].get("nodeName") for o in objs if o["kind"] == "Pod"}
    assert placed == {o["metadata"]["name"]: o["spec"].get("nodeName") for o in generate(base) if o["kind"] == "Pod"}


def test_queues_priorities_and_pending_jobs_load_and_validate() -> None:
    from optplan.solvers.quota.queues import validate_queues

    loaded = load(FAMILY)
    snap = loaded.snapshot
    assert snap.warnings == ()
    assert validate_queues(snap) == []
    leaves = {q.name for q in snap.queues.values() if q.parent is not None}
    assert len(leaves) == 4 and {q.parent for q in snap.queues.values() if q.parent} == {"tenant-a", "tenant-b"}
    assert [q.reclaimable for q in snap.queues.values()].count(False) == 1
    assert {pg.queue for pg in snap.pod_groups.values()} <= leaves
    assert {pc.name: pc.value for pc in snap.priority_classes.values()} == {"high": 1000, "normal": 100, "low": 10}
    assert all(pg.priority_class_name in snap.priority_classes for pg in snap.pod_groups.values())
    jobs = sorted(snap.jobs.values(), key=lambda j: j.creation_timestamp)
    assert [j.name for j in jobs] == [f"pending-{k:04d}" for k in range(1, 7)]
    for j in jobs:
        assert j.queue in leaves and j.priority_class_name in snap.priority_classes
        assert 1 <= len(j.tasks) <= 2 and 1 <= j.min_available <= j.replicas
        assert {t.request(GPU) // 1000 for t in j.tasks} <= {1, 2, 4, 8}
        nt = j.network_topology
        assert nt is None or nt.mode == "soft" or nt.highest_tier_allowed in (1, 2)
    assert any(j.network_topology is not None for j in jobs)


def test_pending_jobs_without_queues_go_to_default_and_flags_parse() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    cfg = config_from_args(p.parse_args(["-o", "x", "--nodes", "8", "--pending-jobs", "3", "--queues", "0",
                                         "--priority-classes"]))
    assert (cfg.pending_jobs, cfg.queues, cfg.priority_classes) == (3, 0, True)
    snap = load(cfg).snapshot
    assert [j.queue for j in snap.jobs.values()] == ["default"] * 3
    assert all(j.network_topology is None for j in snap.jobs.values())
    with pytest.raises(InputError):
        GenConfig(queues=-1)
