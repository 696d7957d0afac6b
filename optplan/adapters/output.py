"""Write objects the way kubectl prints them: YAML (default) or JSON, deterministic to the byte; and the one
PNG writer every figure goes through (``png``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from optplan.errors import InputError, printable
from optplan.models.repack import API_VERSION, KIND, RepackRun, RepackRunStatus

_Base: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # the C emitter is ~3x faster, same bytes


class _Dumper(_Base):
    """Block style, no aliases, long strings kept on one line."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_representer)


def to_yaml(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                     width=1 << 16)


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def dump(obj: Any, fmt: str) -> str:
    return to_json(obj) if fmt == "json" else to_yaml(obj)


def status_dict(status: RepackRunStatus, *, timings: bool = False) -> dict[str, Any]:
    """The status as the CRD spells it. Wall-clock fields only with ``timings``, so that the same
    input gives the same bytes."""
    out: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not timings:
        out["plan"]["solver"].pop("wallSeconds", None)
    return out


def repack_run_document(run: RepackRun, status: RepackRunStatus, *, timings: bool = False) -> dict[str, Any]:
    """The RepackRun object as read (apiVersion, kind, metadata, spec) with our status."""
    raw = run.raw
    meta = raw.get("metadata") or {"name": run.name}
    keep = {k: meta[k] for k in ("name", "labels", "annotations", "uid", "resourceVersion") if k in meta}
    return {
        "apiVersion": raw.get("apiVersion", API_VERSION),
        "kind": raw.get("kind", KIND),
        "metadata": keep,
        "spec": raw.get("spec", {}),
        "status": status_dict(status, timings=timings),
    }


def table(rows: list[list[str]]) -> str:
    """Rows as aligned columns (kubectl's style), every cell one printable line: a name holding a line
    break, a control or a bidi character cannot break the table or reorder what a terminal shows."""
    cells = [[printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n" for r in cells)


def write_atomic(path: str, data: str | bytes) -> None:
    """The whole file or nothing: a temporary file in the same folder, then a rename (permissions as
    the umask gives a new file). An unwritable path is an InputError naming the file."""
    target = Path(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else ".")
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise InputError(f"cannot write file ({e.strerror or e})", file=path) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def png(fig: Any, dpi: float | None = None) -> bytes:
    """PNG bytes of a matplotlib Figure drawn on the Agg canvas (no global backend switch) and without the
    Software metadata, so the same figure gives the same bytes: the renderer, the bench and the replay's
    plots all write through this."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi if dpi is not None else "figure", metadata={"Software": None})
    return buf.getvalue()
