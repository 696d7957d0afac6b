"""The vc-scheduler configuration the controller plans under (``SchedulerConfSource``): the live cluster's
volcano-system/volcano-scheduler-configmap, read by the reader ``optplan snapshot`` uses
(``adapters.kube.KubeClient.scheduler_configmap``) and parsed by ``adapters.schedconf.configmap_scheduler_conf``,
read again at most every ``refresh`` seconds so that a change takes effect. Every place the controller applies
placement's rules reads it: the goals' planners and their ``pendingByFragmentation`` (``reconcile``), a goal
run's verification (``placements``) and the auto-trigger's verdicts (``autotrigger``).

With it, on the same refresh, the device-share plugin's ConfigMap (its MIG geometries: kube-system/
volcano-vgpu-device-config, or where the scheduler ConfigMap's deviceshare arguments say), read as ``optplan
snapshot`` reads it (``KubeClient.device_configmap``). Both are kept as read (``configmaps``) and go into the
controller's snapshot among the watched objects, where the snapshot file loader finds them
(``kubefile.build``): a register's ``mig`` device is MIG only when that ConfigMap gives its type a geometry,
else hami-core, by the one rule ``optplan snapshot`` + ``optplan repack`` follow. ``version`` changes when
either does, and the snapshot is built again (``reconcile.snapshot``).

A ConfigMap that is absent (or may not be read) means seed 002's configuration, or no MIG geometry, said once;
a scheduler ConfigMap that does not parse means seed 002's too, with a warning; every part of a configuration
optplan does not model is a warning (``SchedulerConf.warnings``), logged once per change and told on each run
planned under it (an Event, ``reconcile``). A read that fails keeps the ConfigMap last read, with a warning.
Nothing in it is silently ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from optplan.adapters.schedconf import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    configmap_scheduler_conf,
    device_config_location,
)
from optplan.adapters.vgpu import DEVICE_CONFIG_NAME, DEVICE_CONFIG_NAMESPACE, read_device_config
from optplan.errors import InputError
from optplan.models.schedconf import SchedulerConf

log = logging.getLogger(__name__)

SOURCE = f"ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"
REFRESH = 60.0
"""Seconds between two reads of the ConfigMaps (a GET each; the configuration changes rarely)."""


class ConfReader(Protocol):
    """``adapters.kube.KubeClient``, as this module reads it."""

    def scheduler_configmap(self) -> dict[str, Any] | None: ...

    def device_configmap(self, scheduler_configmap: Mapping[str, Any] | None) -> dict[str, Any] | None: ...


def _digest(cm: Mapping[str, Any] | None) -> str:
    return json.dumps(cm, sort_keys=True, default=str)


class SchedulerConfSource:
    """The configuration now (``current``), its warnings (``warnings``: what optplan does not model, or why
    the seed's configuration stands in), the ConfigMaps as read (``configmaps``: the scheduler's and the
    device-share plugin's) and ``version``, which changes when either ConfigMap does."""

    def __init__(self, reader: ConfReader, clock: Callable[[], float], refresh: float = REFRESH) -> None:
        self.reader = reader
        self.clock = clock
        self.refresh = refresh
        self.conf = SchedulerConf()
        self.warnings: tuple[str, ...] = ()
        self.version = 0
        self.configmap: dict[str, Any] | None = None  # the volcano-scheduler ConfigMap as last read
        self.devices: dict[str, Any] | None = None  # the device-share plugin's ConfigMap as last read
        self._digest: str | None = None
        self._devices_digest: str | None = None
        self._read_at: float | None = None

    def current(self) -> SchedulerConf:
        """The configuration, both ConfigMaps read again when ``refresh`` seconds have passed since the last
        read (``read``)."""
        self.read()
        return self.conf

    def configmaps(self) -> tuple[dict[str, Any], ...]:
        """The scheduler's and the device-share plugin's ConfigMaps as last read (those present), read again
        when due: the objects a snapshot file of the cluster holds beside the watched ones (``optplan
        snapshot``), for the snapshot loader to find (``kubefile.build``)."""
        self.read()
        return tuple(cm for cm in (self.configmap, self.devices) if cm is not None)

    def read(self) -> None:
        """Read both ConfigMaps again if ``refresh`` seconds have passed since the last read; ``version``
        changes when either changed. A read that fails (the API server) keeps that ConfigMap as last read,
        with a warning."""
        now = self.clock()
        if self._read_at is not None and now - self._read_at < self.refresh:
            return
        self._read_at = now
        changed = self._read_scheduler()
        changed = self._read_devices() or changed
        if changed:
            self.version += 1

    def _read_scheduler(self) -> bool:
        try:
            cm = self.reader.scheduler_configmap()
        except Exception as e:  # the API server: the last configuration stands
            log.warning("scheduler configuration: cannot read %s (%s: %s): planning for the last one read",
                        SOURCE, type(e).__name__, e)
            return False
        digest = _digest(cm)
        if digest == self._digest:
            return False
        self._digest = digest
        self.configmap = cm
        self.conf, self.warnings = self._parse(cm)
        if cm is None:  # seed 002's configuration, which optplan models: said once, no warning to tell
            log.warning("scheduler configuration: no %s (or it may not be read): planning for seed 002's "
                        "configuration", SOURCE)
        else:
            log.info("scheduler configuration: %s: actions %s", self.conf.source or "seed 002's",
                     ", ".join(self.conf.actions))
        for w in self.warnings:
            log.warning("scheduler configuration: %s", w)
        return True

    def _read_devices(self) -> bool:
        """The device-share plugin's ConfigMap, where the scheduler ConfigMap last read says it is."""
        ns, name = device_config_location(self.configmap, (DEVICE_CONFIG_NAMESPACE, DEVICE_CONFIG_NAME))
        try:
            cm = self.reader.device_configmap(self.configmap)
        except Exception as e:  # the API server: the last device configuration stands
            log.warning("device configuration: cannot read ConfigMap %s/%s (%s: %s): planning for the last one "
                        "read", ns, name, type(e).__name__, e)
            return False
        digest = _digest(cm)
        if digest == self._devices_digest:
            return False
        self._devices_digest = digest
        self.devices = cm
        if cm is None:  # as Volcano, which falls back to its default configuration: said once
            log.warning("device configuration: no ConfigMap %s/%s (or it may not be read): a node's registered "
                        "mig devices are read as hami-core (no MIG geometry), as Volcano reads them", ns, name)
        else:
            device = read_device_config(cm)  # the snapshot reads it by the same function
            if device.mig_problem:
                log.warning("device configuration: %s", device.mig_problem)
            else:
                log.info("device configuration: ConfigMap %s/%s: MIG geometries for %s", ns, name,
                         ", ".join(device.mig_models) or "no GPU type")
        return True

    @staticmethod
    def _parse(cm: dict[str, Any] | None) -> tuple[SchedulerConf, tuple[str, ...]]:
        if cm is None:
            return SchedulerConf(), ()
        try:
            conf = configmap_scheduler_conf(cm, "cluster")
        except InputError as e:
            return SchedulerConf(), (f"{e}: planning for seed 002's configuration",)
        return conf, conf.warnings
