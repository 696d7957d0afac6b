"""The fake API server behaves as the apiserver does where the Repack controller depends on it: the real
kubernetes client (``optplan.adapters.kube.connect``'s ApiClient, and the official ``watch.Watch``)
talks to ``tests.fakekube`` over real HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from optplan.adapters import kube
from tests.builders import node, pdb, pod, repack_run
from tests.fakekube import FakeKube
from tests.fakeworld import ready

RUNS = "/apis/repack.volcano.sh/v1alpha1/repackruns"
PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class Http:
    """Requests through the kubernetes client's ApiClient (urllib3), as optplan's adapter sends them."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    def __call__(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                 **query: str) -> tuple[int, dict[str, Any]]:
        _, url, headers, out, _ = self.api.param_serialize(
            method=method, resource_path=path, query_params=list(query.items()) or None, body=body,
            header_params={"Content-Type": content_type, "Accept": "application/json"}, auth_settings=["BearerToken"])
        resp = self.api.call_api(method, url, header_params=headers, body=out, _request_timeout=10)
        return resp.status, json.loads(resp.read())

    def lines(self, path: str, **query: str) -> Iterator[dict[str, Any]]:
        """A watch: its events as they arrive."""
        _, url, headers, _, _ = self.api.param_serialize(
            method="GET", resource_path=path, query_params=list(query.items()), header_params={},
            auth_settings=["BearerToken"])
        resp = self.api.call_api("GET", url, header_params=headers, _request_timeout=10)
        for line in _lines(resp.response):
            yield json.loads(line)


def _lines(raw: Any) -> Iterator[bytes]:
    buf = b""
    for chunk in raw.stream(1024):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line


@pytest.fixture
def fake(fk: FakeKube) -> FakeKube:
    return fk


@pytest.fixture
def http(fake: FakeKube, tmp_path: Path) -> Iterator[Http]:
    with kube.connect(str(fake.write_kubeconfig(tmp_path / "kubeconfig"))) as client:
        yield Http(client.api)


def run_body(name: str = "run", **spec: Any) -> dict[str, Any]:
    body = repack_run(name)
    body["spec"].update(spec)
    return body


def _status_doc() -> dict[str, Any]:
    return {"phase": "Running", "conditions": [{"type": "Complete", "status": "False", "reason": "ReplacementsPending",
                                                "lastTransitionTime": "2026-12-01T00:00:00Z"}]}


# ---- CRD schema: validation, pruning, defaulting ------------------------------------------------

@pytest.mark.parametrize(("mutate", "field", "message"), [
    (lambda b: b["spec"].update(mode="Sometimes"), "spec.mode",
     'Unsupported value: "Sometimes": supported values: "DryRun", "Execute"'),
    (lambda b: b["spec"].pop("goals"), "spec.goals", "Required value"),
    (lambda b: b["spec"].update(goals=[]), "spec.goals",
     "Invalid value: 0: spec.goals in body should have at least 1 items"),
    (lambda b: b["spec"]["goals"][0].update(minFragImprovementPercent=101), "spec.goals[0].minFragImprovementPercent",
     "Invalid value: 101: spec.goals[0].minFragImprovementPercent in body should be less than or equal to 100"),
    (lambda b: b["spec"].update(maxPerRun={"podGroups": "two"}), "spec.maxPerRun.podGroups",
     'Invalid value: "string": spec.maxPerRun.podGroups in body must be of type integer: "string"'),
    (lambda b: b["spec"].update(maxPerRun={"resources": {"nvidia.com/gpu": "8 cards"}}),
     "spec.maxPerRun.resources[nvidia.com/gpu]", "in body should match"),
    (lambda b: b.pop("spec"), "spec", "Required value"),
])
def test_create_refuses_what_the_crd_schema_refuses_naming_the_field(http: Http, fake: FakeKube, mutate: Any,
                                                                     field: str, message: str) -> None:
    body = run_body()
    mutate(body)
    code, status = http("POST", RUNS, body)
    assert code == 422 and status["reason"] == "Invalid"
    assert [c["field"] for c in status["details"]["causes"]] == [field]
    assert message in status["details"]["causes"][0]["message"]
    assert status["message"].startswith(f'RepackRun.repack.volcano.sh "run" is invalid: {field}: ')
    assert fake.objects("repack.volcano.sh/v1alpha1", "RepackRun") == []


def test_int_or_string_takes_both_and_several_errors_are_listed(http: Http) -> None:
    ok = run_body(maxPerRun={"resources": {"nvidia.com/gpu": 8, "cpu": "500m"}})
    assert http("POST", RUNS, ok)[0] == 201
    bad = run_body("bad", mode="Now", maxPerRun={"podGroups": -1})
    code, status = http("POST", RUNS, bad)
    assert code == 422
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.maxPerRun.podGroups", "spec.mode"]
    assert status["message"].startswith('RepackRun.repack.volcano.sh "bad" is invalid: [spec.maxPerRun.podGroups: ')


def test_unknown_fields_are_pruned_and_defaults_filled(http: Http) -> None:
    body = run_body()
    body["spec"].pop("mode")
    body["spec"]["colour"] = "blue"
    body["spec"]["goals"][0]["weight"] = 3
    body["metadata"]["shoeSize"] = 44
    body["extra"] = {"a": 1}
    code, made = http("POST", RUNS, body)
    assert code == 201
    assert made["spec"] == {"goals": [{"resource": "nvidia.com/gpu"}], "mode": "DryRun",
                            "disruptionProtection": "Honor"}
    assert "shoeSize" not in made["metadata"] and "extra" not in made
    assert http("GET", f"{RUNS}/run")[1]["spec"] == made["spec"]


def test_strict_field_validation_refuses_unknown_fields_and_warn_names_them(http: Http, fake: FakeKube) -> None:
    """As the real API server: ``fieldValidation=Strict`` (kubectl's default) refuses an unknown field with
    400; without it (optplan's own requests) the field is pruned and a ``Warning`` header names it;
    ``Ignore`` prunes silently."""
    body = run_body()
    body["spec"]["priority"] = 1
    body["spec"]["goals"][0]["weight"] = 3
    code, status = http("POST", RUNS, body, fieldValidation="Strict")
    assert code == 400 and status["reason"] == "BadRequest"
    assert status["message"] == ('RepackRun in version "v1alpha1" cannot be handled as a RepackRun: strict decoding '
                                 'error: unknown field "spec.goals[0].weight", unknown field "spec.priority"')
    assert fake.objects("repack.volcano.sh/v1alpha1", "RepackRun") == []
    _, url, headers, out, _ = http.api.param_serialize(
        method="POST", resource_path=RUNS, body=body, auth_settings=["BearerToken"],
        header_params={"Content-Type": "application/json", "Accept": "application/json"})
    resp = http.api.call_api("POST", url, header_params=headers, body=out, _request_timeout=10)
    assert resp.status == 201
    assert resp.getheader("Warning") == ('299 - "unknown field \\"spec.goals[0].weight\\"", '
                                         '299 - "unknown field \\"spec.priority\\""')
    assert "priority" not in json.loads(resp.read())["spec"]
    code, _ = http("POST", RUNS, {**body, "metadata": {"name": "ignored"}}, fieldValidation="Ignore")
    assert code == 201


def test_the_crds_cel_rule_is_enforced(http: Http, fake: FakeKube) -> None:
    """spec's x-kubernetes-validations rule (freeHyperNodes or networkTopology, not both), with the real
    server's cause."""
    both = run_body(goals=[{"resource": "nvidia.com/gpu", "freeHyperNodes": {"tier": 1, "count": 1}}],
                    networkTopology={"tier": 1, "requiredNodeBlocks": 1})
    code, status = http("POST", RUNS, both)
    assert code == 422, status
    assert status["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "spec", "message": (
        "Invalid value: give freeHyperNodes or networkTopology, not both")}]
    either = run_body(goals=[{"resource": "nvidia.com/gpu", "freeHyperNodes": {"tier": 1, "count": 1}}])
    assert http("POST", RUNS, either)[0] == 201


def test_cel_rules_outside_the_supported_subset_are_refused_not_passed() -> None:
    from tests.fakekube import cel_eval
    assert cel_eval("self.a.exists(x, x == 'b') && size(self.a) == 2", {"a": ["a", "b"]})
    with pytest.raises(ValueError, match="cannot read it"):
        cel_eval("self.a + 1 > 2", {"a": 1})
    with pytest.raises(ValueError, match="unexpected"):
        cel_eval("self.a.map(x, x)", {"a": []})


@pytest.mark.parametrize(("edit", "field", "message"), [
    (lambda c: c.pop("image"), "spec.containers[0].image", "Required value"),
    (lambda c: c["resources"].pop("limits"), "spec.containers[0].resources.limits",
     "Required value: Limit must be set for non overcommitable resources"),
    (lambda c: c["resources"]["limits"].update({"nvidia.com/gpu": "2"}),
     "spec.containers[0].resources.requests",
     'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2'),
])
def test_a_pod_is_refused_as_the_real_server_refuses_it(http: Http, fake: FakeKube, edit: Any, field: str,
                                                        message: str) -> None:
    """A container needs an image; an extended resource's request needs an equal limit."""
    body = pod("p", None)
    body.pop("status")
    edit(body["spec"]["containers"][0])
    code, status = http("POST", PODS, body)
    assert code == 422, status
    assert status["details"]["causes"] == [{"reason": status["details"]["causes"][0]["reason"], "field": field,
                                            "message": message}]
    assert status["message"] == f'Pod "p" is invalid: {field}: {message}'
    ok = pod("q", None)
    ok["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1000m"}  # equal, spelled otherwise
    assert http("POST", PODS, ok)[0] == 201


def test_status_writes_are_validated_and_pruned(http: Http) -> None:
    http("POST", RUNS, run_body())
    status = _status_doc()
    status["relocations"] = [{"namespace": "ns", "victimPodName": "p", "eviction": {"phase": 3}}]
    code, out = http("PATCH", f"{RUNS}/run/status", {"status": status}, MERGE)
    assert code == 422
    assert [c["field"] for c in out["details"]["causes"]] == ["status.relocations[0].eviction.phase"]
    status["relocations"] = [{"namespace": "ns", "victimPodName": "p", "notes": "dropped"}]
    status["conditions"][0]["status"] = "Maybe"
    code, out = http("PATCH", f"{RUNS}/run/status", {"status": status}, MERGE)
    assert code == 422 and out["details"]["causes"][0]["field"] == "status.conditions[0].status"
    assert 'Unsupported value: "Maybe": supported values: "True", "False", "Unknown"' in out["message"]
    status["conditions"][0]["status"] = "False"
    code, out = http("PATCH", f"{RUNS}/run/status", {"status": status}, MERGE)
    assert code == 200 and "notes" not in out["status"]["relocations"][0]
    status["conditions"][0]["lastTransitionTime"] = "yesterday"
    code, out = http("PATCH", f"{RUNS}/run/status", {"status": status}, MERGE)
    assert code == 422 and "must be of type date-time" in out["message"]
    status["conditions"][0]["lastTransitionTime"] = "2026-12-01T00:00:00Z"
    status["conditions"] += [{"type": "Planned", "status": "True", "reason": "Done"},
                             {"type": "Complete", "status": "True", "reason": "Done"}]
    code, out = http("PATCH", f"{RUNS}/run/status", {"status": status}, MERGE)  # a list-type map: keys unique
    assert code == 422 and [(c["field"], c["reason"]) for c in out["details"]["causes"]] == [
        ("status.conditions[2]", "FieldValueDuplicate")]
    assert out["details"]["causes"][0]["message"] == 'Duplicate value: map[string]interface {}{"type":"Complete"}'


def test_without_crd_schemas_the_run_is_stored_as_sent(tmp_path: Path) -> None:
    server = FakeKube().start()  # the default: the existing adapter tests write statuses the CRD refuses
    try:
        server.create(run_body(mode="Whenever"))
        assert server.get("repack.volcano.sh/v1alpha1", "RepackRun", "run")["spec"]["mode"] == "Whenever"
    finally:
        server.stop()


WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}], pattern: '^[0-9]+%$'}
              note: {type: string, nullable: true, maxLength: 5}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
              labels: {type: object, additionalProperties: {type: integer}}
          status: {type: object, properties: {ready: {type: boolean}}}
"""


def test_a_crd_without_status_subresource_nullable_int_or_string_and_open_objects(http: Http, fake: FakeKube,
                                                                                   tmp_path: Path) -> None:
    (tmp_path / "crd.yaml").write_text(WIDGET_CRD, encoding="utf-8")
    fake.install_crd(tmp_path / "crd.yaml")
    path = "/apis/example.com/v1/namespaces/team/widgets"
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 3, "note": None, "free": {"any": {"thing": [1]}}, "labels": {"a": 1}, "gone": 1},
            "status": {"ready": True}}
    code, made = http("POST", path, body)
    assert code == 201 and made["metadata"]["namespace"] == "team"
    assert made["spec"] == {"size": 3, "note": None, "free": {"any": {"thing": [1]}}, "labels": {"a": 1}}
    assert made["status"] == {"ready": True}  # no status subresource: status is written with the object
    code, out = http("PATCH", f"{path}/w", {"status": {"ready": False}}, MERGE)
    assert code == 200 and out["metadata"]["generation"] == 2  # ... and counts as a change of the object
    assert http("PATCH", f"{path}/w/status", {"status": {"ready": True}}, MERGE)[0] == 404
    bad = {**body, "metadata": {"name": "v"}, "spec": {"size": "big", "note": "too long", "labels": {"a": "x"}}}
    code, out = http("POST", path, bad)
    assert code == 422
    assert [(c["field"], c["reason"]) for c in out["details"]["causes"]] == [
        ("spec.labels[a]", "FieldValueTypeInvalid"), ("spec.note", "FieldValueTooLong"),
        ("spec.size", "FieldValueInvalid")]
    assert "spec.size in body should match '^[0-9]+%$'" in out["message"]
    code, out = http("POST", path, {**body, "metadata": {"name": "u"}, "spec": {"size": 1.5}})
    assert code == 422 and out["details"]["causes"][0]["reason"] == "FieldValueTypeInvalid"


# ---- status subresource, generation, server-set fields ------------------------------------------

def test_status_subresource_separates_spec_and_status(http: Http) -> None:
    body = run_body()
    body["status"] = _status_doc()
    code, made = http("POST", RUNS, body)
    assert code == 201 and "status" not in made  # create drops status
    assert made["metadata"]["generation"] == 1 and made["metadata"]["uid"] and made["metadata"]["creationTimestamp"]
    code, out = http("PATCH", f"{RUNS}/run", {"status": _status_doc(), "metadata": {"labels": {"a": "b"}}}, MERGE)
    assert code == 200 and "status" not in out and out["metadata"]["labels"] == {"a": "b"}
    assert out["metadata"]["generation"] == 1  # metadata only: no bump
    code, out = http("PATCH", f"{RUNS}/run/status", {"status": _status_doc(), "spec": {"mode": "Execute"}}, MERGE)
    assert code == 200 and out["spec"]["mode"] == "DryRun" and out["status"]["phase"] == "Running"
    assert out["metadata"]["generation"] == 1  # status only: no bump
    code, out = http("PATCH", f"{RUNS}/run", {"spec": {"mode": "Execute"}}, MERGE)
    assert out["metadata"]["generation"] == 2 and out["status"]["phase"] == "Running"
    rv = out["metadata"]["resourceVersion"]
    code, again = http("PATCH", f"{RUNS}/run", {"spec": {"mode": "Execute"}}, MERGE)
    assert again["metadata"]["resourceVersion"] == rv  # a no-op write is no write


def test_pod_status_patch_changes_status_only_and_spec_is_immutable(http: Http, fake: FakeKube) -> None:
    fake.add(pod("p", None, phase="Pending"), server_fields=True)
    code, out = http("PATCH", f"{PODS}/p/status", {"status": {"nominatedNodeName": "n2"},
                                                   "spec": {"nodeName": "n9"}}, MERGE)
    assert code == 200 and out["status"] == {"phase": "Pending", "nominatedNodeName": "n2"}
    assert "nodeName" not in out["spec"]
    code, out = http("PATCH", f"{PODS}/p", {"spec": {"nodeName": "n9"}}, MERGE)
    assert code == 422 and out["details"]["causes"][0]["field"] == "spec"


def test_strategic_merge_merges_pod_conditions_by_type_and_is_refused_for_crs(http: Http, fake: FakeKube) -> None:
    p = pod("p", "n1")
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]
    fake.add(p)
    code, out = http("PATCH", f"{PODS}/p/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                     STRATEGIC)
    assert code == 200
    assert out["status"]["conditions"] == [{"type": "PodScheduled", "status": "True"},
                                           {"type": "Ready", "status": "True"}]
    code, out = http("PATCH", f"{PODS}/p/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                     MERGE)
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}]  # merge patch replaces lists
    http("POST", RUNS, run_body())
    code, out = http("PATCH", f"{RUNS}/run", {"spec": {"mode": "Execute"}}, STRATEGIC)
    assert code == 415 and out["reason"] == "UnsupportedMediaType"


def test_json_patch_with_a_test_operation(http: Http) -> None:
    http("POST", RUNS, run_body())
    ops = [{"op": "test", "path": "/spec/mode", "value": "DryRun"}, {"op": "replace", "path": "/spec/mode",
                                                                     "value": "Execute"}]
    code, out = http("PATCH", f"{RUNS}/run", ops, JSON_PATCH)
    assert code == 200 and out["spec"]["mode"] == "Execute"
    code, out = http("PATCH", f"{RUNS}/run", ops, JSON_PATCH)
    assert code == 422 and out["message"].startswith("json patch: test failed")


# ---- writes: conflicts, create, delete ----------------------------------------------------------

def test_update_with_a_stale_resource_version_conflicts(http: Http) -> None:
    _, made = http("POST", RUNS, run_body())
    stale = made["metadata"]["resourceVersion"]
    made["spec"]["mode"] = "Execute"
    code, updated = http("PUT", f"{RUNS}/run", made)
    assert code == 200 and updated["metadata"]["generation"] == 2
    made["spec"]["mode"] = "DryRun"
    code, out = http("PUT", f"{RUNS}/run", made)
    assert code == 409 and out["reason"] == "Conflict"
    assert "the object has been modified" in out["message"]
    code, out = http("PATCH", f"{RUNS}/run/status", {"metadata": {"resourceVersion": stale},
                                                     "status": _status_doc()}, MERGE)
    assert code == 409
    del made["metadata"]["resourceVersion"]
    code, out = http("PUT", f"{RUNS}/run", made)  # a CR's update must name the version it replaces
    assert code == 422 and out["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_create_conflicts_and_generates_names(http: Http) -> None:
    assert http("POST", RUNS, run_body())[0] == 201
    code, out = http("POST", RUNS, run_body())
    assert code == 409 and out["reason"] == "AlreadyExists" and out["details"]["name"] == "run"
    body = run_body()
    body["metadata"] = {"generateName": "run-"}
    names = {http("POST", RUNS, body)[1]["metadata"]["name"] for _ in range(3)}
    assert len(names) == 3 and all(n.startswith("run-") and len(n) == 9 for n in names)


def test_delete_with_uid_precondition_and_finalizers(http: Http) -> None:
    body = run_body()
    body["metadata"]["finalizers"] = ["repack.volcano.sh/cleanup"]
    _, made = http("POST", RUNS, body)
    code, out = http("DELETE", f"{RUNS}/run", {"preconditions": {"uid": "someone-else"}})
    assert code == 409 and "Precondition failed: UID in precondition: someone-else" in out["message"]
    code, out = http("DELETE", f"{RUNS}/run", {"preconditions": {"uid": made["metadata"]["uid"]}})
    assert code == 200 and out["metadata"]["deletionTimestamp"]  # held by its finalizer
    code, out = http("PATCH", f"{RUNS}/run", {"metadata": {"finalizers": None}}, MERGE)
    assert code == 200
    assert http("GET", f"{RUNS}/run")[0] == 404
    http("POST", RUNS, run_body())
    code, out = http("DELETE", f"{RUNS}/run")
    assert (code, out["status"], out["details"]["name"]) == (200, "Success", "run")


def test_leases_conflict_and_events_are_stored(http: Http, fake: FakeKube) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "optplan"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    code, a = http("POST", LEASES, lease)
    assert code == 201 and a["metadata"]["namespace"] == "kube-system"
    assert http("POST", LEASES, lease)[0] == 409
    b = json.loads(json.dumps(a))
    a["spec"]["holderIdentity"] = "a-renewed"
    assert http("PUT", f"{LEASES}/optplan", a)[0] == 200
    b["spec"]["holderIdentity"] = "b"
    code, out = http("PUT", f"{LEASES}/optplan", b)  # b read before a renewed: it loses
    assert code == 409 and out["reason"] == "Conflict"
    assert http("GET", f"{LEASES}/optplan")[1]["spec"]["holderIdentity"] == "a-renewed"
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "run."},
             "involvedObject": {"kind": "RepackRun", "name": "run"}, "reason": "Planned", "message": "ok"}
    assert http("POST", "/api/v1/namespaces/default/events", event)[0] == 201
    assert [e["reason"] for e in fake.objects("v1", "Event")] == ["Planned"]


# ---- list and watch ------------------------------------------------------------------------------

def test_list_label_selector_and_resource_version(http: Http, fake: FakeKube) -> None:
    fake.add(pod("a", "n1", labels={"app": "x", "tier": "1"}), pod("b", "n1", labels={"app": "y"}), pod("c", "n1"))
    rv = str(fake.resource_version)
    for selector, names in [("app=x", ["a"]), ("app!=x", ["b", "c"]), ("app", ["a", "b"]), ("!app", ["c"]),
                            ("app in (x,y),tier notin (2)", ["a", "b"]), ("app==x,tier=1", ["a"])]:
        _, out = http("GET", PODS, labelSelector=selector)
        assert [i["metadata"]["name"] for i in out["items"]] == names, selector
        assert out["metadata"]["resourceVersion"] == rv


def test_a_list_or_continue_older_than_the_history_is_gone(http: Http, fake: FakeKube) -> None:
    fake.add(*[pod(f"p{i}", "n1") for i in range(3)])
    old = str(fake.resource_version)
    _, page = http("GET", PODS, limit="2")
    assert http("GET", PODS, resourceVersion=old)[0] == 200
    fake.add(pod("p9", "n1"))
    fake.compact()
    code, out = http("GET", PODS, resourceVersion=old)
    assert code == 410 and out["reason"] == "Expired" and "too old resource version" in out["message"]
    code, out = http("GET", PODS, limit="2", **{"continue": page["metadata"]["continue"]})
    assert code == 410 and "continue parameter is too old" in out["message"]


def _wait_for_watch(fake: FakeKube) -> None:
    deadline = time.monotonic() + 5
    while fake.watch_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)


def _stream(fake: FakeKube, api: k8s.ApiClient, until: str | None = None, **kwargs: Any) -> list[dict[str, Any]]:
    """The watch's events until the stream ends, or through the first event of type ``until`` (so that a slow
    machine waits longer instead of the stream's timeout cutting the events short)."""
    core = k8s.CoreV1Api(api)
    events = []
    w = k8s_watch.Watch()
    for e in w.stream(core.list_namespaced_pod, "default", **kwargs):
        events.append(e)
        if e["type"] == until:
            w.stop()
    return events


def test_watch_resumes_after_a_resource_version_with_bookmarks(http: Http, fake: FakeKube) -> None:
    fake.add(pod("before", "n1"))
    rv = str(fake.resource_version)

    def later() -> None:
        _wait_for_watch(fake)
        fake.add(pod("after", "n1"))
        fake.patch("v1", "Pod", "after", {"status": {"phase": "Succeeded"}}, subresource="status")
        fake.delete("v1", "Pod", "before")
        fake.bookmark()

    threading.Thread(target=later, daemon=True).start()
    events = _stream(fake, http.api, until="BOOKMARK", resource_version=rv, allow_watch_bookmarks=True,
                     timeout_seconds=30)
    seen = [(e["type"], e["raw_object"]["metadata"].get("name")) for e in events]
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "before"), ("BOOKMARK", None)]
    assert events[-1]["raw_object"]["metadata"]["resourceVersion"] == str(fake.resource_version)
    assert events[1]["object"].status.phase == "Succeeded"  # the client deserialises the pod


def test_watch_without_a_version_lists_first_and_filters_by_label(http: Http, fake: FakeKube) -> None:
    fake.add(pod("a", "n1", labels={"app": "x"}), pod("b", "n1"))

    def later() -> None:
        _wait_for_watch(fake)
        fake.patch("v1", "Pod", "b", {"metadata": {"labels": {"app": "x"}}})
        fake.patch("v1", "Pod", "a", {"metadata": {"labels": {"app": "z"}}})

    threading.Thread(target=later, daemon=True).start()
    events = list(http.lines(PODS, watch="1", labelSelector="app=x", timeoutSeconds="1"))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")]  # b starts matching, a stops


def test_periodic_bookmarks_and_field_selected_watches(http: Http, fake: FakeKube) -> None:
    fake.add(pod("a", "n1"), pod("b", "n2"))
    fake.bookmark_interval = 0.2

    def later() -> None:
        _wait_for_watch(fake)
        fake.patch("v1", "Pod", "b", {"status": {"phase": "Failed"}}, subresource="status")
        fake.patch("v1", "Pod", "a", {"status": {"phase": "Failed"}}, subresource="status")

    threading.Thread(target=later, daemon=True).start()
    kinds = []
    for e in http.lines(PODS, watch="1", fieldSelector="spec.nodeName=n1", allowWatchBookmarks="true",
                        timeoutSeconds="30"):
        kinds.append((e["type"], e["object"]["metadata"].get("name")))
        if ("MODIFIED", "a") in kinds and kinds[-2:] == [("BOOKMARK", None)] * 2:
            break  # two bookmarks after a's change (b changed before it): enough seen, however slow the machine
    assert [k for k in kinds if k[0] != "BOOKMARK"] == [("ADDED", "a"), ("MODIFIED", "a")]  # nothing of b
    assert kinds[:1] == [("ADDED", "a")] and kinds.count(("BOOKMARK", None)) >= 2  # about every 0.2 s


def test_watch_from_a_compacted_version_is_410_gone(http: Http, fake: FakeKube) -> None:
    fake.add(pod("a", "n1"))
    rv = str(fake.resource_version)
    fake.add(pod("b", "n1"))
    fake.compact()
    events = list(http.lines(PODS, watch="1", resourceVersion=rv, timeoutSeconds="1"))
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    with pytest.raises(k8s.ApiException) as err:  # the official watch retries once, then gives up
        _stream(fake, http.api, resource_version=rv, timeout_seconds=1)
    assert err.value.status == 410


def test_a_small_history_expires_a_watch_that_falls_behind(tmp_path: Path) -> None:
    server = FakeKube(history=2).start()
    try:
        server.add(pod("a", "n1"))
        rv = str(server.resource_version)
        for i in range(3):
            server.add(pod(f"p{i}", "n1"))
        with kube.connect(str(server.write_kubeconfig(tmp_path / "kc"))) as client:
            events = list(Http(client.api).lines(PODS, watch="1", resourceVersion=rv, timeoutSeconds="1"))
        assert [e["type"] for e in events] == ["ERROR"] and events[0]["object"]["code"] == 410
    finally:
        server.stop()


def test_close_watches_ends_open_streams(http: Http, fake: FakeKube) -> None:
    out: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: out.extend(http.lines(PODS, watch="1", timeoutSeconds="30")), daemon=True)
    started = time.monotonic()
    t.start()
    _wait_for_watch(fake)
    fake.close_watches()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - started < 5 and out == []


def test_a_watch_whose_client_hung_up_is_closed(http: Http, fake: FakeKube) -> None:
    _, url, headers, _, _ = http.api.param_serialize(method="GET", resource_path=PODS,
                                                     query_params=[("watch", "1")], auth_settings=["BearerToken"])
    resp = http.api.call_api("GET", url, header_params=headers, _request_timeout=10)
    _wait_for_watch(fake)
    assert fake.watch_count() == 1
    resp.response.close()  # the client gives up on the watch and closes the connection
    deadline = time.monotonic() + 5
    while fake.watch_count() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake.watch_count() == 0


# ---- eviction ------------------------------------------------------------------------------------

def _evict(http: Http, name: str, *, uid: str | None = None, grace: int | None = None) -> tuple[int, dict[str, Any]]:
    opts: dict[str, Any] = {}
    if uid is not None:
        opts["preconditions"] = {"uid": uid}
    if grace is not None:
        opts["gracePeriodSeconds"] = grace
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"},
            "deleteOptions": opts}
    return http("POST", f"{PODS}/{name}/eviction", body)


def test_eviction_decrements_the_budget_then_is_refused_with_429(http: Http, fake: FakeKube) -> None:
    budget = pdb("train", {"app": "train"}, 1)
    budget["status"].update(desiredHealthy=2, currentHealthy=3)
    fake.add(node("n1"), ready(pod("a", "n1", labels={"app": "train"})), ready(pod("b", "n1", labels={"app": "train"})),
             budget, server_fields=True)
    code, out = _evict(http, "a", grace=30)
    assert (code, out["status"]) == (201, "Success")
    assert fake.find("v1", "Pod", "a", "default") is None
    status = fake.get("policy/v1", "PodDisruptionBudget", "train", "default")["status"]
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["a"]
    code, out = _evict(http, "b")
    assert code == 429 and out["reason"] == "TooManyRequests"
    assert out["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert out["details"]["causes"] == [{"reason": "DisruptionBudget", "message": (
        "The disruption budget train needs 2 healthy pods and has 3 currently")}]
    assert fake.find("v1", "Pod", "b", "default") is not None
    assert [(e.name, e.code, e.grace_period_seconds) for e in fake.evictions] == [("a", 201, 30), ("b", 429, None)]
    assert fake.evicted() == ["default/a"]


def test_an_unready_pod_is_evicted_without_spending_the_budget(http: Http, fake: FakeKube) -> None:
    budget = pdb("train", {"app": "train"}, 1)
    budget["status"].update(desiredHealthy=2, currentHealthy=2)
    fake.add(pod("starting", "n1", labels={"app": "train"}), budget)  # Running, not Ready
    assert _evict(http, "starting")[0] == 201
    assert fake.get("policy/v1", "PodDisruptionBudget", "train", "default")["status"]["disruptionsAllowed"] == 1


def test_eviction_uid_precondition_and_two_budgets(http: Http, fake: FakeKube) -> None:
    fake.add(pod("a", "n1", labels={"app": "x"}), server_fields=True)
    uid = fake.get("v1", "Pod", "a", "default")["metadata"]["uid"]
    code, out = _evict(http, "a", uid="the-old-pod")
    assert code == 409 and "UID in precondition: the-old-pod" in out["message"]
    fake.add(pdb("one", {"app": "x"}, 5), pdb("all", {}, 0))  # an empty selector matches no pod here
    assert _evict(http, "a", uid=uid)[0] == 201
    fake.add(pod("a", "n1", labels={"app": "x"}), pdb("two", {"app": "x"}, 5))
    code, out = _evict(http, "a")
    assert code == 500 and "more than one PodDisruptionBudget" in out["message"]
    assert _evict(http, "ghost")[0] == 404
    assert fake.evicted() == ["default/a"]


def test_pending_pods_ignore_budgets_and_held_deletions_terminate(http: Http, fake: FakeKube) -> None:
    fake.add(pod("waiting", None, phase="Pending", labels={"app": "x"}), pod("running", "n1", labels={"app": "x"}),
             pdb("x", {"app": "x"}, 0), pdb("y", {"app": "y"}, 1), pod("y", "n1", labels={"app": "y"}))
    assert _evict(http, "waiting")[0] == 201  # Pending: canIgnorePDB
    assert _evict(http, "running")[0] == 429
    fake.hold_pod_deletions()
    assert _evict(http, "y", grace=10)[0] == 201
    held = fake.get("v1", "Pod", "y", "default")
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["deletionGracePeriodSeconds"] == 10
    assert fake.terminating() == ["default/y"]
    assert _evict(http, "y")[0] == 201  # already terminating: accepted, nothing more
    assert fake.get("policy/v1", "PodDisruptionBudget", "y", "default")["status"]["disruptionsAllowed"] == 0
    assert fake.reap() == ["default/y"] and fake.find("v1", "Pod", "y", "default") is None


def test_binding_sets_the_node_once(http: Http, fake: FakeKube) -> None:
    fake.add(pod("p", None, phase="Pending"))
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n2"}}
    assert http("POST", f"{PODS}/p/binding", body)[0] == 201
    got = fake.get("v1", "Pod", "p", "default")
    assert got["spec"]["nodeName"] == "n2" and got["status"]["conditions"][0]["type"] == "PodScheduled"
    code, out = http("POST", f"{PODS}/p/binding", body)
    assert code == 409 and "already assigned" in out["message"]


# ---- faults on the new verbs -----------------------------------------------------------------------

def test_faults_apply_to_writes_evictions_and_watches(http: Http, fake: FakeKube) -> None:
    fake.add(pod("a", "n1"))
    fake.fail(f"{PODS}/a/eviction", 503, times=1, method="POST", retry_after="1")
    code, out = _evict(http, "a")
    assert code == 503 and out["reason"] == "ServiceUnavailable"
    assert _evict(http, "a")[0] == 201
    fake.fail(PODS, 500, times=1, method="GET")
    code, _ = http("GET", PODS, watch="1", timeoutSeconds="1")
    assert code == 500
    fake.forbid(RUNS)
    code, out = http("POST", RUNS, run_body())
    assert code == 403 and 'cannot create resource "repackruns"' in out["message"]



def test_nominating_a_bound_pod_is_forbidden_as_on_the_real_server(http: Http, fake: FakeKube,
                                                                  tmp_path: Path) -> None:
    """The real API server refuses status.nominatedNodeName on a pod already bound (found when vc-scheduler
    bound a replacement before optplan nominated it); a pending pod takes it. optplan's client says which
    (AlreadyBoundError), and the controller then records where the pod was bound instead of retrying."""
    fake.add(pod("bound", "n1"), pod("waiting", None), server_fields=True)
    code, status = http("PATCH", f"{PODS}/bound/status", {"status": {"nominatedNodeName": "n2"}}, MERGE)
    assert code == 422 and status["message"] == ('Pod "bound" is invalid: status.nominatedNodeName: Forbidden: may '
                                                 "not be set on pods that are already bound to a node")
    assert http("PATCH", f"{PODS}/waiting/status", {"status": {"nominatedNodeName": "n2"}}, MERGE)[0] == 200
    with kube.connect(str(fake.write_kubeconfig(tmp_path / "kc"))) as client, \
            pytest.raises(kube.AlreadyBoundError, match="already bound"):
        client.patch_pod_status("default", "bound", {"nominatedNodeName": "n2"})
