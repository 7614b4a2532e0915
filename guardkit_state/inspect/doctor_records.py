"""The records of ``guardkit-state doctor``: one :class:`Check` per finding, and the report of a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardkit_state.model import Fields

OK, NOTE, WARNING, PROBLEM = "ok", "note", "warning", "problem"


@dataclass(frozen=True)
class Check(Fields):
    """One finding: ``area`` (``git``, ``repository``, ``agents`` ...), what it is about, its status,
    what was found, and for a warning or problem the one-line fix."""

    area: str
    subject: str
    status: str
    detail: str
    fix: str | None = None


@dataclass
class DoctorReport:
    """Every check of one ``doctor`` run; ``ready`` when none is a problem."""

    repo: Path
    checks: list[Check] = field(default_factory=list)

    @property
    def problems(self) -> list[Check]:
        return [c for c in self.checks if c.status == PROBLEM]

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.status == WARNING]

    @property
    def ready(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"repo": str(self.repo), "ready": self.ready, "problems": len(self.problems),
                "warnings": len(self.warnings), "checks": [c.to_dict() for c in self.checks]}


__all__ = ["NOTE", "OK", "PROBLEM", "WARNING", "Check", "DoctorReport"]
