"""Diagnostics: the one error type of the compiler, and how messages are shown.

Every message reads like a compiler's::

    bridge.ss:3:8: error: unknown function 'avgg'; did you mean 'avg'?
        MD1Z = avgg("8MD1-AZ", 10min, 5min);
               ^^^^
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Sequence

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True, order=True)
class Span:
    """A region of a source file; lines and columns start at 1."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int  # exclusive

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    severity: str  # "error" or "warning"
    message: str
    span: Span | None = None

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def render(self, source: str | None = None) -> str:
        """The message, then (when the source is known) the line and a caret under the span."""
        where = f"{self.span}: " if self.span else ""
        text = f"{where}{self.severity}: {self.message}"
        if self.span is None or source is None:
            return text
        lines = source.splitlines()
        if not 1 <= self.span.line <= len(lines):
            return text
        line = lines[self.span.line - 1].expandtabs(4)
        start = self.span.column - 1
        if self.span.end_line == self.span.line and self.span.end_column > self.span.column:
            width = self.span.end_column - self.span.column
        else:
            width = 1
        width = max(1, min(width, max(1, len(line) - start)))
        return f"{text}\n    {line}\n    {' ' * start}{'^' * width}"


class SensorScriptError(Exception):
    """Raised when scripts (or the inputs of a stage) are wrong; carries every diagnostic found."""

    def __init__(self, diagnostics: Sequence[Diagnostic], sources: dict[str, str] | None = None):
        self.diagnostics = tuple(diagnostics)
        self.sources = dict(sources or {})
        super().__init__(self.render())

    def render(self) -> str:
        return render_all(self.diagnostics, self.sources)


def render_all(diagnostics: Iterable[Diagnostic], sources: dict[str, str] | None = None) -> str:
    sources = sources or {}
    return "\n".join(d.render(sources.get(d.span.file) if d.span else None) for d in diagnostics)


def error(message: str, span: Span | None = None) -> Diagnostic:
    return Diagnostic(ERROR, message, span)


def warning(message: str, span: Span | None = None) -> Diagnostic:
    return Diagnostic(WARNING, message, span)


def did_you_mean(name: str, candidates: Iterable[str], cutoff: float = 0.6) -> str:
    """"; did you mean 'x'?" for the closest candidate, or "" when none is close."""
    pool = sorted(set(candidates))
    match = difflib.get_close_matches(name, pool, n=1, cutoff=cutoff)
    if not match:
        # Case slips ("md1z" for "MD1Z") are the commonest typo in sensor names.
        folded = {c.lower(): c for c in pool}
        if name.lower() in folded:
            match = [folded[name.lower()]]
    return f"; did you mean '{match[0]}'?" if match else ""


def file_problem(exc: OSError | UnicodeDecodeError) -> str:
    """Why a file or folder could not be read or written, in a user's words rather than Python's."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at position {exc.start})"
    reasons = {FileNotFoundError: "no such file or folder", IsADirectoryError: "it is a folder, not a file",
               NotADirectoryError: "a part of the path is a file, not a folder",
               FileExistsError: "a file is in the way", PermissionError: "permission denied"}
    return next((reason for kind, reason in reasons.items() if isinstance(exc, kind)), exc.strerror or str(exc))
