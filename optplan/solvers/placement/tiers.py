"""Which victims Volcano's plugin tiers allow on one node for one preemptor pod (``allowed``): the rule the
greedy evicts by (``greedy``), the validator checks (``validate``) and the exact model stays inside
(``model.victim_data``: the first tier, and the second within static bounds).

vc-scheduler v1.15 asks its plugins in tiers (pkg/scheduler/framework/session_plugins.go,
``Session.Preemptable``/``Reclaimable``), with the node's preemptees (preempt: Running pods of other jobs
in the preemptor's queue; reclaim: Running pods of other, reclaimable queues):

- tier by tier, plugin by plugin, each plugin that registered a function answers with a list; an empty
  answer ends the tier with nothing; the first answer starts the tier's set, each later one intersects
  it; an intersection that comes out empty leaves the set unset, so the next plugin's answer starts it
  again (Volcano's code, kept as it is); a tier whose set is non-empty decides, later tiers are not asked;
- the tiers of seed 002's configuration (hack/cluster/volcano-scheduler.conf): preempt ``priority``,
  ``gang``, ``conformance``, then ``drf``; reclaim ``gang``, ``conformance``, then ``capacity``
  (``priority`` has no reclaim function; ``drf`` has one only with hierarchy on; the other plugins none).

The plugins' answers, each in the order it is given the pods:

- **priority** (preempt only): pods of a job whose priority is strictly below the preemptor job's;
- **gang**: per victim job, while its ready pods (bound, running, succeeded; the pods already evicted
  this cycle no longer count) exceed minMember, the next pod, one fewer ready after each: a gang never
  goes below minMember by this plugin;
- **conformance**: every pod except the critical ones (the catalogue holds none of those: all of them);
- **drf** (preempt): the pod, when the preemptor job's dominant share with this pod added (its running
  and already placed pods plus the pod, over the cluster's allocatable) is below, or within 1e-6 of, the
  victim job's dominant share with this pod and the pods of the same job before it in the list
  removed; no priority check;
- **capacity** (reclaim): the pods that request a resource the reclaimer pod requests and pass the capacity
  plugin's ReclaimableFn (``victims.victim_blocked``) with the pods kept before them taken from their queue,
  asked in Volcano's eviction order (the plugin walks ``BuildVictimsPriorityQueue``, not the order given):
  a queue just above its deserved lets its pods go only until it is not, so which pods pass depends on it.

The node's pods come to the plugins in Volcano from a Go map, in random order; here in victim order with
the smaller UID first among equals (``Candidate.input_key``). The order shows when a victim job has more
pods on the node than the gang plugin lets go, and in drf's running subtraction: which of them the tier
offers can differ from run to run in Volcano, never here. The victims the tiers offer go in Volcano's
eviction order (``victim_key``: ``BuildVictimsPriorityQueue``; across jobs of one queue the session's job
order reversed — lower priority, a ready gang, then drf's larger dominant share —, then ``Candidate.order_key``'s
task order, the larger UID first among equals).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from optplan.solvers.placement.victims import Candidate, Reason, dims, victim_blocked

PREEMPT_TIERS: tuple[tuple[str, ...], ...] = (("priority", "gang", "conformance"), ("drf",))
RECLAIM_TIERS: tuple[tuple[str, ...], ...] = (("gang", "conformance"), ("capacity",))
TIERS: dict[Reason, tuple[tuple[str, ...], ...]] = {"preempt": PREEMPT_TIERS, "reclaim": RECLAIM_TIERS}
SHARE_DELTA = 0.000001
"""drf's shareDelta: shares this close count as equal."""

Answer = Callable[[list[Candidate]], list[Candidate]]
Order = Callable[[list[Candidate]], list[Candidate]]
"""Pods in Volcano's eviction order (``BuildVictimsPriorityQueue``: ``victim_key`` within a queue, the capacity
plugin's queue order across queues, ``queueorder.victims_in_order``)."""


def victim_key(allocated: Callable[[str], Mapping[str, int]], total: Mapping[str, int]
               ) -> Callable[[Candidate], tuple[object, ...]]:
    """Volcano's victim order (``BuildVictimsPriorityQueue``; the first is evicted first) for pods of one queue:
    pods of different jobs by the session's job order reversed — the priority plugin (lower job priority
    first), gang (a ready gang first), drf (its JobOrderFn puts the smaller dominant share first: the larger
    share goes first; a PodGroup's share now, ``share`` of ``allocated(group)`` over ``total``) —, jobs equal
    in all three by the task order reversed, as pods of one job (``Candidate.order_key``). Across queues the
    capacity plugin's order comes first (``queueorder.victim_queue_key``)."""
    def key(c: Candidate) -> tuple[object, ...]:
        k = c.order_key()
        return (k[0], k[1], -share(allocated(c.group), total), *k[2:])
    return key


def walk(tiers: Sequence[Sequence[str]], answers: Mapping[str, Answer], pods: list[Candidate]
         ) -> tuple[list[Candidate], int | None]:
    """Volcano's tier walk (module docstring): the victims and the tier (1-based) that decided them, or
    ``[]`` and None when no tier offered any."""
    for t, tier in enumerate(tiers, 1):
        victims: list[Candidate] | None = None
        for name in tier:
            answer = answers.get(name)
            if answer is None:
                continue
            cands = answer(pods)
            if not cands:
                victims = None
                break
            if victims is None:
                victims = cands
            else:
                keys = {c.key for c in cands}
                victims = [v for v in victims if v.key in keys] or None
        if victims:
            return victims, t
    return [], None


def priority_answer(preemptor_priority: int, pods: Iterable[Candidate]) -> list[Candidate]:
    return [c for c in pods if c.job_priority < preemptor_priority]


def gang_answer(ready: Callable[[str], int], min_member: Callable[[str], int],
                pods: Iterable[Candidate]) -> list[Candidate]:
    """``ready``: a PodGroup's ready pods now (evictions of this cycle taken off)."""
    left: dict[str, int] = {}
    out = []
    for c in pods:
        if c.group not in left:
            left[c.group] = ready(c.group)
        if left[c.group] > min_member(c.group):
            left[c.group] -= 1
            out.append(c)
    return out


def share(allocated: Mapping[str, int], total: Mapping[str, int]) -> float:
    """drf's dominant share: the largest allocated / total over the resources the cluster has."""
    best = 0.0
    for r, t in total.items():
        if r == "pods" or t <= 0:
            continue
        best = max(best, allocated.get(r, 0) / t)
    return best


def drf_answer(preemptor_share: float, job_allocated: Callable[[str], Mapping[str, int]],
               total: Mapping[str, int], pods: Iterable[Candidate]) -> list[Candidate]:
    """``job_allocated``: a victim PodGroup's allocation now (its occupying pods not evicted)."""
    left: dict[str, dict[str, int]] = {}
    out = []
    for c in pods:
        a = left.setdefault(c.group, dict(job_allocated(c.group)))
        for r, x in c.pod.requests.items():
            a[r] = a.get(r, 0) - x
        theirs = share(a, total)
        if preemptor_share < theirs or abs(preemptor_share - theirs) <= SHARE_DELTA:
            out.append(c)
    return out


def capacity_answer(need: frozenset[str], allocated: Callable[[str], Mapping[str, int]],
                    deserved: Callable[[str], Mapping[str, int]], listed: Callable[[str], frozenset[str]],
                    guarantee: Callable[[str], Mapping[str, int]], pods: list[Candidate], order: Order,
                    refused: list[str] | None = None) -> list[Candidate]:
    """The capacity plugin's ReclaimableFn, asking the pods in eviction order (``order``); ``refused`` collects
    why the others were not kept."""
    alloc: dict[str, dict[str, int]] = {}
    out = []
    for c in order(sorted(pods, key=Candidate.input_key)):
        if not dims(c.pod.requests) & need:
            continue
        a = alloc.setdefault(c.queue, dict(allocated(c.queue)))
        why = victim_blocked(c.queue, a, c.pod.requests, deserved(c.queue), listed(c.queue), guarantee(c.queue))
        if why is None:
            out.append(c)
            for r, x in c.pod.requests.items():
                a[r] = a.get(r, 0) - x
        elif refused is not None:
            refused.append(why)
    return out


def node_victims(reason: Reason, pods: list[Candidate], *, preemptor_priority: int, ready: Callable[[str], int],
                 min_member: Callable[[str], int], preemptor_allocated: Mapping[str, int],
                 job_allocated: Callable[[str], Mapping[str, int]], total: Mapping[str, int],
                 need: frozenset[str], allocated: Mapping[str, Mapping[str, int]],
                 deserved: Mapping[str, Mapping[str, int]], listed: Mapping[str, frozenset[str]],
                 guarantee: Mapping[str, Mapping[str, int]], order: Order,
                 refused: list[str] | None = None) -> tuple[list[Candidate], int | None]:
    """The victims the tiers allow among one node's preemptees (``pods``, in victim order) for one
    preemptor pod, in eviction order (``order``), and the deciding tier. ``preemptor_allocated``: the
    preemptor job's allocation with the pod added (drf's share); ``ready``/``job_allocated``: a victim
    PodGroup's ready pods and allocation now; ``allocated`` etc.: the queues now (the capacity plugin)."""
    answers: dict[str, Answer] = {
        "gang": lambda ps: gang_answer(ready, min_member, ps),
        "conformance": list,
    }
    if reason == "preempt":
        mine = share(preemptor_allocated, total)
        answers["priority"] = lambda ps: priority_answer(preemptor_priority, ps)
        answers["drf"] = lambda ps: drf_answer(mine, job_allocated, total, ps)
    else:
        answers["capacity"] = lambda ps: capacity_answer(
            need, lambda q: allocated[q], lambda q: deserved[q], lambda q: listed[q], lambda q: guarantee[q], ps,
            order, refused)
    victims, tier = walk(TIERS[reason], answers, pods)
    return order(victims), tier


def preemptee_refused(c: Candidate, reason: Reason, queue: str, reclaimable: bool) -> str | None:
    """Why the action never hands the pod to the plugins for a job of ``queue``, or None: preempt takes
    the pods of other jobs in the preemptor's queue, reclaim the pods of other, reclaimable queues (the
    preemptor's own job is never one: its running pods are shielded from the catalogue, and left out of the
    exposed ones it may take, ``evict._tier_rules``)."""
    if reason == "preempt":
        return None if c.queue == queue else f"queue {c.queue}, not the preemptor's {queue}"
    if c.queue == queue:
        return f"queue {c.queue} is the reclaimer's own"
    return None if reclaimable else f"queue {c.queue} is not reclaimable"
