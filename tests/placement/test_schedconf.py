"""``--scheduler-conf``: vc-scheduler's configuration read as Volcano reads it (actions, plugins, binpack and
network-topology-aware arguments, capacity's hierarchy), what optplan cannot model named in a warning each,
bad files one line (exit 2), and the weights it gives placement."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.schedconf import parse_scheduler_conf, read_scheduler_conf
from optplan.cli import main
from optplan.errors import InputError
from optplan.models.placement import BinpackWeights
from optplan.models.schedconf import SEED_ACTIONS, SchedulerConf
from optplan.solvers.core.options import PlanOptions
from optplan.solvers.placement.place import plan_placement
from tests.builders import GPU, hypernode, job_task, load, node, pod, vcjob

ROOT_DIR = Path(__file__).resolve().parents[2]
SEED_CONF = ROOT_DIR / "hack" / "cluster" / "volcano-scheduler.conf"
OPTS = PlanOptions(time_limit=5, workers=1, seed=0)


def plugins(*tiers: list[dict[str, Any]], actions: str = ", ".join(SEED_ACTIONS)) -> dict[str, Any]:
    return {"actions": actions, "tiers": [{"plugins": t} for t in tiers]}


BASE = [{"name": "priority"}, {"name": "gang"}, {"name": "predicates"}, {"name": "capacity", "enableHierarchy": True}]

# conf, expected (actions, binpack, hyper binpack, hierarchy), warnings that must appear (substrings)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("seed's file: binpack.resources.cpu is never read",
     yaml.safe_load(SEED_CONF.read_text()),
     {"actions": SEED_ACTIONS, "binpack": BinpackWeights(weight=10, resources={GPU: 10}),
      "hyper_node_binpack": BinpackWeights(weight=10), "hierarchy": True},
     ["plugin binpack: binpack.resources.cpu is not read",
      "plugin nodeorder: only its least-requested and balanced-resource scores"]),
    ("drf: its job order is read, its switch off; hierarchical drf is warned about",
     plugins([*BASE, {"name": "drf", "enableJobOrder": False, "enableHierarchy": True}]),
     {"drf_job_order": False}, ["plugin drf: enableHierarchy (hierarchical dominant resource fairness"]),
    ("no drf: no job order by share",
     plugins(BASE), {"drf_job_order": False}, []),
    ("binpack.cpu and listed resources",
     plugins([*BASE, {"name": "binpack", "arguments": {"binpack.weight": 3, "binpack.cpu": 5, "binpack.memory": 2,
                                                       "binpack.resources": "nvidia.com/gpu, example.com/foo",
                                                       "binpack.resources.nvidia.com/gpu": 7}}]),
     {"binpack": BinpackWeights(weight=3, cpu=5, memory=2, resources={GPU: 7, "example.com/foo": 1})}, []),
    ("a string weight keeps the default, a negative reads as 1",
     plugins([*BASE, {"name": "binpack", "arguments": {"binpack.weight": "10", "binpack.cpu": -4}}]),
     {"binpack": BinpackWeights()}, ["binpack.weight: '10' is not an integer; Volcano keeps the default 1"]),
    ("network-topology-aware: HyperNode binpack weights",
     plugins([*BASE, {"name": "network-topology-aware", "arguments": {
         "weight": 2, "hypernode.binpack.cpu": 0, "hypernode.binpack.resources": "nvidia.com/gpu",
         "hypernode.binpack.resources.nvidia.com/gpu": 9, "hypernode.binpack.normal-pod.enable": True}}]),
     {"hyper_node_binpack": BinpackWeights(weight=2, cpu=0, resources={GPU: 9}), "binpack": None,
      "normal_pod_binpack": True, "normal_pod_fading": 0.8}, []),
    ("network-topology-aware: the normal-pod switch and fading, an unknown key, the plugin's switches",
     plugins([*BASE, {"name": "network-topology-aware", "enabledHyperNodeOrder": False, "enableNodeOrder": False,
                      "arguments": {"hypernode.binpack.normal-pod.enable": "false",
                                    "hypernode.binpack.normal-pod.fading": 0, "hypernode.binpack.normal-pod.x": 1}}]),
     {"normal_pod_binpack": False, "normal_pod_fading": 0.0, "hyper_node_order": False,
      "topology_node_order": False}, ["hypernode.binpack.normal-pod.x is not read by Volcano"]),
    ("network-topology-aware: a fading not a number, a negative one, a switch not a boolean",
     plugins([*BASE, {"name": "network-topology-aware",
                      "arguments": {"hypernode.binpack.normal-pod.enable": "yes",
                                    "hypernode.binpack.normal-pod.fading": "0.5"}}]),
     {"normal_pod_binpack": True, "normal_pod_fading": 0.8},
     ["normal-pod.enable: 'yes' is not a boolean; Volcano keeps the default true",
      "normal-pod.fading: '0.5' is not a number; Volcano keeps the default 0.8"]),
    ("network-topology-aware: a negative fading reads as 0.8, an integer one as a number",
     plugins([*BASE, {"name": "network-topology-aware", "arguments": {"hypernode.binpack.normal-pod.fading": -1}}]),
     {"normal_pod_fading": 0.8}, []),
    ("nodeorder: its two weights read, its other scores warned about",
     plugins([*BASE, {"name": "nodeorder", "arguments": {"leastrequested.weight": 3, "balancedresource.weight": 0,
                                                         "nodeaffinity.weight": 2}}]),
     {"least_requested": 3, "balanced_resource": 0}, ["plugin nodeorder: nodeaffinity.weight is not modelled"]),
    ("capacity without hierarchy",
     plugins([{"name": "priority"}, {"name": "gang"}, {"name": "predicates"}, {"name": "capacity"}]),
     {"hierarchy": False}, ["plugin capacity without enableHierarchy"]),
    ("Volcano's own default: no preempt, no reclaim, proportion",
     plugins([{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}],
             [{"name": "overcommit"}, {"name": "drf"}, {"name": "predicates"}, {"name": "proportion"},
              {"name": "nodeorder"}], actions="enqueue, allocate, backfill"),
     {"actions": ("enqueue", "allocate", "backfill")},
     ["plugin proportion: queue shares by weight",
      "plugin overcommit: not modelled"]),
    ("gang-aware actions, an unknown plugin, a switch off, no gang",
     plugins([{"name": "priority"}, {"name": "predicates", "enablePredicate": False}, {"name": "capacity"},
              {"name": "my-plugin"}], actions="allocate, gangpreempt, gangreclaim, preempt, reclaim"),
     {"actions": ("allocate", "gangpreempt", "gangreclaim", "preempt", "reclaim")},
     ["plugin my-plugin: vc-scheduler does not know it", "plugin predicates: enablePredicate false",
      "no plugin gang"]),
]


@pytest.mark.parametrize(("what", "doc", "expected", "warned"), CASES, ids=[c[0] for c in CASES])
def test_configuration_maps_as_volcano_reads_it(what: str, doc: dict[str, Any], expected: dict[str, Any],
                                                warned: list[str]) -> None:
    conf = parse_scheduler_conf(doc, "conf.yaml")
    for field, value in expected.items():
        assert getattr(conf, field) == value, field
    for w in warned:
        assert any(w in line for line in conf.warnings), (w, conf.warnings)
    assert all("\n" not in line for line in conf.warnings)


def test_a_configuration_optplan_models_whole_warns_nothing() -> None:
    conf = parse_scheduler_conf(plugins([*BASE, {"name": "conformance"}, {"name": "binpack"},
                                         {"name": "network-topology-aware"}]), "conf.yaml")
    assert conf.warnings == ()
    assert conf.binpack == BinpackWeights() and conf.hierarchy


ERRORS: list[tuple[str, Any, str]] = [
    ("unknown action", {"actions": "allocate, bogus"}, "unknown action 'bogus'"),
    ("actions not a string", {"actions": ["allocate"]}, "actions: expected the actions as one string"),
    ("tiers not a list", {"actions": "allocate", "tiers": {"plugins": []}}, "tiers: expected a list"),
    ("plugin without a name", {"actions": "allocate", "tiers": [{"plugins": [{"arguments": {}}]}]},
     "tiers[0].plugins[0]: expected a mapping with a name"),
    ("arguments not a mapping", {"actions": "allocate", "tiers": [{"plugins": [{"name": "binpack", "arguments": 3}]}]},
     "tiers[0].plugins[0].arguments: expected a mapping"),
    ("a switch not a boolean", {"actions": "allocate", "tiers": [{"plugins": [{"name": "capacity",
                                                                               "enableHierarchy": "yes"}]}]},
     "enableHierarchy: expected true or false"),
    ("a weight past optplan's range", plugins([{"name": "binpack", "arguments": {"binpack.weight": 10**6}}]),
     "above 10000"),
]


@pytest.mark.parametrize(("what", "doc", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_configuration_is_one_line(what: str, doc: Any, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_scheduler_conf(doc, "conf.yaml")
    assert message in str(e.value) and "\n" not in str(e.value) and str(e.value).startswith("conf.yaml")


def test_configmap_dump_is_read(tmp_path: Path) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"},
          "data": {"volcano-scheduler.conf": SEED_CONF.read_text()}}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(cm))
    assert replace(read_scheduler_conf(str(path)), source=None) == replace(read_scheduler_conf(str(SEED_CONF)),
                                                                            source=None)
    cm["data"] = {"a": "actions: allocate", "b": "actions: allocate"}
    path.write_text(yaml.safe_dump(cm))
    with pytest.raises(InputError, match=r"no key volcano-scheduler\.conf"):
        read_scheduler_conf(str(path))


@pytest.mark.parametrize("text", ["actions: [\n", "tiers: {a: b\n", "\tactions: allocate"])
def test_a_configmaps_malformed_configuration_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          text: str) -> None:
    """The configuration inside a ConfigMap (a snapshot's, or a dump given to --scheduler-conf) that is not YAML:
    one line naming the file, the ConfigMap and its key, exit 2 (it was an internal error)."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
          "data": {"volcano-scheduler.conf": text}}
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(cm))
    with pytest.raises(InputError, match=r"data\.volcano-scheduler\.conf: malformed YAML"):
        read_scheduler_conf(str(path))
    snap = ROOT_DIR / "instances" / "place-demo.yaml"
    assert main(["place", str(snap), str(path), "--solver", "greedy"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ConfigMap volcano-system/volcano-scheduler-configmap" in err, err


def test_default_is_the_seeds_configuration() -> None:
    assert SchedulerConf().actions == SEED_ACTIONS and SchedulerConf().hierarchy
    assert SchedulerConf().binpack is None and SchedulerConf().hyper_node_binpack is None


# ---- what the configuration changes in a plan ------------------------------------------------------

def _weights_snapshot() -> list[dict[str, Any]]:
    # a: 6 of 8 GPUs used, cpu idle; b: GPUs idle, 60 of 64 cpu used (tests/placement/test_placement.py).
    return [node("a", 8, cpu="64", memory="64Gi"), node("b", 8, cpu="64", memory="64Gi"),
            pod("pa", "a", 6, cpu="0", memory="0", group=None), pod("pb", "b", 0, cpu="60", memory="0", group=None)]


def _place(objs: list[dict[str, Any]], conf: SchedulerConf | None) -> list[str]:
    s = load(*objs).snapshot
    plan = plan_placement(s, list(s.jobs.values()), "greedy", OPTS, scheduler=conf)
    return sorted(b.node for jp in plan.jobs for b in jp.bindings)


def test_binpack_arguments_choose_the_node() -> None:
    objs = [*_weights_snapshot(), vcjob("j", tasks=[job_task("w", 1, 1, cpu="2", memory="1Gi")])]
    assert _place(objs, None) == ["b"]  # Volcano's defaults score cpu and memory only
    gpu_first = parse_scheduler_conf(plugins([*BASE, {"name": "binpack", "arguments": {
        "binpack.resources": GPU, f"binpack.resources.{GPU}": 10}}]), "conf.yaml")
    assert _place(objs, gpu_first) == ["a"]


def test_hypernode_binpack_arguments_choose_the_hypernode() -> None:
    # r0 holds a (GPUs mostly used), r1 holds b (cpu mostly used): one node each, so the HyperNode score decides.
    objs = [*_weights_snapshot(), hypernode("r0", 1, ["a"]), hypernode("r1", 1, ["b"]),
            vcjob("j", tasks=[job_task("w", 1, 1, cpu="2", memory="1Gi")],
                  network_topology={"mode": "hard", "highestTierAllowed": 1})]
    assert _place(objs, None) == ["b"]
    hyper_gpu = parse_scheduler_conf(plugins([*BASE, {"name": "network-topology-aware", "arguments": {
        "hypernode.binpack.resources": GPU, f"hypernode.binpack.resources.{GPU}": 10}}]), "conf.yaml")
    assert hyper_gpu.binpack is None
    assert _place(objs, hyper_gpu) == ["a"]


def test_cli_reads_the_file_warns_and_refuses_bad_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = ROOT_DIR / "instances" / "place-demo.yaml"
    job = ROOT_DIR / "instances" / "place-demo-job.yaml"
    argv = ["place", str(snap), "--job", str(job), "--solver", "greedy", "--now", "2025-06-01T00:00:00Z"]
    assert main([*argv, "-o", "json"]) == 0
    default = capsys.readouterr().out
    assert main([*argv, "-o", "json", "--scheduler-conf", str(SEED_CONF)]) == 0
    out, err = capsys.readouterr()
    assert "plugin nodeorder" in err and out == default  # the demo's choices do not hang on the weights
    bad = tmp_path / "bad.conf"
    bad.write_text('actions: "allocate, shufle"\n')
    assert main([*argv, "--scheduler-conf", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown action 'shufle'" in err
    queues = ROOT_DIR / "instances" / "queues-demo.yaml"
    flat = tmp_path / "flat.conf"
    flat.write_text(yaml.safe_dump(plugins([*BASE[:3], {"name": "capacity"}])))
    assert main(["queues", str(queues), "--scheduler-conf", str(flat)]) == 0
    assert "hierarchy off" in capsys.readouterr().out
