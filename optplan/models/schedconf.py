"""The vc-scheduler configuration optplan plans for (``optplan ... --scheduler-conf FILE``), as data.

``SchedulerConf()`` is what optplan assumes when no file is given: seed 002 §7's configuration (actions
``enqueue, allocate, preempt, reclaim, backfill``; the capacity plugin with hierarchy; binpack and
network-topology-aware as each command's own default weights say). ``adapters.schedconf`` reads Volcano's
file (the same YAML vc-scheduler reads with ``--scheduler-conf``, or the volcano-scheduler ConfigMap)
into one, with a warning for each thing optplan cannot model.
"""

from __future__ import annotations

from dataclasses import dataclass

from optplan.models.placement import BinpackWeights

SEED_ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
"""Seed 002 §7's actions, in order: what optplan's planners simulate when no configuration is given."""

SEED_TIERS = (("priority", "gang", "conformance"),
              ("drf", "predicates", "capacity", "nodeorder", "binpack", "network-topology-aware"))
"""Seed 002 §7's plugin tiers (``hack/cluster/volcano-scheduler.conf``), plugin names in order."""

GANG_ACTIONS = ("gangpreempt", "gangreclaim")
"""Volcano's gang-aware eviction actions (v1.15): victims in bundles (``placement.bundles``)."""

NORMAL_POD_FADING = 0.8
"""network-topology-aware's ``hypernode.binpack.normal-pod.fading`` default: in a pod's node score without a
network topology, HyperNode tier t weighs fading^(t-1)."""

DEFAULT_MAX_DOMAINS = 8
"""gangpreempt's and gangreclaim's ``maxDomains`` default, and the network-topology-aware plugin's
``hypernode.gradient.evict.max-hypernodes`` default: HyperNodes a starving job's eviction search scans."""


@dataclass(frozen=True)
class GangArgs:
    """A gang-aware action's arguments (``configurations``): ``allow_whole``: ``allowWholeBundle`` (a whole
    bundle, which breaks a victim gang, may be taken); ``max_domains``: ``maxDomains``."""

    allow_whole: bool = True
    max_domains: int = DEFAULT_MAX_DOMAINS


@dataclass(frozen=True)
class SchedulerConf:
    """What optplan's planners take from a vc-scheduler configuration.

    ``binpack``: the binpack plugin's weights (None: the plugin is not configured by a file, each command's
    default applies, Volcano's all-1 for ``place``); ``hyper_node_binpack``: the network-topology-aware
    plugin's HyperNode binpack weights, its ``weight`` as ``weight`` (None: the node weights serve, as
    before); ``hierarchy``: the capacity plugin's ``enableHierarchy``; ``actions``: the actions in order
    (placement's preempt and reclaim evict only when listed, gangpreempt and gangreclaim as ``placement.gang``
    says); ``tiers``: the plugins' names, tier by tier (which plugin decides a gang-aware action's victims);
    ``gang_args``: gangpreempt's and gangreclaim's arguments; ``evict_max_hyper_nodes``: the
    network-topology-aware plugin's ``hypernode.gradient.evict.max-hypernodes``; ``normal_pod_binpack``,
    ``normal_pod_fading``: its ``hypernode.binpack.normal-pod.enable`` and ``.fading`` (the HyperNode binpack in
    the node score of a pod without a network topology: on or off, and tier t weighing fading^(t-1));
    ``hyper_node_order``: its ``enabledHyperNodeOrder`` switch (false: no HyperNode score, every candidate
    HyperNode of a tier scores 0); ``topology_node_order``: its ``enableNodeOrder`` switch (false: none of its
    node scores, for pods with or without a network topology); ``least_requested``, ``balanced_resource``: the
    nodeorder plugin's ``leastrequested.weight`` and ``balancedresource.weight`` (its scores join the greedy's
    node order when a file lists the plugin); ``device_order``: which device a share takes (``oracle.DEVICE_ORDERS``):
    Volcano's vGPU order when the ``deviceshare`` plugin has ``deviceshare.VGPUEnable`` (by its
    ``deviceshare.SchedulePolicy``), else optplan's ``best-fit``; ``drf_job_order``: the drf plugin is listed
    (its job order not switched off): jobs of equal priority and gang readiness go by their dominant share, the
    smaller first;
    ``warnings``: one line for each action, plugin or argument optplan does not model; ``source``: the
    file, None for the default."""

    actions: tuple[str, ...] = SEED_ACTIONS
    binpack: BinpackWeights | None = None
    hyper_node_binpack: BinpackWeights | None = None
    hierarchy: bool = True
    tiers: tuple[tuple[str, ...], ...] = SEED_TIERS
    gang_args: tuple[tuple[str, GangArgs], ...] = ()
    evict_max_hyper_nodes: int = DEFAULT_MAX_DOMAINS
    normal_pod_binpack: bool = True
    normal_pod_fading: float = NORMAL_POD_FADING
    hyper_node_order: bool = True
    topology_node_order: bool = True
    least_requested: int = 1
    balanced_resource: int = 1
    device_order: str = "best-fit"
    drf_job_order: bool = True
    warnings: tuple[str, ...] = ()
    source: str | None = None

    def binpack_or(self, default: BinpackWeights) -> BinpackWeights:
        """The file's binpack weights, else ``default``."""
        return default if self.binpack is None else self.binpack

    def gang(self, action: str) -> GangArgs:
        """The arguments of gangpreempt or gangreclaim (their defaults when the file gives none)."""
        return dict(self.gang_args).get(action, GangArgs())
