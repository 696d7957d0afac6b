"""An Execute with an admit goal, end to end (issue 15): the controller against the fake API server (CRD schemas
enforced) and the simulated world evicts the pods the plan moves, nominates their replacements off the nodes it
makes room on, and verifies that the gang can now be placed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from optplan.controller import status as st
from tests.builders import pod
from tests.controller.test_controller_e2e import RUN_API, Env
from tests.fakekube import FakeKube

DEMO = Path(__file__).resolve().parents[2] / "instances" / "admit-gang.yaml"


def demo_execute() -> list[dict[str, Any]]:
    items = copy.deepcopy(yaml.safe_load(DEMO.read_text())["items"])
    for o in items:
        if o["kind"] == "RepackRun":
            o["spec"]["mode"] = "Execute"
    return items


def test_an_execute_with_an_admit_goal_makes_room_and_keeps_it(fk: FakeKube, tmp_path: Path) -> None:
    env = Env(fk, str(fk.write_kubeconfig(tmp_path / "kubeconfig")), demo_execute())
    try:
        run = env.until_finished(env.controller(), name="admit-llm")
    finally:
        env.close()
    status = run["status"]
    cond = st.find_condition(status, st.COMPLETE)
    assert cond is not None and status["phase"] == "Succeeded", status
    assert cond["reason"] == "ExecutionCompleted"  # no admitted gang lost its room (else ExecutionGoalNotReached)
    goals = st.find_condition(status, "GoalsMet")
    assert goals is not None and goals["reason"] == "GoalsMet"
    gang = status["plan"]["goals"]["admissions"][0]
    room = {b["node"] for b in gang["bindings"]}
    assert len(status["relocations"]) == 2 and all(r["eviction"]["phase"] == "Evicted" for r in status["relocations"])
    # every replacement landed off the nodes kept for the gang
    landed = {r["placement"].get("actualNodeName") for r in status["relocations"]}
    assert landed and not landed & room, (landed, room)
    assert [r["metadata"]["name"] for r in fk.objects(*RUN_API)] == ["admit-llm"]


def test_a_dry_run_with_goals_keeps_its_goals_met_condition(fk: FakeKube, tmp_path: Path) -> None:
    items = [o for o in demo_execute() if o["kind"] != "RepackRun"]
    run = next(o for o in demo_execute() if o["kind"] == "RepackRun")
    run["spec"]["mode"] = "DryRun"
    env = Env(fk, str(fk.write_kubeconfig(tmp_path / "kubeconfig")), [*items, run])
    try:
        done = env.until_finished(env.controller(), name="admit-llm")
    finally:
        env.close()
    assert [c["type"] for c in done["status"]["conditions"]] == ["Complete", "GoalsMet"]
    assert done["status"]["plan"]["goals"]["admittedJobCount"] == 1


def test_the_gang_placed_on_the_room_made_for_it_is_the_goal_met(fk: FakeKube, tmp_path: Path) -> None:
    """On the real cluster vc-scheduler binds the admitted gang as soon as its room is free, often before the
    verdict: its pods on the nodes the plan emptied are the goal met, not "still holding" (the run had ended
    Failed/ExecutionGoalNotReached there). Verified on the executed run's cluster with the gang bound where the
    plan forecast it."""
    from optplan import api
    from optplan.adapters import kube
    env = Env(fk, str(fk.write_kubeconfig(tmp_path / "kubeconfig")), demo_execute())
    try:
        run = env.until_finished(env.controller(), name="admit-llm")
    finally:
        env.close()
    status = run["status"]
    [gang] = status["plan"]["goals"]["admissions"]
    with kube.connect(str(tmp_path / "kubeconfig")) as client:
        objects = client.snapshot_objects()
    freed = set(status["plan"]["freedNodes"])
    bound = []
    for b in gang["bindings"]:
        name = f"{gang['name']}-{b['task']}-{b['index']}"
        p = pod(name, b["node"], 8, group=None, ns=gang["namespace"], labels={"volcano.sh/job-name": gang["name"]})
        bound.append(p)
    assert freed and freed <= {b["node"] for b in gang["bindings"]}, (freed, gang["bindings"])
    v = api.verify(api.snapshot_from_objects([*objects, *bound]), "admit-llm")
    assert v.phase == "Succeeded", v.conditions
    assert v.conditions[0].reason == st.find_condition(status, st.COMPLETE)["reason"]  # type: ignore[index]
    assert "taken by the admitted gang(s)" in v.conditions[0].message
    assert v.result.freed_node_count == 0  # taken, not free: freedNodeCount counts nodes without the resource
    # a pod of another job there is still a holder
    other = pod("intruder", sorted(freed)[0], 1, group=None, ns=gang["namespace"])
    assert api.verify(api.snapshot_from_objects([*objects, other]), "admit-llm").phase == "Failed"
