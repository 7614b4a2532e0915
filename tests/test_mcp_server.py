"""``guardkit-state mcp``: the server started as a subprocess and driven over stdio by the official
SDK's own client (the real protocol), against real repositories; its answers compared with the
CLI's ``--json`` for the same question, and its refusals with the CLI's one-line errors."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextResourceContents

from .feature_support import FEATURE_ID, TaskSpec, make_feature
from .helpers import coach_decision, make_task_repo, player_report

TASK = "TASK-AUTH-001"
READ_TOOLS = {"status", "show", "context", "criteria", "turn_reports", "feature", "search"}
WRITE_TOOLS = {"record_turn", "claim_next_task", "release_claim", "release_quarantined_task"}
T = TypeVar("T")


def with_server(repo: Path, session: Callable[[Client], Awaitable[T]], *, read_only: bool = False) -> T:
    """Start ``guardkit-state mcp`` on ``repo`` and run ``session`` with a client connected over stdio."""
    args = ["-m", "guardkit_state", "mcp", "--repo", str(repo), *(["--read-only"] if read_only else [])]

    async def main() -> T:
        async with Client(StdioServerParameters(command=sys.executable, args=args, cwd=str(repo))) as client:
            return await session(client)

    return anyio.run(main)


def cli(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guardkit_state", *args, "--repo", str(repo)], cwd=repo,
                          capture_output=True, text=True, timeout=120, check=False, env=_env())


def cli_json(repo: Path, *args: str) -> Any:
    done = cli(repo, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "NO_COLOR": "1"}


def answer(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    assert len(result.content) == 1
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` but git's own, with its bytes: what a refusal must leave as it was."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts[:1]}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a feature plan of two tasks, and TASK-AUTH-001 with three criteria."""
    project = make_feature(tmp_path, [TaskSpec("TASK-FB-001"), TaskSpec("TASK-FB-002", ["TASK-FB-001"])])
    make_task_repo(project.root)
    return project.root


def write_reports(repo: Path, turn: int, decision: str, **coach: Any) -> tuple[Path, Path]:
    player_file, coach_file = repo / f"player{turn}.json", repo / f"coach{turn}.json"
    player_file.write_text(json.dumps(player_report(turn)), encoding="utf-8")
    coach_file.write_text(json.dumps(coach_decision(turn, decision, **coach)), encoding="utf-8")
    return player_file, coach_file


def record_by_cli(repo: Path, turn: int, decision: str, **coach: Any) -> None:
    player_file, coach_file = write_reports(repo, turn, decision, **coach)
    done = cli(repo, "record", TASK, "--player", str(player_file), "--coach", str(coach_file))
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------------------------------ the tools


def test_the_tools_are_listed_with_descriptions_and_read_only_leaves_out_the_write_tool(repo: Path) -> None:
    async def listing(client: Client) -> tuple[dict[str, Any], str | None]:
        listed = await client.list_tools()
        return {t.name: t for t in listed.tools}, client.instructions

    tools, instructions = with_server(repo, listing)
    assert set(tools) == READ_TOOLS | WRITE_TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80, tool.name  # each teaches its part
    assert not any(tools[name].annotations.read_only_hint for name in WRITE_TOOLS)
    assert all(tools[name].annotations.read_only_hint for name in READ_TOOLS)
    assert "record_turn" in (instructions or "") and "context" in (instructions or "")

    async def read_only(client: Client) -> tuple[set[str], CallToolResult]:
        names = {t.name for t in (await client.list_tools()).tools}
        refused = await client.call_tool("record_turn", {"task_id": TASK, "player": player_report(1),
                                                         "coach": coach_decision(1, "feedback", feedback="x")})
        return names, refused

    names, refused = with_server(repo, read_only, read_only=True)
    assert names == READ_TOOLS
    assert refused.is_error
    assert not (repo / ".guardkit" / "autobuild" / TASK).exists()


def test_each_read_tool_answers_what_the_cli_json_answers(repo: Path) -> None:
    record_by_cli(repo, 1, "feedback", feedback="token refresh ignores the expiry",
                  verdicts={"AC-001": "verified", "AC-002": "rejected"})

    async def ask(client: Client) -> dict[str, Any]:
        return {
            "status": answer(await client.call_tool("status", {})),
            "show": answer(await client.call_tool("show", {"task_id": TASK})),
            "show_feature": answer(await client.call_tool("show", {"task_id": FEATURE_ID})),
            "feature": answer(await client.call_tool("feature", {"feature_id": FEATURE_ID})),
            "context": answer(await client.call_tool("context", {"task_id": TASK})),
            "context_1": answer(await client.call_tool("context", {"task_id": TASK, "turn": 1})),
            "criteria": answer(await client.call_tool("criteria", {"task_id": TASK})),
            "turn_reports": answer(await client.call_tool("turn_reports", {"task_id": TASK})),
            "search": answer(await client.call_tool("search", {"query": "token refresh expiry", "backend": "files"})),
        }

    got = with_server(repo, ask)
    assert got["status"] == cli_json(repo, "status", "--features")
    assert [t["task_id"] for t in got["status"]["tasks"]] == [TASK]
    assert got["show"] == cli_json(repo, "show", TASK)
    assert got["show"]["turns"][0]["decision"] == "feedback"
    assert got["feature"] == got["show_feature"] == cli_json(repo, "show", FEATURE_ID)
    assert [[row["task_id"] for row in wave["tasks"]] for wave in got["feature"]["waves"]] == \
        [["TASK-FB-001"], ["TASK-FB-002"]]
    assert got["context"] == cli_json(repo, "context", TASK)
    assert got["context"]["turn"] == 2 and "token refresh ignores the expiry" in got["context"]["context"]
    assert got["context_1"] == cli_json(repo, "context", TASK, "--turn", "1")
    shown = got["show"]
    assert got["criteria"]["criteria"] == shown["criteria"]
    assert got["criteria"]["criteria_counts"] == shown["criteria_counts"]
    assert {c["id"]: c["status"] for c in got["criteria"]["criteria"]} == \
        {"AC-001": "verified", "AC-002": "rejected", "AC-003": "pending"}
    on_disk = repo / ".guardkit" / "autobuild" / TASK
    reports = got["turn_reports"]
    assert (reports["turn"], reports["turn_state_source"]) == (1, "file")
    assert reports["turn_state"] == json.loads((on_disk / "turn_state_turn_1.json").read_text(encoding="utf-8"))
    assert reports["player"]["summary"] == player_report(1)["summary"]
    assert reports["coach"]["decision"] == "feedback"
    assert got["search"] == cli_json(repo, "search", "token refresh expiry", "--backend", "files")
    assert got["search"]["hits"], "the recorded turn's feedback is found"


def test_a_read_only_server_writes_nothing(repo: Path) -> None:
    record_by_cli(repo, 1, "feedback", feedback="token refresh ignores the expiry",
                  verdicts={"AC-001": "verified", "AC-002": "rejected"})
    shutil.rmtree(repo / ".guardkit" / "cache", ignore_errors=True)  # as a clone has it: no cache yet
    before = tree(repo)
    git_files = {p: p.stat().st_mtime_ns for p in (repo / ".git").rglob("*") if p.is_file()}

    async def ask_everything(client: Client) -> list[CallToolResult]:
        calls = [("status", {}), ("show", {"task_id": TASK}), ("show", {"task_id": FEATURE_ID}),
                 ("feature", {"feature_id": FEATURE_ID}), ("context", {"task_id": TASK}),
                 ("criteria", {"task_id": TASK}), ("turn_reports", {"task_id": TASK}),
                 ("search", {"query": "token refresh expiry"}), ("search", {"query": "expiry", "backend": "files"})]
        return [await client.call_tool(name, arguments) for name, arguments in calls]

    answers = with_server(repo, ask_everything, read_only=True)
    assert not any(result.is_error for result in answers), [r.content for r in answers if r.is_error]
    assert answers[0].structured_content["tasks"][0]["task_id"] == TASK  # read as it would be with a cache
    assert tree(repo) == before
    assert not (repo / ".guardkit" / "cache").exists()
    assert {p: p.stat().st_mtime_ns for p in (repo / ".git").rglob("*") if p.is_file()} == git_files


def test_a_turn_recorded_through_the_server_is_read_back_and_a_retry_is_already_recorded(repo: Path) -> None:
    player, coach = player_report(1), coach_decision(1, "feedback", feedback="add the refresh test",
                                                     verdicts={"AC-001": "verified"})

    async def session(client: Client) -> list[CallToolResult]:
        return [
            await client.call_tool("record_turn", {"task_id": TASK, "player": player, "coach": coach}),
            await client.call_tool("show", {"task_id": TASK}),
            await client.call_tool("record_turn", {"task_id": TASK, "player": player, "coach": coach}),
            await client.call_tool("record_turn", {"task_id": TASK, "player": player_report(1, summary="other"),
                                                   "coach": coach}),
        ]

    recorded, shown, retried, differing = with_server(repo, session)
    result = answer(recorded)
    assert (result["turn"], result["decision"]) == (1, "feedback")
    assert result["criteria"]["AC-001"] == "verified"
    view = answer(shown)
    assert [t["turn"] for t in view["turns"]] == [1]
    assert view["turns"][0]["feedback"] == "add the refresh test"
    assert view == cli_json(repo, "show", TASK)  # the CLI reads the same turn from the files
    assert answer(retried) == {"task_id": TASK, "turn": 1, "already_recorded": True,
                               "message": answer(retried)["message"]}
    # Different reports for a recorded turn: the refusal `record` exits 3 with, in its words.
    player_file, coach_file = repo / "p.json", repo / "c.json"
    player_file.write_text(json.dumps(player_report(1, summary="other")), encoding="utf-8")
    coach_file.write_text(json.dumps(coach), encoding="utf-8")
    done = cli(repo, "record", TASK, "--player", str(player_file), "--coach", str(coach_file))
    assert done.returncode == 3
    assert error_text(differing) == done.stderr.strip()
    assert differing.structured_content is not None
    assert differing.structured_content["error"] == "AlreadyRecordedError"


def test_a_bad_report_is_refused_with_the_cli_line_and_nothing_written(repo: Path) -> None:
    player_file, coach_file = write_reports(repo, 1, "feedback", feedback="x")
    bad = coach_decision(1, "feedback", feedback="x")
    del bad["decision"]
    coach_file.write_text(json.dumps(bad), encoding="utf-8")
    before = tree(repo)

    async def session(client: Client) -> list[CallToolResult]:
        return [
            await client.call_tool("record_turn", {"task_id": TASK, "player_file": "player1.json",
                                                   "coach_file": str(coach_file)}),
            await client.call_tool("record_turn", {"task_id": TASK, "player": player_report(1), "coach": bad}),
            await client.call_tool("record_turn", {"task_id": TASK, "player": player_report(1)}),
            await client.call_tool("record_turn", {"task_id": TASK, "player": player_report(1, task_id="TASK-X-9"),
                                                   "coach": coach_decision(1, "approve")}),
        ]

    from_files, inline, no_coach, other_task = with_server(repo, session)
    assert tree(repo) == before
    done = cli(repo, "record", TASK, "--player", str(player_file), "--coach", str(coach_file))
    assert done.returncode == 1
    assert tree(repo) == before
    assert error_text(from_files) == done.stderr.strip()
    assert "decision" in error_text(from_files)
    assert error_text(inline).startswith("error: ") and "decision" in error_text(inline)
    assert error_text(no_coach) == "error: give the coach report either inline ('coach') or as a file " \
        "('coach_file') (expected exactly one of coach, coach_file)"
    assert "TASK-X-9" in error_text(other_task)


def test_a_turn_the_cli_records_meanwhile_is_seen_by_the_running_server(repo: Path) -> None:
    async def session(client: Client) -> tuple[Any, Any, Any, Any]:
        before = answer(await client.call_tool("show", {"task_id": TASK}))
        context_before = answer(await client.call_tool("context", {"task_id": TASK}))
        await anyio.to_thread.run_sync(lambda: record_by_cli(repo, 1, "feedback", feedback="handle clock skew"))
        after = answer(await client.call_tool("show", {"task_id": TASK}))
        context_after = answer(await client.call_tool("context", {"task_id": TASK}))
        return before, context_before, after, context_after

    before, context_before, after, context_after = with_server(repo, session)
    assert (before["turns"], context_before["turn"]) == ([], 1)
    assert [t["feedback"] for t in after["turns"]] == ["handle clock skew"]
    assert context_after["turn"] == 2 and "handle clock skew" in context_after["context"]


def test_an_error_is_the_cli_line(repo: Path) -> None:
    async def session(client: Client) -> list[CallToolResult]:
        return [await client.call_tool("show", {"task_id": "TASK-NOPE-1"}),
                await client.call_tool("context", {"task_id": TASK, "turn": 5}),
                await client.call_tool("turn_reports", {"task_id": TASK}),
                await client.call_tool("show", {"task_id": "../../etc/passwd.md"})]

    results = with_server(repo, session)
    for result, argv in zip(results, [("show", "TASK-NOPE-1"), ("context", TASK, "--turn", "5"), None,
                                      ("show", "../../etc/passwd.md")], strict=True):
        if argv is None:
            assert error_text(result) == f"error: {TASK} has no recorded turn yet; 'record' or a loop records one"
            continue
        done = cli(repo, *argv)
        assert done.returncode == 2
        assert error_text(result) == done.stderr.strip()


# ------------------------------------------------------------------------------------------ resources


def test_the_task_file_and_a_turns_reports_are_resources(repo: Path) -> None:
    record_by_cli(repo, 1, "feedback", feedback="first")

    async def session(client: Client) -> tuple[Any, ...]:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        task = await client.read_resource(f"guardkit://task/{TASK}")
        turn = await client.read_resource(f"guardkit://task/{TASK}/turn/1")
        reports = answer(await client.call_tool("turn_reports", {"task_id": TASK, "turn": 1}))
        return templates, task, turn, reports

    templates, task, turn, reports = with_server(repo, session)
    assert templates == {"guardkit://task/{task_id}", "guardkit://task/{task_id}/turn/{turn}"}
    (task_text,) = task.contents
    assert isinstance(task_text, TextResourceContents)
    assert task_text.text == (repo / "tasks/backlog/TASK-AUTH-001-jwt-auth.md").read_text(encoding="utf-8")
    (turn_text,) = turn.contents
    assert isinstance(turn_text, TextResourceContents)
    assert json.loads(turn_text.text) == reports


def test_a_resource_that_cannot_be_read_is_a_protocol_error_with_the_cli_line(repo: Path) -> None:
    async def session(client: Client) -> list[str]:
        errors = []
        for uri in ("guardkit://task/TASK-NOPE-1", f"guardkit://task/{TASK}/turn/1", f"guardkit://task/{TASK}/turn/x"):
            with pytest.raises(MCPError) as failed:
                await client.read_resource(uri)
            errors.append(failed.value.error.message)
        return errors

    missing, unrecorded, not_a_number = with_server(repo, session)
    assert missing == cli(repo, "show", "TASK-NOPE-1").stderr.strip()
    assert unrecorded == f"error: {TASK} has no recorded turn yet; 'record' or a loop records one"
    assert not_a_number == "error: turn must be a number, not 'x'"


# ------------------------------------------------------------------------------------------ the wire


def test_stdout_carries_only_the_protocol(repo: Path) -> None:
    """Raw JSON-RPC on the server's pipes: every line it writes on stdout is a protocol message,
    while the tools it runs read files and run git (whose output must not reach the wire)."""
    record_by_cli(repo, 1, "feedback", feedback="first")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "feature",
                                                                       "arguments": {"feature_id": FEATURE_ID}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "show",
                                                                       "arguments": {"task_id": "TASK-NOPE-1"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "guardkit_state", "mcp", "--repo", str(repo)], cwd=repo,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    assert proc.stdin is not None and proc.stdout is not None
    replies: list[dict[str, Any]] = []
    for message in messages:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        if "id" in message:
            replies.append(json.loads(proc.stdout.readline()))  # a line that is not JSON fails here
    proc.stdin.close()
    rest = proc.stdout.read()
    assert proc.wait(timeout=60) == 0
    assert rest == ""
    assert [r["id"] for r in replies] == [1, 2, 3, 4]
    assert all(r["jsonrpc"] == "2.0" and "result" in r for r in replies)
    assert replies[2]["result"]["isError"] is True
    assert replies[3]["result"]["structuredContent"]["tasks"][0]["task_id"] == TASK


# ------------------------------------------------------------------------------------------ the CLI


def test_the_other_commands_never_import_the_sdk(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    code = ("import sys\nfrom guardkit_state.cli.app import run\ntry:\n    run(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp' or m.startswith('guardkit_state.mcp')))")
    for argv in (["status", "--json"], ["--help"], ["mcp", "--help"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.stdout.splitlines()[-1] == "[]", (argv, done.stdout[-300:], done.stderr[-300:])


def test_without_the_mcp_extra_the_command_says_which_install_fixes_it(tmp_path: Path) -> None:
    # The SDK made unimportable, as it is where the extra is not installed.
    code = "import sys\nsys.modules['mcp'] = None\nfrom guardkit_state.cli import main\nmain(sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", code, "mcp", "--repo", str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=False, env=_env())
    assert (done.returncode, done.stdout) == (1, "")
    # The command that installs it into this copy: here, a virtual environment's own pip.
    assert done.stderr == "error: the MCP server needs the mcp extra (mcp is not installed); install it with: " \
        f"{shlex.quote(sys.executable)} -m pip install 'mcp<3,>=2.3'\n"


def test_records_sent_at_once_are_taken_one_at_a_time(repo: Path) -> None:
    """Calls run in the server's worker threads: the same turn sent twice at once is recorded once
    and the other call answered "already recorded", never refused as locked."""
    player, coach = player_report(1), coach_decision(1, "feedback", feedback="add the refresh test")
    arguments = {"task_id": TASK, "player": player, "coach": coach}

    async def session(client: Client) -> list[Any]:
        results: list[Any] = []

        async def send() -> None:
            results.append(answer(await client.call_tool("record_turn", arguments)))

        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(send)
        return results

    results = with_server(repo, session)
    assert sorted(bool(r.get("already_recorded")) for r in results) == [False, True, True, True]
    assert [t["turn"] for t in cli_json(repo, "show", TASK)["turns"]] == [1]


def test_two_servers_on_one_repository_agree(repo: Path) -> None:
    """Neither keeps anything of its own: a turn recorded through one is in the other's next answer."""
    args = ["-m", "guardkit_state", "mcp", "--repo", str(repo)]
    player, coach = player_report(1), coach_decision(1, "feedback", feedback="cover the expired token")

    async def main() -> tuple[Any, Any, Any]:
        async with Client(StdioServerParameters(command=sys.executable, args=args, cwd=str(repo))) as first, \
                Client(StdioServerParameters(command=sys.executable, args=[*args, "--read-only"],
                                             cwd=str(repo))) as second:
            before = answer(await second.call_tool("show", {"task_id": TASK}))
            answer(await first.call_tool("record_turn", {"task_id": TASK, "player": player, "coach": coach}))
            return (before, answer(await first.call_tool("show", {"task_id": TASK})),
                    answer(await second.call_tool("show", {"task_id": TASK})))

    before, through_first, through_second = anyio.run(main)
    assert before["turns"] == []
    assert through_first == through_second
    assert [t["feedback"] for t in through_second["turns"]] == ["cover the expired token"]


def test_an_inline_report_is_read_as_strictly_as_a_report_file(repo: Path) -> None:
    """Nesting deeper than a report file may hold is refused as `record` refuses the file (the
    JSON-RPC parser would let it through), naming the report instead of a file; nothing written."""
    nested: Any = "deep"
    for _ in range(80):
        nested = [nested]
    player = player_report(1, concerns=[nested])
    coach = coach_decision(1, "feedback", feedback="x")
    player_file, coach_file = repo / "deep.json", repo / "coach.json"
    player_file.write_text(json.dumps(player), encoding="utf-8")
    coach_file.write_text(json.dumps(coach), encoding="utf-8")
    before = tree(repo)

    async def session(client: Client) -> CallToolResult:
        return await client.call_tool("record_turn", {"task_id": TASK, "player": player, "coach": coach})

    refused = with_server(repo, session)
    done = cli(repo, "record", TASK, "--player", str(player_file), "--coach", str(coach_file))
    assert done.returncode == 2
    assert error_text(refused) == done.stderr.strip().replace(str(player_file), "the player report")
    assert "nest" in error_text(refused)
    assert tree(repo) == before


def test_a_report_file_outside_the_repository_is_refused_with_nothing_written(repo: Path, tmp_path: Path) -> None:
    """The agent names files of the repository it was given: one reached by '..', an absolute path
    or a symlink out of it is refused, never copied into the turn's records (where turn_reports
    would serve it back)."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "player.json").write_text(json.dumps(player_report(1, secret="kept out")), encoding="utf-8")
    (outside / "coach.json").write_text(json.dumps(coach_decision(1, "feedback", feedback="x")), encoding="utf-8")
    (repo / "coach.json").write_text(json.dumps(coach_decision(1, "feedback", feedback="x")), encoding="utf-8")
    (repo / "linked.json").symlink_to(outside / "player.json")
    before = tree(repo)
    escapes = [os.path.relpath(outside / "player.json", repo), str(outside / "player.json"), "linked.json"]

    async def session(client: Client) -> list[CallToolResult]:
        results = [await client.call_tool("record_turn", {"task_id": TASK, "player_file": escape,
                                                          "coach_file": "coach.json"}) for escape in escapes]
        results.append(await client.call_tool("record_turn", {"task_id": TASK, "player": player_report(1),
                                                              "coach_file": str(outside / "coach.json")}))
        return results

    for refused in with_server(repo, session):
        assert "resolves outside the repository" in error_text(refused)
        assert refused.structured_content is not None
        assert refused.structured_content["error"] == "UnsafePathError"
    assert tree(repo) == before
    assert not (repo / ".guardkit" / "autobuild" / TASK).exists()


def test_an_error_echoing_a_line_break_or_an_escape_is_the_cli_one_line(repo: Path) -> None:
    """A value the error repeats (the agent's own argument here) holding a newline, an ANSI escape or
    a bidi control is escaped as the CLI escapes it: the tool error, and a resource error, stay one line."""
    odd = "tasks/backlog/x\ny\x1b[31m\u202ez\r.md"

    async def session(client: Client) -> tuple[CallToolResult, str]:
        shown = await client.call_tool("show", {"task_id": odd})
        with pytest.raises(MCPError) as failed:
            await client.read_resource("guardkit://task/x%0Ay%1B%5B2J.md")  # the SDK decodes it
        return shown, failed.value.error.message

    shown, resource_error = with_server(repo, session)
    done = cli(repo, "show", odd)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert error_text(shown) == done.stderr.strip()
    assert resource_error == cli(repo, "show", "x\ny\x1b[2J.md").stderr.strip()
    assert "\\n" in resource_error and "\\x1b" in resource_error


def test_a_request_nested_past_what_the_sdk_reads_gets_an_error_answer(repo: Path) -> None:
    """~200 levels: the SDK's reader refuses the line; the client still gets an answer (an MCP
    error naming the nesting), and the server answers the next request."""
    nested: Any = TASK
    for _ in range(200):
        nested = [nested]

    async def session(client: Client) -> tuple[str, Any]:
        with anyio.fail_after(60):  # no answer at all would hang here
            try:
                await client.call_tool("show", {"task_id": nested})
            except MCPError as exc:
                refused = str(exc)
            else:
                refused = "answered as if read"
            return refused, answer(await client.call_tool("show", {"task_id": TASK}))

    refused, shown = with_server(repo, session)
    assert refused.startswith("error: the request cannot be read: JSON nested deeper than 64 levels"), refused
    assert shown["task_id"] == TASK


def test_read_calls_keep_the_caches_and_a_read_only_server_writes_none(repo: Path, tmp_path: Path) -> None:
    """Each read call is one read: the caches every command keeps are written when it ends (the
    plans read once per change of the file); a read-only server reads them and writes none."""
    import shutil
    import time

    from guardkit_state.store.stat_cache import RACY_NS

    time.sleep(RACY_NS / 1e9 + 0.1)  # the fixture's files settled: a file changed just now is never kept
    copy = tmp_path / "read-only-copy"
    shutil.copytree(repo, copy)
    time.sleep(RACY_NS / 1e9 + 0.1)

    async def reads(client: Client) -> None:
        for name, arguments in (("status", {}), ("show", {"task_id": TASK}), ("feature", {"feature_id": "FEAT-FB"})):
            assert not (await client.call_tool(name, arguments)).is_error

    with_server(copy, reads, read_only=True)
    assert not (copy / ".guardkit" / "cache").exists()
    with_server(repo, reads)
    plans = json.loads((repo / ".guardkit" / "cache" / "plans.json").read_text(encoding="utf-8"))
    assert list(plans["files"]) == [".guardkit/features/FEAT-FB.yaml"]
    assert (repo / ".guardkit" / "cache" / "status.json").is_file()


# ------------------------------------------------------------------ answers kept while nothing changed


def _same_size_same_mtime(path: Path, old: str, new: str) -> None:
    """An in-place edit a stat could miss (same size, mtime put back): an editor within one tick."""
    assert len(old) == len(new)
    info = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_a_running_server_sees_every_change_to_what_it_answers_from(repo: Path) -> None:
    """The server keeps its answers while nothing they were read from changed: every change made
    meanwhile, in place, by a rename, in a folder made after it started, is in the next answer."""
    task = repo / "tasks" / "backlog" / "TASK-AUTH-001-jwt-auth.md"
    record_by_cli(repo, 1, "feedback", feedback="handle clock skew")
    moved = repo / "tasks" / "in_review" / "auth" / task.name
    fresh = repo / "tasks" / "design_approved" / "later" / "TASK-NEW-009.md"

    async def session(client: Client) -> list[Any]:
        seen = []

        async def look() -> None:
            shown = answer(await client.call_tool("show", {"task_id": TASK}))
            listed = answer(await client.call_tool("status", {}))
            where = Path(shown["path"]).resolve().relative_to(repo.resolve()).as_posix()
            seen.append((shown["status"], where, [t["feedback"] for t in shown["turns"]],
                         sorted(t["task_id"] for t in listed["tasks"])))

        await look()
        await look()  # nothing changed: the same answer
        _same_size_same_mtime(task, "status: in_progress", "status: in_review  ")
        await look()
        moved.parent.mkdir(parents=True)
        os.rename(task, moved)
        await look()
        fresh.parent.mkdir(parents=True)
        fresh.write_text(moved.read_text(encoding="utf-8").replace(TASK, "TASK-NEW-009"), encoding="utf-8")
        await look()
        await anyio.to_thread.run_sync(lambda: record_by_cli(repo, 2, "feedback", feedback="now the expiry"))
        await look()
        return seen

    seen = with_server(repo, session)
    relative = moved.relative_to(repo).as_posix()
    assert seen == [
        ("in_progress", "tasks/backlog/TASK-AUTH-001-jwt-auth.md", ["handle clock skew"], [TASK]),
        ("in_progress", "tasks/backlog/TASK-AUTH-001-jwt-auth.md", ["handle clock skew"], [TASK]),
        ("in_review", "tasks/backlog/TASK-AUTH-001-jwt-auth.md", ["handle clock skew"], [TASK]),
        ("in_review", relative, ["handle clock skew"], [TASK]),
        ("in_review", relative, ["handle clock skew"], [TASK, "TASK-NEW-009"]),
        ("in_progress", relative, ["handle clock skew", "now the expiry"], [TASK, "TASK-NEW-009"]),
    ]


def test_an_answer_is_read_once_while_nothing_it_was_read_from_changed(repo: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from guardkit_state.inspect import status as status_module
    from guardkit_state.mcp_server.serve import build_server

    reads: list[str] = []
    real = status_module.repo_status
    monkeypatch.setattr(status_module, "repo_status", lambda root: reads.append("status") or real(root))
    task = repo / "tasks" / "backlog" / "TASK-AUTH-001-jwt-auth.md"

    async def main() -> list[int]:
        counts = []
        async with Client(build_server(repo)) as client:  # the SDK's client, in this process
            for edit in (None, None, lambda: _same_size_same_mtime(task, "backlog", "blocked"), None):
                if edit is not None:
                    edit()
                answer(await client.call_tool("status", {}))
                counts.append(len(reads))
        return counts

    assert anyio.run(main) == [1, 1, 2, 2]  # read again only after the edit


def test_a_symlinked_task_file_edited_through_its_target_is_seen(repo: Path) -> None:
    # No event reaches the folder holding a link when its target changes: the server reads the
    # files on every call then (it never keeps an answer).
    task = repo / "tasks" / "backlog" / "TASK-AUTH-001-jwt-auth.md"
    target = repo / "docs-tasks" / task.name
    target.parent.mkdir()
    os.rename(task, target)
    task.symlink_to(target)

    async def session(client: Client) -> tuple[str, str]:
        before = answer(await client.call_tool("show", {"task_id": TASK}))["status"]
        _same_size_same_mtime(target, "status: backlog", "status: blocked")
        return before, answer(await client.call_tool("show", {"task_id": TASK}))["status"]

    assert with_server(repo, session) == ("backlog", "blocked")
