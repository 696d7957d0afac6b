"""Units that read right: every table, summary and plot names an amount in its resource's own unit, as
``kubectl describe node`` does — cards for devices (any extended resource), cores (or millicores) for cpu,
bytes in binary units for memory and storage. One function decides it (``quantity.unit_of``) and
``format_amount`` / ``with_unit`` write the amounts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from optplan.cli import main
from optplan.models.quantity import format_amount, unit_of, with_unit
from tests.builders import GPU, node, pod, podgroup, repack_run

GI = 2**30 * 1000


@pytest.mark.parametrize(("resource", "unit"), [
    (GPU, "cards"), ("huawei.com/ascend-1980", "cards"), ("huawei.com/ascend-310p", "cards"),
    ("example.com/fpga", "cards"), ("cpu", "cores"), ("memory", "bytes"), ("ephemeral-storage", "bytes"),
    ("storage", "bytes"), ("hugepages-2Mi", "bytes"), ("pods", "pods"), ("kubernetes.io/other", "units"),
])
def test_unit_of(resource: str, unit: str) -> None:
    assert unit_of(resource) == unit


@pytest.mark.parametrize(("resource", "milli", "amount", "phrase"), [
    (GPU, 72_000, 72, "72 cards"),
    ("huawei.com/ascend-1980", 8_000, 8, "8 cards"),
    ("cpu", 72_000, 72, "72 cores"),
    ("cpu", 1_500, "1500m", "1500 millicores"),
    ("memory", 768 * GI, "768Gi", "768Gi"),
    ("memory", 1536 * 2**20 * 1000, "1536Mi", "1536Mi"),
    ("memory", 3 * 2**40 * 1000, "3Ti", "3Ti"),
    ("memory", 1_000_000, 1000, "1000 bytes"),
    ("memory", 0, 0, "0 bytes"),
    ("ephemeral-storage", 100 * GI, "100Gi", "100Gi"),
    ("pods", 3_000, 3, "3 pods"),
])
def test_amounts(resource: str, milli: int, amount: int | str, phrase: str) -> None:
    assert format_amount(resource, milli) == amount
    assert with_unit(resource, milli) == phrase


def batch_case(resource: str = "cpu") -> list[dict[str, Any]]:
    """Seed 004's batch case: tasks of 4 cores and 8Gi spread two or three to a node over 12 nodes (32
    cores, 64Gi each) by a least-allocated scheduler; 120 cores fit 4 nodes."""
    objs: list[dict[str, Any]] = [node(f"n{i:02d}", 0, cpu="32", memory="64Gi") for i in range(12)]
    k = 0
    for i in range(12):
        for _ in range(3 if i < 6 else 2):
            objs += [podgroup(f"job-{k}"), pod(f"job-{k}-0", f"n{i:02d}", 0, group=f"job-{k}", cpu="4",
                                                memory="8Gi")]
            k += 1
    return [*objs, repack_run(resource=resource)]


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], objs: list[dict[str, Any]], *args: str) -> str:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(objs), encoding="utf-8")
    assert main([*args[:1], str(path), *args[1:]]) == 0
    return capsys.readouterr().out


def test_a_cpu_repack_counts_cores_not_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path, capsys, batch_case(), "repack", "--solver", "greedy", "-o", "table")
    assert "occupied 12 -> 4" in out, out
    assert "cards" not in out and "CARDS" not in out, out
    disruption = next(line for line in out.splitlines() if line.startswith("Disruption:"))
    assert disruption.endswith(" below minAvailable, 72 cores affected, 72 cores moved, 18 pods moved"), disruption
    header = next(line for line in out.splitlines() if line.startswith("NAMESPACE"))
    assert header.split()[-1] == "CORES"
    assert {line.split()[-1] for line in out.splitlines()[out.splitlines().index(header) + 1:] if
            line.startswith("default")} == {"4"}
    doc = json.loads(_run(tmp_path, capsys, batch_case(), "repack", "--solver", "greedy", "-o", "json"))
    assert doc["status"]["plan"]["disruption"]["movedCards"] == 72  # the CRD's field keeps its name


def test_a_memory_repack_counts_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path, capsys, batch_case("memory"), "repack", "--solver", "greedy", "-o", "table")
    disruption = next(line for line in out.splitlines() if line.startswith("Disruption:"))
    assert "144Gi affected, 144Gi moved" in disruption, disruption
    assert "cards" not in out and "8Gi" in out


def test_compare_labels_name_the_unit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path, capsys, batch_case(), "compare", "--solvers", "greedy", "--time-limit", "5")
    rows = {line.split("  ")[0].strip(): line.split()[-1] for line in out.splitlines()[2:] if line.strip()}
    assert rows["moved cores"] == "72" and rows["affected cores"] == "72", out
    assert "cards" not in out


def test_cards_stay_cards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [node("n1"), node("n2"), podgroup("pg"), pod("p1", "n1", 2), pod("p2", "n2", 3), repack_run()]
    out = _run(tmp_path, capsys, objs, "repack", "--solver", "greedy", "-o", "table")
    assert "2 cards affected, 2 cards moved, 1 pods moved" in out and "CARDS" in out


@pytest.mark.parametrize(("resource", "used", "total", "title"), [
    (GPU, 12_000, 16_000, "12/16 cards used"),
    ("cpu", 40_000, 96_000, "40/96 cores used"),
    ("cpu", 500, 96_000, "500m/96 cores used"),
    ("memory", 64 * GI, 768 * GI, "64Gi/768Gi used"),
])
def test_the_plot_title_names_the_unit(resource: str, used: int, total: int, title: str) -> None:
    from optplan.adapters.render import _used

    assert _used(resource, used, total) == title


def test_render_a_cpu_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = tmp_path / "snap.yaml"
    snap.write_text(yaml.safe_dump_all(batch_case()), encoding="utf-8")
    run = tmp_path / "run.yaml"
    assert main(["repack", str(snap), "--solver", "greedy"]) == 0
    run.write_text(capsys.readouterr().out, encoding="utf-8")
    assert main(["render", str(snap), "--run", str(run), "-o", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 0
