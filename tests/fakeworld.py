"""A simulated cluster on top of ``tests.fakekube.FakeKube``: the controllers and the scheduler that
would react to the Repack controller's evictions and nominations in a real cluster.

API (for controller tests)
==========================

FakeKube (tests/fakekube.py; its docstring says exactly what the server emulates)::

    kube = FakeKube(crd_schemas=True, history=1000, seed=0).start()   # ... kube.stop()
    kube.url; kube.write_kubeconfig(path) -> Path
    # seeding and reading from Python (no HTTP):
    kube.add(*objs, server_fields=False) # stored verbatim (+resourceVersion), a watch event each;
                                         # server_fields: also a missing uid, creationTimestamp, generation
    kube.create(obj) -> obj              # as POST: uid, creationTimestamp, generation, schema, status reset
    kube.update(obj, subresource=None|"status") -> obj     # as PUT (409 on stale resourceVersion)
    kube.patch(api_version, kind, name, patch, namespace="", subresource=None,
               content_type="application/merge-patch+json") -> obj
    kube.delete(api_version, kind, name, namespace="", options=None) -> Status | obj
    kube.evict(name, namespace="default", grace_period_seconds=None, uid=None) -> Status
    kube.bind(name, node, namespace="default") -> Status
    kube.get(api_version, kind, name, namespace="") -> obj      # KeyError when absent (a copy)
    kube.find(api_version, kind, name, namespace="") -> obj | None
    kube.objects(api_version, kind, namespace=None) -> [obj]    # sorted by namespace/name
    kube.resource_version -> int
    # (the Python-side writes raise tests.fakekube.ApiError(code, status) where HTTP would answer an error)
    # records:
    kube.requests: list[Request(method, path, query, headers, body)]; kube.paths(method="GET")
    kube.evictions: list[Eviction(namespace, name, uid, grace_period_seconds, code, message)]
    kube.evicted() -> ["ns/name", ...]   # successful (201) evictions, in order, repeats kept
    # pod termination:
    kube.hold_pod_deletions(True)        # deleted/evicted bound pods stay terminating (deletionTimestamp)
    kube.terminating() -> ["ns/name"]; kube.reap(*keys) -> ["ns/name"]   # finish their deletion
    # watch hooks:
    kube.compact()                       # forget event history: older resourceVersions/continues -> 410
    kube.bookmark()                      # a BOOKMARK now to every watch that allows them
    kube.bookmark_interval = 1.0         # periodic bookmarks (None: off)
    kube.close_watches(); kube.watch_count() -> int
    kube.clock = lambda: datetime(...)   # server timestamps (kube.timestamp() -> "2026-...Z")
    # faults (any verb, watches too):
    kube.fail(path, status, times=1|None, on_continue=False, retry_after=None, message=None, method=None)
    kube.stall(path, seconds); kube.drip(path, interval, headers=False); kube.pad(path, n); kube.cut(path)
    kube.forbid(path)
    kube.install_crd(path) -> ResourceType; kube.uninstall(group, plural)

World (this module)::

    world = World(kube, recreate_delay=0, schedule_delay=1, reap_delay=0, pdb_controller=True,
                  disrupted_timeout=120.0)        # pods existing now are the workloads' desired pods
    world.step() -> list[str]            # one round (below); returns what happened, one line each
    world.run(steps=10) -> list[str]; world.run_until(lambda: ..., max_steps=50) -> int (steps taken)
    world.start(interval=0.05) -> World; world.stop()        # background thread calling step(); a delay
                                         # of N steps is then about N x interval seconds; stop() re-raises
                                         # (RuntimeError) what ended the thread (world.error)
    world.never_schedule("ns/pod"); world.bind_instead("ns/pod", "node")
    world.never_recreate("ns/pod"); world.fail_next_binds(n)
    world.log: list[str]                 # every line step() returned
    world.bindings: list[tuple[str, str]]            # ("ns/pod", node) in order
    world.recreated: list[tuple[str, str, str]]      # ("ns/pod", old uid, new uid) in order
    ready(pod_obj) -> pod_obj            # a seed pod Running with PodScheduled and Ready conditions

One ``step()``, in order:

1. **kubelet**: a terminating pod is removed (``kube.reap``) in the first step that has seen it
   terminating in ``reap_delay`` earlier steps (0: the first step that sees it).
2. **workload controllers**: every pod the world has seen that belongs to a VCJob (``batch.volcano.sh``
   Job, from the pod's or its PodGroup's controller ownerReference) or a Kthena ModelServing (label
   ``modelserving.volcano.sh/name`` or an ownerReference) and is now gone is recreated once
   ``recreate_delay`` earlier steps have seen it gone (pods that exist when the World is made count as
   seen): a VCJob pod ``<job>-<task>-<index>`` under the same name with a new
   UID, Pending, without ``nodeName`` or ``status`` beyond ``phase: Pending``. The Job's policy for
   ``PodEvicted`` (``VCJob.action_on``, the task's policies first) widens it: ``RestartJob`` deletes and
   recreates every pod of the job, ``RestartTask`` every pod of the task. A ModelServing with
   ``recoveryPolicy: ServingGroupRecreate`` deletes the whole ServingGroup and recreates it under a new
   PodGroup name (``<serving>-<n>``, n one above the highest index used so far; pod names, the
   ``modelserving.volcano.sh/group-name`` label and the ``scheduling.k8s.io/group-name`` annotation are
   rewritten, the old PodGroup is deleted and a new one created), which is ``verify``'s matching rule 3;
   ``RoleRecreate`` (the default) recreates the pods of the role replica (labels ``.../role`` and
   ``.../role-id``) under their names; ``None`` the pod alone.
3. **scheduler**: pending pods (no ``nodeName``, not terminating) that have waited ``schedule_delay``
   steps are bound, PodGroup by PodGroup, all-or-nothing up to the PodGroup's ``minMember`` as Volcano's
   gang scheduling does: each to its ``status.nominatedNodeName`` when it still fits there
   (``optplan.solvers.core.oracle``: ``static_reason`` and ``Capacity`` on a snapshot built by optplan's
   own loader from the fake's objects), else to the most allocated feasible node (the largest share of
   the requested resources in use once the pod is placed; ties by name), else it stays Pending.
   Binding goes through ``pods/binding`` and then the pod's status becomes Running (Ready, startTime).
   Nominated pods are placed first; capacity held by other nominated pods is not reserved.
4. **disruption controller** (``pdb_controller``): each PDB with ``spec.minAvailable`` or
   ``spec.maxUnavailable`` gets ``status.currentHealthy`` (bound, Running pods with condition Ready True
   that it selects, not terminating and not in ``disruptedPods``; seed pods with ``ready(pod)``),
   ``desiredHealthy``, ``expectedPods`` (the pods it selects), ``disruptionsAllowed`` = max(currentHealthy
   - desiredHealthy, 0), and ``disruptedPods`` without the pods that are gone or terminating and without
   entries older than ``disrupted_timeout`` seconds by ``kube.clock`` (the controller's DeletionTimeout, 2
   minutes). As in Kubernetes, the entry is by pod name: a VCJob pod recreated under its name counts as
   disrupted, not healthy, until the entry expires (set ``disrupted_timeout=0`` or advance
   ``kube.clock``). A PDB with neither field is left as the test wrote it.

Every step is deterministic (sorted iteration, the fake's seeded UIDs), so an explicitly stepped test
gives the same world every run. Not simulated: the kubelet's own evictions, preemption, node failures,
ReplicaSets/StatefulSets (their pods are not recreated), the scheduler's reservation for nominated pods
of other priorities, Volcano's job versioning and Kthena's rolling of roles.
"""

from __future__ import annotations

import copy
import re
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from optplan.adapters.kubefile import load_objects
from optplan.models.queues import POD_EVICTED
from optplan.models.snapshot import Pod, Snapshot
from optplan.solvers.core.oracle import Capacity, static_reason
from optplan.solvers.repack.rules import RESTART_JOB, RESTART_TASK, SERVING_GROUP_RECREATE, RepackProblem
from tests.fakekube import ApiError, FakeKube, selector_matches

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
MS_NAME = "modelserving.volcano.sh/name"
MS_GROUP = "modelserving.volcano.sh/group-name"
MS_ROLE = "modelserving.volcano.sh/role"
MS_ROLE_ID = "modelserving.volcano.sh/role-id"
VCJOB_GROUP = "batch.volcano.sh"
MS_GROUPS = ("workload.serving.volcano.sh", "workload.volcano.sh")
PG_API = "scheduling.volcano.sh/v1beta1"
SNAPSHOT_KINDS = (("v1", "Node"), ("v1", "Pod"), (PG_API, "PodGroup"), ("batch.volcano.sh/v1alpha1", "Job"),
                  ("workload.serving.volcano.sh/v1alpha1", "ModelServing"), ("policy/v1", "PodDisruptionBudget"))


@dataclass
class _Seen:
    """A workload pod the world has seen: what to recreate when it is gone."""

    key: str
    template: dict[str, Any]  # the pod as last seen
    owner: tuple[str, str] | None  # ("Job" | "ModelServing", name)
    gone_since: int | None = None  # the step it was first seen gone


class World:
    """Workload controllers, a scheduler and a disruption controller over a FakeKube (module docstring)."""

    def __init__(self, kube: FakeKube, *, recreate_delay: int = 0, schedule_delay: int = 1, reap_delay: int = 0,
                 pdb_controller: bool = True, disrupted_timeout: float = 120.0) -> None:
        self.kube = kube
        self.disrupted_timeout = disrupted_timeout
        self.recreate_delay = recreate_delay
        self.schedule_delay = schedule_delay
        self.reap_delay = reap_delay
        self.pdb_controller = pdb_controller
        self.log: list[str] = []
        self.bindings: list[tuple[str, str]] = []
        self.recreated: list[tuple[str, str, str]] = []
        self._seen: dict[str, _Seen] = {}
        self._pending_since: dict[tuple[str, str], int] = {}  # (pod key, uid) -> step first seen pending
        self._terminating_since: dict[str, int] = {}
        self._never_schedule: set[str] = set()
        self._never_recreate: set[str] = set()
        self._bind_instead: dict[str, str] = {}
        self._failing_binds = 0
        self._steps = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        """The exception that ended the background thread, if any."""
        objects = self._objects()
        self._observe(*_by_key(objects))  # the workloads' pods as of now: what the controllers keep alive

    # ---- failures and overrides ---------------------------------------------------------------

    def never_schedule(self, pod: str) -> None:
        """The scheduler leaves ``namespace/name`` pending forever (any UID)."""
        self._never_schedule.add(pod)

    def bind_instead(self, pod: str, node: str) -> None:
        """The scheduler binds ``namespace/name`` to ``node``, whatever was nominated and whatever fits."""
        self._bind_instead[pod] = node

    def never_recreate(self, pod: str) -> None:
        """The workload controller does not recreate ``namespace/name`` (nor its restart unit through it)."""
        self._never_recreate.add(pod)

    def fail_next_binds(self, n: int) -> None:
        """The next ``n`` bindings fail (the pod stays pending and is tried again next step)."""
        self._failing_binds = n

    # ---- driving ------------------------------------------------------------------------------

    def step(self) -> list[str]:
        """One round of kubelet, workload controllers, scheduler and disruption controller."""
        with self._lock:
            self._steps += 1
            out: list[str] = []
            out += self._kubelet()
            out += self._workloads()
            out += self._schedule()
            if self.pdb_controller:
                out += self._disruption()
            self.log += out
            return out

    def run(self, steps: int = 10) -> list[str]:
        out: list[str] = []
        for _ in range(steps):
            out += self.step()
        return out

    def run_until(self, done: Callable[[], bool], max_steps: int = 50) -> int:
        """Step until ``done()``; the steps taken (AssertionError after ``max_steps``)."""
        for i in range(max_steps + 1):
            if done():
                return i
            self.step()
        raise AssertionError(f"not done after {max_steps} steps; last steps: {self.log[-10:]}")

    def start(self, interval: float = 0.05) -> World:
        """Step every ``interval`` seconds on a background thread until ``stop()``."""
        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.step()
                except BaseException as e:  # recorded for the test to see; the loop ends
                    self.error = e
                    return

        self._thread = threading.Thread(target=loop, name="fakeworld", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.error is not None:
            raise RuntimeError("the world's background thread failed") from self.error

    # ---- reading --------------------------------------------------------------------------------

    def _objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for api_version, kind in SNAPSHOT_KINDS:
            try:
                out += self.kube.objects(api_version, kind)
            except KeyError:
                continue  # that CRD is not installed
        return out

    def _snapshot(self, objects: list[dict[str, Any]]) -> Snapshot:
        return load_objects(objects, source="fakeworld").snapshot

    # ---- 1. kubelet ---------------------------------------------------------------------------

    def _kubelet(self) -> list[str]:
        now = set(self.kube.terminating())
        for key in now:
            self._terminating_since.setdefault(key, self._steps)
        for key in list(self._terminating_since):
            if key not in now:
                del self._terminating_since[key]
        due = sorted(k for k, s in self._terminating_since.items() if self._steps - s >= self.reap_delay)
        gone = self.kube.reap(*due) if due else []
        return [f"kubelet: {k} terminated" for k in gone]

    # ---- 2. workload controllers --------------------------------------------------------------

    def _owner(self, pod: dict[str, Any], groups: dict[str, dict[str, Any]]) -> tuple[str, str] | None:
        meta = pod["metadata"]
        ns = meta.get("namespace", "default")
        refs = list(meta.get("ownerReferences") or [])
        group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
        pg = groups.get(f"{ns}/{group}") if group else None
        if pg is not None:
            refs += pg["metadata"].get("ownerReferences") or []
        for ref in refs:
            api_group = str(ref.get("apiVersion", "")).split("/")[0]
            if ref.get("kind") == "Job" and api_group == VCJOB_GROUP:
                return ("Job", ref["name"])
            if ref.get("kind") == "ModelServing" and api_group in MS_GROUPS:
                return ("ModelServing", ref["name"])
        if (meta.get("labels") or {}).get(MS_NAME):
            return ("ModelServing", meta["labels"][MS_NAME])
        return None

    def _observe(self, pods: dict[str, dict[str, Any]], groups: dict[str, dict[str, Any]]) -> None:
        """Remember the workload pods there are now (what a controller would recreate)."""
        for key, pod in sorted(pods.items()):
            owner = self._owner(pod, groups)
            if owner is not None:
                seen = self._seen.get(key)
                if seen is None or pod["metadata"].get("uid") != seen.template["metadata"].get("uid") \
                        or seen.gone_since is not None:
                    self._seen[key] = _Seen(key, copy.deepcopy(pod), owner)
                else:
                    seen.template = copy.deepcopy(pod)

    def _workloads(self) -> list[str]:
        objects = self._objects()
        pods, groups = _by_key(objects)
        self._observe(pods, groups)
        out: list[str] = []
        snapshot: Snapshot | None = None
        for key in sorted(self._seen):
            seen = self._seen.get(key)
            if seen is None or key in pods:
                continue
            if seen.gone_since is None:
                seen.gone_since = self._steps
            if self._steps - seen.gone_since < self.recreate_delay or key in self._never_recreate:
                continue
            if snapshot is None:
                snapshot = self._snapshot(objects)
            if seen.owner is not None and seen.owner[0] == "Job":
                out += self._restart_job_pods(seen, snapshot)
            else:
                out += self._restart_serving_pods(seen, snapshot)
            objects = self._objects()
            pods = _by_key(objects)[0]
        return out

    def _kill(self, keys: list[str]) -> list[str]:
        """Delete pods of a restart unit that are still there (at once, as the controller's kill does)."""
        out = []
        for key in keys:
            ns, name = key.split("/", 1)
            try:
                self.kube.delete("v1", "Pod", name, ns, {"gracePeriodSeconds": 0})
            except ApiError as e:
                if e.code != 404:
                    raise
                continue  # gone meanwhile
            self._terminating_since.pop(key, None)
            out.append(f"controller: {key} killed for restart")
        return out

    def _recreate(self, seen: _Seen, name: str | None = None, rewrite: Callable[[dict[str, Any]], None] | None = None,
                  ) -> str:
        pod = copy.deepcopy(seen.template)
        meta = pod["metadata"]
        ns = meta.get("namespace", "default")
        old_uid = meta.get("uid", "")
        keep = {k: meta[k] for k in ("name", "namespace", "labels", "annotations", "ownerReferences") if k in meta}
        if name is not None:
            keep["name"] = name
        pod["metadata"] = keep
        pod.get("spec", {}).pop("nodeName", None)
        pod.pop("status", None)
        if rewrite is not None:
            rewrite(pod)
        made = self.kube.create(pod)
        key = f"{ns}/{made['metadata']['name']}"
        self.recreated.append((key, old_uid, made["metadata"]["uid"]))
        self._seen.pop(seen.key, None)
        return key

    def _restart_job_pods(self, seen: _Seen, snapshot: Snapshot) -> list[str]:
        assert seen.owner is not None
        ns = seen.template["metadata"].get("namespace", "default")
        job = snapshot.jobs.get(f"{ns}/{seen.owner[1]}")
        policy = None
        if job is not None:
            task = RepackProblem.task_of(_as_pod(seen.template), job)
            policy = job.action_on(POD_EVICTED, task)
            members = [s for s in self._seen.values() if s.owner == seen.owner
                       and s.template["metadata"].get("namespace", "default") == ns]
            if policy == RESTART_TASK and task is not None:
                members = [s for s in members if RepackProblem.task_of(_as_pod(s.template), job) == task]
            elif policy != RESTART_JOB and policy != RESTART_TASK:
                members = [seen]
        else:
            members = [seen]
        members = sorted(members, key=lambda s: s.key)
        out = self._kill([s.key for s in members if s.key != seen.key])
        for s in members:
            key = self._recreate(s)
            out.append(f"controller: Job {ns}/{seen.owner[1]} recreated {key}"
                       + (f" ({policy})" if policy in (RESTART_JOB, RESTART_TASK) else ""))
        return out

    def _restart_serving_pods(self, seen: _Seen, snapshot: Snapshot) -> list[str]:
        assert seen.owner is not None
        ns = seen.template["metadata"].get("namespace", "default")
        ms = snapshot.model_servings.get(f"{ns}/{seen.owner[1]}")
        policy = RepackProblem.recovery_policy(ms) if ms is not None else "None"
        labels = seen.template["metadata"].get("labels") or {}
        group = labels.get(MS_GROUP) or (seen.template["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
        same = [s for s in self._seen.values() if s.owner == seen.owner
                and s.template["metadata"].get("namespace", "default") == ns and _group_of(s.template) == group]

        def role(s: _Seen) -> tuple[str, str] | None:
            lab = s.template["metadata"].get("labels") or {}
            r, i = lab.get(MS_ROLE), lab.get(MS_ROLE_ID)
            return (r, i) if r is not None and i is not None else None

        if policy == SERVING_GROUP_RECREATE and group:
            return self._recreate_group(seen, sorted(same, key=lambda s: s.key), group, snapshot)
        if policy == "None":
            members = [seen]
        elif role(seen) is None:
            members = same or [seen]
        else:
            members = [s for s in same if role(s) == role(seen)]
        members = sorted(members, key=lambda s: s.key)
        out = self._kill([s.key for s in members if s.key != seen.key])
        for s in members:
            out.append(f"controller: ModelServing {ns}/{seen.owner[1]} recreated {self._recreate(s)} ({policy})")
        return out

    def _recreate_group(self, seen: _Seen, members: list[_Seen], group: str, snapshot: Snapshot) -> list[str]:
        assert seen.owner is not None
        ns = seen.template["metadata"].get("namespace", "default")
        serving = seen.owner[1]
        used = [int(m[1]) for g in {*(k.split("/", 1)[1] for k in snapshot.pod_groups if k.startswith(f"{ns}/")),
                                      group, *(_group_of(s.template) or "" for s in self._seen.values())}
                if (m := re.fullmatch(rf"{re.escape(serving)}-(\d+)", g))]
        new = f"{serving}-{max(used, default=-1) + 1}"
        out = self._kill([s.key for s in members if s.key != seen.key])
        old_pg = self.kube.find(PG_API, "PodGroup", group, ns)
        if old_pg is not None:
            self.kube.delete(PG_API, "PodGroup", group, ns)
            pg = {"apiVersion": PG_API, "kind": "PodGroup", "metadata": {
                k: v for k, v in old_pg["metadata"].items() if k in ("labels", "annotations", "ownerReferences")},
                "spec": copy.deepcopy(old_pg.get("spec", {}))}
            pg["metadata"].update(name=new, namespace=ns)
            if MS_GROUP in pg["metadata"].get("labels", {}):
                pg["metadata"]["labels"][MS_GROUP] = new
            self.kube.create(pg)
            out.append(f"controller: ModelServing {ns}/{serving} PodGroup {group} recreated as {new}")

        def rewrite(pod: dict[str, Any]) -> None:
            meta = pod["metadata"]
            if MS_GROUP in (meta.get("labels") or {}):
                meta["labels"][MS_GROUP] = new
            if GROUP_ANNOTATION in (meta.get("annotations") or {}):
                meta["annotations"][GROUP_ANNOTATION] = new

        for s in members:
            name = s.template["metadata"]["name"]
            renamed = new + name[len(group):] if name.startswith(group) else f"{name}-{new}"
            key = self._recreate(s, renamed, rewrite)
            out.append(f"controller: ModelServing {ns}/{serving} recreated {s.key} as {key} "
                       f"({SERVING_GROUP_RECREATE})")
        return out

    # ---- 3. scheduler -------------------------------------------------------------------------

    def _schedule(self) -> list[str]:
        objects = self._objects()
        raw_pods = {f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}": o
                    for o in objects if o["kind"] == "Pod"}
        waiting = []
        for key, o in sorted(raw_pods.items()):
            if (o.get("spec") or {}).get("nodeName") or o["metadata"].get("deletionTimestamp") \
                    or (o.get("status") or {}).get("phase", "Pending") != "Pending":
                continue
            since = self._pending_since.setdefault((key, o["metadata"].get("uid", "")), self._steps)
            if self._steps - since >= self.schedule_delay and key not in self._never_schedule:
                waiting.append(key)
        if not waiting:
            return []
        snap = self._snapshot(objects)
        cap = Capacity(snap)
        by_group: dict[str, list[Pod]] = defaultdict(list)
        for key in waiting:
            pod = snap.pods[key]
            by_group[pod.group_key or f"<none>/{key}"].append(pod)
        out: list[str] = []
        order = sorted(by_group, key=lambda g: (not any(p.nominated_node_name for p in by_group[g]), g))
        for gk in order:
            pods = sorted(by_group[gk], key=lambda p: (p.nominated_node_name is None, p.key))
            pg = snap.pod_groups.get(gk)
            bound = len(snap.pods_by_group.get(gk, ())) if pg is not None else 0
            need = max((pg.min_member if pg is not None else 1) - bound, 1)
            placed: list[tuple[Pod, str, str]] = []
            for pod in pods:
                node, how = self._choose(pod, snap, cap)
                if node is not None:
                    cap.add(pod, node)
                    placed.append((pod, node, how))
            if len(placed) < min(need, len(pods)):
                for pod, node, _ in placed:
                    cap.remove(pod, node)
                out.append(f"scheduler: PodGroup {gk}: {len(placed)} of {need} pods fit; none bound")
                continue
            for pod, node, how in placed:
                if self._failing_binds > 0:
                    self._failing_binds -= 1
                    cap.remove(pod, node)
                    out.append(f"scheduler: binding {pod.key} to {node} failed (injected)")
                    continue
                try:
                    self.kube.bind(pod.name, node, pod.namespace)
                except ApiError as e:  # deleted or bound meanwhile (a background world races the test)
                    cap.remove(pod, node)
                    out.append(f"scheduler: binding {pod.key} to {node} failed: {e}")
                    continue
                self.kube.patch("v1", "Pod", pod.name, {"status": {
                    "phase": "Running", "startTime": self.kube.timestamp(),
                    "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                }}, namespace=pod.namespace, subresource="status",
                    content_type="application/strategic-merge-patch+json")
                self.bindings.append((pod.key, node))
                out.append(f"scheduler: {pod.key} bound to {node} ({how})")
        return out

    def _choose(self, pod: Pod, snap: Snapshot, cap: Capacity) -> tuple[str | None, str]:
        forced = self._bind_instead.get(pod.key)
        if forced is not None:
            return forced, "forced"
        n = pod.nominated_node_name
        if n is not None and n in snap.nodes and static_reason(pod, snap.nodes[n]) is None \
                and cap.fit_reason(pod, n) is None:
            return n, "nominated"
        feasible = [name for name, node in sorted(snap.nodes.items())
                    if static_reason(pod, node) is None and cap.fit_reason(pod, name) is None]
        if not feasible:
            return None, ""

        def used_share(name: str) -> Fraction:
            alloc = snap.nodes[name].allocatable
            total = Fraction(0)
            for r, v in pod.requests.items():
                if v > 0 and alloc.get(r, 0) > 0:
                    total += Fraction(alloc[r] - cap.free[name].get(r, 0) + v, alloc[r])
            return total

        best = min(feasible, key=lambda name: (-used_share(name), name))
        return best, "nominated node does not fit" if n is not None else "most allocated"

    # ---- 4. disruption controller -------------------------------------------------------------

    def _disruption(self) -> list[str]:
        out: list[str] = []
        pods = self.kube.objects("v1", "Pod")
        for pdb in self.kube.objects("policy/v1", "PodDisruptionBudget"):
            spec = pdb.get("spec") or {}
            if "minAvailable" not in spec and "maxUnavailable" not in spec:
                continue
            ns = pdb["metadata"].get("namespace", "default")
            sel = spec.get("selector")
            mine = [p for p in pods if p["metadata"].get("namespace", "default") == ns
                    and selector_matches(sel, p["metadata"].get("labels") or {})]
            names = {p["metadata"]["name"] for p in mine if not p["metadata"].get("deletionTimestamp")}
            now = self.kube.clock()
            disrupted = {k: v for k, v in ((pdb.get("status") or {}).get("disruptedPods") or {}).items()
                         if k in names and (now - _parse_time(v)).total_seconds() < self.disrupted_timeout}
            healthy = sum(1 for p in mine if _is_ready(p) and not p["metadata"].get("deletionTimestamp")
                          and p["metadata"]["name"] not in disrupted)
            expected = len(mine)
            if "minAvailable" in spec:
                desired = _scaled(spec["minAvailable"], expected, up=True)
            else:
                desired = max(expected - _scaled(spec["maxUnavailable"], expected, up=True), 0)
            status = {**(pdb.get("status") or {}), "currentHealthy": healthy, "desiredHealthy": desired,
                      "expectedPods": expected, "disruptionsAllowed": max(healthy - desired, 0),
                      "observedGeneration": pdb["metadata"].get("generation", 1)}
            if disrupted:
                status["disruptedPods"] = disrupted
            else:
                status.pop("disruptedPods", None)
            if status != pdb.get("status"):
                try:
                    self.kube.update({**pdb, "status": status}, subresource="status")
                except ApiError as e:
                    if e.code != 409:
                        raise
                    continue  # an eviction changed it meanwhile: next step
                if status.get("disruptionsAllowed") != (pdb.get("status") or {}).get("disruptionsAllowed"):
                    out.append(f"disruption: PDB {ns}/{pdb['metadata']['name']} allows "
                               f"{status['disruptionsAllowed']} disruption(s)")
        return out


def _by_key(objects: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Pods and PodGroups by ``namespace/name``."""
    def key(o: dict[str, Any]) -> str:
        return f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}"
    return ({key(o): o for o in objects if o["kind"] == "Pod"}, {key(o): o for o in objects if o["kind"] == "PodGroup"})


def _scaled(value: Any, total: int, *, up: bool) -> int:
    """An int-or-percent PDB field against ``total`` pods (percentages round up, as the controller does)."""
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        return -(-pct * total // 100) if up else pct * total // 100
    return int(value)


def ready(pod: dict[str, Any]) -> dict[str, Any]:
    """Mark a pod object (of a test's seed) Running and Ready, as the kubelet reports a started pod."""
    status = pod.setdefault("status", {})
    status["phase"] = "Running"
    status["conditions"] = [c for c in status.get("conditions", []) if c.get("type") not in ("PodScheduled", "Ready")]
    status["conditions"] += [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
    return pod


def _is_ready(pod: dict[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and (pod.get("status") or {}).get("phase") == "Running" \
        and any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod["status"].get("conditions") or [])


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _group_of(pod: dict[str, Any]) -> str | None:
    meta = pod["metadata"]
    return (meta.get("labels") or {}).get(MS_GROUP) or (meta.get("annotations") or {}).get(GROUP_ANNOTATION)


def _as_pod(obj: dict[str, Any]) -> Pod:
    """Just enough of a Pod for ``RepackProblem.task_of`` (name, labels, annotations)."""
    meta = obj["metadata"]
    return Pod(namespace=meta.get("namespace", "default"), name=meta["name"], labels=meta.get("labels") or {},
               annotations=meta.get("annotations") or {})
