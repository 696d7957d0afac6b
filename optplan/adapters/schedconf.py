"""Read a vc-scheduler configuration (``--scheduler-conf FILE``) into ``models.schedconf.SchedulerConf``.

The file is what vc-scheduler reads: YAML with ``actions`` (a comma-separated string) and ``tiers`` (a list
of ``plugins``, each a ``name``, ``arguments`` and ``enable*`` switches), or a dump of the volcano-scheduler
ConfigMap (``kind: ConfigMap``) whose ``data`` holds that YAML as a string (the key
``volcano-scheduler.conf``, else the only key). Parsed as Volcano parses it:

- an action vc-scheduler does not know stops it from starting: one InputError (exit 2), as for YAML that
  does not parse or a field of the wrong shape (``actions`` not a string, a tier without ``plugins``, a
  plugin without a ``name``, ``arguments`` not a mapping, an ``enable*`` switch not a boolean);
- an argument of the wrong type is ignored by Volcano (``Arguments.GetInt`` logs and keeps the default):
  the default is kept and a warning names it;
- a plugin Volcano does not know is skipped by vc-scheduler (it logs an error): a warning names it;
- binpack: ``binpack.weight``, ``binpack.cpu``, ``binpack.memory``, and for each resource listed in
  ``binpack.resources`` its ``binpack.resources.<name>`` (default 1; a negative weight reads as 1; cpu's and
  memory's weights are always ``binpack.cpu``/``binpack.memory``: ``binpack.resources.cpu`` is never read);
- network-topology-aware: ``weight`` and the HyperNode binpack weights ``hypernode.binpack.cpu``,
  ``hypernode.binpack.memory``, ``hypernode.binpack.resources`` and ``hypernode.binpack.resources.<name>``;
- capacity: ``enableHierarchy``;
- nodeorder: ``leastrequested.weight`` and ``balancedresource.weight`` (its other scores are warned about);
- actions: placement's preempt and reclaim evict only when listed, and so do gangpreempt and gangreclaim
  (``placement.gang``: victims in bundles); shuffle is warned about (not modelled);
- configurations: gangpreempt's and gangreclaim's ``allowWholeBundle`` (a boolean, or a string
  ``strconv.ParseBool`` reads) and ``maxDomains`` (an integer; not above 0 reads as 8); the other actions'
  arguments are warned about (not modelled);
- network-topology-aware: also ``hypernode.gradient.evict.max-hypernodes`` (the HyperNodes a gang-aware
  action scans; not above 0 reads as 8), ``hypernode.binpack.normal-pod.enable`` (a boolean or a string
  ``strconv.ParseBool`` reads) and ``hypernode.binpack.normal-pod.fading`` (a number; negative reads as 0.8),
  and its ``enabledHyperNodeOrder`` and ``enableNodeOrder`` switches (its HyperNode score, its node scores);
  any other ``hypernode.binpack.normal-pod.*`` or ``hypernode.gradient.*`` key is not one Volcano reads (a
  warning);
- the tiers: which plugins sit in which tier (the gang-aware actions ask the first tier whose plugins filter
  victims).

Anything else a configuration says that optplan's planners do not simulate is one warning line each
(``SchedulerConf.warnings``): the command logs them; nothing is silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optplan.adapters.documents import read_data, yaml_documents
from optplan.errors import InputError
from optplan.models.limits import MAX_BINPACK_WEIGHT
from optplan.models.placement import BinpackWeights
from optplan.models.schedconf import (
    DEFAULT_MAX_DOMAINS,
    GANG_ACTIONS,
    NORMAL_POD_FADING,
    SEED_ACTIONS,
    GangArgs,
    SchedulerConf,
)

CONFIGMAP_KEY = "volcano-scheduler.conf"
"""The key of the volcano-scheduler ConfigMap's data that holds the configuration (Volcano's chart)."""
CONFIGMAP_NAMESPACE = "volcano-system"
CONFIGMAP_NAME = "volcano-scheduler-configmap"
"""Where Volcano's installer puts the ConfigMap vc-scheduler reads (installer/volcano-development.yaml; the
helm chart names it ``<release>-scheduler-configmap`` in the release's namespace)."""

ACTIONS = ("enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim", "shuffle")
"""The actions vc-scheduler v1.15 registers; any other stops it from starting."""

UNMODELLED_ACTIONS = {
    "shuffle": "shuffle's evictions are not modelled",
}
EVICT_MAX_HYPER_NODES = "hypernode.gradient.evict.max-hypernodes"
"""The network-topology-aware plugin's cap on the HyperNodes a gang-aware action scans."""
NORMAL_POD_ENABLE = "hypernode.binpack.normal-pod.enable"
NORMAL_POD_FADING_KEY = "hypernode.binpack.normal-pod.fading"
"""The network-topology-aware plugin's switch and tier fading for the node score of a pod without a network
topology."""
BOOL_TEXT = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
"""What Go's ``strconv.ParseBool`` reads (``Arguments.GetBool`` takes a string argument through it)."""

PLUGINS = ("drf", "gang", "deviceshare", "predicates", "priority", "nodeorder", "conformance", "binpack",
           "resource-strategy-fit", "tdm", "overcommit", "sla", "task-topology", "numa-aware", "cdp",
           "rescheduling", "usage", "pdb", "nodegroup", "network-topology-aware", "proportion", "capacity",
           "extender", "resourcequota")
"""The plugins vc-scheduler v1.15 registers; it skips any other (and logs an error)."""

MODELLED = ("priority", "gang", "conformance", "predicates", "capacity", "binpack", "network-topology-aware", "drf")
"""The plugins whose rules optplan's planners follow (with their arguments read here)."""

PARTLY = {
    "nodeorder": "only its least-requested and balanced-resource scores are modelled (in place's greedy); "
                 "node and pod affinity, taints, image locality and topology spread scores are not",
    "proportion": "queue shares by weight are not modelled (optplan plans with the capacity "
                  "plugin's deserved and capability)",
    "deviceshare": "its device rules are applied wherever nodes list their GPUs, whatever its switches (share "
                   "count, cores, memory, card types, sharing mode, PodGroup spread: docs/shared-gpus.md); with "
                   "deviceshare.VGPUEnable, place takes a share's device in its order (deviceshare.SchedulePolicy)",
}

ASSUMED = ("priority", "gang", "predicates")
"""Plugins optplan's planners always apply: a configuration without one is warned about."""

SWITCH_PREFIX = "enable"


def read_scheduler_conf(path: str) -> SchedulerConf:
    """The configuration in ``path`` (vc-scheduler's YAML, or a ConfigMap dump holding it)."""
    docs = read_data(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError("expected one mapping: vc-scheduler's configuration (actions, tiers) or the "
                         "volcano-scheduler ConfigMap", file=path, field="--scheduler-conf")
    doc: dict[str, Any] = docs[0]
    if doc.get("kind") == "ConfigMap":
        doc = configmap_conf(doc, path)
    return parse_scheduler_conf(doc, path)


def configmap_conf(cm: Mapping[str, Any], path: str) -> dict[str, Any]:
    """The configuration a volcano-scheduler ConfigMap holds: ``data[volcano-scheduler.conf]``, else the
    only key of ``data``, parsed as YAML."""
    data = cm.get("data")
    if not isinstance(data, dict) or not data:
        raise InputError("a ConfigMap without data", file=path, obj="ConfigMap", field="data")
    if CONFIGMAP_KEY in data:
        key = CONFIGMAP_KEY
    elif len(data) == 1:
        key = next(iter(data))
    else:
        raise InputError(f"no key {CONFIGMAP_KEY} and more than one key ({', '.join(sorted(data))})",
                         file=path, obj="ConfigMap", field="data")
    text = data[key]
    if not isinstance(text, str):
        raise InputError("expected the configuration as a string", file=path, obj="ConfigMap", field=f"data.{key}")
    docs = yaml_documents(text, f"{path}: data.{key}")
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError("expected one mapping (actions, tiers)", file=path, obj="ConfigMap", field=f"data.{key}")
    return docs[0]


def parse_scheduler_text(text: str, source: str) -> SchedulerConf:
    """The configuration in ``text``: vc-scheduler's YAML, or a volcano-scheduler ConfigMap holding it (what
    ``--scheduler-conf`` reads, given in memory: the API's and the plan server's ``schedulerConf``)."""
    docs = yaml_documents(text, source)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError("expected one mapping: vc-scheduler's configuration (actions, tiers) or the "
                         "volcano-scheduler ConfigMap", file=source)
    doc: dict[str, Any] = docs[0]
    if doc.get("kind") == "ConfigMap":
        doc = configmap_conf(doc, source)
    return parse_scheduler_conf(doc, source)


def device_config_location(cm: Mapping[str, Any] | None, default: tuple[str, str]) -> tuple[str, str]:
    """(namespace, name) of the device-share plugin's ConfigMap: its arguments
    ``deviceshare.KnownGeometriesCMNamespace`` / ``deviceshare.KnownGeometriesCMName`` in the volcano-scheduler
    ConfigMap ``cm``, else ``default``. A configuration that cannot be read gives ``default`` here (reading it for
    planning says why)."""
    ns, name = default
    try:
        doc = configmap_conf(cm, "ConfigMap") if cm is not None else {}
    except InputError:
        return default
    tiers = doc.get("tiers")
    for tier in tiers if isinstance(tiers, list) else []:
        plugins = tier.get("plugins") if isinstance(tier, dict) else None
        for plugin in plugins if isinstance(plugins, list) else []:
            if not isinstance(plugin, dict) or plugin.get("name") != "deviceshare":
                continue
            args = plugin.get("arguments")
            if isinstance(args, dict):
                ns = str(args.get("deviceshare.KnownGeometriesCMNamespace") or ns)
                name = str(args.get("deviceshare.KnownGeometriesCMName") or name)
    return ns, name


def is_configmap(obj: Mapping[str, Any], namespace: str, name: str) -> bool:
    """``obj`` is the ConfigMap ``namespace``/``name``."""
    meta = obj.get("metadata") or {}
    return (obj.get("kind") == "ConfigMap" and str(obj.get("apiVersion", "v1")) == "v1" and isinstance(meta, dict)
            and meta.get("namespace") == namespace and meta.get("name") == name)


def is_scheduler_configmap(obj: Mapping[str, Any]) -> bool:
    """``obj`` is the volcano-scheduler ConfigMap (kind, namespace and name as Volcano's installer has them)."""
    return is_configmap(obj, CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)


def configmap_scheduler_conf(cm: Mapping[str, Any], source: str) -> SchedulerConf:
    """The configuration the volcano-scheduler ConfigMap ``cm`` holds (found in ``source``: a live cluster or a
    snapshot file), read as ``--scheduler-conf`` reads it."""
    where = f"{source}: ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"
    return parse_scheduler_conf(configmap_conf(cm, where), where)


def parse_scheduler_conf(doc: Mapping[str, Any], source: str) -> SchedulerConf:
    """``doc``: the configuration's top-level mapping; ``source`` names it in errors and warnings."""
    warnings: list[str] = []

    def error(field: str, reason: str) -> InputError:
        return InputError(reason, file=source, field=field)

    for key in doc:
        if key not in ("actions", "tiers", "configurations", "metrics"):
            warnings.append(f"{key}: not a field of vc-scheduler's configuration (Volcano ignores it)")
    actions = parse_actions(doc.get("actions"), error)
    for a in actions:
        if a in UNMODELLED_ACTIONS:
            warnings.append(f"action {a}: {UNMODELLED_ACTIONS[a]}")
    if "allocate" not in actions:
        warnings.append("actions: no allocate; optplan's planners always simulate allocate")
    if actions.index("preempt") > actions.index("reclaim") if {"preempt", "reclaim"} <= set(actions) else False:
        warnings.append("actions: reclaim before preempt; optplan simulates preempt first")
    gang_args = action_arguments(doc.get("configurations"), error, warnings)
    tiers = doc.get("tiers")
    if tiers is None:
        tiers = []
    if not isinstance(tiers, list):
        raise error("tiers", "expected a list of tiers, each with plugins")
    plugins: dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
    layout: list[tuple[str, ...]] = []
    for i, tier in enumerate(tiers):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins", []), list):
            raise error(f"tiers[{i}]", "expected a mapping with a list of plugins")
        for j, plugin in enumerate(tier.get("plugins") or []):
            where = f"tiers[{i}].plugins[{j}]"
            if not isinstance(plugin, dict) or not isinstance(plugin.get("name"), str) or not plugin["name"]:
                raise error(where, "expected a mapping with a name")
            args = plugin.get("arguments") or {}
            if not isinstance(args, dict):
                raise error(f"{where}.arguments", "expected a mapping")
            switches = {k: v for k, v in plugin.items() if k.lower().startswith(SWITCH_PREFIX)}
            for k, v in switches.items():
                if not isinstance(v, bool):
                    raise error(f"{where}.{k}", f"expected true or false, got {v!r}")
            for k in plugin:
                if k not in ("name", "arguments") and k not in switches:
                    warnings.append(f"plugin {plugin['name']}: {k}: not a field of a plugin (Volcano ignores it)")
            if plugin["name"] in plugins:
                warnings.append(f"plugin {plugin['name']}: listed twice; optplan reads the first")
            plugins.setdefault(plugin["name"], (args, switches))
        layout.append(tuple(p["name"] for p in tier.get("plugins") or []))
    binpack = hyper = None
    hierarchy = True
    max_hyper = DEFAULT_MAX_DOMAINS
    normal, fading, hyper_order, topo_order = True, NORMAL_POD_FADING, True, True
    least = balanced = 1
    device_order = "best-fit"
    for name, (arguments, flags) in plugins.items():
        if name not in PLUGINS:
            warnings.append(f"plugin {name}: vc-scheduler does not know it and skips it")
            continue
        if name not in MODELLED:
            warnings.append(f"plugin {name}: {PARTLY.get(name, 'not modelled')}")
        read = ({"enableHierarchy"} if name != "drf" else {"enableJobOrder"}) | (
            {"enabledHyperNodeOrder", "enableNodeOrder"} if name == "network-topology-aware" else set())
        off = sorted(k for k, v in flags.items() if v is False and k not in read)
        if off and name in MODELLED:
            warnings.append(f"plugin {name}: {', '.join(off)} false is not modelled (optplan applies the whole "
                            "plugin)")
        if name == "binpack":
            binpack = binpack_weights(arguments, "binpack.", warnings, name, source=source)
        elif name == "network-topology-aware":
            hyper = binpack_weights(arguments, "hypernode.binpack.", warnings, name, weight_key="weight",
                                    source=source)
            for k in map(str, arguments):
                if k == EVICT_MAX_HYPER_NODES:
                    max_hyper = int_argument(arguments, k, DEFAULT_MAX_DOMAINS, warnings, name) or DEFAULT_MAX_DOMAINS
                elif k == NORMAL_POD_ENABLE:
                    normal = bool_argument(arguments, k, True, warnings, name)
                elif k == NORMAL_POD_FADING_KEY:
                    fading = float_argument(arguments, k, NORMAL_POD_FADING, warnings, name)
                elif k.startswith("hypernode.binpack.normal-pod") or k.startswith("hypernode.gradient"):
                    warnings.append(f"plugin {name}: {k} is not read by Volcano (an unknown argument)")
            hyper_order = flags.get("enabledHyperNodeOrder") is not False
            topo_order = flags.get("enableNodeOrder") is not False
        elif name == "nodeorder":
            for k in map(str, arguments):
                if k == "leastrequested.weight":
                    least = int_argument(arguments, k, 1, warnings, name)
                elif k == "balancedresource.weight":
                    balanced = int_argument(arguments, k, 1, warnings, name)
                else:
                    warnings.append(f"plugin {name}: {k} is not modelled")
        elif name == "deviceshare":
            if "deviceshare.VGPUEnable" in arguments and bool_argument(arguments, "deviceshare.VGPUEnable", False,
                                                                       warnings, name):
                policy = arguments.get("deviceshare.SchedulePolicy", "")
                device_order = {"binpack": "volcano-binpack", "spread": "volcano-spread"}.get(str(policy), "volcano")
            weight = arguments.get("deviceshare.ScheduleWeight", 0)
            if isinstance(weight, int) and not isinstance(weight, bool) and weight > 0:
                warnings.append(f"plugin deviceshare: deviceshare.ScheduleWeight {weight}: its node score (the "
                                "devices' score by deviceshare.SchedulePolicy) is not modelled")
        elif name == "drf":
            if flags.get("enableHierarchy") is True:
                warnings.append("plugin drf: enableHierarchy (hierarchical dominant resource fairness over queues) "
                                "is not modelled; its job order, preemptable and victim order are")
            if arguments:
                warnings.append(f"plugin drf: arguments {', '.join(sorted(map(str, arguments)))} not modelled")
        elif name == "capacity":
            hierarchy = flags.get("enableHierarchy") is True
            if not hierarchy:
                warnings.append("plugin capacity without enableHierarchy: optplan queues accounts flat; place and "
                                "the goal planners keep the hierarchy's rules")
        elif arguments and name in MODELLED:
            warnings.append(f"plugin {name}: arguments {', '.join(sorted(map(str, arguments)))} not modelled")
    for name in ASSUMED:
        if name not in plugins:
            warnings.append(f"no plugin {name}: optplan's planners apply its rules anyway")
    if "capacity" not in plugins and "proportion" not in plugins:
        warnings.append("neither capacity nor proportion: optplan's planners apply the capacity plugin's queue "
                        "rules anyway")
    drf = plugins.get("drf")
    drf_job_order = drf is not None and drf[1].get("enableJobOrder") is not False
    return SchedulerConf(actions=actions, binpack=binpack, hyper_node_binpack=hyper, hierarchy=hierarchy,
                         tiers=tuple(layout), gang_args=gang_args, evict_max_hyper_nodes=max_hyper,
                         normal_pod_binpack=normal, normal_pod_fading=fading, hyper_node_order=hyper_order,
                         topology_node_order=topo_order, least_requested=least, balanced_resource=balanced,
                         device_order=device_order, drf_job_order=drf_job_order, warnings=tuple(warnings),
                         source=source)


def action_arguments(raw: Any, error: Any, warnings: list[str]) -> tuple[tuple[str, GangArgs], ...]:
    """``configurations``: a list of ``name`` and ``arguments``; gangpreempt's and gangreclaim's arguments
    read as Volcano reads them (``GetArgOfActionFromConf``: the first entry of that name), any other
    action's warned about."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise error("configurations", "expected a list of actions' arguments, each a name and arguments")
    out: dict[str, GangArgs] = {}
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise error(f"configurations[{i}]", "expected a mapping with a name")
        args = entry.get("arguments") or {}
        if not isinstance(args, dict):
            raise error(f"configurations[{i}].arguments", "expected a mapping")
        name = entry["name"]
        if name not in GANG_ACTIONS:
            if args:
                warnings.append(f"configurations: {name}'s arguments {', '.join(sorted(map(str, args)))} are "
                                "not modelled")
            continue
        if name in out:
            continue
        allow = GangArgs().allow_whole
        if "allowWholeBundle" in args:
            v = args["allowWholeBundle"]
            if isinstance(v, bool):
                allow = v
            elif isinstance(v, str) and v in BOOL_TEXT:
                allow = BOOL_TEXT[v]
            else:
                warnings.append(f"configurations: {name}: allowWholeBundle: {v!r} is not a boolean; Volcano keeps "
                                f"the default {str(allow).lower()}")
        domains = int_argument(args, "maxDomains", DEFAULT_MAX_DOMAINS, warnings, name) or DEFAULT_MAX_DOMAINS
        for k in sorted(map(str, args)):
            if k not in ("allowWholeBundle", "maxDomains"):
                warnings.append(f"configurations: {name}: {k} is not modelled")
        out[name] = GangArgs(allow_whole=allow, max_domains=domains)
    return tuple(sorted(out.items()))


def parse_actions(raw: Any, error: Any) -> tuple[str, ...]:
    """``actions``: names separated by commas; an action vc-scheduler does not know is an error (it would not
    start). Absent: none (vc-scheduler would run no action; optplan warns, as for a missing allocate)."""
    if raw is None:
        return ()
    if not isinstance(raw, str):
        raise error("actions", "expected the actions as one string, names separated by commas")
    names = tuple(a.strip() for a in raw.split(","))
    for a in names:
        if a not in ACTIONS:
            raise error("actions", f"unknown action {a!r} (vc-scheduler would not start); known: "
                                   f"{', '.join(ACTIONS)}")
    return names


def int_argument(args: Mapping[str, Any], key: str, default: int, warnings: list[str], plugin: str, *,
                 source: str = "") -> int:
    """Volcano's ``Arguments.GetInt``: an integer value, else (logged) the default; then a negative reads as the
    default, as the binpack and network-topology-aware plugins do. Above ``MAX_BINPACK_WEIGHT``: an
    InputError (optplan's exact models would overflow)."""
    if key not in args:
        return default
    v = args[key]
    if not isinstance(v, int) or isinstance(v, bool):
        warnings.append(f"plugin {plugin}: {key}: {v!r} is not an integer; Volcano keeps the default {default}")
        return default
    if v > MAX_BINPACK_WEIGHT:
        raise InputError(f"{v} is above {MAX_BINPACK_WEIGHT}, the largest weight optplan plans with", file=source,
                         obj=f"plugin {plugin}", field=key)
    return default if v < 0 else v


def bool_argument(args: Mapping[str, Any], key: str, default: bool, warnings: list[str], plugin: str) -> bool:
    """Volcano's ``Arguments.GetBool``: a boolean, or a string Go's ``strconv.ParseBool`` reads; else (logged)
    the default."""
    v = args[key]
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v in BOOL_TEXT:
        return BOOL_TEXT[v]
    warnings.append(f"plugin {plugin}: {key}: {v!r} is not a boolean; Volcano keeps the default {str(default).lower()}")
    return default


def float_argument(args: Mapping[str, Any], key: str, default: float, warnings: list[str], plugin: str) -> float:
    """Volcano's ``Arguments.GetFloat64`` for the normal-pod fading: a number (an integer too), else (logged) the
    default; a negative reads as the default, as network-topology-aware reads it."""
    v = args[key]
    if isinstance(v, bool) or not isinstance(v, int | float):
        warnings.append(f"plugin {plugin}: {key}: {v!r} is not a number; Volcano keeps the default {default}")
        return default
    if v != v or v in (float("inf"), float("-inf")):
        warnings.append(f"plugin {plugin}: {key}: {v!r} is not a finite number; optplan keeps the default {default}")
        return default
    return default if v < 0 else float(v)


def binpack_weights(args: Mapping[str, Any], prefix: str, warnings: list[str], plugin: str, *,
                    weight_key: str | None = None, source: str = "") -> BinpackWeights:
    """The binpack formula's weights from a plugin's arguments: ``<prefix>weight`` (or ``weight_key``),
    ``<prefix>cpu``, ``<prefix>memory``, and ``<prefix>resources.<name>`` for each name listed in
    ``<prefix>resources`` (default 1 each); cpu's and memory's weights always come from ``<prefix>cpu`` and
    ``<prefix>memory``."""
    wkey = weight_key or prefix + "weight"
    weight = int_argument(args, wkey, 1, warnings, plugin, source=source)
    cpu = int_argument(args, prefix + "cpu", 1, warnings, plugin, source=source)
    memory = int_argument(args, prefix + "memory", 1, warnings, plugin, source=source)
    listed = args.get(prefix + "resources", "")
    if not isinstance(listed, str):
        warnings.append(f"plugin {plugin}: {prefix}resources: {listed!r} is not a string; Volcano reads no "
                        "extra resource")
        listed = ""
    extra: dict[str, int] = {}
    for name in (r.strip() for r in listed.split(",")):
        if name and name not in ("cpu", "memory"):
            extra[name] = int_argument(args, f"{prefix}resources.{name}", 1, warnings, plugin, source=source)
    for k in args:
        key = str(k)
        if key.startswith(prefix + "resources.") and key[len(prefix + "resources."):] not in extra:
            warnings.append(f"plugin {plugin}: {key} is not read by Volcano (the resource is not listed in "
                            f"{prefix}resources, or is cpu or memory: {prefix}cpu and {prefix}memory weigh them)")
    return BinpackWeights(weight=weight, cpu=cpu, memory=memory, resources=extra)


def default_conf() -> SchedulerConf:
    """Seed 002 §7's configuration, as optplan assumes it without ``--scheduler-conf``."""
    return SchedulerConf(actions=SEED_ACTIONS)
