"""Live snapshots over real HTTP: the real kubernetes client against the fake API server in fakekube."""

from __future__ import annotations

import logging
import random
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from optplan.adapters.kube import RESOURCES, KubeClient, connect, write_snapshot
from optplan.adapters.kubefile import load_files, load_objects
from optplan.errors import ConflictError, InputError, KubeError
from tests.builders import hypernode, node, pdb, pod, podgroup, priority_class, queue, repack_run, vcjob
from tests.fakekube import FakeKube, self_signed, write_kubeconfig

PODS = "/api/v1/pods"
PDBS = "/apis/policy/v1/poddisruptionbudgets"
RUNS = "/apis/repack.volcano.sh/v1alpha1/repackruns"


@pytest.fixture
def kube(fake_kube: FakeKube, tmp_path: Path) -> Iterator[KubeClient]:
    client = connect(str(fake_kube.write_kubeconfig(tmp_path / "kubeconfig")), backoff=0)
    try:
        yield client
    finally:
        client.close()


def cluster() -> list[dict[str, Any]]:
    """Two nodes, a gang of two running pods, and one object of every other kind the planners read."""
    n0 = node("n0", labels={"zone": "a"})
    n0["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update"}]
    return [
        n0, node("n1"),
        pod("w0", "n0", 4, labels={"app": "train"}), pod("w1", "n1", 4, labels={"app": "train"}),
        podgroup("pg"), pdb("train", {"app": "train"}, 1), priority_class("high", 1000), queue("research"),
        hypernode("rack", 1, ["n0", "n1"]), vcjob("job"), repack_run("run"),
        {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
         "metadata": {"name": "llm", "namespace": "serve"}, "spec": {"recoveryPolicy": "ServingGroupRecreate"}},
    ]


def names(objects: list[dict[str, Any]], kind: str) -> list[str]:
    return [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects if o["kind"] == kind]


# ---- reading a snapshot ------------------------------------------------------------------------

def test_snapshot_has_every_kind_in_kubectl_shape(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.add(*cluster(),
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}, "data": {"k": "dg=="}},
                  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}})
    objects = kube.snapshot_objects()
    assert [o["kind"] for o in objects] == [
        "Node", "Node", "Pod", "Pod", "PodDisruptionBudget", "PriorityClass", "PodGroup", "Queue", "HyperNode",
        "Job", "ModelServing", "RepackRun"]
    assert objects[0]["apiVersion"] == "v1" and objects[-1]["apiVersion"] == "repack.volcano.sh/v1alpha1"
    assert "managedFields" not in objects[0]["metadata"] and objects[0]["metadata"]["labels"] == {"zone": "a"}
    assert all(o["metadata"]["resourceVersion"] for o in objects)
    # Secrets and ConfigMaps are never asked for
    assert not [r.path for r in fake_kube.requests if "secrets" in r.path or "configmaps" in r.path]
    assert {r.headers.get("authorization") for r in fake_kube.requests} == {"Bearer fake-token"}


def test_pods_are_read_in_pages_and_sorted(fake_kube: FakeKube, kube: KubeClient) -> None:
    pods = [pod(f"p{i:04d}", "n0", 0, ns=f"ns{i % 3}") for i in range(1203)]
    random.Random(7).shuffle(pods)
    fake_kube.add(node("n0", pods="2000"), *pods)
    objects = kube.snapshot_objects()
    listed = [r for r in fake_kube.requests if r.path == PODS]
    assert [r.query["limit"] for r in listed] == ["500", "500", "500"]
    assert ["continue" in r.query for r in listed] == [False, True, True]
    got = names(objects, "Pod")
    assert len(got) == 1203 and got == sorted(got, key=lambda k: tuple(k.split("/")))
    assert kube.snapshot_objects() == objects  # deterministic


def test_terminal_pods_are_left_out(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.add(node("n0"), pod("running", "n0"), pod("pending", None), pod("done", "n0", phase="Succeeded"),
                  pod("crashed", "n0", phase="Failed"))
    assert names(kube.snapshot_objects(), "Pod") == ["default/pending", "default/running"]


def test_a_missing_crd_reads_as_none_and_warns_once(fake_kube: FakeKube, kube: KubeClient, tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    fake_kube.add(*cluster())
    fake_kube.uninstall("topology.volcano.sh", "hypernodes")
    with caplog.at_level(logging.WARNING, logger="optplan.adapters.kube"):
        objects = kube.snapshot_objects()
        kube.snapshot_objects()
    assert names(objects, "HyperNode") == [] and len(names(objects, "Node")) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "hypernodes.topology.volcano.sh" in warnings[0]
    write_snapshot(objects, tmp_path / "snap.yaml")
    assert load_files([tmp_path / "snap.yaml"]).snapshot.hyper_nodes == {}


def test_forbidden_names_the_resource_and_the_verb(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.add(*cluster())
    fake_kube.forbid(PDBS)
    with pytest.raises(KubeError) as e:
        kube.snapshot_objects()
    msg = str(e.value)
    assert msg.startswith("forbidden: cannot list poddisruptionbudgets.policy at the cluster scope (403): ")
    assert 'cannot list resource "poddisruptionbudgets" in API group "policy"' in msg and "\n" not in msg


@pytest.mark.parametrize("status", [429, 500, 503])
def test_throttling_and_server_errors_are_retried(fake_kube: FakeKube, kube: KubeClient, status: int) -> None:
    fake_kube.add(*cluster())
    clean = kube.snapshot_objects()
    before = len(fake_kube.requests)
    fake_kube.fail(PODS, status, times=2, retry_after="0" if status == 429 else None)
    assert kube.snapshot_objects() == clean
    assert len(fake_kube.requests) - before == len(RESOURCES) + 2  # one page per kind, two retries


def test_retry_after_is_honoured(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.add(*cluster())
    fake_kube.fail(PODS, 429, times=3, retry_after="0")
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kc")), backoff=1) as slow:  # backoff alone: 7 s
        started = time.monotonic()
        assert len(names(slow.snapshot_objects(), "Pod")) == 2
    assert time.monotonic() - started < 3


def test_retries_are_bounded(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.fail(PODS, 503, times=None, message="etcd is down")
    with pytest.raises(KubeError, match=r"^cannot list pods at the cluster scope: the API server answered 503 "
                                        r"5 times: etcd is down$"):
        kube.snapshot_objects()
    assert fake_kube.paths().count(PODS) == 5


def test_an_expired_continue_token_restarts_the_list_once(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.add(node("n0"), *[pod(f"p{i}", "n0", 0) for i in range(7)])
    fake_kube.fail(PODS, 410, times=1, on_continue=True)
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kc")), page_size=3, backoff=0) as client:
        assert names(client.snapshot_objects(), "Pod") == [f"default/p{i}" for i in range(7)]
        starts = [r for r in fake_kube.requests if r.path == PODS and "continue" not in r.query]
        assert len(starts) == 2  # the first try, and the restart
        fake_kube.fail(PODS, 410, times=2, on_continue=True)
        with pytest.raises(KubeError, match=r"^cannot list pods at the cluster scope \(410\): The provided continue"):
            client.snapshot_objects()


def test_a_refused_connection_says_refused(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.stop()
    with pytest.raises(KubeError, match=r"^cannot list nodes at the cluster scope: cannot reach the API server at "
                                        r"http://127\.0\.0\.1:\d+: connection refused$"):
        kube.snapshot_objects()


def test_a_dns_failure_says_dns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "api.cluster.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    path = write_kubeconfig(tmp_path / "kc", {"lab": "https://api.cluster.invalid:6443"})
    with connect(str(path)) as client, pytest.raises(
            KubeError, match=r"^cannot list nodes at the cluster scope: cannot reach the API server at "
                             r"https://api\.cluster\.invalid:6443: DNS lookup of api\.cluster\.invalid failed "
                             r"\(name or service not known\)$"):
        client.snapshot_objects()


def test_a_tls_failure_says_tls(fake_kube: FakeKube, tmp_path: Path) -> None:
    url = fake_kube.url.replace("http://", "https://")  # the fake speaks plain HTTP: the handshake fails
    with connect(str(write_kubeconfig(tmp_path / "kc", {"tls": url}))) as client, pytest.raises(
            KubeError, match=rf"^cannot list nodes at the cluster scope: TLS handshake with the API server at "
                             rf"{re.escape(url)} failed: [a-z]"):
        client.snapshot_objects()


@pytest.fixture
def tls_kube(tmp_path: Path) -> Iterator[FakeKube]:
    """The fake API server over HTTPS, with a self-signed certificate for 127.0.0.1."""
    pair = self_signed(tmp_path)
    if pair is None:
        pytest.skip("no openssl command to make a certificate")
    server = FakeKube(tls=pair).start()
    try:
        yield server
    finally:
        server.stop()


def test_over_tls_an_untrusted_certificate_says_tls(tls_kube: FakeKube, tmp_path: Path) -> None:
    tls_kube.add(node("n0"))
    with connect(str(tls_kube.write_kubeconfig(tmp_path / "trusted"))) as client:
        assert names(client.snapshot_objects(), "Node") == ["/n0"]
    with connect(str(tls_kube.write_kubeconfig(tmp_path / "untrusted", trust=False))) as client, pytest.raises(
            KubeError, match=r"^cannot list nodes at the cluster scope: TLS handshake with the API server at "
                             r"https://127\.0\.0\.1:\d+ failed: certificate verify failed: self.signed certificate$"):
        client.snapshot_objects()


def test_over_tls_a_trickle_hits_the_deadline(tls_kube: FakeKube, tmp_path: Path) -> None:
    tls_kube.add(node("n0"))
    tls_kube.drip("/api/v1/nodes", 0.1)
    with connect(str(tls_kube.write_kubeconfig(tmp_path / "kc")), timeout=1.0) as client:
        started = time.monotonic()
        with pytest.raises(KubeError, match=r"^cannot list nodes at the cluster scope: the answer from the API server "
                                            r"at https://\S+ did not complete within the 1 s request deadline"):
            client.snapshot_objects()
        assert 0.9 < time.monotonic() - started < 5


def test_an_answer_cut_short_is_one_line(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.add(node("n0"))
    fake_kube.cut("/api/v1/nodes")
    with pytest.raises(KubeError, match=r"^cannot list nodes at the cluster scope: the API server at \S+ closed the "
                                        r"connection before its answer was complete \(\d+ bytes received\)$"):
        kube.snapshot_objects()


# ---- deadlines and the size cap ------------------------------------------------------------------
# Deadlines of ~1 s; elapsed times are checked with room for a loaded machine (the bound proves that the
# deadline, not the server, ended the request: each server below would hold it 10 s or more).

NODES = "/api/v1/nodes"


@pytest.mark.parametrize("setup, expected", [
    (lambda f: f.stall(NODES, 30),
     r"no answer from the API server at \S+ within the 1 s request deadline \(--request-timeout\)"),
    (lambda f: f.drip(NODES, 0.1, headers=True),  # each byte in time; the headers alone take 10 s
     r"no answer from the API server at \S+ within the 1 s request deadline \(--request-timeout\)"),
    (lambda f: f.drip(NODES, 0.1), r"the answer from the API server at \S+ did not complete within the 1 s request "
                                   r"deadline \(--request-timeout\): \d+ bytes received"),
    (lambda f: f.drip(NODES, 30), r"the answer from the API server at \S+ did not complete within the 1 s request "
                                  r"deadline \(--request-timeout\): 1 byte received"),  # headers, then a stall
], ids=["silent", "trickled-headers", "trickled-body", "stalled-body"])
def test_every_request_has_a_total_deadline(fake_kube: FakeKube, tmp_path: Path, setup: Any, expected: str) -> None:
    fake_kube.add(node("n0"))
    setup(fake_kube)
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kc")), timeout=1.0) as client:
        started = time.monotonic()
        with pytest.raises(KubeError) as e:
            client.snapshot_objects()
        elapsed = time.monotonic() - started
    assert re.fullmatch(rf"cannot list nodes at the cluster scope: {expected}", str(e.value))
    assert 0.9 < elapsed < 5


def test_the_deadline_is_per_request(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.add(node("n0", pods="100"), *[pod(f"p{i}", "n0", 0) for i in range(4)])
    fake_kube.stall(PODS, 0.5)  # 5 pages of 0.5 s: 2.5 s in all, each well inside 2 s
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kc")), timeout=2.0, page_size=1) as client:
        assert len(names(client.snapshot_objects(), "Pod")) == 4


def test_the_command_deadline_bounds_requests_and_retries(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.add(*cluster())
    kubeconfig = str(fake_kube.write_kubeconfig(tmp_path / "kc"))
    fake_kube.stall(PODS, 30)
    with connect(kubeconfig, timeout=30, deadline=1.0) as client:
        started = time.monotonic()
        with pytest.raises(KubeError, match=r"^cannot list pods at the cluster scope: no answer from the API server "
                                            r"at \S+ within the 1 s deadline of the command's API requests "
                                            r"\(--api-deadline\)$"):
            client.snapshot_objects()
        assert time.monotonic() - started < 5
    fake_kube.stall(PODS, 0)
    fake_kube.fail(PODS, 503, times=None, retry_after="20", message="etcd is down")
    with connect(kubeconfig, deadline=10) as client:
        started = time.monotonic()
        with pytest.raises(KubeError, match=r"^cannot list pods at the cluster scope: the API server answered 503 "
                                            r"\(etcd is down\) and a retry in 20 s would pass the 10 s deadline of "
                                            r"the command's API requests \(--api-deadline\)$"):
            client.snapshot_objects()
        assert time.monotonic() - started < 5  # refused at once, not after sleeping
    assert fake_kube.paths().count(PODS) == 2


@pytest.mark.parametrize("padding, expected", [
    (4 << 20, r"the API server announced 4 MiB, over the 1 MiB cap on one response \(lower --page-size\)"),
    (None, r"the answer exceeds the 1 MiB cap on one response \(lower --page-size\)"),  # chunked, never ending
], ids=["announced", "endless"])
def test_a_response_over_the_size_cap_is_refused(fake_kube: FakeKube, tmp_path: Path, padding: int | None,
                                                 expected: str) -> None:
    fake_kube.add(node("n0"), pod("p0", "n0"))
    fake_kube.pad(NODES, padding)
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kc")), max_bytes=1 << 20, timeout=10) as client:
        started = time.monotonic()
        with pytest.raises(KubeError) as e:
            client.snapshot_objects()
        assert time.monotonic() - started < 5
        assert re.fullmatch(rf"cannot list nodes at the cluster scope: {expected}", str(e.value))
        # the connection holding the rest of the answer is dropped, not reused: the next list reads cleanly
        assert names(client.list_objects(RESOURCES[1]), "Pod") == ["default/p0"]


def test_a_padded_answer_under_the_cap_reads(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.add(node("n0"))
    fake_kube.pad(NODES, (1 << 20) - 4096)
    with connect(str(fake_kube.write_kubeconfig(tmp_path / "kc")), max_bytes=1 << 20) as client:
        assert names(client.list_objects(RESOURCES[0]), "Node") == ["/n0"]


def test_a_written_snapshot_plans_like_the_live_cluster(fake_kube: FakeKube, kube: KubeClient,
                                                        tmp_path: Path) -> None:
    objects = cluster()
    fake_kube.add(*objects, pod("done", "n0", phase="Succeeded"))
    live = kube.snapshot_objects()
    path = tmp_path / "snapshot.yaml"
    write_snapshot(live, path)
    assert path.read_text().startswith("apiVersion: v1\nkind: List\n")
    from_file = load_files([path])
    assert from_file == load_objects(live)
    assert from_file.snapshot == load_objects(objects).snapshot
    assert list(from_file.runs) == ["run"]


# ---- RepackRun status --------------------------------------------------------------------------

def test_status_patch_at_the_read_version(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.add(repack_run("run"))
    run = kube.get_repack_run("run")
    assert run["kind"] == "RepackRun" and run["spec"]["mode"] == "DryRun"
    version = run["metadata"]["resourceVersion"]
    out = kube.patch_repack_run_status("run", {"phase": "Planned", "plan": {"moves": []}}, version)
    assert out["status"] == {"phase": "Planned", "plan": {"moves": []}}
    assert int(out["metadata"]["resourceVersion"]) > int(version)
    assert fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "run")["status"]["phase"] == "Planned"
    patch = fake_kube.requests[-1]
    assert (patch.method, patch.path) == ("PATCH", f"{RUNS}/run/status")
    assert patch.headers["content-type"] == "application/merge-patch+json"
    assert patch.body["metadata"] == {"resourceVersion": version}


def test_status_patch_conflicts_when_another_writer_came_first(fake_kube: FakeKube, kube: KubeClient) -> None:
    fake_kube.add(repack_run("run"))
    version = kube.get_repack_run("run")["metadata"]["resourceVersion"]
    changed = repack_run("run", min_improvement=5)
    fake_kube.add(changed)  # someone edits the spec after we planned
    before = fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "run")
    with pytest.raises(ConflictError, match=r"^RepackRun 'run' changed .*re-plan$"):
        kube.patch_repack_run_status("run", {"phase": "Planned"}, version)
    assert fake_kube.get("repack.volcano.sh/v1alpha1", "RepackRun", "run") == before


def test_a_missing_run_is_named(kube: KubeClient) -> None:
    with pytest.raises(KubeError, match=r"^not found: no RepackRun named 'ghost' \(404\)"):
        kube.get_repack_run("ghost")
    with pytest.raises(KubeError, match=r"^not found: no RepackRun named 'ghost' \(404\)"):
        kube.patch_repack_run_status("ghost", {"phase": "Planned"}, "1")


# ---- connecting --------------------------------------------------------------------------------

@pytest.mark.parametrize("content, context, expected", [
    (None, None, r"kubeconfig file not found"),
    ("clusters: [unclosed\n", None, r"malformed kubeconfig"),
    ("- just\n- a list\n", None, r"not a kubeconfig"),
    ("apiVersion: v1\nkind: Config\ncontexts: []\n", None, r"current-context: no current-context set"),
    (None, "staging", r"--context: no context named 'staging' \(contexts: fake\)"),
])
def test_bad_kubeconfig_is_one_line(fake_kube: FakeKube, tmp_path: Path, content: str | None, context: str | None,
                                    expected: str) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    elif context is not None:
        fake_kube.write_kubeconfig(path)
    with pytest.raises(InputError, match=expected) as e:
        connect(str(path), context)
    assert str(e.value).startswith(str(path)) and "\n" not in str(e.value)


def test_the_context_picks_the_cluster(fake_kube: FakeKube, tmp_path: Path) -> None:
    other = FakeKube().start()
    try:
        other.add(node("elsewhere"))
        fake_kube.add(node("here"))
        path = write_kubeconfig(tmp_path / "kc", {"prod": fake_kube.url, "lab": other.url})
        with connect(str(path)) as client:
            assert names(client.snapshot_objects(), "Node") == ["/here"]
        with connect(str(path), "lab") as client:
            assert names(client.snapshot_objects(), "Node") == ["/elsewhere"]
    finally:
        other.stop()


def test_without_arguments_kubeconfig_comes_from_the_environment(fake_kube: FakeKube, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake_kube.add(node("n0"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(fake_kube.write_kubeconfig(tmp_path / "kc")))
    with connect() as client:
        assert names(client.snapshot_objects(), "Node") == ["/n0"]


def test_in_a_pod_the_service_account_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr("kubernetes.config.incluster_config.SERVICE_CERT_FILENAME", str(ca))
    with pytest.raises(InputError, match=r"^KUBERNETES_SERVICE_HOST: in-cluster configuration: .*token"):
        connect()
    token.write_text("sa-token")
    ca.write_text("not checked before the first request")
    with connect() as client:
        assert client.host == "https://10.0.0.1:443"
