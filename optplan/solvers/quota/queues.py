"""Volcano queues over a snapshot: admission checks, capacity-plugin accounting, spot capabilities.

Pure functions; integer milli-units throughout (no floats decide anything).

**Validation** (``validate_queues``) lists what Volcano's queue and job admission webhooks would
refuse, each violation naming the queue and, where it concerns one, the resource:

- ``guarantee-over-deserved``: ``guarantee[r] ≤ deserved[r]`` for every guaranteed r (a guaranteed
  resource missing from deserved is refused too).
- ``deserved-over-capability``: ``deserved[r] ≤ capability[r]`` where both are written.
- ``capability-over-ancestor``: ``capability[r] ≤`` the capability of the nearest ancestor below
  ``root`` that sets r (to a positive amount).
- ``children-guarantee-over-parent`` / ``children-deserved-over-parent``: the children's sum
  ≤ the parent's (an absent resource counts as 0); skipped under ``root``. Reported on the parent.
- ``depth``: at most ``MAX_DEPTH`` levels below ``root``.
- ``parent``: the parent is missing, the queue itself, or a cycle (the queue is accounted under root).
- ``job-in-parent-queue``: PodGroups and VCJobs only in leaf queues (``root`` is never a leaf: ``default``
  hangs under it); a queue holding pods cannot become a parent.
- ``unknown-queue``: a PodGroup or VCJob names a queue that does not exist.
- ``job-in-closed-queue``: a pending VCJob in a queue that is not Open (itself and its ancestors).

**Accounting** (``account_queues``) follows the capacity plugin (SPEC.md, "capacity plugin and queues"):

- allocated: requests of occupying pods, counted in their PodGroup's queue; with hierarchy summed up
  to every ancestor. Pods with no PodGroup, a PodGroup missing from the snapshot, or an unknown queue
  count nowhere and are listed in ``QueueReport.unaccounted``.
- realCapability, hierarchical: ``root``'s is unlimited (``UNLIMITED``) when root names no capability —
  Volcano v1.15's capacity plugin sets it to infinity then (jobs may ask for more than today's nodes
  hold; the nodes enforce their own room); when root names one, that capability on the resources it
  names (not capped by the cluster total) and the cluster total on the others (where Volcano v1.15 has
  0, stopping every job that requests them; v1.14 and before: the cluster total, capped by root's
  capability). A child's is ``max(0, parent's − Σ all children's guarantee) + own guarantee`` (unlimited
  under an unlimited parent), capped by its own capability. Flat (``enableHierarchy`` off): ``max(0,
  cluster total − Σ every queue's guarantee) + own guarantee``, capped by capability (the cluster total
  in every Volcano version).
- deserved (effective) = ``max(guarantee, min(deserved, realCapability))`` per resource, deserved
  absent = 0. With hierarchy, ``root``'s guarantee and deserved are its children's sums (Volcano sets
  them so).
- listed dimensions (``deserved_listed``): the resources the effective deserved names, as the capacity
  plugin's ``helpers.Max(deserved, guarantee)`` leaves them: every resource written in ``deserved`` or
  ``guarantee`` (an explicit 0 included), except that cpu and memory count only when positive (Volcano
  keeps them as plain numbers, and ``GreaterPartlyWithRelevantDimensions`` skips them when below its
  ``minResource``); ``pods`` never (``IsIgnoredScalarResource``).
- over deserved: the listed resources where allocated > effective deserved (the reclaim baseline). A
  resource deserved does not list is neither under nor over it.

**Spot capability** (``spot_capacity``), seed 002 §4.3/§4.5, for the target resource R (GPUs):

    c(tenant_i spot) = cluster_idle × subscription_i / total_subscription
    cluster_idle     = cluster total R − Σ subscription deserved R − Σ pay-as-you-go allocated R

rounded down to whole units (Σ over tenants never exceeds the idle amount; up to tenants − 1 units stay
unassigned). cpu and memory follow the GPUs in the cluster's own ratio, ``spot R × cluster total r /
cluster total R``, rounded down: the seed's example (68 GPUs, 544 cpu, 2176Gi) is exactly that on nodes
of 8 GPUs, 64 cpu and 256Gi.

Which queue is which: the label ``platform.io/billing-type: subscription|payg|spot`` on the Queue (the
seed puts this label on spot VCJobs, §6.6); without it a queue inherits its parent's billing type (team
queues under a subscription queue), else its name decides when it ends in ``-subscription`` or
``-fixed`` (the seed uses both names for the subscription queue), ``-payg`` or ``-spot``. The tenant is
the label ``platform.io/tenant`` (the seed's namespace label, §3.1) on the queue, else its billing
parent's tenant, else the label on the nearest ancestor (a tenant parent queue), else the name
without that suffix and without a leading ``tenant-`` (``tenant-alpha-spot`` → ``alpha``). A
tenant's subscription amount is the deserved R of its top subscription queue(s) (children are not
added again), its pay-as-you-go usage the allocated R of its top payg queue(s), subtree included.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from optplan.errors import InputError
from optplan.models.quantity import MILLI, format_amount
from optplan.models.queues import ROOT, QueueTree
from optplan.models.snapshot import Resources, Snapshot

NUMERIC_DIMS = ("cpu", "memory")
"""Resources Volcano keeps as plain numbers (always present, 0 when not written), not scalar maps."""
MAX_DEPTH = 5
"""Volcano's webhook default (``--max-queue-depth``)."""
UNLIMITED = 2 ** 62
"""An unlimited realCapability (milli-units; far above any cluster, and still an int64 with an allocation
added): root's when it names no capability, and every queue's below it that no capability caps."""

BILLING_LABEL = "platform.io/billing-type"
TENANT_LABEL = "platform.io/tenant"
BILLING_TYPES = ("subscription", "payg", "spot")
_NAME_SUFFIXES = (("-subscription", "subscription"), ("-fixed", "subscription"), ("-payg", "payg"),
                  ("-spot", "spot"))
SPOT_COMPANIONS = ("cpu", "memory")

def _amount(resource: str, milli: int) -> str:
    return str(format_amount(resource, milli))


# ---- validation ----------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class QueueViolation:
    queue: str
    resource: str
    """The resource concerned, or "" for a rule about the tree or the jobs."""
    rule: str
    message: str


def unheld_deserved(snap: Snapshot, tree: QueueTree) -> list[QueueViolation]:
    """A queue's ``deserved`` naming a resource no node has (only when the snapshot has nodes). Volcano's
    webhook does not check resource names, so it runs with it, but it is almost always a misspelt name:
    the resource it stands for is then unlisted in deserved (neither under nor over), which changes what
    may be reclaimed. ``optplan queues`` reports it; ``optplan place`` refuses it."""
    if not snap.nodes:
        return []
    held = {r for n in snap.nodes.values() for r, v in n.allocatable.items() if v > 0}
    return [QueueViolation(name, r, "deserved-resource", f"deserved names {r}, which no node has (a misspelt "
                           "resource name?): the capacity plugin compares nothing on it and leaves the resource it "
                           "stands for unlisted, which changes what may be reclaimed")
            for name in sorted(tree.queues) for r, v in sorted(tree.queues[name].deserved.items())
            if v > 0 and r != "pods" and r not in held]


def validate_queues(snap: Snapshot, tree: QueueTree | None = None) -> list[QueueViolation]:
    """Every admission rule a queue, PodGroup or pending VCJob of the snapshot breaks, sorted."""
    tree = tree or QueueTree(snap.queues)
    out: list[QueueViolation] = []
    out.extend(unheld_deserved(snap, tree))
    for name in tree.preorder():
        out.extend(_quota_order(tree, name))
        out.extend(_capability_vs_ancestor(tree, name))
        out.extend(_children_sums(tree, name))
        depth = tree.depth(name)
        if depth > MAX_DEPTH:
            out.append(QueueViolation(name, "", "depth", f"queue {name} is {depth} levels below root "
                                                         f"(at most {MAX_DEPTH})"))
        if name in tree.broken:
            out.append(QueueViolation(name, "", "parent", f"{tree.broken[name]}; accounted under root"))
    out.extend(_job_queues(snap, tree))
    return sorted(out)


def _quota_order(tree: QueueTree, name: str) -> list[QueueViolation]:
    q = tree.queues[name]
    out = []
    for r, g in sorted(q.guarantee.items()):
        d = q.deserved.get(r)
        if d is None:
            out.append(QueueViolation(name, r, "guarantee-over-deserved",
                                      f"guarantee {_amount(r, g)} but no deserved (deserved must be >= guarantee)"))
        elif d < g:
            out.append(QueueViolation(name, r, "guarantee-over-deserved",
                                      f"guarantee {_amount(r, g)} > deserved {_amount(r, d)}"))
    for r, d in sorted(q.deserved.items()):
        c = q.capability.get(r)
        if c is not None and d > c:
            out.append(QueueViolation(name, r, "deserved-over-capability",
                                      f"deserved {_amount(r, d)} > capability {_amount(r, c)}"))
    return out


def _capability_vs_ancestor(tree: QueueTree, name: str) -> list[QueueViolation]:
    q = tree.queues[name]
    out = []
    for r, c in sorted(q.capability.items()):
        for a in tree.ancestors(name):
            if a == ROOT:
                break
            limit = tree.queues[a].capability.get(r, 0)
            if limit > 0:
                if c > limit:
                    out.append(QueueViolation(name, r, "capability-over-ancestor",
                                              f"capability {_amount(r, c)} > capability {_amount(r, limit)} of "
                                              f"ancestor {a}"))
                break
    return out


def _children_sums(tree: QueueTree, name: str) -> list[QueueViolation]:
    children = tree.children[name]
    if name == ROOT or not children:
        return []
    parent = tree.queues[name]
    out = []
    for kind, own in (("guarantee", parent.guarantee), ("deserved", parent.deserved)):
        totals: dict[str, int] = defaultdict(int)
        for c in children:
            for r, v in getattr(tree.queues[c], kind).items():
                totals[r] += v
        for r, total in sorted(totals.items()):
            limit = own.get(r, 0)
            if total > limit:
                parts = ", ".join(f"{c} {_amount(r, getattr(tree.queues[c], kind).get(r, 0))}" for c in children)
                out.append(QueueViolation(name, r, f"children-{kind}-over-parent",
                                          f"children's {kind} sum {_amount(r, total)} ({parts}) > {kind} "
                                          f"{_amount(r, limit)}"))
    return out


def _job_queues(snap: Snapshot, tree: QueueTree) -> list[QueueViolation]:
    users: dict[str, list[str]] = defaultdict(list)
    for key, pg in snap.pod_groups.items():
        users[pg.queue].append(f"PodGroup {key}")
    for key, job in snap.jobs.items():
        users[job.queue].append(f"VCJob {key}")
    out = []
    for queue, objs in sorted(users.items()):
        listed = ", ".join(objs[:3]) + (f" (+{len(objs) - 3} more)" if len(objs) > 3 else "")
        if queue not in tree.queues:
            out.append(QueueViolation(queue, "", "unknown-queue", f"queue {queue} does not exist; named by {listed}"))
        elif not tree.is_leaf(queue):
            out.append(QueueViolation(queue, "", "job-in-parent-queue",
                                      f"queue {queue} has child queues ({', '.join(tree.children[queue])}) "
                                      f"but holds {listed}: jobs go in leaf queues only"))
    is_open = {q: tree.is_open(q) for q in users if q in tree.queues}  # once per queue, not per job
    for key, job in snap.jobs.items():
        if job.queue in tree.queues and not is_open[job.queue]:
            states = ", ".join(f"{q} {tree.queues[q].state}" for q in (job.queue, *tree.ancestors(job.queue))
                               if tree.queues[q].state != "Open")
            out.append(QueueViolation(job.queue, "", "job-in-closed-queue",
                                      f"VCJob {key} is pending in a queue that is not Open ({states})"))
    return out


# ---- accounting ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class QueueAccount:
    """One queue as the capacity plugin sees it. Computed maps cover every resource of the report."""

    name: str
    parent: str | None
    depth: int
    leaf: bool
    implicit: bool
    state: str
    open: bool
    reclaimable: bool
    weight: int
    guarantee: Resources
    deserved: Resources
    """As written (with hierarchy, root's is its children's sum)."""
    capability: Resources
    """As written; a resource not named is unlimited."""
    real_capability: Resources
    effective_deserved: Resources
    """deserved clamped into [guarantee, realCapability]."""
    allocated: Resources
    over_deserved: tuple[str, ...]
    """Listed resources on which allocated > effective deserved."""
    deserved_listed: frozenset[str] = frozenset()
    """The resources the effective deserved names (module docstring): only these are compared with it."""

    def headroom(self, resource: str) -> int:
        """What may still be allocated here before realCapability (ancestors not included); ``UNLIMITED``
        when nothing caps it."""
        real = self.real_capability.get(resource, 0)
        return UNLIMITED if real >= UNLIMITED else real - self.allocated.get(resource, 0)


@dataclass(frozen=True)
class QueueReport:
    hierarchical: bool
    cluster_total: Resources
    resources: tuple[str, ...]
    """Resources shown: named by any queue or allocated by any; else the cluster's."""
    accounts: dict[str, QueueAccount]
    """In tree order: root first, then each subtree, children by name."""
    violations: list[QueueViolation]
    unaccounted: tuple[tuple[str, str], ...] = field(default=())
    """(pod, why) for occupying pods counted in no queue."""


def cluster_total(snap: Snapshot) -> Resources:
    """Σ node allocatable, every node (cordoned ones too, as Volcano's session total), pods excluded."""
    out: dict[str, int] = defaultdict(int)
    for node in snap.nodes.values():
        for r, v in node.allocatable.items():
            if r != "pods":
                out[r] += v
    return dict(sorted(out.items()))


def _own_allocations(snap: Snapshot, tree: QueueTree) -> tuple[dict[str, Resources], list[tuple[str, str]]]:
    own: dict[str, dict[str, int]] = {name: defaultdict(int) for name in tree.queues}
    unaccounted: list[tuple[str, str]] = []
    groups = snap.pod_groups
    for key, pod in snap.pods.items():
        requests = pod.requests
        if not requests or not pod.occupying:
            continue
        gk = pod.group_key
        if gk is None:
            unaccounted.append((key, "no PodGroup"))
            continue
        pg = groups.get(gk)
        if pg is None:
            unaccounted.append((key, f"PodGroup {gk} is not in the snapshot"))
            continue
        acc = own.get(pg.queue)
        if acc is None:
            unaccounted.append((key, f"queue {pg.queue} does not exist"))
            continue
        for r, v in requests.items():
            acc[r] += v
    return {k: dict(v) for k, v in own.items()}, unaccounted


def account_queues(snap: Snapshot, *, hierarchical: bool = True) -> dict[str, QueueAccount]:
    """A QueueAccount per queue (root and default included), in tree order."""
    return queue_report(snap, hierarchical=hierarchical).accounts


def queue_report(snap: Snapshot, *, hierarchical: bool = True) -> QueueReport:
    tree = QueueTree(snap.queues)
    total = cluster_total(snap)
    own, unaccounted = _own_allocations(snap, tree)
    order = tree.preorder()

    allocated: dict[str, dict[str, int]] = {name: dict(own[name]) for name in order}
    if hierarchical:
        for name in reversed(order):  # children before parents
            p = tree.parent(name)
            if p is not None:
                for r, v in allocated[name].items():
                    allocated[p][r] = allocated[p].get(r, 0) + v

    guarantee = {name: dict(tree.queues[name].guarantee) for name in order}
    deserved = {name: dict(tree.queues[name].deserved) for name in order}
    if hierarchical:  # Volcano sets root's guarantee and deserved to its children's sums
        g_sum: dict[str, int] = defaultdict(int)
        d_sum: dict[str, int] = defaultdict(int)
        for c in tree.children[ROOT]:
            q = tree.queues[c]
            for r in set(q.guarantee) | set(q.deserved):
                g_sum[r] += q.guarantee.get(r, 0)
                d_sum[r] += max(q.deserved.get(r, 0), q.guarantee.get(r, 0))
        guarantee[ROOT] = {r: v for r, v in sorted(g_sum.items()) if v}
        deserved[ROOT] = {r: v for r, v in sorted(d_sum.items()) if v}

    named = {r for q in tree.queues.values() for m in (q.guarantee, q.deserved, q.capability) for r in m}
    used = {r for a in allocated.values() for r, v in a.items() if v}
    universe = sorted(set(total) | named | used)
    shown = tuple(sorted(named | used)) or tuple(total)

    real: dict[str, Resources] = {}
    if hierarchical:
        root_cap = tree.queues[ROOT].capability
        real[ROOT] = ({r: root_cap.get(r, total.get(r, 0)) for r in universe} if root_cap else
                      dict.fromkeys(universe, UNLIMITED))
        for name in order:
            kids = tree.children[name]
            if not kids:
                continue
            g_all = {r: sum(tree.queues[c].guarantee.get(r, 0) for c in kids) for r in universe}
            base = {r: UNLIMITED if real[name][r] >= UNLIMITED else max(0, real[name][r] - g_all[r]) for r in universe}
            for c in kids:
                real[c] = _capped(tree, c, base, universe)
    else:
        g_all = {r: sum(q.guarantee.get(r, 0) for q in tree.queues.values()) for r in universe}
        base = {r: max(0, total.get(r, 0) - g_all[r]) for r in universe}
        for name in order:
            real[name] = _capped(tree, name, base, universe)

    accounts: dict[str, QueueAccount] = {}
    for name in order:
        q = tree.queues[name]
        g, d, rc = guarantee[name], deserved[name], real[name]
        eff = {r: max(g.get(r, 0), min(d.get(r, 0), rc[r])) for r in universe}
        listed = frozenset(r for r in set(g) | set(d) if r != "pods" and (r not in NUMERIC_DIMS or eff[r] > 0))
        alloc = {r: allocated[name].get(r, 0) for r in universe}
        accounts[name] = QueueAccount(
            name=name, parent=tree.parent(name), depth=tree.depth(name), leaf=tree.is_leaf(name),
            implicit=q.implicit, state=q.state, open=tree.is_open(name), reclaimable=q.reclaimable, weight=q.weight,
            guarantee=g, deserved=d, capability=dict(q.capability), real_capability=rc, effective_deserved=eff,
            allocated=alloc, over_deserved=tuple(r for r in universe if r in listed and alloc[r] > eff[r]),
            deserved_listed=listed)
    return QueueReport(hierarchical=hierarchical, cluster_total=total, resources=shown, accounts=accounts,
                       violations=validate_queues(snap, tree), unaccounted=tuple(sorted(unaccounted)))


def _capped(tree: QueueTree, name: str, base: Resources, universe: list[str]) -> Resources:
    q = tree.queues[name]
    out = {}
    for r in universe:
        v = UNLIMITED if base[r] >= UNLIMITED else base[r] + q.guarantee.get(r, 0)
        out[r] = min(v, q.capability[r]) if r in q.capability else v
    return out


# ---- spot capability (seed 002 §4.3/§4.5) --------------------------------------------------------

@dataclass(frozen=True)
class BillingQueue:
    queue: str
    tenant: str
    billing: str
    source: str
    """How the billing type was found: "label", "parent" or "name"."""


@dataclass(frozen=True)
class TenantSpot:
    tenant: str
    subscription_queues: tuple[str, ...]
    subscription: int
    """Σ deserved of the target resource over the tenant's top subscription queues."""
    payg_queues: tuple[str, ...]
    payg_allocated: int
    spot_queue: str | None
    capability: Resources
    """The computed spot capability: the target resource and its companions."""
    current: Resources
    """The spot queue's capability as written, for the same resources."""

    @property
    def changed(self) -> bool:
        return self.spot_queue is not None and self.capability != self.current


@dataclass(frozen=True)
class SpotReport:
    resource: str
    cluster_total: Resources
    subscription_total: int
    payg_allocated: int
    idle: int
    tenants: tuple[TenantSpot, ...]
    queues: tuple[BillingQueue, ...]


def _name_billing(name: str) -> tuple[str, str] | None:
    """(billing type, tenant) from a queue name such as ``tenant-alpha-spot``."""
    for suffix, billing in _NAME_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            tenant = name[: -len(suffix)]
            tenant = tenant.removeprefix("tenant-") or tenant
            return billing, tenant
    return None


def classify_queues(tree: QueueTree) -> dict[str, BillingQueue]:
    """Billing type and tenant of every queue that has them (see the module docstring), tree order."""
    out: dict[str, BillingQueue] = {}
    for name in tree.preorder():
        q = tree.queues[name]
        if name == ROOT:
            continue
        label = q.labels.get(BILLING_LABEL)
        if label is not None and label not in BILLING_TYPES:
            raise InputError(f"must be one of {', '.join(BILLING_TYPES)}, got {label!r}", obj=f"Queue/{name}",
                             field=f"metadata.labels.{BILLING_LABEL}")
        parent = tree.parent(name)
        inherited = out.get(parent) if parent is not None else None
        by_name = _name_billing(name)
        if label is not None:
            billing, source = label, "label"
        elif inherited is not None:
            billing, source = inherited.billing, "parent"
        elif by_name is not None:
            billing, source = by_name[0], "name"
        else:
            continue
        tenant = q.labels.get(TENANT_LABEL) or (inherited.tenant if inherited is not None else None)
        if tenant is None:
            tenant = next((tree.queues[a].labels[TENANT_LABEL] for a in tree.ancestors(name)
                           if tree.queues[a].labels.get(TENANT_LABEL)), None)
        if tenant is None and by_name is not None:
            tenant = by_name[1]
        if tenant is None:
            raise InputError(f"billing type {billing} but no tenant: label the queue (or a parent) with "
                             f"{TENANT_LABEL}", obj=f"Queue/{name}", field=f"metadata.labels.{TENANT_LABEL}")
        out[name] = BillingQueue(queue=name, tenant=tenant, billing=billing, source=source)
    return out


def _floor_units(milli: int) -> int:
    return milli // MILLI * MILLI


def spot_capacity(snap: Snapshot, resource: str = "nvidia.com/gpu",
                  payg_use: Mapping[str, int] | None = None) -> SpotReport:
    """Each tenant's spot queue capability by the seed's formula (see the module docstring). ``payg_use``:
    pay-as-you-go queue -> its use of the resource to count instead of its allocation (the use a sizing
    plans, ``optplan queues --size-payg``)."""
    tree = QueueTree(snap.queues)
    accounts = account_queues(snap, hierarchical=True)
    total = cluster_total(snap)
    billing = classify_queues(tree)

    def top(name: str) -> bool:  # the highest queue of its (tenant, billing type)
        p = tree.parent(name)
        b = billing[name]
        return p is None or p not in billing or (billing[p].tenant, billing[p].billing) != (b.tenant, b.billing)

    per: dict[str, dict[str, list[str]]] = defaultdict(lambda: {b: [] for b in BILLING_TYPES})
    for name, b in billing.items():
        if top(name):
            per[b.tenant][b.billing].append(name)
    subscription = {t: sum(tree.queues[q].deserved.get(resource, 0) for q in v["subscription"])
                    for t, v in per.items()}
    use = payg_use or {}
    payg = {t: sum(use.get(q, accounts[q].allocated.get(resource, 0)) for q in v["payg"]) for t, v in per.items()}
    sub_total = sum(subscription.values())
    payg_total = sum(payg.values())
    idle = max(0, total.get(resource, 0) - sub_total - payg_total)
    tenants = []
    for t in sorted(per):
        spots = per[t]["spot"]
        if len(spots) > 1:
            raise InputError(f"tenant {t} has {len(spots)} spot queues ({', '.join(spots)}); expected one",
                             obj=f"Queue/{spots[1]}", field=f"metadata.labels.{BILLING_LABEL}")
        amount = _floor_units(idle * subscription[t] // sub_total) if sub_total else 0
        cap = {resource: amount}
        for r in SPOT_COMPANIONS:
            if r != resource and total.get(resource, 0) > 0:
                cap[r] = _floor_units(amount * total.get(r, 0) // total[resource])
        spot = spots[0] if spots else None
        written = tree.queues[spot].capability if spot is not None else {}
        current = {r: written[r] for r in cap if r in written}
        tenants.append(TenantSpot(
            tenant=t, subscription_queues=tuple(per[t]["subscription"]), subscription=subscription[t],
            payg_queues=tuple(per[t]["payg"]), payg_allocated=payg[t], spot_queue=spot,
            capability=dict(sorted(cap.items())), current=dict(sorted(current.items()))))
    return SpotReport(resource=resource, cluster_total=total, subscription_total=sub_total,
                      payg_allocated=payg_total, idle=idle, tenants=tuple(tenants),
                      queues=tuple(billing.values()))
