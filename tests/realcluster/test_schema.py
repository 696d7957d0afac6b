"""The shipped RepackRun CRD on the real API server: what it accepts and refuses, beside the fake server.

Every broken document of tests/controller/test_crd_schema.py (refused there by the offline OpenAPI validator) is sent
to the real API server as a server-side dry run — a spec change as a create, a status change as a replace
of the status subresource — and to tests/fakekube.py's FakeKube enforcing the same CRD; the full document
(the seed's complete spec with a planned Execute status) is accepted by both.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.controller.test_crd_schema import BROKEN, full_doc  # noqa: F401 (full_doc is a fixture)
from tests.fakekube import ApiError, FakeKube
from tests.realcluster.cluster import ROOT, Cluster

pytestmark = pytest.mark.realcluster
PROBE = "schema-probe"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeKube]:
    server = FakeKube(crd_schemas=True).start()
    try:
        yield server
    finally:
        server.stop()


def _named(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": PROBE}
    return doc


@pytest.fixture(scope="module")
def probe(real_cluster: Cluster, full_doc: dict[str, Any], fake: FakeKube) -> Iterator[dict[str, Any]]:  # noqa: F811
    """The full document created in both servers with its status written: what the status cases replace;
    deleted after the module (an Execute run in progress would hold back the journey's)."""
    real_cluster.kubectl("apply", "-f", str(ROOT / "crds"))
    doc = _named(full_doc)
    spec_only = {k: v for k, v in doc.items() if k != "status"}
    real_cluster.kubectl("create", "-f", "-", input=json.dumps(spec_only))
    created = real_cluster.kubectl_json("get", "repackrun", PROBE)
    doc["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    real_cluster.kubectl("replace", "--subresource=status", "-f", "-", input=json.dumps(doc))
    made = fake.create(spec_only)
    fake.update({**doc, "metadata": made["metadata"]}, subresource="status")
    yield doc
    real_cluster.kubectl("delete", "repackrun", PROBE, "--ignore-not-found")


STRICT = "strict decoding error: unknown field"


def _real_refuses(c: Cluster, doc: dict[str, Any], status: bool, *, strict: bool = True) -> str:
    """The real server's refusal ('' when it accepts), as kubectl prints it; ``strict``: kubectl's default
    fieldValidation=Strict, else --validate=false (fieldValidation=Ignore: unknown fields are pruned)."""
    flags = [] if strict else ["--validate=false"]
    if status:
        doc = {**doc, "metadata": {**doc["metadata"],
                                   "resourceVersion": c.kubectl_json("get", "repackrun", PROBE)["metadata"][
                                       "resourceVersion"]}}
        res = c.kubectl("replace", "--subresource=status", "--dry-run=server", *flags, "-f", "-",
                        input=json.dumps(doc), check=False)
    else:
        doc = {**{k: v for k, v in doc.items() if k != "status"}, "metadata": {"name": "schema-broken"}}
        res = c.kubectl("create", "--dry-run=server", *flags, "-f", "-", input=json.dumps(doc), check=False)
    return res.stderr.strip() if res.returncode else ""


def _fake_refuses(fake: FakeKube, doc: dict[str, Any], status: bool) -> str:
    try:
        if status:
            current = fake.get("repack.volcano.sh/v1alpha1", "RepackRun", PROBE)
            fake.update({**doc, "metadata": current["metadata"]}, subresource="status")
            fake.update(current, subresource="status")  # put the valid status back
        else:
            body = {**{k: v for k, v in doc.items() if k != "status"}, "metadata": {"name": "schema-broken"}}
            fake.create(body)
            fake.delete("repack.volcano.sh/v1alpha1", "RepackRun", "schema-broken")
    except ApiError as e:
        return str(e)
    return ""


def test_the_full_document_is_accepted_by_both(real_cluster: Cluster, probe: dict[str, Any], fake: FakeKube) -> None:
    assert _real_refuses(real_cluster, probe, status=False) == ""
    assert _real_refuses(real_cluster, probe, status=True) == ""
    assert _fake_refuses(fake, probe, status=True) == ""


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_document_is_refused_by_the_real_server_as_by_the_fake(
        real_cluster: Cluster, probe: dict[str, Any], fake: FakeKube, name: str) -> None:
    doc = copy.deepcopy(probe)
    BROKEN[name](doc)
    status = doc["spec"] == probe["spec"]
    real = _real_refuses(real_cluster, doc, status)
    assert real, f"{name}: the real API server accepts it"
    fake_says = _fake_refuses(fake, doc, status)
    if STRICT in real:
        # An unknown field: refused (400) only because kubectl asks for fieldValidation=Strict; without it,
        # as optplan's own requests go, the real server prunes it, and so does the fake (which has no Strict).
        lenient = _real_refuses(real_cluster, doc, status, strict=False)
        assert bool(lenient) == bool(fake_says), f"{name}: real without Strict: {lenient!r}; fake: {fake_says!r}"
    else:
        assert "is invalid" in real, real
        assert fake_says, f"{name}: the real server refuses it ({real}); the fake accepts it"


def test_the_crds_cel_rule_is_enforced_by_the_real_server_as_by_the_fake(real_cluster: Cluster, probe: dict[str, Any],
                                                                         fake: FakeKube) -> None:
    """spec's x-kubernetes-validations rule: freeHyperNodes or networkTopology, not both; the same cause from
    both servers."""
    doc = copy.deepcopy(probe)
    doc["spec"]["goals"] = [{"resource": "huawei.com/ascend-1980", "freeHyperNodes": {"tier": 1, "count": 1}}]
    doc["spec"]["networkTopology"] = {"tier": 1, "requiredNodeBlocks": 1}
    real = _real_refuses(real_cluster, doc, status=False)
    cause = "spec: Invalid value: give freeHyperNodes or networkTopology, not both"
    assert cause in real, real
    assert cause in _fake_refuses(fake, doc, status=False)


def _http(c: Cluster, method: str, path: str, body: Any) -> tuple[int, dict[str, Any], str]:
    """A request as the admin, over the REST API: (status, the answer, its Warning header)."""
    import urllib.error
    import urllib.request
    req = urllib.request.Request(c.server + path, data=json.dumps(body).encode(), method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=c.ssl_context(), timeout=20) as r:
            return r.status, json.loads(r.read()), ", ".join(r.headers.get_all("Warning") or [])
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), ", ".join(e.headers.get_all("Warning") or [])


def _fake_http(fake: FakeKube, method: str, path: str, body: Any) -> tuple[int, dict[str, Any], str]:
    code, out, headers = fake.handle(method, path, {"content-type": "application/json"}, json.dumps(body).encode())
    assert isinstance(out, dict)
    return code, out, headers.get("Warning", "")


def _answer(code: int, out: dict[str, Any], warning: str) -> tuple[Any, ...]:
    causes = sorted((c.get("field"), c.get("message")) for c in (out.get("details") or {}).get("causes") or [])
    return (code, out.get("reason"), out.get("message") if code >= 400 else None, causes if code >= 400 else [],
            warning)


RUNS = "/apis/repack.volcano.sh/v1alpha1/repackruns"


@pytest.mark.parametrize("validation", ["Strict", "Warn", "Ignore"])
def test_unknown_fields_are_answered_by_the_fake_as_by_the_real_server(real_cluster: Cluster, probe: dict[str, Any],
                                                                      fake: FakeKube, validation: str) -> None:
    """fieldValidation=Strict (kubectl's default) refuses an unknown field (400, the same message); Warn (the
    default without the parameter) and Ignore store the run pruned, Warn with the same Warning header."""
    doc = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "schema-unknown"},
           "spec": {"mode": "DryRun", "priority": 1, "goals": [{"resource": "nvidia.com/gpu", "weight": 3}]}}
    path = f"{RUNS}?dryRun=All&fieldValidation={validation}"
    real = _answer(*_http(real_cluster, "POST", path, doc))
    faked = _answer(*_fake_http(fake, "POST", f"{RUNS}?fieldValidation={validation}", doc))
    if faked[0] == 201:
        fake.delete("repack.volcano.sh/v1alpha1", "RepackRun", "schema-unknown")
    print(f"real: {real}\nfake: {faked}")
    assert faked == real


PODS = "/api/v1/namespaces/default/pods"
GPU = "nvidia.com/gpu"
NPU = "huawei.com/ascend-1980"


def _pod(**container: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "parity", "namespace": "default"},
            "spec": {"containers": [{"name": "c", **container}]}}


@pytest.mark.parametrize("pod", [
    _pod(resources={"requests": {GPU: "1"}, "limits": {GPU: "1"}}),
    _pod(image="i:1", resources={"requests": {GPU: "1"}}),
    _pod(image="i:1", resources={"requests": {GPU: "1", "cpu": "1"}, "limits": {GPU: "2"}}),
    _pod(image="i:1", resources={"requests": {GPU: "1", "cpu": "1"}, "limits": {GPU: "1"}}),
    _pod(image="i:1", resources={"requests": {NPU: "2"}, "limits": {NPU: "2000m"}}),
], ids=["no-image", "no-limit", "other-limit", "valid", "valid-npu"])
def test_a_new_pod_is_answered_by_the_fake_as_by_the_real_server(real_cluster: Cluster, fake: FakeKube,
                                                                 pod: dict[str, Any]) -> None:
    """The pod rules tests used to get wrong against the lenient fake: a container needs an image, an
    extended resource's request an equal limit. A server-side dry run on the real server."""
    real = _answer(*_http(real_cluster, "POST", f"{PODS}?dryRun=All", pod))
    faked = _answer(*_fake_http(fake, "POST", PODS, pod))
    if faked[0] == 201:
        fake.delete("v1", "Pod", "parity", "default")
    print(f"real: {real}\nfake: {faked}")
    assert faked == real
