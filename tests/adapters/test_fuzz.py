"""Property-based tests (hypothesis) over the loaders, the planners and the commands.

- Random valid clusters (the seeded generator, its knobs drawn by hypothesis) give plans that every
  planner finishes and the independent validator accepts, with the bounds consistent.
- Random mutations of real inputs (a field deleted, a value replaced by a hostile one, an object
  duplicated, the text itself damaged) give either a result (exit 0) or ONE clean line (exit 2) —
  never a traceback, an "internal error", a hang or a half-written file.

Example counts are bounded so the suite stays fast; ``OPTPLAN_FUZZ_EXAMPLES=2000 pytest tests/adapters/test_fuzz.py``
is the long run (``derandomize`` stays on, so a failure found there reproduces from the same command).
"""

from __future__ import annotations

import copy
import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optplan import api
from optplan.adapters.generate import GenConfig, generate
from optplan.cli import main
from optplan.errors import InputError

EXAMPLES = int(os.environ.get("OPTPLAN_FUZZ_EXAMPLES", "0"))
"""0: the CI's bounded counts; otherwise the examples of every property (the long run)."""

PER_EXAMPLE_SECONDS = 90
"""An example that runs longer than this is a hang (limits of 2 s per computation in these tests)."""


def fuzz_settings(ci_examples: int) -> Any:
    return settings(max_examples=EXAMPLES or ci_examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@contextmanager
def hang_guard(what: str) -> Iterator[None]:
    """Fail (rather than hang the suite) when one example runs past PER_EXAMPLE_SECONDS."""
    def alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{what} ran longer than {PER_EXAMPLE_SECONDS} s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, PER_EXAMPLE_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# ---- random valid clusters ---------------------------------------------------------------------------

@st.composite
def gen_configs(draw: st.DrawFn) -> GenConfig:
    nodes = draw(st.integers(1, 9))
    rack = draw(st.sampled_from([0, 2, 3]))
    return GenConfig(
        nodes=nodes,
        cards_per_node=draw(st.sampled_from([(8,), (4,), (4, 8), (2, 8)])),
        pools=draw(st.integers(1, min(2, nodes))),
        tainted_pools=draw(st.booleans()),
        occupancy=draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.0])),
        min_member_ratio=draw(st.sampled_from([0.5, 1.0])),
        cpu_pressure=draw(st.sampled_from([0.0, 0.5])),
        daemonset_pods=draw(st.booleans()),
        protected_share=draw(st.sampled_from([0.0, 0.3, 1.0])),
        pdb_share=draw(st.sampled_from([0.0, 0.5])),
        pending_share=draw(st.sampled_from([0.0, 0.3])),
        non_volcano_share=draw(st.sampled_from([0.0, 0.3])),
        serving_share=draw(st.sampled_from([0.0, 0.5])),
        seed=draw(st.integers(0, 2**16)),
        min_improvement=draw(st.sampled_from([None, 0, 50])),
        max_pod_groups=draw(st.sampled_from([None, 1, 3])),
        max_cards=draw(st.sampled_from([None, 2, 16])),
        rack_size=rack,
        topology_share=draw(st.sampled_from([0.0, 0.5])) if rack else 0.0,
    )


REPACK_SOLVERS = ("greedy", "greedy-fast", "cpsat", "milp", "auto")


@fuzz_settings(ci_examples=25)
@given(cfg=gen_configs())
def test_random_valid_clusters_give_valid_plans_from_every_planner(cfg: GenConfig) -> None:
    cluster = api.snapshot_from_objects(generate(cfg))
    freed: dict[str, int] = {}
    with hang_guard(f"repack of {cfg}"):
        for solver in REPACK_SOLVERS:
            # plan_repack validates every plan independently and raises PlanInvalidError on a broken one
            result = api.plan_repack(cluster, solver=solver, time_limit=2, deterministic=True)
            summary = result.status["plan"]["summary"]
            solver_rec = result.status["plan"]["solver"]
            n = summary["freedNodeCount"]
            assert n == len(result.freed_nodes)
            assert summary["occupiedNodesAfter"] == summary["occupiedNodesBefore"] - n
            assert summary["occupiedNodesAfter"] >= summary["theoreticalMinNodes"]
            bound = solver_rec.get("freedNodesBound")
            if bound is not None:
                assert n <= bound, solver
            reason = result.status["conditions"][0]["reason"]
            assert reason in ("NoFragmentation", "RepackRecommended", "InsufficientImprovement")
            if reason == "RepackRecommended":
                assert n >= 1 and summary["fragAfterPercent"] <= summary["fragBeforePercent"]
            freed[solver] = n
    # auto keeps the better of the greedy and CP-SAT (a plan of the greedy is always available to it)
    assert freed["auto"] >= freed["greedy-fast"]


@fuzz_settings(ci_examples=15)
@given(nodes=st.integers(1, 8), rack=st.sampled_from([0, 2]), queues=st.integers(0, 3),
       pending=st.integers(1, 4), occupancy=st.sampled_from([0.0, 0.5, 0.9]), seed=st.integers(0, 2**16),
       solver=st.sampled_from(["greedy", "cpsat", "auto"]))
def test_random_pending_jobs_get_valid_placements(nodes: int, rack: int, queues: int, pending: int,
                                                  occupancy: float, seed: int, solver: str) -> None:
    cfg = GenConfig(nodes=nodes, pools=min(2, nodes), rack_size=rack, topology_share=0.5 if rack else 0.0,
                    queues=queues, priority_classes=True, pending_jobs=pending, occupancy=occupancy, seed=seed)
    cluster = api.snapshot_from_objects(generate(cfg))
    with hang_guard(f"place of {cfg}"):
        # place_jobs validates the plan (capacity, predicates, gang, quota, topology, victims)
        doc = api.place_jobs(cluster, solver=solver, time_limit=2, now="2025-06-01T00:00:00Z").document
    assert len(doc["jobs"]) == pending
    for job in doc["jobs"]:
        assert job["reason"]
        assert bool(job["bindings"]) == job["admitted"] or not job["admitted"]


# ---- random mutations of real inputs ----------------------------------------------------------------

BASES = {
    "seed": ["instances/seed-dryrun.yaml"],
    "place": ["instances/place-demo.yaml"],
    "queues": ["instances/queues-demo.yaml"],
    "spot": ["instances/spot-demo.yaml"],
    "execute": ["instances/execute-demo.yaml"],
    "restart": ["instances/restart-policies.yaml"],
}

COMMANDS = {
    "seed": [["repack", "--time-limit", "2", "--deterministic"], ["frag", "--resource", "huawei.com/ascend-1980"],
             ["repack", "--solver", "milp", "--time-limit", "2"],
             ["compare", "--solvers", "greedy,cpsat,karpenter,cluster-autoscaler,descheduler", "--time-limit", "2"]],
    "place": [["place", "--time-limit", "2", "--now", "2025-06-01T00:00:00Z"], ["queues"]],
    "queues": [["queues"], ["spot-capacity"], ["place", "--time-limit", "2", "--now", "2025-06-01T00:00:00Z"]],
    "spot": [["reclaim-spot", "--gpus", "12", "--now", "2025-06-01T12:00:00Z", "--time-limit", "2"],
             ["spot-capacity"]],
    "execute": [["nominate", "--victim", "ascend-batch-training-worker-0"], ["verify", "--time-limit", "2"]],
    "restart": [["repack", "--time-limit", "2", "--deterministic"]],
}

_BASE_OBJECTS: dict[str, list[Any]] = {}


def base_documents(name: str) -> list[Any]:
    if name not in _BASE_OBJECTS:
        docs: list[Any] = []
        for path in BASES[name]:
            docs.extend(d for d in yaml.safe_load_all(Path(path).read_text()) if d is not None)
        _BASE_OBJECTS[name] = docs
    return copy.deepcopy(_BASE_OBJECTS[name])


def _nested(kids: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=4), kids, max_size=3))


HOSTILE = st.one_of(
    st.sampled_from([None, True, False, 0, -1, 1, 2**31, -(2**31) - 1, 2**63, 10**30, 1.5, -0.0, 1e308,
                     float("inf"), float("nan"), "", "x", "8Gi", "1.5", "8m", "-8", "1e3", "0x10", "１２",
                     "Infinity", "9" * 5000, "true", "a\nb", "evil\u202ename", "\x00", "\ud800", "../../etc/passwd",
                     "n" * 300, {}, [], {"a": 1}, [None], [[[[[[[[[[[1]]]]]]]]]]]]),
    st.integers(-(2**70), 2**70),
    st.text(max_size=12),
    st.recursive(st.integers(-3, 3) | st.text(max_size=3), _nested, max_leaves=8),
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: str) -> list[Any]:
    docs = base_documents(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(docs) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _at(docs, path[:-1]), path[-1]
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "duplicate", "rename"]))
        if op == "replace":
            parent[key] = draw(HOSTILE)
        elif op == "delete":
            del parent[key]
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["name", "kind", "apiVersion", "metadata", "spec", "status", "items",
                                         "nodeName", "x"]))] = parent.pop(key)
    return docs


def _write(tmp: Path, docs: list[Any], fmt: str) -> Path:
    path = tmp / f"snap.{fmt}"
    if fmt == "json":  # JSON keeps what YAML cannot carry (lone surrogates, as \ud800 escapes)
        text = "\n".join(json.dumps(d, ensure_ascii=True) for d in docs) if len(docs) == 1 else json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [i for d in docs for i in (
                d.get("items", [d]) if isinstance(d, dict) and isinstance(d.get("items"), list) else [d])]},
            ensure_ascii=True)
    else:
        try:
            text = yaml.safe_dump_all(docs, allow_unicode=False)
        except (yaml.YAMLError, UnicodeError):
            return _write(tmp, docs, "json")
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return path


def assert_clean(code: int, out: str, err: str, argv: list[str]) -> None:
    where = f"optplan {' '.join(argv)}"
    assert "Traceback" not in err, f"{where}: traceback\n{err}"
    assert "internal error" not in err, f"{where}: {err}"
    assert code in (0, 2), f"{where}: exit {code}: {err}"
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert lines and lines[-1].startswith(("optplan: error:", "optplan ")), f"{where}: {err}"
        assert not out, f"{where}: output on error"
        errors = [ln for ln in lines if ln.startswith("optplan: error:")]
        assert len(errors) <= 1, f"{where}: {err}"


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("base", sorted(BASES))
def test_mutated_inputs_give_a_result_or_one_clean_line(base: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    @fuzz_settings(ci_examples=20)
    @given(docs=mutated(base), fmt=st.sampled_from(["yaml", "json"]))
    def check(docs: list[Any], fmt: str) -> None:
        path = _write(tmp_path, docs, fmt)
        for command in COMMANDS[base]:
            argv = [command[0], str(path), *command[1:]]
            if command[0] == "place" and base == "place":
                argv += ["--job", "instances/place-demo-job.yaml"]
            with hang_guard("optplan " + " ".join(argv)):
                assert_clean(*run_cli(capsys, argv), argv)
    check()


@fuzz_settings(ci_examples=30)
@given(cut=st.integers(0, 10_000), noise=st.binary(max_size=16), at=st.integers(0, 10_000))
def test_damaged_text_gives_a_result_or_one_clean_line(tmp_path_factory: pytest.TempPathFactory,
                                                       capsys: pytest.CaptureFixture[str], cut: int,
                                                       noise: bytes, at: int) -> None:
    raw = Path("instances/seed-dryrun.yaml").read_bytes()
    at = at % (len(raw) + 1)
    data = (raw[:at] + noise + raw[at:])[: max(cut, len(raw) // 2)]
    path = tmp_path_factory.mktemp("dmg") / "snap.yaml"
    path.write_bytes(data)
    argv = ["repack", str(path), "--time-limit", "2", "--deterministic"]
    with hang_guard("damaged text"):
        assert_clean(*run_cli(capsys, argv), argv)


def test_api_errors_are_input_errors_for_mutated_objects() -> None:
    """The library too: a hostile object is an InputError naming it, never another exception."""
    docs = base_documents("seed")
    items = docs[0]["items"]
    items[0]["status"]["allocatable"]["huawei.com/ascend-1980"] = "1.5"
    with pytest.raises(InputError, match=r"Node/ascend-node-01.*huawei\.com/ascend-1980"):
        api.snapshot_from_objects(items)
