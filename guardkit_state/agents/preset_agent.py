"""A coding CLI as a Player or Coach, run from its preset: argv built, output read into an envelope.

The report comes from the agent's schema-enforced structured output where its CLI has one, else
from the report file, else from the JSON in its answer; the loop then validates it against
``schemas/`` (and, for a Player, takes its files changed from git). An envelope that says
``is_error`` is an error even after exit 0.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shlex
import shutil
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from guardkit_state.agents.envelope import AgentEnvelope, read_envelope, report_in_text
from guardkit_state.agents.presets import AgentPreset, is_preset_name, load_presets
from guardkit_state.agents.protocol import Agent, CommandAgent, TurnRequest, read_report_file, run_agent_process
from guardkit_state.errors import AgentError, InputError, ParseError
from guardkit_state.turns.turn_state import AGENT_RUN_KEY

#: How much of an agent's own error text is quoted in the turn's reason.
ERROR_CHARS = 300
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class PresetAgent:
    """Runs one preset for one role per turn."""

    def __init__(self, preset: AgentPreset) -> None:
        self.preset = preset
        self.name = preset.name

    def argv(self, request: TurnRequest, *, prompt: str, log_file: Path) -> list[str]:
        """The command line for ``request`` (placeholders filled, role and schema arguments in place)."""
        schema_text = request.schema_file.read_text(encoding="utf-8") if request.schema_file else ""
        values = {"prompt": prompt, "prompt_file": str(request.prompt_file or ""), "schema": schema_text,
                  "schema_file": str(request.schema_file or ""), "report_file": str(request.report_file),
                  "workdir": str(request.workdir), "log_file": str(log_file),
                  "session_id": request.session_id or ""}
        lists = {"{role_args}": self.preset.role_args.get(request.role, ()),  # words that stand for a list
                 "{schema_args}": self.preset.schema_args if request.schema_file is not None else (),
                 "{continue_args}": self.preset.continue_args if request.session_id else ()}
        return [_fill(part, values) for word in self.preset.command for part in lists.get(word, (word,))]

    def run(self, request: TurnRequest) -> dict[str, Any]:
        """The report, its ``agent_run`` the run as the envelope tells it (an :class:`AgentError`
        carries it when the run failed)."""
        prompt = request.prompt_file.read_text(encoding="utf-8") if request.prompt_file else ""
        log_file = request.report_file.with_name(f"{request.role}_agent_log_{request.turn}.jsonl")
        with contextlib.suppress(FileNotFoundError):
            log_file.unlink()
        argv = self.argv(request, prompt=prompt, log_file=log_file)
        started = time.monotonic()
        run: dict[str, Any] = {"agent": self.name}  # what is known should it not start
        try:
            done = run_agent_process(argv, request,
                                     stdin=prompt.encode("utf-8") if self.preset.stdin_prompt else None)
            duration = time.monotonic() - started
            run = {**run, "duration_seconds": round(duration, 3)}
            where = f"{request.role.capitalize()} ({self.name})"
            log_text = log_file.read_text(encoding="utf-8", errors="replace") if log_file.is_file() else ""
            with _unreadable_output(where, request):
                envelope = read_envelope(self.preset, done.stdout.decode("utf-8", "replace"), log_text=log_text)
            if envelope is not None:
                run = envelope.run_record(self.name, duration)
            if done.notes:
                run["notes"] = [*run.get("notes", ()), *done.notes]
            self._check_exit(envelope, done.returncode, done.stdout, done.stderr, where, request)
            with _unreadable_output(where, request):
                report = self._report(request, envelope, done.stdout.decode("utf-8", "replace"))
        except AgentError as exc:
            exc.run = exc.run or run
            raise
        report[AGENT_RUN_KEY] = run
        return report

    @staticmethod
    def _check_exit(envelope: AgentEnvelope | None, returncode: int, stdout: bytes, stderr: bytes, where: str,
                    request: TurnRequest) -> None:
        """An envelope that says ``is_error`` is an error even after exit 0; a non-zero exit is one too."""
        if envelope is not None and envelope.is_error:
            told = envelope.error or envelope.result or "no message"
            kind = f" ({envelope.subtype})" if envelope.subtype and envelope.subtype != "success" else ""
            exit_note = " (exit 0)" if returncode == 0 else f" (exit {returncode})"
            raise AgentError(f"{where} reported an error{kind}{exit_note}: {_one_line(told)}",
                             task_id=request.task_id, turn=request.turn)
        if returncode != 0:
            tail = _one_line(stderr.decode("utf-8", "replace")) or _one_line(stdout.decode("utf-8", "replace"))
            raise AgentError(f"{where} exited with status {returncode}" + (f": {tail}" if tail else ""),
                             task_id=request.task_id, turn=request.turn)

    def _report(self, request: TurnRequest, envelope: AgentEnvelope | None, stdout: str) -> dict[str, Any]:
        role = request.role.capitalize()
        if envelope is not None and envelope.structured is not None:
            return dict(envelope.structured)
        if request.report_file.is_file():
            return read_report_file(request)
        text = envelope.result if envelope is not None else stdout
        report = report_in_text(text)
        if report is None:
            raise AgentError(f"{role} ({self.name}) gave no report: no structured output, no "
                             f"{request.report_file.name} and no JSON object in its answer "
                             f"({_one_line(text)[:120] or 'empty'})", task_id=request.task_id, turn=request.turn,
                             expected="the report of the output contract")
        return report


@contextlib.contextmanager
def _unreadable_output(where: str, request: TurnRequest) -> Iterator[None]:
    """JSON in the agent's output that cannot be read (nested deeper than the limit) is the agent's
    error: one line, recorded as its turn (which ``--resume`` goes on from)."""
    try:
        yield
    except ParseError as exc:
        raise AgentError(f"{where} printed JSON that cannot be read: {exc.message}", task_id=request.task_id,
                         turn=request.turn) from exc


def _fill(word: str, values: Mapping[str, str]) -> str:
    # One pass, known placeholders only: braces in a user's argument stay as written, and a value
    # put in (the prompt, the task's own text) is never read again for placeholders.
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), word)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:ERROR_CHARS]


def agent_for(spec: str, repo_root: Path | None = None, *, option: str | None = None) -> Agent:
    """The agent ``spec`` names: a preset (``claude``, ``codex``, ...), else a shell command.

    Checked before anything runs: a preset whose program is not on ``PATH``, or a command whose
    program is neither on ``PATH`` nor a path (``claud``, a typo), is refused with
    :class:`InputError` (``option``, such as ``--player``, names the value in its message), with the
    preset it is closest to. A command the shell would read first (``cd x && ...``, ``$AGENT``,
    ``VAR=1 prog``) is checked by its first program where it is plain, else left to the shell.
    """
    presets = load_presets(repo_root)
    name = spec.strip()
    label = f"{option} {name}" if option else name
    if not name:  # an unset shell variable (`--player "$PLAYER"`): a shell would run nothing, turn after turn
        raise InputError(f"{option or 'the agent'} is empty: name an agent preset ({', '.join(sorted(presets))}) "
                         "or a command")
    # Spaces around a name (a quoted shell variable) do not make it a command: a shell would run
    # the bare program, with no prompt and none of the preset's arguments.
    if is_preset_name(name, presets):
        preset = presets[name]
        if shutil.which(preset.program) is None:
            raise InputError(f"{label}: the {name} preset runs {preset.program}, which is not on PATH; install it, "
                             "or name another agent")
        return PresetAgent(preset)
    program = _missing_program(spec)
    if program is not None:
        which = "" if program == name else f" (its program {program})"
        if program in presets:  # `claude --x` without claude installed: no typo to suggest
            raise InputError(f"{label}: {program} is not on PATH; install it (and `{option or '--player'} "
                             f"{program}` alone runs the {program} preset with its own arguments)")
        close = difflib.get_close_matches(program, sorted(presets), n=1, cutoff=0.6)
        hint = f"; did you mean `{close[0]}`?" if close else f" (presets: {', '.join(sorted(presets))})"
        raise InputError(f"{label}: neither an agent preset nor a command on PATH{which}{hint}")
    unrunnable = _unrunnable_path(spec, Path(repo_root) if repo_root is not None else Path.cwd())
    if unrunnable is not None:
        raise InputError(f"{label}: {unrunnable}")
    return CommandAgent(spec)


#: Words a shell reads itself: a command starting with one is not a program to look up.
_SHELL_WORDS = frozenset(("!", "{", "(", "[", "[[", ".", ":", "builtin", "case", "cd", "command", "eval", "exec",
                          "export", "for", "function", "if", "source", "test", "time", "until", "while"))


def _first_program(command: str) -> str | None:
    """The first word of ``command`` a shell would run as a program (after ``VAR=value`` words), when it
    is plain: None for shell syntax (``cd x && ...``, ``$AGENT``, quotes a shell reads itself)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None  # unbalanced quotes: the shell's own error says it best
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.S):
        words = words[1:]  # VAR=value before the program
    if not words:
        return None
    first = words[0]
    if first in _SHELL_WORDS or re.search(r"[$`*?\[\]{}()<>|;&~'\"\\]", first):
        return None
    return first


def _missing_program(command: str) -> str | None:
    """The first program of ``command`` when it is a plain name found nowhere on ``PATH``; else None."""
    first = _first_program(command)
    if first is None or "/" in first:
        return None
    return first if shutil.which(first) is None else None


def _unrunnable_path(command: str, root: Path) -> str | None:
    """Why the program of ``command``, when it is a path (``./agent.sh``, ``/opt/agent``), cannot run: it
    is nowhere (a relative one is looked for from ``root``, the repository, and from here) or not an
    executable file; None when it can, or is no path."""
    first = _first_program(command)
    if first is None or "/" not in first:
        return None
    path = Path(first)
    found = [p for p in ((path,) if path.is_absolute() else (root / path, path)) if p.exists()]
    if not found:
        return f"its program {first} does not exist"
    if not any(p.is_file() and os.access(p, os.X_OK) for p in found):
        return f"its program {first} is not an executable file (chmod +x it, or name its interpreter first)"
    return None


__all__ = ["PresetAgent", "agent_for"]
