"""Pay-as-you-go queue sizing (``optplan queues --size-payg``, seed 002 §4.3): the capability and deserved
to set on each pay-as-you-go queue so that its pending jobs place, the values to return to when they
finish, and the spot capabilities recomputed from the new pay-as-you-go use.

Amounts are on the wire already (``format_amount``: ``8``, ``"1500m"``, ``"640Gi"``), so that the model is
its own wire shape (camelCase) and the plan server's schema. ``apply`` and ``release`` are ``List``s of
partial Queue objects for ``kubectl apply --server-side -f``.
"""

from __future__ import annotations

from typing import Any

from optplan.models.selectors import KubeModel

Amounts = dict[str, int | str]


class PaygJob(KubeModel):
    job: str
    queue: str
    granted: bool
    request: Amounts
    """What its placed pods request (all of them: the job as the nodes it may use can hold it)."""
    reason: str


class PaygQueue(KubeModel):
    queue: str
    tenant: str
    allocated: Amounts
    """Its allocation now: the value to return to when the granted jobs finish."""
    current: Amounts
    """spec.capability as written."""
    capability: Amounts
    """To set now, and deserved with it (deserved = capability)."""
    jobs: tuple[PaygJob, ...] = ()


class SpotQueue(KubeModel):
    queue: str
    tenant: str
    current: Amounts
    capability: Amounts
    """By the seed's formula with the granted pay-as-you-go use."""
    release: Amounts
    """By the formula again once the granted jobs finish."""
    to_free: int | str
    """Of the resource: what its jobs hold beyond the new capability (the platform deletes them first:
    ``optplan reclaim-spot``)."""


class PaygSizing(KubeModel):
    resource: str
    queues: tuple[PaygQueue, ...]
    spot: tuple[SpotQueue, ...]
    apply: dict[str, Any]
    release: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
