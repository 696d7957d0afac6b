"""The plan server's request bodies: one pydantic model each, the one source of both their validation and
their OpenAPI schemas (``openapi.py`` reads ``model_json_schema`` of the same classes, as it does for the
responses).

The models are strict (JSON types only: no ``"1"`` for 1, no ``true`` for 1), refuse unknown fields, and
read camelCase keys. A refusal is an ``InputError`` of one line naming the field, as ``objects[3].kind`` or
``weights.movedPods``: ``expected <what the field holds>, got <the value, cut short>``, ``required field is
missing (...)`` or ``unknown field; expected one of ...``. The first problem found is the one reported."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, TypeVar, cast, get_args, get_type_hints

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    create_model,
    with_config,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from optplan.errors import InputError, printable
from optplan.models.execute import Relocation
from optplan.models.limits import MAX_WEIGHT, WEIGHT_DIGITS, WEIGHT_RESOLUTION
from optplan.models.placement import SafePreemption
from optplan.models.repack import DIMENSIONS
from optplan.solvers.core import registry

REQUEST = "request"
"""The ``file`` part of errors about the request body's own fields."""
REPACK_SOLVERS = (*registry.default_first("repack"),
                  *(n for n in registry.names("goals") if n not in registry.names("repack")))
"""Repack's planners, then those only a run with admit / freeHyperNodes goals takes (``kai``)."""
PLACE_SOLVERS = registry.default_first("placement")
"""The planners a request may name (``optplan.solvers.core.registry``), the default first."""
MAX_SEED = 2**31 - 1


# ---- how a field that does not hold what it should is reported ------------------------------------------

def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return "string" if isinstance(v, str) else type(v).__name__


def _short(v: Any, limit: int = 60) -> str:
    """A request value quoted in an error, cut short (an integer may have thousands of digits)."""
    text = repr(v) if isinstance(v, bool | float | str) or v is None else _json_type(v)
    if isinstance(v, int) and not isinstance(v, bool):
        text = str(v) if v.bit_length() < 64 else f"an integer of {v.bit_length()} bits"
    out = printable(text[:limit])
    return out + ("..." if len(text) > limit else "")


@dataclass(frozen=True)
class Expect:
    """A field's validation, reported as ``expected <what>, got <the value>`` when it fails. Inside a value
    of type ``within`` (an array of objects, an object), a problem is reported at its own place instead;
    ``inner`` then validates such a value (when the field is a union, whose errors would name each branch)."""

    what: str
    within: type | None = None
    inner: TypeAdapter[Any] | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return self.around(handler(source))

    def around(self, schema: core_schema.CoreSchema) -> core_schema.CoreSchema:
        return core_schema.no_info_wrap_validator_function(self._check, schema)

    def _check(self, v: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
        if self.within is not None and isinstance(v, self.within):
            return self.inner.validate_python(v) if self.inner is not None else handler(v)
        try:
            return handler(v)
        except ValidationError:
            raise PydanticCustomError("expected", "expected {what}, got {got}",
                                      {"what": self.what, "got": _short(v)}) from None


@dataclass(frozen=True)
class OneOf:
    """One of a few strings: validated and described (``enum``) by one literal schema."""

    choices: tuple[str, ...]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return Expect(f"one of {', '.join(self.choices)}").around(core_schema.literal_schema(list(self.choices)))


NonEmpty = Annotated[str, StringConstraints(min_length=1), Expect("a non-empty string")]


# ---- Kubernetes objects --------------------------------------------------------------------------------

@with_config(ConfigDict(extra="allow", strict=True))
class KubeObject(TypedDict):
    """A Kubernetes object; a kind ending in List has items, each a KubeObject"""

    apiVersion: NonEmpty
    kind: NonEmpty
    items: NotRequired[list[KubeItem]]
    # metadata and the rest are read by the snapshot loader (optplan.adapters.kubefile), which names the
    # object and the field at fault; validating them here too would cost a copy of every object's fields


KubeItem = Annotated[KubeObject, Expect("an object", within=dict)]
KUBE_OBJECT: TypeAdapter[KubeObject] = TypeAdapter(KubeObject)
Objects = Annotated[list[KubeItem], Expect("an array of Kubernetes objects", within=list)]


def expand(objects: list[KubeObject]) -> list[dict[str, Any]]:
    """The objects with each ``kind: ...List`` replaced by its items."""
    out: list[dict[str, Any]] = []
    for obj in objects:
        items = obj.get("items")
        if obj["kind"].endswith("List") and items is not None:
            out.extend(cast(list[dict[str, Any]], items))
        else:
            out.append(cast(dict[str, Any], obj))
    return out


# ---- fields shared by the requests -----------------------------------------------------------------------

Run = Annotated[KubeObject | NonEmpty | None,
                Expect("a RepackRun object or the name of one in objects", within=dict, inner=KUBE_OBJECT),
                Field(description="The RepackRun: an object (apiVersion repack.volcano.sh/v1alpha1), the name of "
                                  "one in objects, or omitted when objects hold exactly one")]
TimeLimit = Annotated[Annotated[float, Field(gt=0)] | None, Expect("a positive number of seconds"),
                      Field(description="Solver time limit in seconds, capped to --max-time-limit; the applied "
                                        "value is returned in the X-Optplan-Time-Limit header")]
Seed = Annotated[int, Field(ge=0, le=MAX_SEED), Expect(f"an integer within 0..{MAX_SEED}")]
Deterministic = Annotated[bool, Expect("true or false"),
                          Field(description="limits count work, not wall-clock seconds: one input, one plan, on "
                                            "any machine")]
OBJECTS_HELP = ("The snapshot: Nodes, Pods, PodGroups, PodDisruptionBudgets, Queues, PriorityClasses, HyperNodes, "
                "VCJobs, ModelServings, RepackRuns, as the API server returns them, and the volcano-scheduler "
                "ConfigMap (volcano-system/volcano-scheduler-configmap: the configuration planned for when neither "
                "schedulerConf nor the server's --scheduler-conf gives one); a kind: List is expanded, other kinds "
                "are ignored")
SchedulerConfText = Annotated[NonEmpty | None, Field(
    description="The vc-scheduler configuration to plan for, as text: the YAML vc-scheduler reads with "
                "--scheduler-conf, or the volcano-scheduler ConfigMap (YAML or JSON); wins over the server's "
                "--scheduler-conf and over a ConfigMap in objects (default: seed 002's configuration)")]


def _rounded(w: float) -> float:
    return round(float(w), WEIGHT_DIGITS)


Weight = Annotated[Annotated[float, Field(ge=0, le=0)] | Annotated[float, Field(ge=WEIGHT_RESOLUTION, le=MAX_WEIGHT)],
                   AfterValidator(_rounded),
                   Expect(f"0 or a number within {WEIGHT_RESOLUTION:g}..{MAX_WEIGHT:g} (weights are relative; the "
                          "exact models scale them to integers)")]
"""0, or within WEIGHT_RESOLUTION..MAX_WEIGHT, rounded to multiples of WEIGHT_RESOLUTION: the exact models
scale weights to integers, so their ratios must stay bounded (1e308 or 1e-320 would overflow the objective)."""

STRICT = ConfigDict(extra="forbid", strict=True, alias_generator=to_camel, populate_by_name=True)

Weights: type[BaseModel] = create_model(
    "Weights",
    __config__=STRICT,
    __doc__=f"Weights of the disruption dimensions (defaults {', '.join(str(d.default) for d in DIMENSIONS)}); "
            f"each 0, or within {WEIGHT_RESOLUTION:g}..{MAX_WEIGHT:g}, rounded to multiples of "
            f"{WEIGHT_RESOLUTION:g} (weights are relative)",
    **{d.field: cast(Any, (Weight, Field(d.default, alias=d.key, description=d.help))) for d in DIMENSIONS},
)
"""One field per disruption dimension, from the one table (``DIMENSIONS``): its key, default and help."""


# ---- the requests ------------------------------------------------------------------------------------

M = TypeVar("M", bound="Request")


class Request(BaseModel):
    model_config = STRICT

    @classmethod
    def parse(cls: type[M], body: Mapping[str, Any]) -> M:
        """The request, or an ``InputError`` of one line naming the field at fault."""
        try:
            return cls.model_validate(body)
        except ValidationError as e:
            raise _input_error(cls, e) from None


class RepackPlanRequest(Request):
    objects: Annotated[Objects, Field(description=OBJECTS_HELP)]
    run: Run = None
    solver: Annotated[str, OneOf(REPACK_SOLVERS)] = registry.DEFAULT
    time_limit_seconds: TimeLimit = None
    seed: Seed = 0
    weights: Annotated[Weights | None, Expect("an object", within=dict)] = None
    deterministic: Deterministic = False
    scheduler_conf: SchedulerConfText = None

    def weights_or_none(self) -> dict[str, float] | None:
        """The weights given, by ``Weights`` field (the others keep their defaults)."""
        return None if self.weights is None else self.weights.model_dump(exclude_unset=True)


class SafePreemptionRules(SafePreemption):
    """Safe preemption's rules (docs/queues.md#safe-preemption): ``pdb``, ``cooldownSeconds``,
    ``lastPreemption``, ``levels``, ``levelGap``, ``approvalWeight``; each off unless given."""

    model_config = ConfigDict(strict=True, extra="forbid")


class PlaceRequest(Request):
    objects: Annotated[Objects, Field(description=OBJECTS_HELP)]
    jobs: Annotated[Objects | None, Field(description="VCJobs to place; without it, the pending VCJobs in objects")
                    ] = None
    solver: Annotated[str, OneOf(PLACE_SOLVERS)] = registry.DEFAULT
    time_limit_seconds: TimeLimit = None
    seed: Seed = 0
    now: Annotated[NonEmpty | None, Field(description="RFC 3339 time victims are priced at (reproducible outputs)",
                                          json_schema_extra={"format": "date-time"})] = None
    deterministic: Deterministic = False
    safe_preemption: Annotated[SafePreemptionRules | None,
                               Expect("an object of safe preemption rules", within=dict)] = None
    scheduler_conf: SchedulerConfText = None


class SizePaygRequest(Request):
    objects: Annotated[Objects, Field(description=OBJECTS_HELP)]
    jobs: Annotated[Objects | None, Field(description="VCJobs to size for; without it, the pending VCJobs in "
                                                      "objects (those of pay-as-you-go queues count)")] = None
    resource: Annotated[NonEmpty, Field(description="The resource of the spot formula")] = "nvidia.com/gpu"
    now: Annotated[NonEmpty | None, Field(description="RFC 3339 time of the snapshot",
                                          json_schema_extra={"format": "date-time"})] = None


class ThrottleRequest(Request):
    objects: Annotated[Objects, Field(description=OBJECTS_HELP)]
    queue: Annotated[NonEmpty, Field(description="The queue the job is submitted to; it must be in objects")]
    priority_class: Annotated[NonEmpty | None, Field(description="The submission's PriorityClass (the snapshot's, "
                                                                 "else seed 002's); this or priority")] = None
    priority: Annotated[int | None, Field(ge=-(2**31), le=10**9, description="The submission's priority value"),
                        Expect("an integer within -2147483648..1000000000")] = None
    now: Annotated[NonEmpty | None, Field(description="RFC 3339 time of the decision (default: the server's clock)",
                                          json_schema_extra={"format": "date-time"})] = None
    timeout_seconds: Annotated[float, Field(ge=0, le=604800, description="The waiting mode ends this long after "
                                                                         "it began (seed: 300)"),
                               Expect("a number of seconds within 0..604800")] = 300.0
    large_priority: Annotated[int | None, Field(ge=-(2**31), le=10**9, description="Jobs of at least this "
                                                "priority are large (default: the large-job class, else 800)"),
                              Expect("an integer within -2147483648..1000000000")] = None


class NominateRequest(Request):
    objects: Annotated[Objects, Field(description="The live snapshot")]
    run: Run = None
    relocation: Annotated[Relocation, Expect("an object, a status.relocations[] item", within=dict)]
    replacement: Annotated[NonEmpty, Field(description="The replacement pod: name (the relocation's namespace) or "
                                                       "namespace/name; it must be in objects")]


class VerifyRequest(Request):
    objects: Annotated[Objects, Field(description="The snapshot after execution")]
    run: Run = None
    time_limit_seconds: TimeLimit = None


REQUESTS: tuple[type[Request], ...] = (RepackPlanRequest, PlaceRequest, NominateRequest, VerifyRequest,
                                       SizePaygRequest, ThrottleRequest)


# ---- a pydantic error as an InputError -----------------------------------------------------------------

def _place(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _field(model: type[BaseModel], name: int | str) -> tuple[Any, list[Any]] | None:
    """The annotation and the metadata of ``model``'s field called ``name`` on the wire."""
    for key, info in model.model_fields.items():
        if (info.alias or key) == name:
            return info.annotation, info.metadata
    return None


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model whose fields ``loc`` names (the request's, or that of an object field such as weights)."""
    for name in loc:
        found = _field(model, name)
        if found is None:
            return None
        sub = [t for t in (found[0], *get_args(found[0])) if isinstance(t, type) and issubclass(t, BaseModel)]
        if not sub:
            return None
        model = sub[0]
    return model


def _expected(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """What a missing field holds, as its ``Expect`` says (the request's fields and a KubeObject's)."""
    parent = _model_at(model, loc[:-1])
    found = _field(parent, loc[-1]) if parent is not None else None
    metadata = found[1] if found is not None else list(getattr(
        get_type_hints(KubeObject, include_extras=True).get(str(loc[-1])), "__metadata__", ()))
    if found is not None:
        metadata = [*metadata, *getattr(found[0], "__metadata__", ())]
    whats = [m.what for m in metadata if isinstance(m, Expect)]
    return f" ({whats[0]})" if whats else ""


def _input_error(model: type[BaseModel], e: ValidationError) -> InputError:
    errors = sorted(e.errors(include_url=False), key=lambda err: err["type"] != "extra_forbidden")
    err = errors[0]
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        names = [info.alias or key for key, info in parent.model_fields.items()] if parent else []
        message = f"unknown field; expected one of {', '.join(names)}" if names else "unknown field"
    elif kind == "missing":
        message = "required field is missing" + _expected(model, loc)
    elif kind == "expected":
        message = err["msg"]
    else:
        message = f"{err['msg'][:1].lower()}{err['msg'][1:]}, got {_short(err['input'])}"
    return InputError(message, file=REQUEST, field=_place(loc) or None)

