"""Verdict words: a Coach's criterion ``result`` taken as written, as a listed synonym, or refused.

A result the schema does not know must never be guessed silently: ``"pass"`` recorded as
``rejected`` (what reading a legacy file does) would tell the Player to redo finished work. An
agent's fresh report therefore goes through :func:`read_verdict_words` before it is recorded,
by the task loop and by ``record`` alike: the schema's words pass, a word of :data:`SYNONYMS`
is read as its verdict and the reading is kept in the report (``verdict_words``) and shown on
the terminal, anything else is refused with one line naming the JSON path and the words known.
Files GuardKit wrote earlier are not agents' fresh reports; they keep the legacy reading
(``store/legacy.py``). Pure functions only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guardkit_state.errors import InputError

#: The schema's own words.
VERDICTS = ("verified", "rejected")
#: The synonyms read as a verdict (docs/agents.md lists them). Small on purpose: a word that could
#: mean either ("pending", "partial", "unknown") is refused, not guessed.
SYNONYMS = {
    "pass": "verified", "passed": "verified", "met": "verified", "satisfied": "verified",
    "fail": "rejected", "failed": "rejected", "not_met": "rejected", "unmet": "rejected",
    "unverified": "rejected", "not_verified": "rejected",
}
#: The report key that keeps each synonym read (``{criterion_id, written, read_as}``).
VERDICT_WORDS_KEY = "verdict_words"


def read_verdict_words(data: dict[str, Any], *, path: Path | None = None, task_id: str | None = None,
                       turn: int | None = None) -> dict[str, Any]:
    """``data`` (a Coach report as an agent wrote it) with every criterion result a schema word.

    Returns ``data`` itself when nothing is mapped, else a copy whose ``verdict_words`` lists each
    mapping. A result that is neither a verdict nor a listed synonym raises :class:`InputError`.
    """
    checks = data.get("criteria_verification")
    if not isinstance(checks, list):
        return data  # absent or malformed: the schema reports it
    mapped: list[dict[str, Any]] = []
    out_checks: list[Any] = []
    for i, check in enumerate(checks):
        if not isinstance(check, dict) or "result" not in check:
            out_checks.append(check)
            continue
        written = check["result"]
        word = written.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(written, str) else None
        if word in VERDICTS:
            out_checks.append(check if written == word else {**check, "result": word})
            continue
        if word in SYNONYMS:
            read_as = SYNONYMS[word]
            cid = check.get("criterion_id", check.get("ac_id"))
            mapped.append({"criterion_id": str(cid), "written": written, "read_as": read_as})
            out_checks.append({**check, "result": read_as})
            continue
        raise InputError(
            f"criterion result {json.dumps(written)} is not a verdict: write \"verified\" or \"rejected\" "
            f"(synonyms read: {', '.join(sorted(SYNONYMS))}); nothing was written",
            path=path, pointer=f"$.criteria_verification[{i}].result", task_id=task_id, turn=turn,
            expected="verified or rejected")
    if not mapped and all(a is b for a, b in zip(out_checks, checks, strict=True)):
        return data
    out = {**data, "criteria_verification": out_checks}
    if mapped:
        out[VERDICT_WORDS_KEY] = [*(data.get(VERDICT_WORDS_KEY) or []), *mapped]
    return out


def describe_verdict_words(mappings: list[dict[str, Any]]) -> list[str]:
    """One terminal line per synonym read: ``AC-2: "pass" read as "verified"``."""
    return [f"{m.get('criterion_id')}: {json.dumps(m.get('written'))} read as {json.dumps(m.get('read_as'))}"
            for m in mappings]


__all__ = ["SYNONYMS", "VERDICTS", "VERDICT_WORDS_KEY", "describe_verdict_words", "read_verdict_words"]
