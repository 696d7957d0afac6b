"""deploy/ and the Dockerfile: what `kubectl apply -f crds/ -f deploy/` would meet in a real cluster.

Every manifest is validated offline against the Kubernetes OpenAPI schemas (kubernetes-validate, strict:
an unknown field fails) for the oldest and the newest Kubernetes version we support; the RBAC rules are
checked against the requests optplan's code really sends (recorded by the fake API server and mapped to
RBAC attributes as the API server does); the Deployment against the metrics server and the CLI parser.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from optplan.adapters.kube import RESOURCES, connect
from optplan.cli import build_parser
from optplan.controller.metrics import PATHS, Metrics
from tests.builders import node, pod, repack_run
from tests.controller.test_controller import seed_objects
from tests.fakekube import FakeKube
from tests.fakeworld import World

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CRDS = ROOT / "crds"
VERSIONS = ("1.30", kubernetes_validate.latest_version())  # the oldest we support, the newest bundled
NAMESPACE = "optplan-system"
RUN_API = ("repack.volcano.sh/v1alpha1", "RepackRun")
NAMESPACED = {"ServiceAccount", "Role", "RoleBinding", "Deployment"}
CONF_NAMESPACE = "volcano-system"
"""Where a Role outside the controller's namespace lets it read vc-scheduler's ConfigMap."""
DEVICE_NAMESPACE = "kube-system"
"""Where a Role outside the controller's namespace lets it read the device-share plugin's ConfigMap."""
LEASE_ROLE = "optplan-controller-leader-election"


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def manifests() -> list[tuple[str, dict[str, Any]]]:
    """(file, object) for every object `kubectl apply -f crds/ -f deploy/` applies, in its order."""
    files = sorted(CRDS.glob("*.yaml")) + sorted(DEPLOY.glob("*.yaml"))
    return [(str(f.relative_to(ROOT)), doc) for f in files for doc in load(f)]


def one(kind: str, namespace: str = NAMESPACE) -> dict[str, Any]:
    found = [doc for _, doc in manifests() if doc["kind"] == kind
             and doc["metadata"].get("namespace", namespace) == namespace]
    assert len(found) == 1, f"expected one {kind} in deploy/, found {len(found)}"
    return found[0]


def container() -> dict[str, Any]:
    [c] = one("Deployment")["spec"]["template"]["spec"]["containers"]
    return c


# ---- schemas -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("file", "doc"), manifests(), ids=[f"{f}:{d['kind']}" for f, d in manifests()])
def test_every_manifest_validates_against_the_kubernetes_schemas(file: str, doc: dict[str, Any], version: str) -> None:
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        pytest.fail(f"{file}: {doc['kind']} {doc['metadata']['name']}: {'.'.join(map(str, e.path))}: {e.message}")


@pytest.mark.parametrize(("change", "field"), [
    (lambda c, d: c.update(imagePullPolice="Always"), "spec.template.spec.containers.0"),
    (lambda c, d: d["spec"].update(replicas="two"), "spec.replicas"),
    (lambda c, d: c["livenessProbe"]["httpGet"].pop("port"), "spec.template.spec.containers.0.livenessProbe.httpGet"),
])
def test_the_schema_check_catches_typos_and_wrong_types(change: Any, field: str) -> None:
    doc = copy.deepcopy(one("Deployment"))
    change(doc["spec"]["template"]["spec"]["containers"][0], doc)
    with pytest.raises(kubernetes_validate.ValidationError) as e:
        kubernetes_validate.validate(doc, VERSIONS[0], strict=True)
    assert ".".join(map(str, e.value.path)) == field


def test_apply_order_creates_the_namespace_first() -> None:
    docs = manifests()
    kinds = [d["kind"] for _, d in docs]
    assert kinds[0] == "CustomResourceDefinition" and kinds[1] == "Namespace"
    assert one("Namespace")["metadata"]["name"] == NAMESPACE
    for file, doc in docs:
        ns = doc["metadata"].get("namespace")
        home = ns if doc["kind"] in ("Role", "RoleBinding") and ns in (CONF_NAMESPACE, DEVICE_NAMESPACE) else NAMESPACE
        assert ns == (home if doc["kind"] in NAMESPACED else None), f"{file}: {doc['kind']} namespace {ns}"
    names = {(d["kind"], d["metadata"]["name"]) for _, d in docs}
    for file, doc in docs:
        if doc["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert (doc["roleRef"]["kind"], doc["roleRef"]["name"]) in names, file
            assert doc["subjects"] == [{"kind": "ServiceAccount", "name": "optplan-controller",
                                        "namespace": NAMESPACE}], file
    assert ("ServiceAccount", one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"]) in names


# ---- RBAC: the rules against the requests optplan sends -------------------------------------------

@dataclass(frozen=True)
class Attributes:
    """A request as RBAC sees it (the API server's request info)."""

    verb: str
    group: str
    resource: str  # "pods", or "pods/eviction" with its subresource
    namespace: str
    name: str


def attributes(method: str, path: str, query: dict[str, str]) -> Attributes:
    """The RBAC attributes of a resource request, derived the way the API server derives them: the verb from
    the method (a collection GET is list, or watch with ?watch=true), group, namespace, resource, name and
    subresource from the path."""
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    elif parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        raise ValueError(f"not a resource path: {path}")
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
    if method == "GET":
        verb = "get" if name else "watch" if query.get("watch") in ("true", "1") else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if name else "deletecollection"}[method]
    return Attributes(verb, group, f"{resource}/{sub}" if sub else resource, namespace, name)


def allows(rules: list[dict[str, Any]], a: Attributes) -> bool:
    def has(values: list[str], value: str) -> bool:
        return "*" in values or value in values
    return any(has(r["apiGroups"], a.group) and has(r["resources"], a.resource) and has(r["verbs"], a.verb)
               and (not r.get("resourceNames") or a.name in r["resourceNames"]) for r in rules)


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every rule, wildcards refused (least privilege names what it grants)."""
    out = set()
    for r in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in r[field], f"a wildcard in {field}: {r}"
        out |= {(g, res, v) for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    return out


def cluster_rules() -> list[dict[str, Any]]:
    return one("ClusterRole")["rules"]


def lease_rules() -> list[dict[str, Any]]:
    return one("Role")["rules"]


def conf_rules() -> list[dict[str, Any]]:
    return one("Role", CONF_NAMESPACE)["rules"]


def device_rules() -> list[dict[str, Any]]:
    return one("Role", DEVICE_NAMESPACE)["rules"]


# What optplan reads (adapters/kube.py's RESOURCES, list + watch into the controller's caches) and what the
# controller writes (issue 14 §1: the run's journal, TTL deletion, Eviction API, nominatedNodeName; issue 29
# §1: events.k8s.io Events, created and their series patched, never read or deleted).
READS = {(r.group, r.plural, verb) for r in RESOURCES for verb in ("list", "watch")}
WRITES = {
    ("repack.volcano.sh", "repackruns", "get"),
    ("repack.volcano.sh", "repackruns", "delete"),
    ("repack.volcano.sh", "repackruns/status", "patch"),
    ("", "pods/eviction", "create"),
    ("", "pods/status", "patch"),
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
}
OPT_IN = {("repack.volcano.sh", "repackruns", "create")}
"""Granted, used only with ``--admit-pending-after`` (off in the Deployment):
tests/controller/test_controller_autotrigger.py checks that its requests are allowed."""
DEVICE_PIN = {("", "pods", "patch")}
"""Granted, used only when a plan moves a share to a planned GPU (annotations on its replacement; the seed
moves none): ``test_a_device_pin_is_a_pod_patch_the_cluster_role_allows`` checks its request."""
LEASES = {("coordination.k8s.io", "leases", verb) for verb in ("create", "get", "update")}
CONF = {("", "configmaps", "get")}


def test_cluster_role_grants_what_optplan_reads_and_writes_and_nothing_more() -> None:
    assert grants(cluster_rules()) == READS | WRITES | OPT_IN | DEVICE_PIN
    assert not {res for _, res, _ in grants(cluster_rules())} & {"secrets", "configmaps"}
    assert one("ClusterRoleBinding")["roleRef"]["name"] == one("ClusterRole")["metadata"]["name"]


def test_leases_only_in_the_controllers_namespace_and_only_its_own() -> None:
    assert grants(lease_rules()) == LEASES
    assert one("Role")["metadata"]["namespace"] == NAMESPACE
    lease = Attributes("update", "coordination.k8s.io", "leases", NAMESPACE, "optplan-controller")
    assert allows(lease_rules(), lease)
    assert allows(lease_rules(), Attributes("create", "coordination.k8s.io", "leases", NAMESPACE, ""))
    assert not allows(lease_rules(), Attributes("update", "coordination.k8s.io", "leases", NAMESPACE, "kube-scheduler"))
    assert not allows(cluster_rules(), lease)  # not cluster-wide


def test_the_scheduler_configmap_is_the_one_configmap_read_and_only_in_volcanos_namespace() -> None:
    assert grants(conf_rules()) == CONF
    cm = Attributes("get", "", "configmaps", CONF_NAMESPACE, "volcano-scheduler-configmap")
    assert allows(conf_rules(), cm) and not allows(cluster_rules(), cm)
    assert not allows(conf_rules(), Attributes("get", "", "configmaps", CONF_NAMESPACE, "other"))
    assert not allows(conf_rules(), Attributes("list", "", "configmaps", CONF_NAMESPACE, ""))
    assert one("RoleBinding", CONF_NAMESPACE)["roleRef"]["name"] == one("Role", CONF_NAMESPACE)["metadata"]["name"]


def test_the_device_configmap_is_the_one_configmap_read_in_kube_system() -> None:
    """The device-share plugin's ConfigMap (its MIG geometries), where Volcano reads it by default; nothing else
    in kube-system, and neither Role reads the other's ConfigMap."""
    assert grants(device_rules()) == CONF
    cm = Attributes("get", "", "configmaps", DEVICE_NAMESPACE, "volcano-vgpu-device-config")
    assert allows(device_rules(), cm) and not allows(cluster_rules(), cm) and not allows(conf_rules(), cm)
    assert not allows(device_rules(), Attributes("get", "", "configmaps", DEVICE_NAMESPACE, "kube-proxy"))
    assert not allows(device_rules(), Attributes("list", "", "configmaps", DEVICE_NAMESPACE, ""))
    assert not allows(device_rules(), Attributes("get", "", "configmaps", CONF_NAMESPACE,
                                                 "volcano-scheduler-configmap"))  # that Role's, in its namespace
    assert not allows(device_rules(), Attributes("get", "", "secrets", DEVICE_NAMESPACE, "volcano-vgpu-device-config"))
    binding = one("RoleBinding", DEVICE_NAMESPACE)
    assert binding["roleRef"]["name"] == one("Role", DEVICE_NAMESPACE)["metadata"]["name"]


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/pods", {"limit": "500"}, Attributes("list", "", "pods", "", "")),
    ("GET", "/api/v1/pods", {"watch": "true"}, Attributes("watch", "", "pods", "", "")),
    ("GET", "/api/v1/namespaces/ns/pods/p", {}, Attributes("get", "", "pods", "ns", "p")),
    ("POST", "/api/v1/namespaces/ns/pods/p/eviction", {}, Attributes("create", "", "pods/eviction", "ns", "p")),
    ("PATCH", "/api/v1/namespaces/ns/pods/p/status", {}, Attributes("patch", "", "pods/status", "ns", "p")),
    ("GET", "/api/v1/namespaces/ns", {}, Attributes("get", "", "namespaces", "", "ns")),
    ("PUT", "/apis/coordination.k8s.io/v1/namespaces/optplan-system/leases/optplan-controller", {},
     Attributes("update", "coordination.k8s.io", "leases", "optplan-system", "optplan-controller")),
    ("PATCH", "/apis/repack.volcano.sh/v1alpha1/repackruns/r/status", {},
     Attributes("patch", "repack.volcano.sh", "repackruns/status", "", "r")),
    ("DELETE", "/apis/repack.volcano.sh/v1alpha1/repackruns/r", {},
     Attributes("delete", "repack.volcano.sh", "repackruns", "", "r")),
])
def test_requests_map_to_rbac_attributes(method: str, path: str, query: dict[str, str],
                                         expected: Attributes) -> None:
    assert attributes(method, path, query) == expected


def test_cluster_role_allows_every_request_of_a_snapshot_and_a_status_write(fake_kube: FakeKube,
                                                                             tmp_path: Path) -> None:
    fake_kube.add(node("n0"), pod("p0", "n0", 1), repack_run("run"))
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kubeconfig")), backoff=0) as kube:
        kube.snapshot_objects()
        run = kube.get_repack_run("run")
        kube.patch_repack_run_status("run", {"phase": "Pending"}, run["metadata"]["resourceVersion"])
    seen = [attributes(r.method, r.path, r.query) for r in fake_kube.requests]
    assert len({a.resource for a in seen}) == len(RESOURCES) + 1  # every kind listed, and the status
    refused = [a for a in seen if not allows(cluster_rules(), a)]
    assert not refused
    assert not allows(cluster_rules(), Attributes("get", "", "secrets", "default", "token"))
    assert not allows(cluster_rules(), Attributes("delete", "", "pods", "default", "p0"))  # evict, never delete


def test_a_device_pin_is_a_pod_patch_the_cluster_role_allows(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.add(node("n0"), pod("p0", None, 1, phase="Pending"))
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kubeconfig")), backoff=0) as kube:
        out = kube.patch_pod_metadata("default", "p0", {"annotations": {"volcano.sh/vgpu-use-gpuuuid": "GPU-a"}})
    assert out["metadata"]["annotations"]["volcano.sh/vgpu-use-gpuuuid"] == "GPU-a"
    seen = [attributes(r.method, r.path, r.query) for r in fake_kube.requests]
    assert seen == [Attributes("patch", "", "pods", "default", "p0")] and allows(cluster_rules(), seen[0])


def test_reading_a_pod_after_an_eviction_conflict_is_a_list_the_cluster_role_allows(fake_kube: FakeKube,
                                                                                    tmp_path: Path) -> None:
    fake_kube.add(node("n0"), pod("p0", "n0", 1))
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kubeconfig")), backoff=0) as kube:
        found = kube.read_pod("default", "p0")
        assert found is not None and found["metadata"]["name"] == "p0"
        assert kube.read_pod("default", "gone") is None
    seen = [attributes(r.method, r.path, r.query) for r in fake_kube.requests]
    assert seen == [Attributes("list", "", "pods", "default", "")] * 2  # no `get` on pods needed
    assert all(allows(cluster_rules(), a) for a in seen)


def test_the_deployments_command_sends_only_requests_the_rbac_allows_and_uses_every_grant(tmp_path: Path) -> None:
    """The Deployment's own command line (with a kubeconfig for the fake instead of the service account) runs
    a DryRun (its first status write refused with 409) and the seed's Execute run to the end (a second
    Execute waiting its turn meanwhile), then deletes them after their TTL, against the fake API server and
    its simulated world. Every request it sent must be allowed by the ClusterRole or, in the controller's
    namespace, by the Role (in Volcano's, by the scheduler ConfigMap's; in kube-system, by the device ConfigMap's);
    every permission granted must have been used by some request."""
    fk = FakeKube(crd_schemas=True).start()
    world = World(fk, schedule_delay=100)  # 5 s at 20 steps a second: time to nominate the replacements
    try:
        fk.add(*seed_objects(ttl=1), server_fields=True)
        fk.add(*[o for o in seed_objects(run_name="seed-dryrun", mode="DryRun", ttl=1) if o["kind"] == "RepackRun"],
               server_fields=True)
        # a second Execute waits its turn, told again on every pass: its Event's series is patched
        fk.add(*[o for o in seed_objects(run_name="seed-second", ttl=1) if o["kind"] == "RepackRun"],
               server_fields=True)
        world.step()
        # another writer got there first: the controller reads the run again (get) and carries on
        fk.fail("/apis/repack.volcano.sh/v1alpha1/repackruns/seed-dryrun/status", 409, method="PATCH")
        kubeconfig = fk.write_kubeconfig(tmp_path / "kubeconfig")
        argv = [*expanded_args(), "--kubeconfig", str(kubeconfig), "--metrics-port", "0"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
        world.start(interval=0.05)
        log_path = tmp_path / "controller.log"
        with log_path.open("w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "optplan.cli", *argv], stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=tmp_path)
            try:
                deadline = time.monotonic() + 120
                while fk.find(*RUN_API, "ascend-execute-001") or fk.find(*RUN_API, "seed-dryrun"):
                    assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                    time.sleep(0.2)
            finally:
                proc.terminate()
                proc.wait(30)
        assert sorted(fk.evicted()) == ["repack-demo/ascend-batch-training-worker-0",
                                        "repack-demo/ascend-batch-training-worker-1"]
    finally:
        world.stop()
        fk.stop()
    waits = [e for e in fk.objects("events.k8s.io/v1", "Event") if e["regarding"]["name"] == "seed-second"]
    assert waits and waits[0]["reason"] == "AnotherRunActive" and waits[0]["series"]["count"] >= 2
    seen = {attributes(r.method, r.path, r.query) for r in fk.requests}
    refused = [a for a in seen if not allows(cluster_rules(), a)
               and not (a.namespace == NAMESPACE and allows(lease_rules(), a))
               and not (a.namespace == CONF_NAMESPACE and allows(conf_rules(), a))
               and not (a.namespace == DEVICE_NAMESPACE and allows(device_rules(), a))]
    assert not refused
    used = {(a.group, a.resource, a.verb) for a in seen}
    assert used == (grants(cluster_rules()) | grants(lease_rules()) | grants(conf_rules())) - OPT_IN - DEVICE_PIN
    for namespace, rules in ((CONF_NAMESPACE, conf_rules()), (DEVICE_NAMESPACE, device_rules())):
        assert any(a.namespace == namespace and allows(rules, a) for a in seen), f"no request used {namespace}'s Role"


# ---- the Deployment ------------------------------------------------------------------------------

def expanded_args() -> list[str]:
    """The container's args as the kubelet passes them: $(VAR) replaced from the container's env."""
    c = container()
    fields = {"metadata.namespace": one("Deployment")["metadata"]["namespace"], "metadata.name": "optplan-controller-0"}
    env = {e["name"]: e["value"] if "value" in e else fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
           for e in c.get("env", [])}
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), a) for a in c["args"]]


def test_deployment_runs_two_non_root_read_only_replicas_with_leader_election() -> None:
    spec = one("Deployment")["spec"]
    pod_spec = spec["template"]["spec"]
    c = container()
    assert spec["replicas"] == 2 and "--leader-elect" in c["args"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    # Pod Security "restricted" (the namespace enforces it): else the pods are refused at admission
    assert one("Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert pod_spec["securityContext"]["runAsNonRoot"] is True and pod_spec["securityContext"]["runAsUser"] > 0
    assert pod_spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert all(set(v) <= {"name", "emptyDir", "configMap", "secret", "projected", "downwardAPI"}
               for v in pod_spec.get("volumes", []))
    # a read-only root: /tmp is the one writable place
    assert [m["mountPath"] for m in c["volumeMounts"]] == ["/tmp"]
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]


def test_probes_and_scrape_annotations_point_at_what_the_metrics_server_serves() -> None:
    c = container()
    [port] = c["ports"]
    annotations = one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port["containerPort"]
    probes = {"liveness": c["livenessProbe"]["httpGet"], "readiness": c["readinessProbe"]["httpGet"]}
    assert all(p["port"] in (port["name"], port["containerPort"]) for p in probes.values())
    paths = {annotations["prometheus.io/path"], probes["liveness"]["path"], probes["readiness"]["path"]}
    assert paths == set(PATHS)
    metrics = Metrics()
    with metrics.serve("127.0.0.1", 0) as server:
        def status(path: str) -> int:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
            try:
                conn.request("GET", path)
                return conn.getresponse().status
            finally:
                conn.close()
        assert status(annotations["prometheus.io/path"]) == 200
        assert status(probes["liveness"]["path"]) == 200
        assert status(probes["readiness"]["path"]) == 503  # until the controller says it is ready
        metrics.set_ready(True)
        assert status(probes["readiness"]["path"]) == 200


def test_container_args_are_accepted_by_optplan_controller_and_match_the_manifests() -> None:
    args = build_parser().parse_args(expanded_args())
    assert args.command == "controller" and args.leader_elect
    assert args.identity == "optplan-controller-0"  # each replica its own holder identity: its pod's name
    assert args.lease_namespace == NAMESPACE == one("Role")["metadata"]["namespace"]
    [named] = [r for r in lease_rules() if r.get("resourceNames")]
    assert named["resourceNames"] == [args.lease_name]  # the Lease the Role lets it update is the one it takes
    [port] = container()["ports"]
    assert args.metrics_port == port["containerPort"]
    assert (args.kubeconfig, args.context) == (None, None)  # the in-cluster service account


# ---- the Dockerfile ------------------------------------------------------------------------------

def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "a continuation line ends the Dockerfile"
    return out


def test_dockerfile_builds_a_non_root_image_of_the_package_running_the_controller() -> None:
    steps = instructions(ROOT / "Dockerfile")
    froms = [arg for step, arg in steps if step == "FROM"]
    assert froms and all(f.startswith("python:3.11-slim") for f in froms)
    final = steps[max(i for i, (step, _) in enumerate(steps) if step == "FROM"):]
    [user] = [arg for step, arg in final if step == "USER"]
    assert re.fullmatch(r"[1-9]\d*(:\d+)?", user), f"USER {user}: numeric and not root, for runAsNonRoot"
    assert int(user.split(":")[0]) == one("Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    runs = " ".join(arg for step, arg in steps if step == "RUN")
    assert "pip install" in runs and "[test]" not in runs  # the package, without the test extras
    entrypoint = yaml.safe_load([arg for step, arg in final if step == "ENTRYPOINT"][-1])
    cmd = yaml.safe_load([arg for step, arg in final if step == "CMD"][-1])
    assert entrypoint == ["optplan"]
    parser = build_parser()
    subcommands = {name for a in parser._subparsers._group_actions for name in a.choices}  # type: ignore[union-attr]
    assert cmd[0] in subcommands, f"CMD {cmd}: not an optplan command"


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    ignored = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    copied = [p for step, arg in instructions(ROOT / "Dockerfile") if step == "COPY" and "--from" not in arg
              for p in shlex.split(arg)[:-1]]
    assert copied == ["pyproject.toml", "README.md", "optplan"]
    assert not set(copied) & set(ignored)
    assert {".git", ".venv", "tests"} <= set(ignored)


# ---- the Grafana dashboard -----------------------------------------------------------------------

DASHBOARD = DEPLOY / "grafana" / "optplan.json"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTOR = re.compile(r"\b(optplan_[a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def exported() -> dict[str, set[str]]:
    """Every sample name the controller's /metrics carries and the labels the controller sets on it, read
    from the exposition of a Metrics that was told one of everything it reports."""
    from prometheus_client.parser import text_string_to_metric_families
    m = Metrics()
    m.run_phases({"Running": 1})
    m.eviction("Evicted")
    m.replacement("Scheduled")
    m.autotrigger_run("DryRun")
    m.plan_seconds(1.0)
    m.plan_result("cpsat", "OPTIMAL", freed=1, bound=2)
    m.run_finished("Succeeded", "ExecutionCompleted")
    m.eviction_refused("DisruptionBudget")
    m.api_error("patch", 500)
    m.event_write_error()
    m.event_dropped()
    m.leader(True)
    m.set_ready(True)
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(m.exposition().decode()):
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of the dashboard, rows' nested panels included."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    out = []
    nested = [q for row in doc["panels"] for q in row.get("panels", [])]
    for p in doc["panels"] + nested:
        out += [(p["title"], t["expr"]) for t in p.get("targets", [])]
    return out


def names_and_labels(expr: str) -> tuple[set[str], dict[str, set[str]], set[str]]:
    """The optplan metric names an expression reads, the labels matched per selector, and the labels it
    groups or joins by."""
    bare = _STRING.sub('""', expr)
    names = set(re.findall(r"\boptplan_[a-zA-Z0-9_:]*", bare))
    matched = {m[1]: set(_MATCHER.findall(m[2])) for m in _SELECTOR.finditer(bare)}
    grouped = {label.strip() for g in _GROUPING.findall(bare) for label in g.split(",") if label.strip()}
    return names, matched, grouped


def test_the_dashboard_parser_sees_names_matchers_and_groupings() -> None:
    names, matched, grouped = names_and_labels(
        'sum by (phase, reason) (rate(optplan_x_total{verb="a,b}", code!~"5.."}[5m])) / on(verb) optplan_y')
    assert names == {"optplan_x_total", "optplan_y"}
    assert matched == {"optplan_x_total": {"verb", "code"}}
    assert grouped == {"phase", "reason", "verb"}


def test_every_dashboard_query_names_metrics_the_controller_exports_with_labels_it_sets() -> None:
    metrics = exported()
    queries = expressions()
    assert len(queries) >= 15
    for title, expr in queries:
        names, matched, grouped = names_and_labels(expr)
        assert names, f"{title}: {expr} reads no optplan metric"
        unknown = names - set(metrics)
        assert not unknown, f"{title}: {expr} reads {sorted(unknown)}, which the controller does not export"
        for name, labels in matched.items():
            assert labels <= metrics[name], f"{title}: {name} has no label {sorted(labels - metrics[name])}"
        known = set().union(*(metrics[n] for n in names))
        assert grouped <= known, f"{title}: {expr} groups by {sorted(grouped - known)}, which no metric in it sets"


def test_the_dashboard_shows_every_metric_the_controller_exports() -> None:
    read = set().union(*(names_and_labels(e)[0] for _, e in expressions()))
    families = {re.sub(r"_(total|bucket|count|sum|created)$", "", n) for n in exported()}
    shown = {re.sub(r"_(total|bucket|count|sum|created)$", "", n) for n in read}
    assert families - shown == set()


def test_the_dashboard_is_grafana_json_with_unique_panel_ids_and_a_prometheus_datasource() -> None:
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert doc["uid"] and doc["title"] and isinstance(doc["schemaVersion"], int)
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in doc["templating"]["list"]} == {"datasource"}
    for p in doc["panels"]:
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert p["targets"] and all(t["refId"] for t in p["targets"]), p["title"]
