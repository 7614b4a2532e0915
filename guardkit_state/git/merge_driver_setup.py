"""Registering the loop-state merge driver in a repository, and telling when it is not.

A merge driver works only where two things hold: ``.gitattributes`` names it for the path
(``merge=guardkit-state``) and the repository's config says how to run it
(``merge.guardkit-state.driver``). The attribute travels with the repository; the config does not
(each clone, each machine, must set it). Where either is missing git silently merges the file as
text, so the places where it matters (a merge that conflicts in a task file or a plan) say so.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from guardkit_state.store.fsio import atomic_write_bytes

if TYPE_CHECKING:
    from guardkit_state.git.repo import GitRepo

DRIVER_NAME = "guardkit-state"
#: The paths the driver merges: task files and feature plans (GuardKit's layout).
ATTRIBUTE_PATTERNS = ("tasks/**/*.md", ".guardkit/features/*.yaml", ".guardkit/features/*.yml")
#: Sample paths asked of ``git check-attr`` to tell whether the attributes are in force.
_SAMPLE_TASK = "tasks/backlog/TASK-X-001.md"
_SAMPLE_PLAN = ".guardkit/features/FEAT-X.yaml"
_HEADER = "# guardkit-state: merge loop state (task files, feature plans) key by key"
INSTALL_HINT = "run 'guardkit-state merge-driver --install' in this repository"


@dataclass(frozen=True)
class DriverRegistration:
    """Whether the driver is in force: the command git runs, and the attribute on each kind of path."""

    driver: str | None
    task_files: bool
    plans: bool

    @property
    def registered(self) -> bool:
        return self.driver is not None and self.task_files and self.plans

    def missing(self) -> list[str]:
        """What is missing, in words ("git config merge.guardkit-state.driver", ...)."""
        gaps = [] if self.driver else [f"git config merge.{DRIVER_NAME}.driver"]
        if not self.task_files:
            gaps.append(f".gitattributes 'merge={DRIVER_NAME}' for task files")
        if not self.plans:
            gaps.append(f".gitattributes 'merge={DRIVER_NAME}' for feature plans")
        return gaps

    def to_dict(self) -> dict[str, object]:
        return {"registered": self.registered, "driver": self.driver, "task_files": self.task_files,
                "plans": self.plans, "missing": self.missing()}


def driver_command() -> str:
    """The command line git runs: this very program (by absolute path, so no PATH is needed)."""
    script = Path(sys.argv[0])
    if script.name == DRIVER_NAME and script.exists():
        program = shlex.quote(str(script.resolve()))
    else:
        program = f"{shlex.quote(sys.executable)} -m guardkit_state"
    return f"{program} merge-driver %O %A %B %P"


def registration(repo: GitRepo) -> DriverRegistration:
    """Read the driver's config and the attributes git applies to a task file and a plan."""
    status, out, _ = repo.run("config", "--get", f"merge.{DRIVER_NAME}.driver", check=False)
    driver = out.decode("utf-8", "replace").strip() if status == 0 and out.strip() else None
    _, attrs, _ = repo.run("check-attr", "merge", "--", _SAMPLE_TASK, _SAMPLE_PLAN, check=False)
    values = {}
    for line in attrs.decode("utf-8", "replace").splitlines():
        path, _, rest = line.partition(": merge: ")
        values[path] = rest.strip()
    return DriverRegistration(driver, values.get(_SAMPLE_TASK) == DRIVER_NAME,
                              values.get(_SAMPLE_PLAN) == DRIVER_NAME)


def install(repo: GitRepo, command: str | None = None) -> list[str]:
    """Register the driver: the attribute lines appended to the top-level ``.gitattributes`` (when
    absent) and the config set. Returns what was changed, in words (empty: it already was)."""
    changed: list[str] = []
    attributes = repo.root / ".gitattributes"
    old = attributes.read_bytes() if attributes.exists() else b""
    text = old.decode("utf-8")
    present = {line.split("#", 1)[0].split()[0] for line in text.splitlines()
               if f"merge={DRIVER_NAME}" in line.split("#", 1)[0].split()}
    lines = [f"{pattern} merge={DRIVER_NAME}" for pattern in ATTRIBUTE_PATTERNS if pattern not in present]
    if lines:
        lead = "" if not text or text.endswith("\n") else "\n"
        header = f"{_HEADER}\n" if _HEADER not in text else ""
        atomic_write_bytes(attributes, old + (lead + header + "\n".join(lines) + "\n").encode())
        changed.append(f".gitattributes: {', '.join(lines)}")
    wanted = command or driver_command()
    current = registration(repo)
    if current.driver != wanted:
        repo.run("config", f"merge.{DRIVER_NAME}.name", "guardkit-state loop state (task files, plans)")
        repo.run("config", f"merge.{DRIVER_NAME}.driver", wanted)
        changed.append(f"git config merge.{DRIVER_NAME}.driver '{wanted}'")
    return changed


def unregistered_note(repo: GitRepo, paths: tuple[str, ...] | list[str]) -> str | None:
    """A note for a merge that conflicted in a task file or plan while the driver is not in force."""
    state_paths = [p for p in paths if (p.startswith("tasks/") and p.endswith(".md"))
                   or (p.startswith(".guardkit/features/") and p.endswith((".yaml", ".yml")))]
    if not state_paths:
        return None
    found = registration(repo)
    if found.registered:
        return None
    return (f"the guardkit-state merge driver is not registered ({'; '.join(found.missing())}), so git "
            f"merged {', '.join(state_paths)} as text: {INSTALL_HINT}")


__all__ = ["ATTRIBUTE_PATTERNS", "DRIVER_NAME", "INSTALL_HINT", "DriverRegistration", "driver_command",
           "install", "registration", "unregistered_note"]
