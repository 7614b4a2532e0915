"""Stall detection (``docs/lifecycle.md``): the same feedback again and again with no progress.

A port of GuardKit's feedback-stall rule, with one decisive change: progress is the criteria
*ledger's* cumulative verified count, so a Player whose early work met the criteria is not declared
stalled because later reports omitted their promises. The window is rebuilt from the files by the
caller (turn states, else the frontmatter's turn entries), so it survives ``--resume``. Pure functions only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from guardkit_state.store.layout import WORKTREES_DIR

#: Same signature this many turns in a row with nothing verified is a stall.
ZERO_PROGRESS_WINDOW = 3
#: Same signature this many turns in a row with an unchanged non-zero count is a stall.
NO_CHANGE_WINDOW = 5

#: Feedback beyond this many characters is not normalised, only hashed as it is (lower-cased,
#: whitespace collapsed): real feedback is far shorter, and the work per turn stays bounded.
NORMALISE_LIMIT = 64 * 1024

_WORKTREE = f"{WORKTREES_DIR.as_posix()}/"
_TEST_ID = ".py::"
_TOKEN = re.compile(r"\S+")
# Order matters: paths before numbers, test ids before line numbers. Each number pattern starts
# only at the first digit of a run ((?<!\d)): a run that fails there fails at every later digit
# too, so the result is the same, without re-scanning a long run from each of its digits.
_NORMALISERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\btest_\w+"), "<test>"),
    (re.compile(r"\blines? \d+(?:-\d+)?"), "line <n>"),
    (re.compile(r"(?<=\.py):\d+(?::\d+)?"), ":<n>"),
    (re.compile(r"(?<!\d)\d+(?:\.\d+)?\s?%"), "<pct>"),
    (re.compile(r"(?<!\d)\d+(?:\.\d+)?\s?(?:ms|s|sec|secs|seconds|min|minutes)\b"), "<dur>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
)


def _paths_in(word: str) -> str:
    """One whitespace-free word with worktree paths and test ids blanked, in linear time.

    The same result as ``re.sub(r"\\S*\\.guardkit/worktrees/[^\\s/]+", "<worktree>")`` then
    ``re.sub(r"\\S+\\.py::\\S+", "<test>")`` on the word, whose backtracking is quadratic on a
    long word: the greedy ``\\S*`` reaches the *last* worktree marker followed by a name, and the
    test pattern, when it matches at all, takes the whole word.
    """
    marker = word.rfind(_WORKTREE)
    while marker != -1:
        after = marker + len(_WORKTREE)
        if after < len(word) and word[after] != "/":
            end = word.find("/", after)
            word = "<worktree>" + (word[end:] if end != -1 else "")
            break
        marker = word.rfind(_WORKTREE, 0, marker)
    test_id = word.find(_TEST_ID, 1)
    if test_id != -1 and test_id + len(_TEST_ID) < len(word):
        return "<test>"
    return word


def _normalise_bounded(text: str) -> str:
    out = _TOKEN.sub(lambda m: _paths_in(m.group()) if "/" in m.group() or "::" in m.group() else m.group(),
                     text.lower())
    for pattern, token in _NORMALISERS:
        out = pattern.sub(token, out)
    return " ".join(out.split())


def normalise_feedback(text: str | None) -> str:
    """Feedback with the parts that vary between otherwise identical reports blanked out.

    Linear in the length of ``text``; beyond :data:`NORMALISE_LIMIT` characters (cut at
    whitespace) the rest is only lower-cased and whitespace-collapsed.
    """
    if not text:
        return ""
    if len(text) <= NORMALISE_LIMIT:
        return _normalise_bounded(text)
    cut = max(text.rfind(" ", 0, NORMALISE_LIMIT), text.rfind("\n", 0, NORMALISE_LIMIT))
    cut = cut if cut > 0 else NORMALISE_LIMIT
    head, rest = _normalise_bounded(text[:cut]), " ".join(text[cut:].lower().split())
    return f"{head} {rest}".strip()


def feedback_signature(text: str | None) -> str | None:
    """A short signature of normalised feedback; ``None`` when there is no feedback."""
    normal = normalise_feedback(text)
    if not normal:
        return None
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class TurnSignal:
    """What the detector needs from one recorded turn."""

    turn: int
    signature: str | None
    #: The ledger's cumulative count after the turn; ``None`` when the files do not say (a turn
    #: known only from its frontmatter entry while criteria were verified at some point).
    verified_count: int | None
    #: The quality gates that failed in the turn (:func:`gate_signature`); None when none did.
    gates: str | None = None


def gate_signature(gate_results: Sequence[object] | None) -> str | None:
    """The failed gates of a turn, by name and the side of the threshold they fell on (``coverage``,
    ``tests_failed``): a gate failing the same way turn after turn is the same signal however the
    Coach words its feedback. None when no gate failed (or none was checked)."""
    failed = sorted({str(g.get("gate")) for g in gate_results or []
                     if isinstance(g, dict) and g.get("passed") is False and g.get("gate")})
    return ",".join(failed) or None


@dataclass(frozen=True)
class Stall:
    """A detected stall: the turns it spans and why."""

    turns: tuple[int, ...]
    reason: str


def detect_stall(history: Sequence[TurnSignal]) -> Stall | None:
    """Return a :class:`Stall` when the most recent turns show one, else ``None``.

    The same feedback signature, or the same quality gates failing (however the feedback is
    worded), over the window, with no progress in the ledger's count.
    """
    for window, wanted in ((ZERO_PROGRESS_WINDOW, "zero"), (NO_CHANGE_WINDOW, "flat")):
        if len(history) < window:
            continue
        recent = history[-window:]
        counts = {t.verified_count for t in recent}
        if None in counts:
            continue  # progress unknown: never call it a stall on a guess
        turns = tuple(t.turn for t in recent)
        for what in _repeated(recent):
            if wanted == "zero" and counts == {0}:
                return Stall(turns, f"{what} {window} turns in a row with no criteria verified "
                                    f"(turns {turns[0]}-{turns[-1]})")
            if wanted == "flat" and len(counts) == 1 and 0 not in counts:
                return Stall(turns, f"{what} {window} turns in a row with {next(iter(counts))} criteria "
                                    f"verified and no change (turns {turns[0]}-{turns[-1]})")
    return None


def _repeated(recent: Sequence[TurnSignal]) -> list[str]:
    """What the turns of ``recent`` all repeat: the same feedback, the same failing gates (in words)."""
    found = []
    signature = recent[0].signature
    if signature is not None and all(t.signature == signature for t in recent):
        found.append("the same feedback")
    gates = recent[0].gates
    if gates is not None and all(t.gates == gates for t in recent):
        found.append(f"the same quality gate(s) failing ({gates.replace(',', ', ')})")
    return found
