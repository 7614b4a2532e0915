"""Fake coding CLIs for tests: ``claude``, ``codex``, ``gemini`` and ``aider`` as the loop runs them.

Each prints exactly the output shape its real CLI documents (docs/agents.md has the sources):
Claude Code's one ``type: result`` object, Codex's ``exec --json`` event lines (both spellings of
the agent message item), Gemini's ``response``/``stats`` object, aider's plain text and analytics
log. What a real model would decide is scripted: the Player writes a file and reports; the Coach
gives feedback on turn 1 (the last criterion rejected) and approves from turn 2.

Set by tests in the environment:
    FAKE_FAIL=quota|auth      fail the way the real CLI does (quota: ``is_error`` with exit 0 where
                              the CLI does so), as the role in FAKE_FAIL_ROLE (default: any);
                              ``deep`` (claude): a result whose ``result`` is nested 100,000 deep
    FAKE_COST=LITERAL         claude: ``total_cost_usd`` written as this JSON text (``Infinity``, ``1e400``)
    FAKE_CODEX_ITEMS=legacy   Codex's earlier item spelling (``item_type: assistant_message``)
    FAKE_CODEX_RETRY=1        Codex reports a stream error it retries (an ``error`` event), then completes
    FAKE_INTERRUPT=ROLE:TURN  send Ctrl-C (SIGINT) to the loop when that role runs that turn
    FAKE_LOG=DIR              append one line per call (name role turn) to DIR/calls
    FAKE_SIGNED_OUT=a,b       these CLIs answer their sign-in status command as signed out
                              (``claude auth status``: a ``loggedIn`` JSON object; ``codex login
                              status``: ``Logged in using ChatGPT`` / ``Not logged in`` on stderr)
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

COST = {"claude": 0.0125, "codex": None, "gemini": None, "aider": 0.0031}


def _criteria() -> list[str]:
    return [c["id"] for c in json.loads(Path(os.environ["GUARDKIT_CRITERIA_FILE"]).read_text())["criteria"]]


def _player_report(turn: int) -> dict[str, Any]:
    ids = _criteria()
    return {"summary": f"implemented part {turn}", "files_modified": [], "files_created": [f"claimed_{turn}.py"],
            "tests_written": [], "tests_run": True, "tests_passed": True,
            "implementation_notes": f"turn {turn} work", "concerns": [], "requirements_addressed": [],
            "requirements_remaining": [],
            "completion_promises": [{"criterion_id": c, "status": "complete", "evidence": "done"} for c in ids]}


def _coach_report(turn: int) -> dict[str, Any]:
    ids = _criteria()
    approve = turn >= 2
    verdicts = [{"criterion_id": c, "result": "verified" if approve or c != ids[-1] else "rejected",
                 "notes": "" if approve or c != ids[-1] else f"{c} has no test yet"} for c in ids]
    issues = [] if approve else [{"severity": "must_fix", "category": "testing",
                                  "description": f"{ids[-1]} is not tested", "suggestion": f"add a test for {ids[-1]}"}]
    return {"decision": "approve" if approve else "feedback", "issues": issues, "criteria_verification": verdicts,
            "validation_results": {"tests_passed_count": 4, "tests_failed_count": 0, "coverage": 91.0},
            "rationale": "all verified" if approve else "one criterion is not met"}


def _work(role: str, turn: int) -> dict[str, Any]:
    if role == "player":
        Path(f"impl_{turn}.py").write_text(f"VALUE = {turn}\n")
        return _player_report(turn)
    return _coach_report(turn)


def _fenced(report: dict[str, Any]) -> str:
    return "Done. My report:\n```json\n" + json.dumps(report, indent=2) + "\n```\n"


def _failing(role: str) -> str | None:
    fail = os.environ.get("FAKE_FAIL")
    wanted = os.environ.get("FAKE_FAIL_ROLE")
    return fail if fail and (not wanted or wanted == role) else None


def claude(argv: list[str], role: str, turn: int) -> int:
    # --resume ID goes on with that session (the real CLI refuses an id it does not know).
    session = argv[argv.index("--resume") + 1] if "--resume" in argv else str(uuid.uuid4())
    base = {"type": "result", "duration_ms": 2100, "duration_api_ms": 1900, "num_turns": 4, "session_id": session,
            "total_cost_usd": COST["claude"], "uuid": str(uuid.uuid4()),
            "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 800,
                      "output_tokens": 340, "server_tool_use": {"web_search_requests": 0}, "service_tier": "standard"},
            "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 1200, "outputTokens": 340, "costUSD": COST["claude"]}},
            "permission_denials": []}
    failing = _failing(role)
    if failing == "quota":  # reported as a result, exit 0
        print(json.dumps({**base, "subtype": "success", "is_error": True, "total_cost_usd": 0,
                          "result": "Claude AI usage limit reached|1767225600"}))
        return 0
    if failing == "auth":
        print(json.dumps({**base, "subtype": "success", "is_error": True, "total_cost_usd": 0,
                          "result": "Invalid API key · Please run /login"}))
        return 1
    if failing == "deep":  # junk no real reply has, valid JSON all the same
        print('{"type": "result", "subtype": "success", "is_error": false, "result": '
              + "[" * 100_000 + "]" * 100_000 + "}")
        return 0
    report = _work(role, turn)
    out = {**base, "subtype": "success", "is_error": False, "result": "Done."}
    if "--json-schema" in argv:
        json.loads(argv[argv.index("--json-schema") + 1])  # the real CLI refuses a schema that is not JSON
        out["structured_output"] = report
    else:
        out["result"] = _fenced(report)
    text = json.dumps(out)
    if os.environ.get("FAKE_COST"):
        text = text.replace(f'"total_cost_usd": {COST["claude"]}', f'"total_cost_usd": {os.environ["FAKE_COST"]}', 1)
    print(text)
    return 0


def codex(argv: list[str], role: str, turn: int) -> int:
    prompt = sys.stdin.read()
    assert prompt.strip(), "codex exec - reads the prompt from stdin"
    legacy = os.environ.get("FAKE_CODEX_ITEMS") == "legacy"
    lines: list[dict[str, Any]] = [{"type": "thread.started", "thread_id": str(uuid.uuid4())},
                                   {"type": "turn.started"}]
    failing = _failing(role)
    if failing:
        message = ("You've hit your usage limit. Upgrade to Pro or try again later." if failing == "quota"
                   else "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header")
        lines += [{"type": "error", "message": message}, {"type": "turn.failed", "error": {"message": message}}]
        for line in lines:
            print(json.dumps(line))
        return 1
    if os.environ.get("FAKE_CODEX_RETRY"):  # codex exec prints a retried stream error as an `error` event
        lines.append({"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion: "
                                                  "error sending request for url (https://api.openai.com/v1/responses))"})
    report = _work(role, turn)
    text = json.dumps(report) if "--output-schema" in argv else _fenced(report)
    item_key, reasoning, message = ("item_type", "reasoning", "assistant_message") if legacy else \
        ("type", "reasoning", "agent_message")
    lines += [{"type": "item.completed", "item": {"id": "item_0", item_key: reasoning, "text": "**Reading the task**"}},
              {"type": "item.completed", "item": {"id": "item_1", item_key: message, "text": text}},
              {"type": "turn.completed", "usage": {"input_tokens": 5120, "cached_input_tokens": 4096,
                                                   "output_tokens": 610}}]
    for line in lines:
        print(json.dumps(line))
    return 0


def gemini(argv: list[str], role: str, turn: int) -> int:
    session = str(uuid.uuid4())
    failing = _failing(role)
    if failing:
        message = ("Quota exceeded for quota metric 'Gemini 2.5 Pro Requests'" if failing == "quota"
                   else "API key not valid. Please pass a valid API key.")
        print(json.dumps({"session_id": session, "error": {"type": "ApiError", "message": message,
                                                           "code": 429 if failing == "quota" else 400}}))
        return 1
    report = _work(role, turn)
    if role == "player":  # auto_edit lets it write the report file
        Path(os.environ["GUARDKIT_REPORT_FILE"]).write_text(json.dumps(report))
        response = "I implemented the change and wrote the report."
    else:
        response = _fenced(report)
    print(json.dumps({"session_id": session, "response": response, "stats": {
        "models": {"gemini-2.5-pro": {"api": {"totalRequests": 2, "totalErrors": 0, "totalLatencyMs": 5053},
                                      "tokens": {"prompt": 2493, "candidates": 120, "total": 2613, "cached": 0,
                                                 "thoughts": 154, "tool": 0}}},
        "tools": {"totalCalls": 1, "totalSuccess": 1, "totalFail": 0, "totalDurationMs": 12},
        "files": {"totalLinesAdded": 1, "totalLinesRemoved": 0}}}))
    return 0


def aider(argv: list[str], role: str, turn: int) -> int:
    message_file = Path(argv[argv.index("--message-file") + 1])
    assert message_file.read_text().strip()
    log = Path(argv[argv.index("--analytics-log") + 1])
    failing = _failing(role)
    if failing:
        print("litellm.RateLimitError: You exceeded your current quota" if failing == "quota"
              else "litellm.AuthenticationError: Incorrect API key provided")
        return 1
    if role == "coach":
        assert "--dry-run" in argv
    report = _work(role, turn)
    with log.open("a") as out:
        out.write(json.dumps({"event": "launched", "properties": {}, "user_id": "u", "time": int(time.time())}) + "\n")
        out.write(json.dumps({"event": "message_send", "properties": {
            "main_model": "gpt-4o", "weak_model": "gpt-4o-mini", "editor_model": "gpt-4o", "edit_format": "diff",
            "prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200, "cost": COST["aider"],
            "total_cost": COST["aider"]}, "user_id": "u", "time": int(time.time())}) + "\n")
    print("Aider v0.86.1\nModel: gpt-4o with diff edit format\n" + _fenced(report) +
          f"Tokens: 3.0k sent, 200 received. Cost: ${COST['aider']:.4f} message, ${COST['aider']:.4f} session.")
    return 0


def sign_in_status(name: str) -> int:
    """The CLI's own sign-in status command, as the real one answers it (no model is called)."""
    signed_out = name in os.environ.get("FAKE_SIGNED_OUT", "").split(",")
    if name == "claude":
        answer = {"loggedIn": False, "authMethod": "none", "apiProvider": "firstParty"} if signed_out else \
            {"loggedIn": True, "authMethod": "claude.ai", "apiProvider": "firstParty", "subscriptionType": "max"}
        print(json.dumps(answer, indent=2))
        return 1 if signed_out else 0
    print("Not logged in" if signed_out else "Logged in using ChatGPT", file=sys.stderr)
    return 1 if signed_out else 0


def main(name: str) -> int:
    argv = sys.argv[1:]
    if (name, argv) in (("claude", ["auth", "status"]), ("codex", ["login", "status"])):
        return sign_in_status(name)
    if argv == ["--version"]:
        print({"claude": "2.0.14 (Claude Code)", "codex": "codex-cli 0.46.0", "gemini": "0.9.0",
               "aider": "aider 0.86.1"}[name])
        return 0
    role, turn = os.environ["GUARDKIT_ROLE"], int(os.environ["GUARDKIT_TURN"])
    if os.environ.get("FAKE_LOG"):
        with (Path(os.environ["FAKE_LOG"]) / "calls").open("a") as out:
            out.write(f"{name} {role} {turn}\n")
        with (Path(os.environ["FAKE_LOG"]) / "argv").open("a") as out:
            out.write(json.dumps([name, role, turn, [a for a in argv if len(a) < 200]]) + "\n")
    if os.environ.get("FAKE_INTERRUPT") == f"{role}:{turn}":
        os.kill(os.getppid(), signal.SIGINT)  # Ctrl-C reaches the loop; it stops this agent
        time.sleep(60)
    return {"claude": claude, "codex": codex, "gemini": gemini, "aider": aider}[name](argv, role, turn)
