"""The bounds optplan puts on its input, in one place. Each is checked where the input is read
(``adapters.kubefile``); a snapshot past one is refused with an InputError naming the limit.

Kubernetes' own ranges come first (int32 fields, names, whole numbers for extended resources); the
rest keep an untrusted file from exhausting memory or time and keep every sum the planners hold in
int64 (numpy arrays, CP-SAT models) from overflowing.
"""

from __future__ import annotations

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
"""Largest sum, per resource, of the requests of the pods bound to one node; and, for the resources a
RepackRun names (its goal and its ``maxPerRun.resources``), of the requests of all the pods and of the
allocatable of all the nodes, the sums the repack planners hold in int64; and a ``maxPerRun.resources``
budget itself. Then any capacity minus any requests, and any sum of moved requests, fits in an int64."""

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
