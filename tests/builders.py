"""Small builders for inline snapshots: a 3-node cluster written in a test says more than a fixture."""

from __future__ import annotations

from typing import Any

from optplan.adapters.kubefile import LoadedInput, load_objects
from optplan.models.repack import RepackRun

GPU = "nvidia.com/gpu"


def node(name: str, gpu: int | str = 8, *, cpu: str = "96", memory: str = "768Gi", pods: str | None = "110",
         labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, resource: str = GPU, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    alloc: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if pods is not None:
        alloc["pods"] = pods
    if gpu not in (0, "0"):
        alloc[resource] = str(gpu)
    alloc.update(extra or {})
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec, "status": {"allocatable": alloc}}


IMAGE = "registry.example/workload:1"  # the real API server refuses a container without an image


def resources(requests: dict[str, Any]) -> dict[str, Any]:
    """A container's resources as the real API server accepts them: every extended resource (a
    domain-prefixed name outside kubernetes.io) requested with an equal limit."""
    limits = {k: v for k, v in requests.items() if "/" in k and "kubernetes.io/" not in k}
    return {"requests": requests, **({"limits": limits} if limits else {})}


def pod(name: str, node_name: str | None, gpu: int | str = 1, *, group: str | None = "pg", ns: str = "default",
        cpu: str = "1", memory: str = "1Gi", phase: str = "Running", scheduler: str = "volcano",
        labels: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None, affinity_terms: list[dict[str, Any]] | None = None,
        resource: str = GPU, priority: int | None = None, extra_requests: dict[str, str] | None = None,
        ) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpu not in (0, "0"):
        requests[resource] = str(gpu)
    requests.update(extra_requests or {})
    spec: dict[str, Any] = {"schedulerName": scheduler,
                            "containers": [{"name": "main", "image": IMAGE, "resources": resources(requests)}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": affinity_terms}}}
    if priority is not None:
        spec["priority"] = priority
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if group is not None:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def podgroup(name: str, min_member: int = 1, *, ns: str = "default", labels: dict[str, str] | None = None,
             owner: tuple[str, str, str] | None = ("batch.volcano.sh/v1alpha1", "Job", "job"),
             network_topology: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "controller": True}]
    spec: dict[str, Any] = {"minMember": min_member, "queue": "default"}
    if network_topology is not None:
        spec["networkTopology"] = network_topology
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pdb(name: str, match_labels: dict[str, str], allowed: int, *, ns: str = "default", policy: str | None = None,
        current: int | None = None, desired: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": match_labels}}
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if current is not None:
        status["currentHealthy"] = current
    if desired is not None:
        status["desiredHealthy"] = desired
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": spec, "status": status}


def ready(pod_obj: dict[str, Any], value: bool | None = True) -> dict[str, Any]:
    """The pod with a Ready condition of status "True" or "False" (None: no Ready condition)."""
    conditions = [{"type": "PodScheduled", "status": "True"}]
    if value is not None:
        conditions.append({"type": "Ready", "status": "True" if value else "False"})
    pod_obj.setdefault("status", {})["conditions"] = conditions
    return pod_obj


def repack_run(name: str = "run", resource: str = GPU, *, min_improvement: float | None = None,
               scope: dict[str, Any] | None = None, max_per_run: dict[str, Any] | None = None) -> dict[str, Any]:
    goal: dict[str, Any] = {"resource": resource}
    if min_improvement is not None:
        goal["minFragImprovementPercent"] = min_improvement
    spec: dict[str, Any] = {"mode": "DryRun", "goals": [goal]}
    if scope is not None:
        spec["scope"] = scope
    if max_per_run is not None:
        spec["maxPerRun"] = max_per_run
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name},
            "spec": spec}


def load(*objects: dict[str, Any]) -> LoadedInput:
    return load_objects(objects)


def load_with_run(*objects: dict[str, Any]) -> tuple[LoadedInput, RepackRun]:
    loaded = load_objects(objects)
    assert len(loaded.runs) == 1, "exactly one RepackRun expected"
    return loaded, next(iter(loaded.runs.values()))


# ---- queues, PriorityClasses, VCJobs (the queue placement issue) --------------------------------

def queue(name: str, parent: str | None = None, *, guarantee: dict[str, Any] | None = None,
          deserved: dict[str, Any] | None = None, capability: dict[str, Any] | None = None,
          labels: dict[str, str] | None = None, state: str | None = None, reclaimable: bool | None = None,
          weight: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parent"] = parent
    if guarantee is not None:
        spec["guarantee"] = {"resource": guarantee}
    if deserved is not None:
        spec["deserved"] = deserved
    if capability is not None:
        spec["capability"] = capability
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    if weight is not None:
        spec["weight"] = weight
    obj: dict[str, Any] = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                           "metadata": {"name": name, "labels": labels or {}}, "spec": spec}
    if state is not None:
        obj["status"] = {"state": state}
    return obj


def podgroup_in(queue_name: str, name: str, min_member: int = 1, *, ns: str = "default") -> dict[str, Any]:
    pg = podgroup(name, min_member, ns=ns)
    pg["spec"]["queue"] = queue_name
    return pg


def priority_class(name: str, value: int, policy: str | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                           "value": value}
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def job_task(name: str, replicas: int, gpu: int | str = 1, *, cpu: str = "1", memory: str = "1Gi",
             min_available: int | None = None, template_spec: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": IMAGE, "resources": resources({
        GPU: str(gpu), "cpu": cpu, "memory": memory})}]}
    spec.update(template_spec or {})
    task: dict[str, Any] = {"name": name, "replicas": replicas, "template": {"spec": spec}}
    if min_available is not None:
        task["minAvailable"] = min_available
    return task


def vcjob(name: str, queue_name: str | None = "default", tasks: list[dict[str, Any]] | None = None, *,
          ns: str = "default", min_available: int | None = None, priority_class_name: str | None = None,
          network_topology: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "volcano",
                            "tasks": tasks if tasks is not None else [job_task("worker", 1)]}
    if queue_name is not None:
        spec["queue"] = queue_name
    if min_available is not None:
        spec["minAvailable"] = min_available
    if priority_class_name is not None:
        spec["priorityClassName"] = priority_class_name
    if network_topology is not None:
        spec["networkTopology"] = network_topology
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


# ---- HyperNodes (network topology) -------------------------------------------------------------

def hypernode(name: str, tier: int, members: list[str], kind: str = "Node") -> dict[str, Any]:
    """A HyperNode whose members are all of one type, each chosen by exactMatch."""
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                               for m in members]}}


def seed_fabric() -> list[dict[str, Any]]:
    """Seed 002 §8.2: s0..s3 (tier 1, two nodes each), s4 = s0+s1 and s5 = s2+s3 (tier 2), s6 (tier 3)."""
    return [hypernode("s0", 1, ["n0", "n1"]), hypernode("s1", 1, ["n2", "n3"]), hypernode("s2", 1, ["n4", "n5"]),
            hypernode("s3", 1, ["n6", "n7"]), hypernode("s4", 2, ["s0", "s1"], "HyperNode"),
            hypernode("s5", 2, ["s2", "s3"], "HyperNode"), hypernode("s6", 3, ["s4", "s5"], "HyperNode")]


# ---- spot jobs (seed 002 §6.5, §6.6) --------------------------------------------------------------

def spot_job(name: str, placements: list[tuple[str, int | str]], price: str | None = "0.1", *,
             started: str | None = "2025-06-01T11:00:00Z", ns: str = "default", billing: str | None = "spot",
             on: str = "job", resource: str = GPU) -> list[dict[str, Any]]:
    """A running VCJob with one pod per (node, amount of ``resource``), its PodGroup (owned by the job)
    and the pods (``status.startTime`` = ``started``).

    ``on`` says where ``platform.io/billing-type`` (= ``billing``) and ``platform.io/spot-price`` sit:
    "job": on the VCJob, the label copied to the PodGroup as Volcano does; "podgroup": the label on the
    PodGroup only, the price on the pods; "pod": both on the pods, and no VCJob object."""
    label = {"platform.io/billing-type": billing} if billing is not None else {}
    price_ann = {"platform.io/spot-price": price} if price is not None else {}
    objs: list[dict[str, Any]] = []
    if on == "job":
        job = vcjob(name, "default", [job_task("worker", len(placements))], ns=ns)
        job["metadata"].update(labels=dict(label), annotations=dict(price_ann))
        job["status"] = {"state": {"phase": "Running"}}
        objs.append(job)
    objs.append(podgroup(f"{name}-pg", len(placements), ns=ns, labels=dict(label) if on != "pod" else {},
                         owner=("batch.volcano.sh/v1alpha1", "Job", name)))
    for i, (node_name, amount) in enumerate(placements):
        p = pod(f"{name}-{i}", node_name, amount, group=f"{name}-pg", ns=ns, resource=resource,
                labels=dict(label) if on == "pod" else {})
        if on != "job":
            p["metadata"]["annotations"].update(price_ann)
        if started is not None:
            p["status"]["startTime"] = started
        objs.append(p)
    return objs


def place_validated(objects: list[dict[str, Any]], solver: str, options: Any, now: str) -> Any:
    """Place the snapshot's VCJobs with ``solver`` and assert that the validator accepts the plan."""
    from optplan.solvers.placement.place import plan_placement
    from optplan.solvers.placement.validate import placement_violations
    snap = load(*objects).snapshot
    jobs = list(snap.jobs.values())
    plan = plan_placement(snap, jobs, solver, options, now=now)
    assert placement_violations(snap, jobs, plan) == []
    return plan


def admitted_with(plan: Any, job: str, nodes: tuple[str, ...], victims: tuple[tuple[str, str, str], ...]) -> Any:
    """``plan`` with ``job`` admitted on ``nodes`` (task ``w``, one replica each) evicting ``victims``
    (default-namespace pod, node, reason): a plan a validator test hands in to be refused."""
    from optplan.models.placement import Binding, Victim

    jp = plan.job(job)
    bad = jp.model_copy(update={
        "admitted": True, "after_evictions": True,
        "bindings": tuple(Binding(task="w", index=i, node=n) for i, n in enumerate(nodes)),
        "victims": tuple(Victim(namespace="default", name=p, node=n, reason=r) for p, n, r in victims)})
    return plan.model_copy(update={"jobs": (bad,)})
