"""Validation errors that name the field and the reason (Kueue-webhook style)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FieldError:
    """One problem in an input: ``path`` is the field, e.g. ``jobs[3].tasks[0].demand.gpu``."""

    path: str
    reason: str
    #: ``path`` as a reader finds the field in a long file: each named entry's name after
    #: its index (``jobs[3] (big).tasks[0].demand.gpu``); empty when nothing on the path
    #: has a name. Only printed: the API's ``field``, ``ScenarioError.paths`` and equality
    #: use ``path``, which tools parse.
    named_path: str = field(default="", compare=False)

    def __str__(self) -> str:
        shown = self.named_path or self.path
        return f"{shown}: {self.reason}" if shown else self.reason


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

    def summary(self) -> str:
        """``N problems in SOURCE``: the line a command ends the list of problems with."""
        return f"{len(self.errors)} problem{'s' if len(self.errors) != 1 else ''} in {self.source}"

    @property
    def paths(self) -> list[str]:
        return [err.path for err in self.errors]
