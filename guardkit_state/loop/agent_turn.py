"""One turn's agents: their briefing files, their runs (timed, labelled), and the Coach kept read-only.

The loop (``loop/run.py``) asks this module for the Player's and the Coach's requests, with every
file an agent reads written first: its whole prompt (``GUARDKIT_PROMPT_FILE``), the continuation
context, the criteria as JSON (``GUARDKIT_CRITERIA_FILE``), the strict schema of its report
(``GUARDKIT_SCHEMA_FILE``) and, for the Coach, the turn's diff (``GUARDKIT_DIFF_FILE``). A run is
timed and its failure labelled with the role and, when it is one, the kind of failure that would
only repeat (a missing binary, authentication, quota).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from guardkit_state.agents.protocol import Agent, TurnRequest, agent_name
from guardkit_state.config import ResolvedConfig, render_coach_prompt, render_player_role_section
from guardkit_state.config.prompt import render_gates_section
from guardkit_state.errors import AgentError, GitError, GuardkitStateError
from guardkit_state.git.parse import StatusEntry
from guardkit_state.git.repo import GitRepo
from guardkit_state.git.snapshot import Restoration, WorktreeSnapshots
from guardkit_state.loop.briefing import (
    coach_output_schema,
    coach_prompt,
    criteria_document,
    player_output_schema,
    player_prompt,
)
from guardkit_state.loop.worktree_watch import changed_between, records_fingerprint, turn_diff
from guardkit_state.model import TurnMode
from guardkit_state.store.fsio import atomic_write_text, ensure_private_dir
from guardkit_state.store.jsonio import load_json
from guardkit_state.turns.context import must_address_lines
from guardkit_state.turns.lifecycle import TurnLifecycle
from guardkit_state.turns.turn_state import AGENT_RUN_KEY

log = logging.getLogger("guardkit_state.loop.agent_turn")

#: Kinds of agent failure that a retry cannot fix: the same one twice in a row stops the loop.
#: Matched (case-insensitive) in the failure's reason, which quotes the agent's own error.
FAILURE_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("missing binary", re.compile(r"status 127\b|command not found", re.I)),
    # The same argv is built again next turn: a prompt too long for an argument, or holding a NUL.
    ("cannot start", re.compile(r"could not be started: (argument list too long|embedded null byte)", re.I)),
    # The CLIs' own phrases, not a bare "401", "429", "rate_limit" or "authentication": those are in
    # the test output of a Player building a rate limiter or a login (tests/test_rate_limiter.py,
    # "assert 429 == 200"), a failure the next turn can fix. \b keeps test_quota, test_unauthorized out.
    ("authentication", re.compile(r"invalid api key|api key not valid|incorrect api key|authenticationerror|"
                                  r"\bauthentication (failed|error|required)|failed to authenticate|"
                                  r"\bunauthori[sz]ed\b|not logged in|please (run )?/?login", re.I)),
    ("quota", re.compile(r"\bquota\b|ratelimiterror|\brate[ -]limit(ed| exceeded| reached)?\b|too many requests|"
                         r"usage limit|credit balance|insufficient.?(funds|credit)|resource.?exhausted", re.I)),
)


def failure_kind(reason: str) -> str | None:
    """``missing binary``, ``authentication``, ``quota``, or None for a failure a retry may fix."""
    return next((kind for kind, pattern in FAILURE_KINDS if pattern.search(reason)), None)


@dataclass
class AgentRuns:
    """The runs of one turn's agents, as the turn state keeps them (role -> run)."""

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: What the agents' runs left to say (a process group left running and killed, a cost read as unknown).
    notes: list[str] = field(default_factory=list)

    def run(self, role: str, agent: Agent, request: TurnRequest) -> dict[str, Any]:
        """Run ``agent``; its report. Its run (agent, model, session, cost, tokens, time, notes) is what
        the agent tells in the report's ``agent_run`` or in its :class:`AgentError`, timed here."""
        started = time.monotonic()
        told: Any = None
        try:
            report = agent.run(request)
            told = report.get(AGENT_RUN_KEY)
        except AgentError as exc:
            told = exc.run
            raise
        finally:
            run: dict[str, Any] = dict(told) if isinstance(told, dict) else {"agent": agent_name(agent)}
            run.setdefault("duration_seconds", round(time.monotonic() - started, 3))
            self.runs[role] = run
            self.notes.extend(f"the {role.capitalize()} ({run.get('agent')}): {text}" for text in run.get("notes") or ()
                              if isinstance(text, str))
        return report


@dataclass
class TurnBriefing:
    """Writes what one turn's agents read, and builds their requests."""

    config: ResolvedConfig
    lifecycle: TurnLifecycle
    checkout: Path
    number: int
    mode: TurnMode
    timeout: float | None
    git: GitRepo | None
    #: Set (the Player's agent name) to go on with the session its previous turn's run reported.
    continue_agent: str | None = None
    #: What the Player changed, as git said it after the Player ran (its report's files): the Coach's
    #: diff is made of the same answer (None: the Player's report was taken from an earlier run).
    changes: list[StatusEntry] | None = None

    def __post_init__(self) -> None:
        self.work = ensure_private_dir(self.lifecycle.store.work_dir)
        task = self.lifecycle.task
        self.previous = self.lifecycle.previous_turn_state(self.number)
        self.statuses = self.lifecycle.history.ledger_before(self.number).statuses()
        self.ids = [c.id for c in task.criteria]
        self.title = task.title or task.task_id

    def _write(self, name: str, text: str) -> Path:
        path = self.work / name
        atomic_write_text(path, text)
        return path

    def player_request(self) -> TurnRequest:
        """The continuation context, criteria, schema and prompt written; the Player's request."""
        lifecycle, n, task = self.lifecycle, self.number, self.lifecycle.task
        context = lifecycle.context_for(n, role_section=render_player_role_section(self.config))
        context_file = lifecycle.store.context_path(n)
        atomic_write_text(context_file, context)
        criteria_file = self._write(f"criteria_turn_{n}.json", json.dumps(
            criteria_document(task.task_id, task.criteria, self.statuses), indent=2, ensure_ascii=False) + "\n")
        report_file = self.work / f"player_report_{n}.json"
        schema_file = self._write(f"player_schema_turn_{n}.json",
                                  json.dumps(player_output_schema(self.ids), indent=2) + "\n")
        lookup = self.config.lookup_gate_profile(task.task_type, task.complexity)
        gates = render_gates_section(lookup.profile, task_type=lookup.task_type, complexity=lookup.complexity,
                                     warnings=lookup.warnings, requested_task_type=task.task_type)
        prompt_file = self._write(f"player_prompt_turn_{n}.md", player_prompt(
            task_id=task.task_id, title=self.title, body=task.body, turn=n, mode=self.mode.value,
            criteria=task.criteria, statuses=self.statuses, context=context, gates=gates,
            report_file=str(report_file)))
        return TurnRequest(role="player", task_id=task.task_id, turn=n, mode=self.mode.value, workdir=self.checkout,
                           task_file=task.path, context_file=context_file, report_file=report_file,
                           prompt_file=prompt_file, timeout=self.timeout, criteria_file=criteria_file,
                           schema_file=schema_file, session_id=self._session_to_continue())

    def _session_to_continue(self) -> str | None:
        """The session the same Player agent reported in the previous turn (kept in its turn state)."""
        if self.continue_agent is None or self.previous is None:
            return None
        run = self.previous.agent_runs.get("player") or {}
        session = run.get("session_id")
        return session if run.get("agent") == self.continue_agent and isinstance(session, str) and session else None

    def coach_request(self, player: TurnRequest, player_summary: str) -> TurnRequest:
        """The diff, schema and prompt written (after the Player ran); the Coach's request."""
        lifecycle, n, task = self.lifecycle, self.number, self.lifecycle.task
        diff = turn_diff(self.git, self.checkout, self.changes) if self.git is not None else ""
        diff_file = self._write(f"diff_turn_{n}.diff", diff)
        report_file = self.work / f"coach_report_{n}.json"
        schema_file = self._write(f"coach_schema_turn_{n}.json",
                                  json.dumps(coach_output_schema(self.ids), indent=2) + "\n")
        sections = render_coach_prompt(
            self.config, task_id=task.task_id, title=self.title, task_type=task.task_type,
            complexity=task.complexity, criteria=task.criteria, previous_turn=self.previous, turn=n)
        must = must_address_lines(self.previous) if self.previous is not None else []
        prompt_file = self._write(f"coach_prompt_turn_{n}.md", coach_prompt(
            coach_sections=sections, task_id=task.task_id, title=self.title, body=task.body, turn=n,
            criteria=task.criteria, must_address=must, player_summary=player_summary, diff=diff,
            report_file=str(report_file)))
        return replace(player, role="coach", report_file=report_file, prompt_file=prompt_file,
                       player_report_file=lifecycle.store.path("player_turn", n), schema_file=schema_file,
                       diff_file=diff_file, session_id=None)


class ReadOnlyWatch:
    """Holds the worktree as the Player left it while the Coach runs, and puts it back after.

    With git, a snapshot (:mod:`guardkit_state.git.snapshot`: tracked, untracked and ignored files,
    HEAD, the branch, the index) is taken when it is made and put back by :meth:`put_back`, whatever
    the Coach did; :meth:`check` then makes any change the Coach's error, naming it. Without git only
    the loop's records (``.guardkit/autobuild/TASK``) are watched, by their hashes.
    """

    def __init__(self, git: GitRepo | None, checkout: Path, records: Path, task_id: str) -> None:
        self.checkout, self.records = checkout, records
        self.snapshots = WorktreeSnapshots(git, task_id) if git is not None else None
        self.snapshot = self.snapshots.take() if self.snapshots is not None else None
        self.records_before = records_fingerprint(records) if self.snapshots is None else {}
        self.restored: Restoration | None = None

    @property
    def notes(self) -> list[str]:
        """Repairs made on the way (a ``.git`` link an agent removed, put back), for the loop's notes."""
        return [*(self.snapshots.repairs if self.snapshots else ()), *(self.restored.notes if self.restored else ())]

    def run(self, coach: Callable[[], dict[str, Any]], *, note: Callable[[str], None], turn: int) -> dict[str, Any]:
        """Run ``coach`` and put the worktree back after it, also when it fails or is stopped (then what
        it changed is said in a note, the turn being its failure already); repairs are noted too."""
        failed = True
        try:
            report = coach()
            failed = False
        finally:
            said = self.describe(self.put_back())
            for text in self.notes:
                note(text)
            if failed and said:
                note(f"turn {turn}: {said}")
        return report

    def put_back(self) -> Restoration | None:
        """Put the worktree back as the snapshot holds it (once); what the Coach had changed.

        Raises :class:`GitError` when git cannot: the snapshot then stays under its ref, and
        ``--resume`` puts it back before anything else runs.
        """
        if self.snapshots is None or self.snapshot is None or self.restored is not None:
            return self.restored
        try:
            self.restored = self.snapshots.restore(self.snapshot)
        except GitError as exc:
            raise GitError(f"the worktree {self.checkout} could not be put back as the Player left it after the "
                           f"Coach ran ({exc.message}); it is held at {self.snapshots.ref}, and --resume puts it "
                           "back", path=self.checkout) from exc
        self.snapshots.drop()
        return self.restored

    def check(self, request: TurnRequest) -> None:
        """Raise :class:`AgentError` naming what the Coach changed, if it changed anything."""
        said = self.describe(self.put_back())
        if said:
            raise AgentError(said, task_id=request.task_id, turn=request.turn)

    def describe(self, restored: Restoration | None) -> str | None:
        """What the Coach changed, as the turn's error; None when nothing."""
        if restored is None:
            edited = changed_between(self.records_before, records_fingerprint(self.records)) \
                if self.snapshots is None else []
            return f"Coach changed the loop's records, which it must only read: {_listed(edited)}" if edited else None
        return coach_change(restored, self.checkout, self.records)


def coach_change(restored: Restoration, checkout: Path, records: Path) -> str | None:
    """What a Coach changed in ``checkout`` (``records``: the task's, named apart), put back, as its turn's
    error; None when nothing."""
    if not restored.changed:
        return None
    own = records.relative_to(checkout).as_posix() + "/" if records.is_relative_to(checkout) else None
    mine = [p for p in restored.files if own and p.startswith(own)]
    files = [p for p in restored.files if p not in mine]
    parts = [f"moved the branch, which it must only read: {restored.head} (a commit, reset or checkout of "
             "its own)"] if restored.head else []
    if mine:
        shown = [f"{records.name}/{p[len(own or ''):]}" for p in mine]
        parts.append(f"changed the loop's records, which it must only read: {_listed(shown)}")
    if files:
        parts.append(f"changed the worktree, which it must only read: {_listed(files)}")
    text = "Coach " + "; ".join(parts) + "; put back as the Player left it" if parts else "Coach changed"
    if restored.not_restored:
        text += (f"{';' if parts else ''} ignored files larger than the snapshot keeps, not undone: "
                 f"{_listed(list(restored.not_restored))}")
    return text


def adopt_report(lifecycle: TurnLifecycle, role: str, raw: Path, number: int) -> str | None:
    """On resume, record the report an agent finished before the kill instead of running it again;
    a note saying so, or None when there is none to take (the agent runs again).

    The agent's own report file (``.work/<role>_report_N.json``) survives a kill that lands between
    the agent's exit and the store's write; a valid one is that agent's finished work. An invalid
    or missing one is ignored.
    """
    if not raw.is_file():
        return None
    try:
        data = load_json(raw)
        if not isinstance(data, dict):
            return None
        (lifecycle.record_player if role == "player" else lifecycle.record_coach)(data)
    except GuardkitStateError as exc:
        log.info("turn %d of %s: %s report %s not reused (%s)", number, lifecycle.task_id, role, raw, exc)
        return None
    return f"turn {number}: reused the {role.capitalize()}'s report {raw.name}, finished before the interruption"


def put_back_interrupted(git: GitRepo, task_id: str) -> Restoration | None:
    """Put back the worktree a killed loop left held for its Coach (``--resume``, before anything runs);
    what the Coach had changed (its turn's error: the report it may have left approved another worktree),
    None when nothing was held or nothing had changed. :func:`interrupted_note` says it."""
    snapshots = WorktreeSnapshots(git, task_id)
    snapshot = snapshots.pending()
    if snapshot is None:
        return None
    restored = snapshots.restore(snapshot)
    snapshots.drop()
    return restored if restored.changed else None


def interrupted_note(restored: Restoration) -> str:
    """The note of :func:`put_back_interrupted`'s put-back."""
    what = [*restored.files, *([restored.head] if restored.head else [])]
    return (f"put the worktree back as the Player left it before the interrupted Coach ran: {_listed(what)}"
            + (f"; ignored files larger than the snapshot keeps, not undone: {_listed(list(restored.not_restored))}"
               if restored.not_restored else ""))


def _listed(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


__all__ = ["FAILURE_KINDS", "AgentRuns", "ReadOnlyWatch", "TurnBriefing", "adopt_report", "coach_change",
           "failure_kind", "interrupted_note", "put_back_interrupted"]
