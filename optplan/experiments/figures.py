"""PNG bytes of a matplotlib Figure drawn on the Agg canvas (no pyplot, no global state) and without the
Software metadata, so the same figure gives the same bytes: the bench's sections share this one writer."""

from __future__ import annotations

import io
from typing import Any


def png(fig: Any) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
