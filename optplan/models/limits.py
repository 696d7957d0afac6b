"""The bounds optplan puts on its input, in one place. Each is checked where the input is read
(``adapters.kubefile``); a snapshot past one is refused with an InputError naming the limit.

Kubernetes' own ranges come first (int32 fields, names, whole numbers for extended resources); the
rest keep an untrusted file from exhausting memory or time and keep every sum the planners hold in
int64 (numpy arrays, CP-SAT models) from overflowing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

K = TypeVar("K")

# ---- reading files ---------------------------------------------------------------------------------

MAX_INPUT_BYTES = 256 * 2**20
"""All snapshot files of one command together (stdin included): 256 MiB. A 50 MB snapshot peaks
below 2 GB of memory; five times that would not."""
MAX_OBJECTS = 1_000_000
"""Kubernetes objects across all files, List items counted one by one."""
MAX_NESTING_DEPTH = 100
"""Nesting of mappings and lists inside one object (kubectl's deepest objects use about 20); the YAML
and JSON parsers stop far deeper documents before they are built."""
MAX_ALIAS_EXPANSION = 10_000
"""YAML aliases (``*name``): kubectl never writes them; a hand-written file may reuse a few small
anchors, as long as all aliases together stand for at most this many values (a billion-laughs bomb
stands for billions)."""
MAX_LIST_NESTING = 8
"""``kind: List`` inside ``kind: List``."""

# ---- Kubernetes' ranges ----------------------------------------------------------------------------

INT32_MAX = 2**31 - 1
"""replicas, minAvailable, minMember, weight, priority, value, tier, disruptionsAllowed ... are int32
in Kubernetes and Volcano."""
HIGHEST_USER_PRIORITY = 1_000_000_000
"""The largest ``value`` of a PriorityClass whose name does not start with ``system-``."""
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
"""The only PriorityClasses allowed a ``system-`` name, with their values."""
MAX_NAME_LENGTH = 253
"""DNS-1123 subdomain: metadata.name of Nodes, Pods, PodGroups, Queues, HyperNodes, Jobs, ..."""
MAX_LABEL_LENGTH = 63
"""DNS-1123 label: metadata.namespace."""

# ---- amounts ---------------------------------------------------------------------------------------

MAX_QUANTITY_MILLI = 2**63 - 1
"""Largest single quantity in milli-units (9.2e15 units: 8 PiB of memory): an int64."""
MAX_TOTAL_MILLI = 2**62
"""Largest sum, per resource, of the allocatable of all the nodes, of the requests of all the live pods
and of the requests of all the VCJobs (``past_model_range``); and a ``maxPerRun.resources`` budget
itself. Then any capacity minus any requests, and any sum of moved or placed requests, fits in an int64
and within the bounds of a CP-SAT model."""



def past_model_range(items: Iterable[tuple[K, Mapping[str, int]]]) -> tuple[K, str, int] | None:
    """The integer-model range rule, written once: the amounts of the items, added up per resource in the
    order given, must stay within MAX_TOTAL_MILLI, the range every planner's integer model (CP-SAT, MILP,
    numpy int64) holds a sum of them in. Returns the first item whose amount carries a sum past it, with
    the resource and the sum so far; None when every sum fits. The snapshot reader applies it to all
    nodes' allocatable, all live pods' requests and all VCJobs' requests (replicas x template), so that a
    quantity reaching Repack, placement, goals or queues is within range before any model is built."""
    acc: dict[str, int] = {}
    for key, amounts in items:
        for r in sorted(amounts):
            acc[r] = acc.get(r, 0) + amounts[r]
            if acc[r] > MAX_TOTAL_MILLI:
                return key, r, acc[r]
    return None


MAX_MILP_COEFFICIENT = 10**15
"""HiGHS (the milp solvers' backend) reads a constraint coefficient of this size or more as infinite
(its ``large_matrix_value``): the MILP twins refuse a model that would hold one, naming ``--solver``."""
MAX_MILP_BOUND = 10**20
"""HiGHS reads a right-hand side of this size or more as infinite (its ``infinite_bound``)."""


# ---- planner settings ------------------------------------------------------------------------------

MAX_WEIGHT = 1e6
"""Largest disruption weight (CLI ``--weights``, the plan server's ``weights``); weights are relative."""
WEIGHT_DIGITS = 6
WEIGHT_RESOLUTION = 10.0 ** -WEIGHT_DIGITS
"""Weights are rounded to multiples of this before the exact models scale them to integers, so that the
largest ratio of two weights (1e12) keeps every objective coefficient within int64."""

# ---- hierarchies -----------------------------------------------------------------------------------

MAX_QUEUE_DEPTH = 100
"""Queues from ``root`` down (``root`` is 0); a ``spec.parent`` chain longer than this is refused."""
MAX_HYPERNODE_DEPTH = 100
"""HyperNodes nested through HyperNode members."""

MAX_BINPACK_WEIGHT = 10_000
"""Volcano's binpack weights (``--binpack``, a ``--scheduler-conf`` file's binpack and network-topology-aware
arguments) are small integers (default 1); larger ones would only overflow the exact model's integer
objective."""
