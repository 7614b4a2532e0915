"""What GuardKit's newer plan keys say, for the views (pure): the feature's status ``awaiting_merge``,
the run's declarations (``smoke_gates``, ``behavioural_oracle``, ``evidence_repos``,
``bootstrap_extras``, ``preflight_strict``), and the routing law's stamps (``routing_law``,
``scenarios``; a task's own ``verifier:`` with ``test_ref:``).

GuardKit's runner acts on these keys; guardkit-state's runner does not (it runs its own gates), so
they are shown where they change what a person reads (``show FEAT-X``, ``show TASK-X``), checked by
``validate`` as GuardKit checks them at load, and never changed by a write: every write here is a
surgical splice of the values it sets (:mod:`guardkit_state.plans.plan_splice`).

A stamp names the *home* that proves a scenario or task, one of GuardKit's closed list
(:data:`VERIFIER_HOMES`): a bare word (``hurl``), or a mapping (``{verifier: toolchain, test_ref:
tests/test_x.py::test_y, test_paths: [...]}``). ``toolchain`` means "this named test proves it",
so GuardKit refuses a ``toolchain`` stamp without a ``test_ref``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: GuardKit's closed list of verifier homes (its routing law, ``verifier_stamp.VERIFIER_HOMES``).
VERIFIER_HOMES = ("toolchain", "hurl", "exam", "probe:bus", "probe:process", "flutter", "playwright", "operator")
#: The feature status GuardKit's ``/feature-complete`` leaves: every task done, the branch not merged yet.
AWAITING_MERGE = "awaiting_merge"
#: The plan keys GuardKit's runner reads that change no count (shown as written, never written).
RUN_KEYS = ("smoke_gates", "behavioural_oracle", "evidence_repos", "bootstrap_extras", "preflight_strict",
            "routing_law", "scenarios")


@dataclass(frozen=True)
class Stamp:
    """One ``verifier:`` stamp: the home, and the test that proves it for ``toolchain``."""

    verifier: str
    test_ref: str | None = None


def read_stamp(value: Any, test_ref: Any = None) -> Stamp | None:
    """A stamp as GuardKit writes one: a bare home, or a mapping with ``verifier`` (``test_ref``
    beside it, or given for a task's frontmatter keys); None when there is none."""
    if isinstance(value, Mapping):
        value, test_ref = value.get("verifier"), value.get("test_ref")
    if not isinstance(value, str) or not value.strip():
        return None
    return Stamp(value.strip(), test_ref.strip() if isinstance(test_ref, str) and test_ref.strip() else None)


def stamp_problem(stamp: Stamp) -> str | None:
    """Why GuardKit would refuse ``stamp`` at load (an unknown home, a toolchain stamp naming no
    test), or None."""
    if stamp.verifier not in VERIFIER_HOMES:
        return f"verifier {stamp.verifier!r} is not one of GuardKit's homes ({', '.join(VERIFIER_HOMES)})"
    if stamp.verifier == "toolchain" and not stamp.test_ref:
        return ("verifier toolchain names no test_ref (GuardKit refuses a toolchain stamp without the test "
                "that proves it)")
    return None


def scenario_stamps(data: Mapping[str, Any]) -> dict[str, Stamp | None]:
    """The plan's ``scenarios`` map: scenario title -> its stamp (None for an entry that holds none)."""
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, Mapping):
        return {}
    return {str(title): read_stamp(value) for title, value in scenarios.items()}


def stamp_problems(data: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every scenario stamp GuardKit would refuse, with its JSON path (pure)."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    for title, stamp in scenario_stamps(data).items():
        problem = "no verifier" if stamp is None else stamp_problem(stamp)
        if problem is not None:
            found.append((("scenarios", title), problem))
    law = data.get("routing_law")
    if law is not None and law not in ("enforced", "off") and law is not False:
        found.append((("routing_law",), f"routing_law {law!r} is not 'enforced' or 'off' (GuardKit reads it as "
                                        "enforced, and refuses it at load)"))
    return found


def run_settings(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, what it says)`` for each of GuardKit's run keys the plan holds, in :data:`RUN_KEYS`
    order (``smoke_gates`` apart: the smoke gate has a line of its own)."""
    said: list[tuple[str, str]] = []
    oracle = data.get("behavioural_oracle")
    if isinstance(oracle, Mapping) and oracle.get("command"):
        extra = [f"exit {oracle['expected_exit']}" if "expected_exit" in oracle else "",
                 f"timeout {oracle['timeout']} s" if oracle.get("timeout") else ""]
        said.append(("behavioural_oracle", f"`{oracle['command']}`" + "".join(f", {e}" for e in extra if e)))
    repos = data.get("evidence_repos")
    if isinstance(repos, list) and repos:
        said.append(("evidence_repos", ", ".join(_repo(entry) for entry in repos)))
    extras = data.get("bootstrap_extras")
    if isinstance(extras, list) and extras:
        said.append(("bootstrap_extras", ", ".join(str(e) for e in extras)))
    if data.get("preflight_strict") is True:
        said.append(("preflight_strict", "yes"))
    law = data.get("routing_law")
    if law is not None:
        said.append(("routing_law", "off" if law is False else str(law)))
    stamps = scenario_stamps(data)
    if stamps:
        homes = Counter(stamp.verifier if stamp is not None else "unstamped" for stamp in stamps.values())
        said.append(("scenarios", f"{len(stamps)} stamped: " + ", ".join(f"{home} {n}" for home, n in
                                                                          sorted(homes.items()))))
    return said


def _repo(entry: Any) -> str:
    if isinstance(entry, Mapping):
        path = entry.get("path") or entry.get("repo")
        command = entry.get("test_command") or entry.get("tests")
        return f"{path}" + (f" (tests: {command})" if command else "")
    return str(entry)


__all__ = ["AWAITING_MERGE", "RUN_KEYS", "VERIFIER_HOMES", "Stamp", "read_stamp", "run_settings", "scenario_stamps",
           "stamp_problem", "stamp_problems"]
