"""Repack with a purpose (issue 15 §1, §4): the goals as a RepackRun writes them (admit, freeHyperNodes, and
the networkTopology alias), the flags that give them (--admit, --free-hypernodes, --require-hypernodes),
what they resolve to in a snapshot, and bad goals: one line on stderr naming the field, exit 2, no output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.adapters.kubefile import load_objects
from optplan.cli import main
from optplan.errors import InputError
from optplan.models.goals import AdmitGoal, FreeHyperNodesGoal
from optplan.models.repack import RepackRun
from optplan.solvers.goals.resolve import ResolvedGoals, resolve_goals
from tests.builders import hypernode, job_task, node, pod, podgroup, queue, repack_run, vcjob

JOB = ("batch.volcano.sh/v1alpha1", "Job")


def named_tier(obj: dict[str, Any], tier_name: str) -> dict[str, Any]:
    obj["spec"]["tierName"] = tier_name
    return obj


def with_phase(obj: dict[str, Any], phase: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj["status"] = {"state": {"phase": phase}}
    obj["metadata"]["labels"] = labels or {}
    return obj


def cluster() -> list[dict[str, Any]]:
    """Two racks (tier 1, tierName rack) of two 8-card nodes under a spine (tier 2); ``train`` runs on n0;
    pending: ``llm`` (queue research, label admit=true, PodGroup ``llm-pg``) and ``small`` (default queue);
    ``done`` has finished; PodGroup ``orphan`` belongs to no VCJob and has no pod (a bare gang with nothing to
    place)."""
    return [
        *(node(f"n{i}") for i in range(4)),
        named_tier(hypernode("r0", 1, ["n0", "n1"]), "rack"), named_tier(hypernode("r1", 1, ["n2", "n3"]), "rack"),
        named_tier(hypernode("spine", 2, ["r0", "r1"], "HyperNode"), "spine"),
        queue("research"),
        with_phase(vcjob("train", tasks=[job_task("worker", 1, 4)]), "Running"),
        podgroup("train-pg", owner=(*JOB, "train")), pod("train-worker-0", "n0", 4, group="train-pg"),
        with_phase(vcjob("llm", "research", [job_task("worker", 2, 8)]), "Pending", {"admit": "true"}),
        podgroup("llm-pg", 2, owner=(*JOB, "llm")),
        with_phase(vcjob("small", tasks=[job_task("worker", 1, 2)]), "Pending"),
        with_phase(vcjob("done", tasks=[job_task("worker", 1, 2)]), "Completed"),
        podgroup("orphan", owner=None),
    ]


def run_with(goal: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    obj = repack_run()
    obj["spec"]["goals"][0].update(goal or {})
    obj["spec"].update(spec)
    return obj


def resolve(goal: dict[str, Any] | None = None, **spec: Any) -> ResolvedGoals:
    loaded = load_objects([*cluster(), run_with(goal, **spec)])
    return resolve_goals(loaded.snapshot, next(iter(loaded.runs.values())), file="snap.yaml")


def keys(r: ResolvedGoals) -> list[str]:
    return [j.key for j in r.jobs]


# ---- the spec as written -------------------------------------------------------------------------

SPEC = """\
apiVersion: repack.volcano.sh/v1alpha1
kind: RepackRun
metadata: {name: make-room}
spec:
  goals:
  - resource: nvidia.com/gpu
    admit:
      jobs: [default/llm-pg, default/small]
      selector: {matchLabels: {admit: "true"}}
      queues: [research]
    freeHyperNodes: {tierName: rack, count: 1, required: true}
"""


def load_run(text: str) -> RepackRun:
    return next(iter(load_objects([yaml.safe_load(text)]).runs.values()))


def test_goals_are_read_from_camel_case_yaml() -> None:
    spec = load_run(SPEC).spec
    admit = spec.goal.admit
    assert admit is not None and admit.jobs == ("default/llm-pg", "default/small") and admit.queues == ("research",)
    assert admit.selector is not None and admit.selector.match_labels == {"admit": "true"}
    assert spec.free_hyper_nodes == FreeHyperNodesGoal(tier_name="rack", count=1, required=True)
    assert spec.has_purpose


def test_network_topology_is_freeHyperNodes_required() -> None:
    spec = load_run(repack_yaml(networkTopology={"tier": 1, "requiredNodeBlocks": 2})).spec
    assert spec.free_hyper_nodes == FreeHyperNodesGoal(tier=1, count=2, required=True)
    assert spec.has_purpose and spec.goal.free_hyper_nodes is None


@pytest.mark.parametrize("nt", [
    {"hyperNodeTier": 1, "requiredNodeBlocks": 2},
    {"hyperNodeTier": 1, "nodeBlockSize": 8, "requiredNodeBlocks": 2, "mode": "binpack"},
    {"hyperNodeTier": 1, "nodeBlockSize": 8, "requiredNodeBlocks": 2, "mode": "spread"},
])
def test_the_other_implementations_network_topology_is_freeHyperNodes_required(nt: dict[str, Any]) -> None:
    spec = load_run(repack_yaml(networkTopology=nt)).spec
    assert spec.free_hyper_nodes == FreeHyperNodesGoal(tier=1, count=2, required=True)
    by_name = {**{k: v for k, v in nt.items() if k != "hyperNodeTier"}, "hyperNodeTierName": "rack"}
    named = load_run(repack_yaml(networkTopology=by_name)).spec
    assert named.free_hyper_nodes == FreeHyperNodesGoal(tier_name="rack", count=2, required=True)


def test_a_run_without_goals_is_the_seeds() -> None:
    spec = load_run(repack_yaml()).spec
    assert spec.goal.admit is None and spec.free_hyper_nodes is None and not spec.has_purpose


def test_the_spec_classes_are_importable_from_models_goals() -> None:
    assert AdmitGoal(queues=("q",)).queues == ("q",)


def repack_yaml(goal: dict[str, Any] | None = None, **spec: Any) -> str:
    return yaml.safe_dump(run_with(goal, **spec))


def test_hypernode_tier_name_is_read() -> None:
    snap = load_objects(cluster()).snapshot
    assert {h.name: (h.tier, h.tier_name) for h in snap.hyper_nodes.values()} == {
        "r0": (1, "rack"), "r1": (1, "rack"), "spine": (2, "spine")}
    assert load_objects([hypernode("h", 1, [])]).snapshot.hyper_nodes["h"].tier_name is None


# ---- what the goals resolve to ---------------------------------------------------------------------

def test_jobs_by_key_or_by_their_podgroup() -> None:
    assert keys(resolve({"admit": {"jobs": ["default/small"]}})) == ["default/small"]
    assert keys(resolve({"admit": {"jobs": ["default/llm-pg"]}})) == ["default/llm"]


def test_selector_queues_and_names_are_a_union_each_once_sorted() -> None:
    r = resolve({"admit": {"jobs": ["default/small", "default/llm-pg"], "selector": {"matchLabels": {"admit": "true"}},
                           "queues": ["research"]}})
    assert keys(r) == ["default/llm", "default/small"]
    assert keys(resolve({"admit": {"selector": {"matchLabels": {"admit": "true"}}}})) == ["default/llm"]
    assert keys(resolve({"admit": {"queues": ["default"]}})) == ["default/small"]  # train runs; done is done
    assert (r.free_tier, r.free_count, r.free_required, r.hyper_nodes) == (None, 0, False, ())


def test_a_selector_or_queue_matching_no_pending_gang_is_no_error() -> None:
    assert keys(resolve({"admit": {"selector": {"matchLabels": {"team": "nobody"}}}})) == []
    assert keys(resolve({"admit": {"queues": ["root"]}})) == []


def test_hypernodes_by_tier_or_tier_name() -> None:
    r = resolve({"freeHyperNodes": {"tierName": "rack", "count": 2}})
    assert (r.jobs, r.free_tier, r.free_count, r.free_required, r.hyper_nodes) == ((), 1, 2, False, ("r0", "r1"))
    r = resolve({"freeHyperNodes": {"tier": 2, "count": 1, "required": True}})
    assert (r.free_tier, r.free_count, r.free_required, r.hyper_nodes) == (2, 1, True, ("spine",))
    r = resolve(networkTopology={"tierName": "rack", "requiredNodeBlocks": 1})
    assert (r.free_tier, r.free_count, r.free_required, r.hyper_nodes) == (1, 1, True, ("r0", "r1"))
    for nt in ({"hyperNodeTierName": "rack", "nodeBlockSize": 2, "mode": "spread", "requiredNodeBlocks": 1},
               {"hyperNodeTier": 1, "requiredNodeBlocks": 1, "mode": "binpack"}):  # blocks of whole racks
        assert resolve(networkTopology=nt) == r


# ---- bad goals through the CLI: one line naming the field, exit 2, nothing on stdout -------------------

def cli(capsys: pytest.CaptureFixture[str], tmp_path: Path, run: dict[str, Any] | None,
        *flags: str) -> tuple[int, str, str]:
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                    "items": [*cluster(), *([run] if run is not None else [run_with()])]}))
    try:
        code = main(["repack", str(snap), "--solver", "greedy", *flags])
    except SystemExit as e:  # argparse's usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


BAD_SPECS: dict[str, tuple[dict[str, Any], dict[str, Any], str, str]] = {
    # name: (goal, spec, field, reason)
    "no such job": ({"admit": {"jobs": ["default/small", "team-a/x"]}}, {}, "spec.goals[0].admit.jobs[1]",
                    "no VCJob or PodGroup team-a/x in the snapshot"),
    "running job": ({"admit": {"jobs": ["default/train"]}}, {}, "spec.goals[0].admit.jobs[0]",
                    "default/train is not pending: all its pods are placed"),
    "running job by its PodGroup": ({"admit": {"jobs": ["default/train-pg"]}}, {}, "spec.goals[0].admit.jobs[0]",
                                    "default/train-pg (VCJob default/train) is not pending"),
    "finished job": ({"admit": {"jobs": ["default/done"]}}, {}, "spec.goals[0].admit.jobs[0]",
                     "default/done is not pending: its phase is Completed"),
    "PodGroup of no VCJob": ({"admit": {"jobs": ["default/orphan"]}}, {}, "spec.goals[0].admit.jobs[0]",
                             "default/orphan is not pending: all its pods are placed"),
    "not namespace/name": ({"admit": {"jobs": ["small"]}}, {}, "spec.goals[0].admit.jobs[0]",
                           "expected namespace/name"),
    "admit naming nothing": ({"admit": {}}, {}, "spec.goals[0].admit", "admit names no job"),
    "no such queue": ({"admit": {"queues": ["research", "nope"]}}, {}, "spec.goals[0].admit.queues[1]",
                      "no queue nope in the snapshot (queues: default, research, root)"),
    "no such tier": ({"freeHyperNodes": {"tier": 3, "count": 1}}, {}, "spec.goals[0].freeHyperNodes.tier",
                     "no HyperNode has tier 3; tiers: 1, 2"),
    "no such tierName": ({"freeHyperNodes": {"tierName": "pod", "count": 1}}, {},
                         "spec.goals[0].freeHyperNodes.tierName", "no HyperNode has tierName pod; tier names: rack, "
                                                                  "spine"),
    "count over the tier": ({"freeHyperNodes": {"tier": 1, "count": 5}}, {}, "spec.goals[0].freeHyperNodes.count",
                            "count 5 > 2 HyperNodes of tier 1"),
    "requiredNodeBlocks over the tier": ({}, {"networkTopology": {"tier": 2, "requiredNodeBlocks": 2}},
                                         "spec.networkTopology.requiredNodeBlocks",
                                         "requiredNodeBlocks 2 > 1 HyperNodes of tier 2"),
    "count 0": ({"freeHyperNodes": {"tier": 1, "count": 0}}, {}, "spec.goals[0].freeHyperNodes.count",
                "greater than or equal to 1"),
    "tier 0": ({"freeHyperNodes": {"tier": 0, "count": 1}}, {}, "spec.goals[0].freeHyperNodes.tier",
               "greater than or equal to 1"),
    "tier as a string": ({"freeHyperNodes": {"tier": "1", "count": 1}}, {}, "spec.goals[0].freeHyperNodes.tier",
                         "expected an integer"),
    "required as a string": ({"freeHyperNodes": {"tier": 1, "count": 1, "required": "yes"}}, {},
                             "spec.goals[0].freeHyperNodes.required", "expected a boolean"),
    "tier and tierName": ({"freeHyperNodes": {"tier": 1, "tierName": "rack", "count": 1}}, {},
                          "spec.goals[0].freeHyperNodes", "give exactly one of tier and tierName"),
    "neither tier nor tierName": ({}, {"networkTopology": {"requiredNodeBlocks": 1}}, "spec.networkTopology",
                                  "give exactly one of tier, tierName, hyperNodeTier and hyperNodeTierName"),
    "tier and hyperNodeTier": ({}, {"networkTopology": {"tier": 1, "hyperNodeTier": 1, "requiredNodeBlocks": 1}},
                               "spec.networkTopology",
                               "give exactly one of tier, tierName, hyperNodeTier and hyperNodeTierName"),
    "no such hyperNodeTier": ({}, {"networkTopology": {"hyperNodeTier": 3, "requiredNodeBlocks": 1}},
                              "spec.networkTopology.hyperNodeTier", "no HyperNode has tier 3; tiers: 1, 2"),
    "no such hyperNodeTierName": ({}, {"networkTopology": {"hyperNodeTierName": "pod", "requiredNodeBlocks": 1}},
                                  "spec.networkTopology.hyperNodeTierName", "no HyperNode has tierName pod"),
    "blocks smaller than a HyperNode": ({}, {"networkTopology": {"hyperNodeTier": 1, "nodeBlockSize": 1,
                                                                 "requiredNodeBlocks": 1}},
                                        "spec.networkTopology.nodeBlockSize",
                                        "blocks of 1 node(s) are not whole HyperNodes of tier 1 (r0 has 2, r1 has 2): "
                                        "optplan frees whole HyperNodes only; write nodeBlockSize: 2, or leave it out"),
    "blocks of half the spine": ({}, {"networkTopology": {"hyperNodeTier": 2, "nodeBlockSize": 2,
                                                        "requiredNodeBlocks": 1}},
                               "spec.networkTopology.nodeBlockSize", "(spine has 4): optplan frees whole HyperNodes "
                                                                     "only; write nodeBlockSize: 4"),
    "nodeBlockSize 0": ({}, {"networkTopology": {"hyperNodeTier": 1, "nodeBlockSize": 0, "requiredNodeBlocks": 1}},
                        "spec.networkTopology.nodeBlockSize", "greater than or equal to 1"),
    "nodeBlockSize a string": ({}, {"networkTopology": {"hyperNodeTier": 1, "nodeBlockSize": "2",
                                                        "requiredNodeBlocks": 1}},
                               "spec.networkTopology.nodeBlockSize", "expected an integer"),
    "mode pack": ({}, {"networkTopology": {"hyperNodeTier": 1, "mode": "pack", "requiredNodeBlocks": 1}},
                  "spec.networkTopology.mode", "'binpack' or 'spread'"),
    "freeHyperNodes and networkTopology": ({"freeHyperNodes": {"tier": 1, "count": 1}},
                                           {"networkTopology": {"tier": 1, "requiredNodeBlocks": 1}},
                                           "spec.networkTopology", "give freeHyperNodes or networkTopology, not both"),
}


@pytest.mark.parametrize("name", list(BAD_SPECS))
def test_bad_goals_are_one_line_naming_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                 name: str) -> None:
    goal, spec, field, reason = BAD_SPECS[name]
    code, out, err = cli(capsys, tmp_path, run_with(goal, **spec))
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert "RepackRun/run" in err and f": {field}: " in err and reason in err, err


def test_resolve_names_file_run_and_field() -> None:
    with pytest.raises(InputError) as e:
        resolve({"admit": {"jobs": ["team-a/x"]}})
    assert (e.value.file, e.value.obj, e.value.field) == ("snap.yaml", "RepackRun/run", "spec.goals[0].admit.jobs[0]")


# ---- the flags -------------------------------------------------------------------------------------

def test_flags_give_the_run_its_goals(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = run_with({"admit": {"jobs": ["default/small"], "queues": ["research"]}})
    code, out, err = cli(capsys, tmp_path, run, "--admit", "default/llm", "--admit", "default/small",
                         "--free-hypernodes", "rack:1")
    assert code == 0, err
    goal = yaml.safe_load(out)["spec"]["goals"][0]
    assert goal["admit"] == {"jobs": ["default/small", "default/llm"], "queues": ["research"]}
    assert goal["freeHyperNodes"] == {"tierName": "rack", "count": 1, "required": False}
    code, out, err = cli(capsys, tmp_path, None, "--require-hypernodes", "1:2")
    assert code == 0, err
    assert yaml.safe_load(out)["spec"]["goals"][0]["freeHyperNodes"] == {"tier": 1, "count": 2, "required": True}


def test_without_flags_the_run_is_printed_as_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = run_with({"admit": {"selector": {"matchLabels": {"admit": "true"}}}})
    code, out, err = cli(capsys, tmp_path, run)
    assert code == 0, err
    assert yaml.safe_load(out)["spec"] == run["spec"]


@pytest.mark.parametrize(("flag", "value"), [
    ("--free-hypernodes", "x"), ("--free-hypernodes", "0:1"), ("--free-hypernodes", "1:0"),
    ("--free-hypernodes", "1:"), ("--free-hypernodes", ":2"), ("--require-hypernodes", "1:-1"),
    ("--admit", "small"), ("--admit", "default/"), ("--admit", "a/b/c"),
])
def test_bad_flag_values_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str,
                                          value: str) -> None:
    code, out, err = cli(capsys, tmp_path, None, flag, value)
    assert (code, out) == (2, "")
    assert f"argument {flag}" in err.splitlines()[-1]


def test_free_and_require_together_are_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = cli(capsys, tmp_path, None, "--free-hypernodes", "1:1", "--require-hypernodes", "1:1")
    assert (code, out) == (2, "") and "not allowed with" in err.splitlines()[-1]


@pytest.mark.parametrize(("flags", "field", "reason"), [
    (("--admit", "team-a/x"), "--admit", "no VCJob or PodGroup team-a/x in the snapshot"),
    (("--admit", "default/small", "--admit", "default/train"), "--admit", "default/train is not pending"),
    (("--free-hypernodes", "3:1"), "--free-hypernodes", "no HyperNode has tier 3; tiers: 1, 2"),
    (("--require-hypernodes", "rack:3"), "--require-hypernodes", "count 3 > 2 HyperNodes of tier 1"),
    (("--free-hypernodes", "pod:1"), "--free-hypernodes", "no HyperNode has tierName pod"),
])
def test_bad_goals_from_flags_name_the_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            flags: tuple[str, ...], field: str, reason: str) -> None:
    code, out, err = cli(capsys, tmp_path, None, *flags)
    assert (code, out) == (2, "")
    assert len(err.splitlines()) == 1 and f": {field}: " in err and reason in err, err


def test_a_bad_goal_in_the_yaml_is_named_even_with_flags(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _out, err = cli(capsys, tmp_path, run_with({"admit": {"jobs": ["team-a/x"]}}), "--admit", "default/small")
    assert code == 2 and ": spec.goals[0].admit.jobs[0]: " in err


def test_a_hypernode_flag_with_network_topology_is_refused(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    run = run_with(networkTopology={"tier": 1, "requiredNodeBlocks": 1})
    code, out, err = cli(capsys, tmp_path, run, "--free-hypernodes", "1:1")
    assert (code, out) == (2, "")
    assert ": --free-hypernodes: " in err and "not both" in err
