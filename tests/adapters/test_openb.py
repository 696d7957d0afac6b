"""``optplan.adapters.openb``: the openb trace importer, on small CSVs (and the real files when present)."""

from __future__ import annotations

import argparse
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_files, load_objects
from optplan.adapters.openb import MODEL_LABEL, ImportConfig, import_openb
from optplan.cli.import_openb import add_arguments, run
from optplan.errors import InputError
from optplan.solvers.binpack.frag import fragmentation
from optplan.solvers.repack.run import plan_repack

GPU = "nvidia.com/gpu"
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time," \
             "scheduled_time\n"
REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "openb"


def write(tmp: Path, name: str, text: str) -> str:
    p = tmp / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def nodes_csv(tmp: Path, rows: list[str]) -> str:
    return write(tmp, "nodes.csv", NODE_HEADER + "".join(r + "\n" for r in rows))


def pods_csv(tmp: Path, rows: list[tuple[str, int, int, int, int, str, int]]) -> str:
    """(name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, creation_time) rows."""
    lines = [f"{n},{c},{m},{g},{gm},{s},LS,Running,{t},{t + 100},{t}\n" for n, c, m, g, gm, s, t in rows]
    return write(tmp, "pods.csv", POD_HEADER + "".join(lines))


def one_gpu(n: int, start: int = 0, spec: str = "") -> list[tuple[str, int, int, int, int, str, int]]:
    return [(f"pod-{start + k:03d}", 4000, 8192, 1, 1000, spec, start + k) for k in range(n)]


def pods_of(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "Pod"}


def node_of(objs: list[dict[str, Any]]) -> dict[str, str]:
    return {name: o["spec"]["nodeName"] for name, o in pods_of(objs).items()}


SMALL_NODES = ["n-a,32000,131072,4,G2", "n-b,32000,131072,4,G2", "n-c,32000,131072,4,T4"]


# ---- shape ------------------------------------------------------------------------------------

def test_nodes_and_pods_have_kubernetes_shape(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, ["n-b,96000,393216,8,G2", "n-a,16000,122880,2,P100"])
    pods = pods_csv(tmp_path, [("p-1", 12000, 16384, 2, 1000, "", 5)])
    objs, stats = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Node", "Node", "PodGroup", "Pod", "RepackRun"]
    a, b = objs[0], objs[1]
    assert a["metadata"]["name"] == "n-a" and a["metadata"]["labels"][MODEL_LABEL] == "P100"
    assert a["status"]["allocatable"] == {"cpu": "16", "memory": "120Gi", "pods": "110", GPU: "2"}
    assert b["status"]["allocatable"] == {"cpu": "96", "memory": "384Gi", "pods": "110", GPU: "8"}
    pod = pods_of(objs)["p-1"]
    assert pod["spec"]["schedulerName"] == "volcano" and pod["status"]["phase"] == "Running"
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "12", "memory": "16Gi", GPU: "2"}
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert "affinity" not in pod["spec"]
    run_obj = objs[-1]
    assert run_obj["spec"]["goals"] == [{"resource": GPU}] and run_obj["spec"]["mode"] == "DryRun"
    assert stats["nodes"] == 2 and stats["gpus"] == 10 and stats["pods"] == 1


def test_leastallocated_spreads_with_ties_by_name(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, ["n-c,32000,131072,4,G2", "n-a,32000,131072,4,G2", "n-b,32000,131072,4,G2"])
    pods = pods_csv(tmp_path, one_gpu(4))
    objs, _ = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    assert node_of(objs) == {"pod-000": "n-a", "pod-001": "n-b", "pod-002": "n-c", "pod-003": "n-a"}


def test_leastallocated_averages_cpu_memory_and_gpu(tmp_path: Path) -> None:
    # n-a has more GPUs free but far less cpu and memory: the average prefers n-b.
    nodes = nodes_csv(tmp_path, ["n-a,8000,16384,8,G2", "n-b,64000,262144,4,G2"])
    pods = pods_csv(tmp_path, [("p", 4000, 8192, 1, 1000, "", 0)])
    objs, _ = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    assert node_of(objs) == {"p": "n-b"}


def test_trace_order_is_creation_time_then_name(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, ["n-a,32000,131072,1,G2", "n-b,32000,131072,1,G2"])
    pods = pods_csv(tmp_path, [("p-z", 1000, 1024, 1, 1000, "", 0), ("p-late", 1000, 1024, 1, 1000, "", 9),
                               ("p-b", 1000, 1024, 1, 1000, "", 0)])
    objs, stats = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    assert node_of(objs) == {"p-b": "n-a", "p-z": "n-b"}  # the fill is reached before p-late
    assert stats["placed"] == 2 and stats["skipped"] == 0


def test_gpu_spec_restricts_the_model(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, SMALL_NODES)
    pods = pods_csv(tmp_path, [("p-1", 1000, 1024, 1, 1000, "T4", 0), ("p-2", 1000, 1024, 2, 1000, "A10|T4", 1),
                               ("p-3", 1000, 1024, 1, 1000, "X9", 2), ("p-4", 1000, 1024, 1, 1000, "G2|T4", 3)])
    objs, stats = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    assert node_of(objs) == {"p-1": "n-c", "p-2": "n-c", "p-4": "n-a"}
    assert stats["skipped"] == 1
    terms = pods_of(objs)["p-2"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": ["A10", "T4"]}]}]
    snap = load_objects(objs).snapshot
    assert snap.pods["openb/p-2"].required_node_affinity is not None


# ---- fill, passes, departures -------------------------------------------------------------------

def test_fill_stops_at_the_target(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, SMALL_NODES)  # 12 GPUs
    pods = pods_csv(tmp_path, one_gpu(20))
    objs, stats = import_openb(nodes, pods, ImportConfig(fill=50))
    assert stats["placed"] == 6 and stats["gpus_taken_at_fill"] == 6 and stats["fill_reached_percent"] == 50.0
    assert stats["passes"] == 1 and stats["skipped"] == 0
    assert sorted(pods_of(objs)) == [f"pod-{k:03d}" for k in range(6)]
    # ceil: 40% of 12 GPUs is 4.8, so 5 are taken.
    _, stats = import_openb(nodes, pods, ImportConfig(fill=40))
    assert stats["gpus_taken_at_fill"] == 5
    _, stats = import_openb(nodes, pods, ImportConfig(fill=0))
    assert stats["placed"] == 0


def test_trace_is_replayed_until_the_fill_is_reached(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, SMALL_NODES)
    pods = pods_csv(tmp_path, [*one_gpu(5), ("big", 1000, 1024, 8, 1000, "", 99)])
    objs, stats = import_openb(nodes, pods, ImportConfig(fill=100))
    assert stats["gpus_taken_at_fill"] == 12 and stats["passes"] == 3
    assert stats["skipped"] == 2  # "big" fits no node; pass 3 reaches the fill before it
    names = set(pods_of(objs))
    assert {"pod-000", "pod-004", "pod-000-r2", "pod-004-r2", "pod-000-r3"} <= names
    assert len(names) == 12
    snap = load_objects(objs).snapshot
    assert snap.warnings == ()


def test_departures_are_seeded_and_reproducible(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, SMALL_NODES)
    pods = pods_csv(tmp_path, one_gpu(12))
    a, sa = import_openb(nodes, pods, ImportConfig(fill=100, departures=0.25, seed=3))
    b, _ = import_openb(nodes, pods, ImportConfig(fill=100, departures=0.25, seed=3))
    c, _ = import_openb(nodes, pods, ImportConfig(fill=100, departures=0.25, seed=4))
    assert a == b
    assert sa["placed"] == 12 and sa["departed"] == 3 and sa["pods"] == 9
    assert sa["gpus_taken"] == 9 and sa["fill_percent"] == 75.0
    assert set(pods_of(a)) != set(pods_of(c))
    # Placement is deterministic: the survivors stay where they were placed.
    full, _ = import_openb(nodes, pods, ImportConfig(fill=100, seed=3))
    assert {k: v for k, v in node_of(full).items() if k in node_of(a)} == node_of(a)


def test_fractional_and_cpu_only_pods_are_left_out(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, SMALL_NODES)
    pods = pods_csv(tmp_path, [("frac", 1000, 1024, 1, 460, "", 0), ("cpu", 1000, 1024, 0, 0, "", 1),
                               ("whole", 1000, 1024, 1, 1000, "", 2)])
    objs, stats = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    assert set(pods_of(objs)) == {"whole"}
    assert stats["fractional_left_out"] == 1 and stats["cpu_only_left_out"] == 1 and stats["whole_gpu_pods"] == 1


# ---- gangs, loading, planning -------------------------------------------------------------------

def test_every_pod_is_in_a_pod_group_and_gangs_hold_one_shape(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, [f"n-{k:02d},64000,262144,8,G2" for k in range(10)])
    rows = [(f"p-{k:03d}", 4000 * (1 + k // 20), 8192, 1 + (k // 20) % 2, 1000, "", k) for k in range(60)]
    objs, stats = import_openb(nodes, pods_csv(tmp_path, rows),
                               ImportConfig(fill=100, max_passes=1, seed=1, gang_sizes=((1, 1.0), (4, 1.0))))
    loaded = load_objects(objs)
    snap = loaded.snapshot
    assert snap.warnings == ()
    members: dict[str, list[Any]] = defaultdict(list)
    for p in snap.pods.values():
        assert p.scheduler_name == "volcano" and p.group_key is not None
        members[p.group_key].append(p)
    assert set(members) == set(snap.pod_groups)
    sizes = Counter(len(m) for m in members.values())
    assert set(sizes) <= {1, 2, 3, 4} and sizes[4] >= 3 and sizes[1] >= 3
    assert stats["pod_groups"] == len(snap.pod_groups) and stats["gangs"] == sum(
        n for s, n in sizes.items() if s > 1)
    for key, pods in members.items():
        g = snap.pod_groups[key]
        assert 1 <= g.min_member <= len(pods)
        assert g.min_member == max(1, math.ceil(0.75 * len(pods)))
        assert g.owner is not None and g.owner.kind == "Job"
        assert len({(p.requests["cpu"], p.request(GPU)) for p in pods}) == 1


def test_loads_and_plans_with_greedy(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, [f"n-{k:02d},64000,262144,{4 if k % 3 else 8},G2" for k in range(12)])
    rows = [(f"p-{k:03d}", 2000, 4096, (1, 1, 2, 1, 4)[k % 5], 1000, "", k) for k in range(40)]
    objs, _ = import_openb(nodes, pods_csv(tmp_path, rows), ImportConfig(fill=80, departures=0.3, seed=2))
    loaded = load_objects(objs)
    assert loaded.snapshot.warnings == ()
    (run_obj,) = loaded.runs.values()
    before = fragmentation(loaded.snapshot, GPU)
    assert before.percent() > 0
    out = plan_repack(loaded.snapshot, run_obj, solver="greedy")
    assert out.status.plan.summary.provider_node_count == 12


# ---- errors -------------------------------------------------------------------------------------

def test_bad_csv_names_file_line_and_column(tmp_path: Path) -> None:
    good_nodes = nodes_csv(tmp_path, SMALL_NODES)
    good_pods = pods_csv(tmp_path, one_gpu(2))
    cfg = ImportConfig()
    bad = write(tmp_path, "bad.csv", NODE_HEADER + "n-a,32000,131072,4,G2\nn-b,lots,131072,4,G2\n")
    with pytest.raises(InputError) as e:
        import_openb(bad, good_pods, cfg)
    assert (e.value.file, e.value.obj, e.value.field) == (bad, "line 3", "cpu_milli")
    assert "lots" in str(e.value)
    bad = write(tmp_path, "bad.csv", "sn,cpu_milli,gpu,model\nn-a,1,1,G2\n")
    with pytest.raises(InputError, match="memory_mib") as e:
        import_openb(bad, good_pods, cfg)
    assert e.value.obj == "line 1"
    bad = write(tmp_path, "bad.csv", POD_HEADER + "p-1,1000,1024,1,1000,,LS,Running,0,1,0,extra\n")
    with pytest.raises(InputError, match="more fields") as e:
        import_openb(good_nodes, bad, cfg)
    assert e.value.obj == "line 2"
    bad = write(tmp_path, "bad.csv", POD_HEADER + "p-1,1000,1024,1,1000\n")
    with pytest.raises(InputError, match="fewer fields"):
        import_openb(good_nodes, bad, cfg)
    bad = write(tmp_path, "bad.csv", POD_HEADER + "p-1,1000,1024,1,1500,,LS,Running,0,1,0\n")
    with pytest.raises(InputError, match=r"0\.\.1000") as e:
        import_openb(good_nodes, bad, cfg)
    assert e.value.field == "gpu_milli"
    bad = write(tmp_path, "bad.csv", NODE_HEADER + "n-a,1,1,1,G2\nn-a,1,1,1,G2\n")
    with pytest.raises(InputError, match="duplicate"):
        import_openb(bad, good_pods, cfg)
    bad = write(tmp_path, "bad.csv", NODE_HEADER + "Node_A,1,1,1,G2\n")
    with pytest.raises(InputError, match="DNS-1123"):
        import_openb(bad, good_pods, cfg)
    bad = write(tmp_path, "bad.csv", NODE_HEADER + "n-a,1,-5,1,G2\n")
    with pytest.raises(InputError, match="at least 0"):
        import_openb(bad, good_pods, cfg)
    bad = write(tmp_path, "bad.csv", NODE_HEADER + "n-a,1,1,99999999999999999999,G2\n")
    with pytest.raises(InputError, match="gpu: must be at most 2147483647"):
        import_openb(bad, good_pods, cfg)
    bad = write(tmp_path, "bad.csv", NODE_HEADER + "n-a,1,1,８,G2\n")
    with pytest.raises(InputError, match="gpu: expected an integer"):
        import_openb(bad, good_pods, cfg)
    for text in ("", NODE_HEADER):
        with pytest.raises(InputError):
            import_openb(write(tmp_path, "bad.csv", text), good_pods, cfg)
    with pytest.raises(InputError, match="cannot read") as e:
        import_openb(str(tmp_path / "missing.csv"), good_pods, cfg)
    assert e.value.file == str(tmp_path / "missing.csv")


def test_five_column_pod_lists_are_read(tmp_path: Path) -> None:
    """The multigpu* lists have no gpu_spec and no creation_time: order by name, any model."""
    nodes = nodes_csv(tmp_path, SMALL_NODES)
    pods = write(tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-b,1000,1024,1,1000\n"
                                    "p-a,1000,1024,1,1000\n")
    objs, _ = import_openb(nodes, pods, ImportConfig(fill=100, max_passes=1))
    assert node_of(objs) == {"p-a": "n-a", "p-b": "n-b"}


@pytest.mark.parametrize("kwargs", [{"fill": 101}, {"departures": 1.5}, {"gang_sizes": ()},
                                    {"gang_sizes": ((0, 1.0),)}, {"min_member_ratio": -1}, {"max_passes": 0}])
def test_bad_config_is_an_input_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        ImportConfig(**kwargs)


# ---- command line -------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="command", required=True)
    add_arguments(sub.add_parser("import"))
    return ap


def test_run_writes_the_snapshot_atomically(tmp_path: Path) -> None:
    nodes = nodes_csv(tmp_path, SMALL_NODES)
    pods = pods_csv(tmp_path, one_gpu(12))
    out = tmp_path / "snap.yaml"
    args = parser().parse_args(["import", "openb", "--nodes", nodes, "--pods", pods, "--seed", "5", "--fill", "75",
                                "--departures", "0.2", "--gang-sizes", "1:1,2:1", "-o", str(out)])
    assert (args.source, args.verbose, args.min_member_ratio) == ("openb", 0, 0.75)
    line = run(args)
    assert line.startswith(f"wrote {out}: 3 nodes (12 GPUs), 7 pods") and line.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "List"
    assert doc["items"] == import_openb(nodes, pods, ImportConfig(fill=75, departures=0.2, seed=5,
                                                                  gang_sizes=((1, 1.0), (2, 1.0))))[0]
    loaded = load_files([out])
    assert len(loaded.snapshot.pods) == 7 and len(loaded.runs) == 1


def test_flags_are_checked(tmp_path: Path) -> None:
    for argv in (["--pods", "p", "--fill", "50", "-o", "x"], ["--nodes", "n", "--pods", "p", "--fill", "150",
                                                             "-o", "x"],
                 ["--nodes", "n", "--pods", "p", "--fill", "50"], ["--nodes", "n", "--pods", "p", "-o", "x"]):
        with pytest.raises(SystemExit) as e:
            parser().parse_args(["import", "openb", *argv])
        assert e.value.code == 2


# ---- the real trace (skipped when the data folder is absent) ------------------------------------

@pytest.mark.skipif(not (REAL / "openb_node_list_gpu_node.csv").is_file()
                    or not (REAL / "openb_pod_list_default.csv").is_file(), reason="openb data not present")
def test_real_openb_trace() -> None:
    objs, stats = import_openb(str(REAL / "openb_node_list_gpu_node.csv"), str(REAL / "openb_pod_list_default.csv"),
                               ImportConfig(fill=90, departures=0.2, seed=0))
    assert stats["nodes"] == 1213 and stats["gpus"] == 6212
    assert stats["fractional_left_out"] == 3078 and stats["whole_gpu_pods"] == 3986
    assert stats["fill_reached_percent"] >= 90.0
    snap = load_objects(objs).snapshot
    assert len(snap.nodes) == 1213 and sum(n.allocatable[GPU] for n in snap.nodes.values()) == 6212 * 1000
    assert fragmentation(snap, GPU).percent() > 0
