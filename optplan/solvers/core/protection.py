"""Disruption protection, one rule for every family: the markers with which a pod's owner protects it
from being evicted. Repack never plans to move such a pod (unless the run's ``spec.disruptionProtection``
is ``Ignore``); placement never makes it a preempt or reclaim victim (Volcano's conformance reads
``volcano.sh/preemptable``); the Karpenter baseline reads only its own marker."""

from __future__ import annotations

from collections.abc import Iterable

from optplan.models.snapshot import Pod

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
PROTECTION_MARKERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (DO_NOT_DISRUPT, "true", ("annotation",)),
    (SAFE_TO_EVICT, "false", ("annotation",)),
    (PREEMPTABLE_KEY, "false", ("annotation", "label")),
)
"""(key, value that protects, where it is read) of each disruption-protection marker."""


def disruption_protection(pod: Pod, keys: Iterable[str] | None = None) -> str | None:
    """The marker protecting ``pod`` from disruption, as ``annotation <key>: "<value>"``, or None;
    ``keys`` limits the markers read (Volcano's victim rules read only its own, as does a peer baseline)."""
    wanted = None if keys is None else set(keys)
    for key, value, wheres in PROTECTION_MARKERS:
        if wanted is not None and key not in wanted:
            continue
        for where in wheres:
            found = (pod.annotations if where == "annotation" else pod.labels).get(key)
            if found is not None and found.lower() == value:
                return f'{where} {key}: "{value}"'
    return None
