"""Execute-time calls: nominate (which node goes into nominatedNodeName) and verify (status.result,
the final condition, actualNodeName), through the public API, on small inline clusters.

The story of every case: the plan freed n1 by moving job-a-worker-0 (2 cards) to n2; n3 is partly
used, n4 is entirely free. The VCJob controller recreated the pod under the same name (new UID)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optplan import api
from optplan.errors import InputError
from tests.builders import node, pod, podgroup, repack_run

NS = "default"
VICTIM = "job-a-worker-0"


def execute_run(relocations: list[dict[str, Any]] | None = None, *, freed: tuple[str, ...] = ("n1",),
                moves: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    run = repack_run("exec-1")
    run["spec"]["mode"] = "Execute"
    run["status"] = {
        "phase": "Running",
        "plan": {"freedNodes": list(freed), "moves": moves if moves is not None else [
            {"namespace": NS, "podGroupName": "pg-a", "owner": {"apiVersion": "batch.volcano.sh/v1alpha1",
                                                               "kind": "Job", "name": "job-a"},
             "cards": 2, "pods": [{"name": VICTIM, "fromNode": "n1", "toNode": "n2", "cards": 2}]}]},
        "relocations": relocations if relocations is not None else [
            {"namespace": NS, "victimPodName": VICTIM, "victimPodUID": "uid-old", "plannedNodeName": "n2",
             "eviction": {"phase": "Evicted"}}],
    }
    return run


def with_uid(obj: dict[str, Any], uid: str, created: str = "") -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    if created:
        obj["metadata"]["creationTimestamp"] = created
    return obj


def cluster(*, replacement_on: str | None, n2_used: int = 6, extra: list[dict[str, Any]] | None = None,
            run: dict[str, Any] | None = None) -> api.Cluster:
    objs = [node("n1"), node("n2"), node("n3"), node("n4"),
            podgroup("pg-a", 1), podgroup("pg-b", 1), podgroup("pg-c", 1),
            pod("b-0", "n2", n2_used, group="pg-b"), pod("c-0", "n3", 4, group="pg-c"),
            with_uid(pod(VICTIM, replacement_on, 2, group="pg-a",
                         phase="Running" if replacement_on else "Pending"), "uid-new"),
            run if run is not None else execute_run()]
    return api.snapshot_from_objects(objs + (extra or []))


def relocation(c: api.Cluster) -> dict[str, Any]:
    rels: list[dict[str, Any]] = c.runs["exec-1"].raw["status"]["relocations"]
    return rels[0]


# ---- nominate ----------------------------------------------------------------------------------

def test_nominate_keeps_the_planned_node_while_it_fits() -> None:
    c = cluster(replacement_on=None)
    n = api.nominate(c, "exec-1", relocation(c), VICTIM)
    assert (n.node_name, n.planned) == ("n2", True)
    assert n.feasible_node_count == 2  # n2 and n3; n1 is being freed, n4 is entirely free


def test_nominate_moves_on_when_the_planned_node_filled_up_but_never_refills_freed_or_idle_nodes() -> None:
    c = cluster(replacement_on=None, n2_used=7)
    n = api.nominate(c, "exec-1", relocation(c), VICTIM)
    assert n.node_name == "n3" and not n.planned
    assert "n2 no longer fits (insufficient nvidia.com/gpu)" in n.reason


def test_nominate_counts_pods_already_nominated_to_a_node() -> None:
    other = pod("z-0", None, 2, group="pg-c", phase="Pending")
    other["status"]["nominatedNodeName"] = "n2"
    c = cluster(replacement_on=None, extra=[other])
    n = api.nominate(c, "exec-1", relocation(c), VICTIM)
    assert n.node_name == "n3"


def test_nominate_returns_none_when_only_freed_or_idle_nodes_would_take_it() -> None:
    c = cluster(replacement_on=None, n2_used=7, extra=[pod("c-1", "n3", 4, group="pg-c")])
    n = api.nominate(c, "exec-1", relocation(c), VICTIM)
    assert n.node_name is None
    assert "the scheduler decides" in n.reason


def test_nominate_respects_predicates_on_the_planned_node() -> None:
    c = api.snapshot_from_objects([
        node("n1"), node("n2", labels={"pool": "b"}), node("n3", labels={"pool": "a"}),
        podgroup("pg-a", 1), podgroup("pg-b", 1),
        pod("b-0", "n2", 4, group="pg-b"), pod("b-1", "n3", 4, group="pg-b"),
        with_uid(pod(VICTIM, None, 2, group="pg-a", phase="Pending", node_selector={"pool": "a"}), "uid-new"),
        execute_run()])
    n = api.nominate(c, "exec-1", relocation(c), f"{NS}/{VICTIM}")
    assert n.node_name == "n3"
    assert "nodeSelector pool=a does not match" in n.reason


def test_nominate_keeps_a_hard_topology_gang_inside_its_hypernode() -> None:
    def hyper(name: str, nodes: list[str]) -> dict[str, Any]:
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}}
                                                for n in nodes]}}

    c = api.snapshot_from_objects([
        node("n1"), node("n2"), node("n3"), node("n4"), hyper("s1", ["n1", "n2"]), hyper("s2", ["n3", "n4"]),
        podgroup("pg-a", 1, network_topology={"mode": "hard", "highestTierAllowed": 1}), podgroup("pg-b", 1),
        pod("a-1", "n2", 4, group="pg-a"), pod("b-0", "n3", 2, group="pg-b"), pod("b-1", "n1", 7, group="pg-b"),
        with_uid(pod(VICTIM, None, 4, group="pg-a", phase="Pending"), "uid-new"), execute_run(freed=("n9",))])
    n = api.nominate(c, "exec-1", {"namespace": NS, "victimPodName": VICTIM, "plannedNodeName": "n3"}, VICTIM)
    # n3 has room, but the gang's other pod is on n2 and tier-1 HyperNodes hold {n1, n2} or {n3, n4}.
    assert n.node_name == "n2"
    assert "outside every HyperNode of tier <= 1" in n.reason


def test_nominate_bad_input_is_an_input_error_naming_the_field() -> None:
    c = cluster(replacement_on=None)
    with pytest.raises(InputError, match="replacement"):
        api.nominate(c, "exec-1", relocation(c), "no-such-pod")
    with pytest.raises(InputError, match="victimPodName"):
        api.nominate(c, "exec-1", {"namespace": NS}, VICTIM)


# ---- verify --------------------------------------------------------------------------------------

def test_verify_completed_on_the_planned_node() -> None:
    v = api.verify(cluster(replacement_on="n2"), "exec-1")
    assert v.conditions[0].reason == "ExecutionCompleted" and v.phase == "Succeeded"
    assert (v.result.freed_node_count, v.result.moved_card_count, v.result.metrics_verified) == (1, 2, True)
    assert v.result.frag_after_percent == 0  # n2 (8) and n3 (4) hold 12 cards: 2 nodes are the minimum
    placement = v.relocations[0].placement
    assert placement is not None
    assert (placement.actual_node_name, placement.replacement_pod_name) == ("n2", VICTIM)


def test_verify_a_plan_that_frees_no_node_says_its_relocations_finished() -> None:
    # A plan with goals may only make room (its moves free no node): not "all 0 planned node(s) freed".
    v = api.verify(cluster(replacement_on="n2", run=execute_run(freed=())), "exec-1")
    assert v.conditions[0].reason == "ExecutionCompleted" and v.phase == "Succeeded"
    assert v.conditions[0].message.startswith("all 1 relocation(s) finished (the plan frees no node)")
    assert v.result.freed_node_count == 0


def test_verify_alternative_placement_when_the_replacement_landed_elsewhere_but_n1_is_free() -> None:
    v = api.verify(cluster(replacement_on="n3"), "exec-1")
    assert v.conditions[0].reason == "ExecutionCompletedWithAlternativePlacement"
    assert "default/job-a-worker-0 -> n3 (planned n2)" in v.conditions[0].message
    assert v.relocations[0].placement is not None and v.relocations[0].placement.actual_node_name == "n3"


def test_verify_goal_not_reached_when_a_planned_node_still_holds_cards() -> None:
    v = api.verify(cluster(replacement_on="n1"), "exec-1")
    assert v.conditions[0].reason == "ExecutionGoalNotReached" and v.phase == "Failed"
    assert v.still_occupied == {"n1": (f"{NS}/{VICTIM}",)}
    assert v.result.freed_node_count == 0


def test_verify_pending_replacement_keeps_the_run_open_and_metrics_unverified() -> None:
    v = api.verify(cluster(replacement_on=None), "exec-1")
    assert v.conditions[0].status == "False" and v.conditions[0].reason == "ReplacementsPending"
    assert not v.result.metrics_verified and v.phase == "Running"


def test_verify_does_not_take_the_victim_itself_for_its_replacement() -> None:
    run = execute_run()
    c = api.snapshot_from_objects([
        node("n1"), node("n2"), podgroup("pg-a", 1),
        with_uid(pod(VICTIM, "n1", 2, group="pg-a"), "uid-old"), run])
    v = api.verify(c, "exec-1")
    assert v.conditions[0].reason == "ReplacementsPending"
    assert "no replacement pod found" in v.conditions[0].message


def test_verify_without_relocations_derives_them_from_the_plan() -> None:
    run = execute_run(relocations=[])
    v = api.verify(cluster(replacement_on="n2", run=run), "exec-1")
    assert v.conditions[0].reason == "ExecutionCompleted"
    assert [r.victim_pod_name for r in v.relocations] == [VICTIM]


def test_verify_servinggroup_recreate_records_the_new_podgroup_name() -> None:
    owner = ("workload.serving.volcano.sh/v1alpha1", "ModelServing", "chat")
    moves = [{"namespace": NS, "podGroupName": "chat-0", "owner": {"apiVersion": owner[0], "kind": owner[1],
                                                                  "name": "chat"},
              "cards": 1, "pods": [{"name": "chat-0-inference-0-1", "fromNode": "n1", "toNode": "n2", "cards": 1}]}]
    run = execute_run(moves=moves, relocations=[
        {"namespace": NS, "victimPodName": "chat-0-inference-0-1", "plannedNodeName": "n2"}])

    def ms_pod(name: str, group: str, node_name: str, created: str) -> dict[str, Any]:
        p = pod(name, node_name, 1, group=group, labels={"modelserving.volcano.sh/name": "chat",
                                                         "modelserving.volcano.sh/group-name": group})
        return with_uid(p, name, created)

    c = api.snapshot_from_objects([
        node("n1"), node("n2"), node("n3"),
        podgroup("chat-1", 2, owner=owner), podgroup("chat-0-g2", 2, owner=owner),
        ms_pod("chat-1-inference-0-0", "chat-1", "n3", "2026-01-01T00:00:00Z"),
        ms_pod("chat-1-inference-0-1", "chat-1", "n3", "2026-01-01T00:00:00Z"),
        ms_pod("chat-0-g2-inference-0-0", "chat-0-g2", "n2", "2026-02-01T00:00:00Z"),
        ms_pod("chat-0-g2-inference-0-1", "chat-0-g2", "n2", "2026-02-01T00:00:00Z"), run])
    v = api.verify(c, "exec-1")
    rel = v.relocations[0]
    assert rel.replacement_pod_group_name == "chat-0-g2"
    assert rel.placement is not None and rel.placement.replacement_pod_name == "chat-0-g2-inference-0-1"
    assert v.conditions[0].reason == "ExecutionCompleted"


def test_verify_uses_the_replacement_the_controller_recorded() -> None:
    run = execute_run(relocations=[{"namespace": NS, "victimPodName": VICTIM, "plannedNodeName": "n2",
                                    "placement": {"replacementPodName": "job-a-worker-0-x"}}])
    c = api.snapshot_from_objects([
        node("n1"), node("n2"), podgroup("pg-a", 1), pod("job-a-worker-0-x", "n2", 2, group="pg-a"), run])
    v = api.verify(c, "exec-1")
    assert v.conditions[0].reason == "ExecutionCompleted"


def test_verify_needs_a_plan() -> None:
    run = repack_run("exec-1")
    run["spec"]["mode"] = "Execute"
    with pytest.raises(InputError, match=r"status\.plan"):
        api.verify(api.snapshot_from_objects([node("n1"), run]), "exec-1")


def test_nominate_and_verify_refuse_a_dry_run_naming_the_mode() -> None:
    run = execute_run()
    run["spec"]["mode"] = "DryRun"
    c = api.snapshot_from_objects([node("n1"), node("n2"), podgroup("pg-a", 1), pod(VICTIM, "n2", 2, group="pg-a"),
                                   run])
    with pytest.raises(InputError, match=r"RepackRun/exec-1: spec\.mode: verify applies to Execute runs; this run "
                                         r"is a DryRun"):
        api.verify(c, "exec-1")
    with pytest.raises(InputError, match=r"RepackRun/exec-1: spec\.mode: nominate applies to Execute runs"):
        api.nominate(c, "exec-1", VICTIM)


def test_verify_rejects_a_malformed_status_naming_the_field() -> None:
    run = execute_run()
    run["status"]["plan"]["freedNodes"] = "n1"
    with pytest.raises(InputError, match=r"RepackRun/exec-1: status\.plan\.freedNodes"):
        api.verify(api.snapshot_from_objects([node("n1"), run]), "exec-1")


def test_verify_output_fits_the_crd_status_schema() -> None:
    from optplan.cli.verify import verification_status
    from tests.controller.test_crd_schema import assert_valid

    c = cluster(replacement_on="n3")
    v = api.verify(c, "exec-1")
    doc = dict(c.runs["exec-1"].raw)
    doc["status"] = verification_status(v)  # what `optplan verify --write-status` patches in
    assert_valid(doc)


def test_the_bundled_execute_example_nominates_and_verifies(capsys: pytest.CaptureFixture[str]) -> None:
    from optplan.cli import main
    assert main(["nominate", "instances/execute-demo.yaml", "--victim", "ascend-batch-training-worker-1",
                 "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodeName"] == "ascend-node-03"
    assert main(["verify", "instances/execute-demo.yaml", "-o", "json"]) == 0
    during = json.loads(capsys.readouterr().out)
    assert (during["phase"], during["conditions"][0]["reason"]) == ("Running", "ReplacementsPending")
    assert main(["verify", "instances/execute-after.yaml", "-o", "json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["conditions"][0]["reason"] == "ExecutionCompleted"
    assert after["freedNodes"] == ["ascend-node-01"] and after["result"]["metricsVerified"] is True
