"""One root exception; the CLI maps InputError to exit status 2 and everything else to 1."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^\x20-\x7e]")


def printable(text: object) -> str:
    """``text`` with every character that could break a one-line message or reorder what a terminal
    shows written as an escape: control characters (line breaks and tabs included), the Unicode line
    and paragraph separators, bidi controls and other format characters (U+200E/F, U+202A-U+202E,
    U+2066-U+2069, U+061C, U+FEFF ...), lone surrogates, unassigned and private-use code points, and
    every space but the plain one. The rule is Python's ``str.isprintable``, the one ``repr`` uses,
    so ``printable("a\\nb")`` is ``a\\nb`` written out as four characters. Printable text, Chinese
    and other non-ASCII letters included, is returned as is."""
    s = text if isinstance(text, str) else str(text)
    if s.isascii() and s.isprintable():
        return s
    return _UNSAFE.sub(_escape, s)


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch.isprintable():
        return ch
    if ch == "\n":
        return "\\n"
    if ch == "\r":
        return "\\r"
    if ch == "\t":
        return "\\t"
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


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
        """One line whatever the parts hold: each is passed through ``printable``."""
        parts = [printable(p) for p in (self.file, self.obj, self.field) if p]
        where = ": ".join(parts)
        reason = printable(self.reason)
        return f"{where}: {reason}" if where else reason

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

