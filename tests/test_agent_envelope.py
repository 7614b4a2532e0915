"""The agent envelope read from each CLI's output by its preset's data, and presets as data."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardkit_state.agents import agent_for, load_presets, read_envelope
from guardkit_state.agents.envelope import report_in_text
from guardkit_state.agents.preset_agent import PresetAgent
from guardkit_state.agents.presets import is_preset_name
from guardkit_state.agents.protocol import CommandAgent
from guardkit_state.errors import ConfigError, InputError

from .agent_fakes import fakes

__all__ = ["fakes"]  # the fixture, shared

PRESETS = load_presets(None)
costs = st.one_of(st.none(), st.floats(min_value=0, max_value=1000, allow_nan=False))
counts = st.integers(min_value=0, max_value=10**9)
texts = st.text(max_size=40)


@given(cost=costs, tokens_in=counts, tokens_out=counts, result=texts, is_error=st.booleans(), session=st.uuids())
def test_claude_result_object(cost: float | None, tokens_in: int, tokens_out: int, result: str, is_error: bool,
                              session: object) -> None:
    out = {"type": "result", "subtype": "success", "is_error": is_error, "result": result,
           "session_id": str(session), "total_cost_usd": cost, "num_turns": 2,
           "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}, "modelUsage": {"claude-opus-4": {}}}
    env = read_envelope(PRESETS["claude"], "some log line\n" + json.dumps(out) + "\n")
    assert env is not None
    assert (env.cost_usd, env.tokens_in, env.tokens_out, env.result, env.is_error, env.session_id, env.model) == (
        cost, tokens_in, tokens_out, result, is_error, str(session), "claude-opus-4")


@given(message=texts.filter(lambda t: t.strip() != ""), legacy=st.booleans(), tokens=st.lists(counts, max_size=3),
       failed=st.booleans())
def test_codex_event_lines(message: str, legacy: bool, tokens: list[int], failed: bool) -> None:
    key, kind = ("item_type", "assistant_message") if legacy else ("type", "agent_message")
    events: list[dict[str, Any]] = [{"type": "thread.started", "thread_id": "t-1"},
                                    {"type": "item.completed", "item": {"id": "i0", key: "reasoning", "text": "x"}},
                                    {"type": "item.completed", "item": {"id": "i1", key: kind, "text": message}}]
    events += [{"type": "turn.completed", "usage": {"input_tokens": n, "cached_input_tokens": 0, "output_tokens": 1}}
               for n in tokens]
    if failed:
        events.append({"type": "turn.failed", "error": {"message": "boom"}})
    env = read_envelope(PRESETS["codex"], "\n".join(json.dumps(e) for e in events))
    assert env is not None
    assert env.result == message and env.session_id == "t-1" and env.cost_usd is None
    assert env.tokens_in == (sum(tokens) if tokens else None)
    assert (env.is_error, env.error) == ((True, "boom") if failed else (False, None))


def test_gemini_error_object_is_an_error_with_its_type() -> None:
    out = {"session_id": "s", "error": {"type": "ApiError", "message": "Quota exceeded", "code": 429}}
    env = read_envelope(PRESETS["gemini"], json.dumps(out))
    assert env is not None and env.is_error and env.error == "Quota exceeded" and env.subtype == "ApiError"


def test_output_that_is_not_the_shape_is_no_envelope() -> None:
    assert read_envelope(PRESETS["claude"], "Error: something went wrong\n") is None
    assert read_envelope(PRESETS["codex"], "") is None


@pytest.mark.parametrize(("text", "expected"), [
    ('Here it is:\n```json\n{"decision": "approve"}\n```\n', {"decision": "approve"}),
    ('```json\n{"a": 1}\n```\nand then\n```json\n{"b": 2}\n```', {"b": 2}),
    ('{"decision": "feedback"}', {"decision": "feedback"}),
    ("no report here", None),
])
def test_report_in_text(text: str, expected: dict[str, Any] | None) -> None:
    assert report_in_text(text) == expected


def test_a_name_is_a_preset_and_anything_else_a_command(tmp_path: Path, fakes: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fakes}{os.pathsep}{os.environ.get('PATH', '')}")
    assert isinstance(agent_for("claude", tmp_path), PresetAgent)
    for spaced in ("claude ", " codex", "gemini\n"):
        agent = agent_for(spaced, tmp_path)
        assert isinstance(agent, PresetAgent) and agent.name == spaced.strip()
    (tmp_path / "claude").write_text("#!/bin/sh\n")
    (tmp_path / "claude").chmod(0o755)  # a path names a program that must exist (checked before anything runs)
    for spec in ("claude -p hi", "./claude", str(fakes / "claude"), "python agent.py", "cd x && claude",
                 "X=1 claude -p hi", "$AGENT"):
        assert not is_preset_name(spec, PRESETS)
        assert isinstance(agent_for(spec, tmp_path), CommandAgent)


def test_a_command_whose_program_is_a_path_that_cannot_run_is_refused(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "player.py").write_text("print('hi')\n")  # not executable: the shell says 126
    with pytest.raises(InputError, match=r"^--player ./agents/player.py --fast: its program ./agents/player.py is "
                                         r"not an executable file \(chmod \+x it, or name its interpreter first\)"):
        agent_for("./agents/player.py --fast", tmp_path, option="--player")
    with pytest.raises(InputError, match=r"^--coach agents/: its program agents/ is not an executable file"):
        agent_for("agents/", tmp_path, option="--coach")  # a folder
    assert isinstance(agent_for("python3 ./agents/player.py", tmp_path), CommandAgent)


def test_a_project_overrides_a_key_and_adds_a_preset(tmp_path: Path) -> None:
    config = tmp_path / ".guardkit" / "config"
    config.mkdir(parents=True)
    (config / "agents.yaml").write_text("codex:\n  coach: [--sandbox, read-only, --model, o4-mini]\n"
                                        "mine:\n  command: [mine, --ask, '{prompt_file}']\n")
    presets = load_presets(tmp_path)
    assert presets["codex"].role_args["coach"] == ("--sandbox", "read-only", "--model", "o4-mini")
    assert presets["codex"].role_args["player"] == ("--sandbox", "workspace-write")  # kept
    assert presets["mine"].output == "text" and presets["mine"].source == ".guardkit/config/agents.yaml"


@pytest.mark.parametrize(("yaml_text", "said"), [
    ("codex:\n  outptu: json\n", "unknown key(s) outptu"),
    ("codex:\n  output: xml\n", "output is 'xml'"),
    ("codex:\n  command: claude\n", "command must be a list of strings"),
    ("- claude\n", "agent presets must be a mapping"),
])
def test_a_bad_agents_file_is_refused_naming_the_key(tmp_path: Path, yaml_text: str, said: str) -> None:
    config = tmp_path / ".guardkit" / "config"
    config.mkdir(parents=True)
    (config / "agents.yaml").write_text(yaml_text)
    with pytest.raises(ConfigError) as info:
        load_presets(tmp_path)
    assert said in str(info.value)


@pytest.mark.parametrize(("name", "player_has", "coach_has"), [
    ("claude", ["--permission-mode", "acceptEdits"], ["--permission-mode", "plan"]),
    ("codex", ["--sandbox", "workspace-write"], ["--sandbox", "read-only"]),
    ("gemini", ["--approval-mode", "auto_edit"], ["--approval-mode", "default"]),
    ("aider", [], ["--dry-run"]),
])
def test_the_coach_runs_with_its_cli_read_only_options(tmp_path: Path, name: str, player_has: list[str],
                                                       coach_has: list[str]) -> None:
    from guardkit_state.agents.protocol import TurnRequest

    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"}')
    agent = PresetAgent(PRESETS[name])
    argvs = {}
    for role in ("player", "coach"):
        request = TurnRequest(role=role, task_id="TASK-A-1", turn=1, mode="fresh_start", workdir=tmp_path,
                              task_file=tmp_path / "t.md", context_file=tmp_path / "c.md",
                              report_file=tmp_path / "r.json", prompt_file=tmp_path / "p.md", schema_file=schema)
        argvs[role] = agent.argv(request, prompt="THE PROMPT", log_file=tmp_path / "log.jsonl")
    for role, wanted in (("player", player_has), ("coach", coach_has)):
        joined = " ".join(argvs[role])
        assert " ".join(wanted) in joined, (role, argvs[role])
    assert "read-only" not in " ".join(argvs["player"]) and "--dry-run" not in argvs["player"]
    if name == "claude":
        assert argvs["coach"][argvs["coach"].index("--json-schema") + 1] == '{"type": "object"}'
        assert argvs["coach"][:3] == ["claude", "-p", "THE PROMPT"]
    if name == "codex":
        assert argvs["coach"][-1] == "-" and str(schema) in argvs["coach"]


@pytest.mark.parametrize("subtype", ["error_max_turns", "error_during_execution", "error_max_budget_usd"])
def test_a_claude_error_subtype_is_an_error(subtype: str) -> None:
    out = {"type": "result", "subtype": subtype, "is_error": False, "session_id": "s", "total_cost_usd": 0.5,
           "usage": {"input_tokens": 1, "output_tokens": 1}}
    env = read_envelope(PRESETS["claude"], json.dumps(out))
    assert env is not None and env.is_error and env.subtype == subtype and env.cost_usd == 0.5


@pytest.mark.parametrize("name", ["claude", "gemini"])
def test_the_prompt_is_passed_as_written_placeholders_in_the_task_text_included(tmp_path: Path, name: str) -> None:
    from guardkit_state.agents.protocol import TurnRequest

    # A task body about templates: its braces must reach the agent untouched, not be filled in.
    prompt = 'write f"{workdir}/{report_file}" and "{schema}"; $(rm -rf ~) `id` {session_id}'
    request = TurnRequest(role="player", task_id="TASK-A-1", turn=1, mode="fresh_start", workdir=tmp_path,
                          task_file=tmp_path / "t.md", context_file=tmp_path / "c.md",
                          report_file=tmp_path / "r.json", prompt_file=tmp_path / "p.md", session_id="S-1")
    argv = PresetAgent(PRESETS[name]).argv(request, prompt=prompt, log_file=tmp_path / "log.jsonl")
    assert argv[argv.index("-p") + 1] == prompt
    assert "S-1" not in argv[argv.index("-p") + 1]


@pytest.mark.parametrize(("usage", "note"), [
    ('{"input_tokens": 1e400, "output_tokens": 3}', "its tokens in were reported as inf"),
    ('{"input_tokens": 12, "output_tokens": -4}', "its tokens out were reported as -4"),
    ('{"input_tokens": 12, "output_tokens": 99999999999999999999999999999999999}',
     "its tokens out were reported as a number of over 30 digits"),
])
def test_a_token_count_that_is_no_count_is_unknown_with_a_note(usage: str, note: str) -> None:
    out = '{"type": "result", "subtype": "success", "is_error": false, "result": "ok", "usage": ' + usage + "}"
    env = read_envelope(PRESETS["claude"], out)
    assert env is not None and (env.tokens_in is None or env.tokens_out is None)
    assert len(env.notes) == 1 and env.notes[0].startswith(note) and env.notes[0].endswith("counted as unknown")
    assert env.run_record("claude")["notes"] == list(env.notes)


def test_agent_json_nested_past_the_limit_is_refused_not_a_recursion_error() -> None:
    from guardkit_state.errors import ParseError

    with pytest.raises(ParseError, match="nested deeper than 64 levels"):
        read_envelope(PRESETS["claude"], "[" * 50_000 + "]" * 50_000)
    with pytest.raises(ParseError, match="nested deeper than 64 levels"):
        report_in_text("```json\n{" + '"a": [' * 5_000 + "1" + "]" * 5_000 + "}\n```")
