"""Validation errors that name the field and the reason (Kueue-webhook style)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem in an input: ``path`` is the field, e.g. ``jobs[3].tasks[0].demand.gpu``."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class ScenarioError(ValueError):
    """An input was rejected; carries every problem found, each with its field path."""

    def __init__(self, errors: list[FieldError] | FieldError, source: str = "<scenario>"):
        if isinstance(errors, FieldError):
            errors = [errors]
        self.errors = list(errors)
        self.source = source
        super().__init__(self.format())

    def format(self) -> str:
        lines = [f"{self.source}: {err}" for err in self.errors]
        return "\n".join(lines)

    @property
    def paths(self) -> list[str]:
        return [err.path for err in self.errors]
