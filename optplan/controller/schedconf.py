"""The vc-scheduler configuration the controller plans under (``SchedulerConfSource``): the live cluster's
volcano-system/volcano-scheduler-configmap, read by the reader ``optplan snapshot`` uses
(``adapters.kube.KubeClient.scheduler_configmap``) and parsed by ``adapters.schedconf.configmap_scheduler_conf``,
read again at most every ``refresh`` seconds so that a change takes effect. Every place the controller applies
placement's rules reads it: the goals' planners and their ``pendingByFragmentation`` (``reconcile``), a goal
run's verification (``placements``) and the auto-trigger's verdicts (``autotrigger``).

A ConfigMap that is absent (or may not be read) means seed 002's configuration, said once; one that does not
parse means seed 002's too, with a warning; every part of a configuration optplan does not model is a warning
(``SchedulerConf.warnings``), logged once per change and told on each run planned under it (an Event,
``reconcile``). Nothing in it is silently ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from optplan.adapters.schedconf import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE, configmap_scheduler_conf
from optplan.errors import InputError
from optplan.models.schedconf import SchedulerConf

log = logging.getLogger(__name__)

SOURCE = f"ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"
REFRESH = 60.0
"""Seconds between two reads of the ConfigMap (a GET each; the configuration changes rarely)."""


class ConfReader(Protocol):
    """``adapters.kube.KubeClient``, as this module reads it."""

    def scheduler_configmap(self) -> dict[str, Any] | None: ...


class SchedulerConfSource:
    """The configuration now (``current``), its warnings (``warnings``: what optplan does not model, or why
    the seed's configuration stands in) and ``version``, which changes when the configuration does."""

    def __init__(self, reader: ConfReader, clock: Callable[[], float], refresh: float = REFRESH) -> None:
        self.reader = reader
        self.clock = clock
        self.refresh = refresh
        self.conf = SchedulerConf()
        self.warnings: tuple[str, ...] = ()
        self.version = 0
        self._digest: str | None = None
        self._read_at: float | None = None

    def current(self) -> SchedulerConf:
        """The configuration, read again when ``refresh`` seconds have passed since the last read. A read
        that fails (the API server) keeps the last configuration, with a warning."""
        now = self.clock()
        if self._read_at is not None and now - self._read_at < self.refresh:
            return self.conf
        self._read_at = now
        try:
            cm = self.reader.scheduler_configmap()
        except Exception as e:  # the API server: the last configuration stands
            log.warning("scheduler configuration: cannot read %s (%s: %s): planning for the last one read",
                        SOURCE, type(e).__name__, e)
            return self.conf
        digest = json.dumps(cm, sort_keys=True, default=str)
        if digest != self._digest:
            self._digest = digest
            self.conf, self.warnings = self._parse(cm)
            self.version += 1
            if cm is None:  # seed 002's configuration, which optplan models: said once, no warning to tell
                log.warning("scheduler configuration: no %s (or it may not be read): planning for seed 002's "
                            "configuration", SOURCE)
            else:
                log.info("scheduler configuration: %s: actions %s", self.conf.source or "seed 002's",
                         ", ".join(self.conf.actions))
            for w in self.warnings:
                log.warning("scheduler configuration: %s", w)
        return self.conf

    @staticmethod
    def _parse(cm: dict[str, Any] | None) -> tuple[SchedulerConf, tuple[str, ...]]:
        if cm is None:
            return SchedulerConf(), ()
        try:
            conf = configmap_scheduler_conf(cm, "cluster")
        except InputError as e:
            return SchedulerConf(), (f"{e}: planning for seed 002's configuration",)
        return conf, conf.warnings

