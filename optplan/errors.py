"""One root exception; the CLI maps InputError to exit status 2 and everything else to 1."""

from __future__ import annotations


class OptplanError(Exception):
    """Root of every error optplan raises on purpose."""


class InputError(OptplanError):
    """Bad input: names the file, the object and the field, in one line."""

    def __init__(self, message: str, *, file: str | None = None, obj: str | None = None,
                 field: str | None = None) -> None:
        self.file = file
        self.obj = obj
        self.field = field
        self.reason = message
        super().__init__(self._line())

    def _line(self) -> str:
        parts = [p for p in (self.file, self.obj, self.field) if p]
        where = ": ".join(parts)
        return f"{where}: {self.reason}" if where else self.reason

    def located(self, *, file: str | None = None, obj: str | None = None) -> InputError:
        """The same error with missing location parts filled in."""
        return InputError(self.reason, file=self.file or file, obj=self.obj or obj, field=self.field)


class PlanInvalidError(OptplanError):
    """A planner produced a plan that breaks a rule: always a bug, never the user's fault."""

    def __init__(self, violations: list[str]) -> None:
        self.violations = violations
        head = "; ".join(violations[:5])
        more = f" (+{len(violations) - 5} more)" if len(violations) > 5 else ""
        super().__init__(f"plan failed validation: {head}{more}")


class KubeError(OptplanError):
    """The Kubernetes API refused or failed a request: one line naming the verb and the resource."""


class ConflictError(KubeError):
    """An object changed on the server since it was read (HTTP 409): re-read and re-plan."""


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """``text`` as one printable line: line breaks, other control characters (C0, DEL, C1, the Unicode
    line and paragraph separators), bidi controls and lone surrogates escaped as ``\\n`` / ``\\xNN`` /
    ``\\uNNNN``, so that a hostile name can neither split an error over lines nor reorder a terminal."""
    if text.isprintable() and not any(c in _BIDI for c in text):
        return text
    out = []
    for c in text:
        o = ord(c)
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif c in _BIDI or not c.isprintable() and c != " " or 0xD800 <= o <= 0xDFFF:
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
        else:
            out.append(c)
    return "".join(out)
