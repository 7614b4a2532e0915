"""End-to-end tests: the real ``guardkit-state`` CLI runs the example project's loop in subprocesses.

Each test copies ``examples/project`` into a fresh git repository and drives ``feature-build`` with
the scripted Player and Coach of ``examples/agents`` (wrapped by ``e2e_agent_wrapper.py`` so every
agent call is logged). Interruptions are real: SIGKILL, SIGINT and SIGTERM of the loop process, and
SIGKILL inside the recording step through ``GUARDKIT_STATE_CRASH_AT``. Waits poll files; no test
sleeps for a fixed time.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardkit_state.store.fsio import TEMP_PREFIX

from .e2e_support import (
    ALL_VERIFIED,
    FIX_MARKER,
    GUARDKIT_STATE,
    REFERENCE_HISTORY,
    TASK_ID,
    TASK_REL,
    Background,
    Project,
    Run,
    clean_env,
    git,
    group_alive,
    wait_until,
)

pytestmark = pytest.mark.skipif(not GUARDKIT_STATE.exists(), reason=f"{GUARDKIT_STATE} is not installed")

#: Every agent call of an uninterrupted approved run, once each.
ONE_RUN = Counter({("player", 1): 1, ("coach", 1): 1, ("player", 2): 1, ("coach", 2): 1})


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    proj = Project.create(tmp_path)
    yield proj
    proj.cleanup()


@pytest.fixture(scope="module")
def approved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Project, Run, str, str]]:
    """One uninterrupted approved run, shared by the read-only tests below."""
    proj = Project.create(tmp_path_factory.mktemp("approved"))
    status_before = git(proj.root, "status", "--porcelain", "--untracked-files=all", "--ignored=no")
    main_head = git(proj.root, "rev-parse", "HEAD").strip()
    run = proj.build()
    yield proj, run, status_before, main_head
    proj.cleanup()


def expected_calls(**changes: int) -> Counter[tuple[str, int]]:
    """ONE_RUN with some (role, turn) counts changed: ``player_2=2`` means turn 2's Player ran twice."""
    calls = Counter(ONE_RUN)
    for key, count in changes.items():
        role, turn = key.split("_")
        calls[(role, int(turn))] = count
    return +calls


def assert_finished_like_uninterrupted(proj: Project, resume: Run) -> None:
    """The resumed run approved, with the same history and commits as an uninterrupted run."""
    assert resume.returncode == 0, resume.output
    assert "approved" in resume.stdout
    assert proj.history() == REFERENCE_HISTORY
    commits = proj.turn_commits()
    assert [(c["turn"], c["decision"]) for c in commits] == [("1", "feedback"), ("2", "approve")]
    assert git(proj.worktree, "status", "--porcelain") == ""
    assert proj.validate_worktree().returncode == 0
    # Every agent call that finished, finished exactly once: no finished work was redone.
    assert proj.counts("end") == ONE_RUN


# -- an approved run and the read commands -------------------------------------------------------

def test_approved_run_exits_0_with_two_turns_all_criteria_verified(approved: tuple[Project, Run, str, str]) -> None:
    proj, run, _, _ = approved
    assert run.returncode == 0, run.output
    assert f"{TASK_ID}: approved — approved by the Coach in turn 2" in run.stdout
    shown = proj.show()
    assert shown["status"] == "in_review"
    assert shown["outcome"] == "approved"
    assert shown["in_worktree"] is True
    assert [(t["turn"], t["mode"], t["decision"]) for t in shown["turns"]] == [
        (1, "fresh_start", "feedback"), (2, "continuing_work", "approve")]
    assert {c["id"]: c["status"] for c in shown["criteria"]} == ALL_VERIFIED
    assert {c["id"]: c["set_by_turn"] for c in shown["criteria"]} == {
        "AC-001": 1, "AC-002": 1, "AC-003": 2, "AC-004": 1}
    assert proj.history() == REFERENCE_HISTORY
    assert proj.counts() == ONE_RUN
    assert [(r["role"], r["turn"], r["mode"], r["code"]) for r in proj.invocations("end")] == [
        ("player", 1, "fresh_start", 0), ("coach", 1, "fresh_start", 0),
        ("player", 2, "continuing_work", 0), ("coach", 2, "continuing_work", 0)]


def test_approved_run_commits_each_turn_with_trailers_and_leaves_main_untouched(
        approved: tuple[Project, Run, str, str]) -> None:
    proj, _, status_before, main_head = approved
    commits = proj.turn_commits()
    assert [(c["subject"], c["task"], c["turn"], c["decision"], c["mode"]) for c in commits] == [
        (f"autobuild({TASK_ID}): turn 1 feedback", TASK_ID, "1", "feedback", "fresh_start"),
        (f"autobuild({TASK_ID}): turn 2 approve", TASK_ID, "2", "approve", "continuing_work"),
    ]
    changed = git(proj.root, "show", "--name-only", "--format=", commits[1]["sha"]).split()
    assert sorted(changed) == sorted([
        "durations.py", str(TASK_REL),
        *(f".guardkit/autobuild/{TASK_ID}/{kind}_turn_2.json" for kind in ("player", "coach", "turn_state"))])
    assert git(proj.worktree, "status", "--porcelain") == ""
    # The main checkout: same status, same HEAD, task file as committed (the worktree holds the state).
    assert git(proj.root, "status", "--porcelain", "--untracked-files=all", "--ignored=no") == status_before == ""
    assert git(proj.root, "rev-parse", "HEAD").strip() == main_head
    assert "autobuild_state" not in (proj.root / TASK_REL).read_text(encoding="utf-8")


def test_turn_2_player_context_has_turn_1_feedback_and_criteria(approved: tuple[Project, Run, str, str]) -> None:
    proj, _, _, _ = approved
    seen = (proj.logdir / "context_seen_player_turn_2.md").read_text(encoding="utf-8")
    assert "## Previous Turn Summary (Turn 1)" in seen
    assert "**Coach decision**: feedback" in seen
    assert "**Coach feedback**: AC-003 not met (acceptance tests fail):" in seen
    assert "test_empty_string (AssertionError: ValueError not raised)" in seen
    for line in ("✓ AC-001", "✓ AC-002", "✗ AC-003", "✓ AC-004"):
        assert f"\n  {line}: " in seen, line
    # The file is kept in the worktree, and `context` renders exactly what the Player saw.
    assert (proj.artifacts / ".work" / "context_turn_2.md").read_text(encoding="utf-8") == seen
    context = proj.cli("context", TASK_ID, "--turn", "2")
    assert context.returncode == 0, context.output
    assert context.stdout == seen
    # Turn 1 had no previous turn to summarise; turn 2's Player fixed exactly what the context named.
    assert "Previous Turn Summary" not in (proj.logdir / "context_seen_player_turn_1.md").read_text(encoding="utf-8")
    report = json.loads((proj.artifacts / "player_turn_2.json").read_text(encoding="utf-8"))
    assert report["summary"] == "Fixed AC-003 from the Coach's feedback"


def test_show_text_and_json_from_the_main_checkout(approved: tuple[Project, Run, str, str]) -> None:
    proj, _, _, _ = approved
    text = proj.cli("show", TASK_ID)
    assert text.returncode == 0, text.output
    assert "status in_review · 2 turn(s) of 5 · criteria 4/4 verified · outcome approved" in text.stdout
    assert f"worktree copy: {proj.worktree / TASK_REL}" in text.stdout
    assert "   1  fresh_start       feedback  AC-003 not met" in text.stdout
    assert "  ✓ AC-003: " in text.stdout and "verified (turn 2)" in text.stdout
    shown = proj.show()
    assert shown["path"] == str(proj.worktree / TASK_REL)
    assert shown["resume"]["action"] == "finished"


def test_status_json_and_plain_output(approved: tuple[Project, Run, str, str]) -> None:
    proj, _, _, _ = approved
    data = json.loads(proj.cli("status", "--json").stdout)
    assert [(e["task_id"], e["status"], e["turns"], e["last_decision"], e["verified"], e["total"],
             e["outcome"], e["in_worktree"]) for e in data] == [
        (TASK_ID, "in_review", 2, "approve", 4, 4, "approved", True)]
    piped = proj.cli("status")
    no_color = proj.cli("status", NO_COLOR="1")
    forced = proj.cli("status", FORCE_COLOR="1")
    assert piped.returncode == no_color.returncode == 0
    assert piped.stdout == no_color.stdout
    assert piped.stdout.split() == [TASK_ID, "in_review", "2", "turn(s)", "approve", "4/4", "verified", "(worktree)"]
    assert "\x1b[" not in piped.stdout + no_color.stdout
    assert "\x1b[" in forced.stdout  # the check above would see colour if there were any


def test_log_json_and_diff_of_turn_2(approved: tuple[Project, Run, str, str]) -> None:
    proj, _, _, _ = approved
    log = json.loads(proj.cli("log", TASK_ID, "--json").stdout)
    assert log["source"] == f"branch autobuild/{TASK_ID}"
    assert [(t["turn"], t["decision"], t["mode"], t["verified_count"], t["delta"]) for t in log["turns"]] == [
        (1, "feedback", "fresh_start", 3, ["+AC-001", "+AC-002", "+AC-004"]),
        (2, "approve", "continuing_work", 4, ["+AC-003"])]
    assert [t["sha"] for t in log["turns"]] == [c["sha"] for c in proj.turn_commits()]
    diff = proj.cli("diff", TASK_ID, "--turn", "2", "--stat")
    assert diff.returncode == 0, diff.output
    assert "Turn: 2" in diff.stdout and "Decision: approve" in diff.stdout
    assert "durations.py" in diff.stdout and "player_turn_2.json" in diff.stdout
    assert "player_turn_1.json" not in diff.stdout
    assert "5 files changed" in diff.stdout


# -- runs that end without approval ---------------------------------------------------------------

def test_max_turns_reached_exits_1_with_the_reason(project: Project) -> None:
    run = project.build("--max-turns", "2", DEMO_PLAYER_MODE="never-fix")
    assert run.returncode == 1, run.output
    assert f"{TASK_ID}: max_turns_exceeded — the Coach did not approve within 2 turns" in run.stdout
    shown = project.show()
    assert [t["decision"] for t in shown["turns"]] == ["feedback", "feedback"]
    assert (shown["status"], shown["outcome"]) == ("blocked", "max_turns_exceeded")
    assert project.counts() == Counter({("player", 1): 1, ("coach", 1): 1, ("player", 2): 1, ("coach", 2): 1})


def test_stall_exits_1_unrecoverable_stall_and_blocks_the_task(project: Project) -> None:
    run = project.build("--max-turns", "9", DEMO_PLAYER_MODE="never-fix")
    assert run.returncode == 1, run.output
    assert f"{TASK_ID}: unrecoverable_stall — the same feedback 5 turns in a row with 3 criteria verified" in run.stdout
    shown = project.show()
    assert (shown["status"], shown["outcome"]) == ("blocked", "unrecoverable_stall")
    assert [t["turn"] for t in shown["turns"]] == [1, 2, 3, 4, 5]
    assert {c["id"]: c["status"] for c in shown["criteria"]}["AC-003"] == "rejected"
    assert project.counts()[("player", 6)] == 0
    assert "status: blocked\n" in (project.worktree / TASK_REL).read_text(encoding="utf-8")


@pytest.mark.parametrize(("mode", "extra", "reason"), [
    ("crash", ("--max-turns", "2"), "Player exited with status 3"),
    ("hang", ("--max-turns", "1", "--turn-timeout", "1"), "Player timed out after 1s (--turn-timeout)"),
    ("invalid-json", ("--max-turns", "1"), "Player wrote an invalid report"),
])
def test_failing_player_is_an_error_turn_and_state_stays_valid(project: Project, mode: str,
                                                                extra: tuple[str, ...], reason: str) -> None:
    run = project.build(*extra, DEMO_PLAYER_MODE=mode)
    assert run.returncode == 1, run.output
    assert "max_turns_exceeded" in run.stdout
    shown = project.show()
    turns = shown["turns"]
    assert [t["decision"] for t in turns] == ["error"] * len(turns)
    assert len(turns) == int(extra[1])
    for turn in turns:
        assert reason in turn["feedback"]
        assert turn["player_success"] is False and turn["coach_success"] is False
    if mode == "invalid-json":
        assert "player_report_1.json" in turns[0]["feedback"]
    state = json.loads((project.artifacts / "turn_state_turn_1.json").read_text(encoding="utf-8"))
    assert state["coach_decision"] == "error" and reason in state["error"]
    assert {c["id"]: c["status"] for c in shown["criteria"]} == dict.fromkeys(ALL_VERIFIED, "pending")
    assert not (project.artifacts / "player_turn_1.json").exists()
    assert project.counts() == Counter({("player", n): 1 for n in range(1, len(turns) + 1)})  # no Coach call
    # The agent's whole process tree is gone (a hung Player is killed, not orphaned).
    for call in project.invocations():
        wait_until(lambda: not group_alive(call["pgid"]), what="the agent's process group to exit", limit=10)
    validate = project.validate_worktree()
    assert validate.returncode == 0, validate.output
    assert [c["turn"] for c in project.turn_commits()] == [str(n) for n in range(1, len(turns) + 1)]


# -- SIGKILL at each phase of a turn, then --resume ---------------------------------------------

def test_sigkill_while_player_runs_then_resume_reruns_only_that_player(project: Project) -> None:
    loop = project.start_build(DEMO_PLAYER_SLEEP="60", DEMO_PLAYER_SLEEP_TURN="2")
    durations = project.worktree / "durations.py"
    wait_until(lambda: project.has_event("start", "player", 2) and durations.is_file()
               and FIX_MARKER in durations.read_text(encoding="utf-8"), proc=loop.proc,
               what="turn 2's Player to edit durations.py")
    orphan = next(project.unfinished_agents())
    loop.signal(signal.SIGKILL)
    assert loop.finish().returncode == -signal.SIGKILL
    # The Player runs in a session of its own, so it outlives the killed loop ...
    assert group_alive(orphan["pgid"])
    assert [t["turn"] for t in project.show()["turns"]] == [1]
    assert not (project.artifacts / "player_turn_2.json").exists()

    resume = project.build("--resume")
    # ... until the resumed run stops it, before re-running the turn it was working on.
    assert (f"stopped the player of turn 2 (process group {orphan['pgid']}) left running by the "
            "interrupted loop") in resume.stderr
    assert not group_alive(orphan["pgid"])
    assert "turn 2 was interrupted: re-run it (recovering_state)" in resume.stderr
    assert_finished_like_uninterrupted(project, resume)
    assert project.counts() == expected_calls(player_2=2)
    assert [r["mode"] for r in project.invocations() if (r["role"], r["turn"]) == ("player", 2)] == [
        "continuing_work", "recovering_state"]
    assert [t["mode"] for t in project.show()["turns"]] == ["fresh_start", "recovering_state"]


def test_sigkill_while_coach_runs_then_resume_reruns_only_the_coach(project: Project) -> None:
    loop = project.start_build(E2E_SLOW_ROLE="coach", E2E_SLOW_TURN="2")
    wait_until(lambda: project.has_event("waiting", "coach", 2), proc=loop.proc, what="turn 2's Coach to start")
    orphan = next(project.unfinished_agents())
    loop.signal(signal.SIGKILL)
    assert loop.finish().returncode == -signal.SIGKILL
    assert (project.artifacts / "player_turn_2.json").is_file()
    assert not (project.artifacts / "coach_turn_2.json").exists()

    resume = project.build("--resume")
    assert f"stopped the coach of turn 2 (process group {orphan['pgid']})" in resume.stderr
    assert not group_alive(orphan["pgid"])
    assert "turn 2 has the Player's report: re-run only the Coach" in resume.stderr
    assert "reusing the player report(s) already on disk" in resume.stderr
    assert_finished_like_uninterrupted(project, resume)
    assert project.counts() == expected_calls(coach_2=2)


#: (crash point, turn files on disk after the kill, turns recorded, agent calls over both runs,
#:  what the resumed run says). Write numbers count atomic writes of a fresh run: 1-3 are
#:  .gitignore files, then per turn: context, criteria, Player schema, Player prompt, player_turn,
#:  diff, Coach schema, Coach prompt, coach_turn, turn_state, task file (turn 1: writes 4-14,
#:  turn 2: writes 15-25). Agents' pid files are written by the
#:  agent processes themselves, before they start, and are not counted.
#:  The file checks after the kill pin that numbering.
CRASHES = [
    ("write.before_replace:8", set(), 0, {}, "reused the Player's report player_report_1.json"),
    ("write.after_replace:8", {"player_turn_1"}, 0, {}, "re-run only the Coach"),
    ("write.before_replace:12", {"player_turn_1"}, 0, {}, "reused the Coach's report coach_report_1.json"),
    ("write.after_replace:12", {"player_turn_1", "coach_turn_1"}, 0, {}, "complete it without calling an agent"),
    ("taskfile.before_write:1", {"player_turn_1", "coach_turn_1", "turn_state_turn_1"}, 0, {},
     "complete it without calling an agent"),
    ("write.before_replace:14", {"player_turn_1", "coach_turn_1", "turn_state_turn_1"}, 0, {},
     "complete it without calling an agent"),
    ("write.after_replace:14", {"player_turn_1", "coach_turn_1", "turn_state_turn_1"}, 1, {},
     "committed turn 1, which was recorded but not committed"),
    ("write.after_replace:23", {"player_turn_1", "coach_turn_1", "turn_state_turn_1", "player_turn_2",
                                "coach_turn_2"}, 1, {}, "complete it without calling an agent"),
    ("taskfile.before_write:2", {"player_turn_1", "coach_turn_1", "turn_state_turn_1", "player_turn_2",
                                 "coach_turn_2", "turn_state_turn_2"}, 1, {}, "complete it without calling an agent"),
    ("write.after_replace:25", {"player_turn_1", "coach_turn_1", "turn_state_turn_1", "player_turn_2",
                                "coach_turn_2", "turn_state_turn_2"}, 2, {},
     "committed turn 2, which was recorded but not committed"),
]


#: Points whose recovery path another case already covers: kept for the slow (full) run.
SLOW_CRASHES = {"taskfile.before_write:1", "write.after_replace:23", "taskfile.before_write:2"}


@pytest.mark.parametrize(("crash_at", "files", "recorded", "calls", "message"), [
    pytest.param(*case, id=case[0], marks=[pytest.mark.slow] if case[0] in SLOW_CRASHES else [])
    for case in CRASHES])
def test_sigkill_inside_the_recording_step_then_resume(project: Project, crash_at: str, files: set[str],
                                                       recorded: int, calls: dict[str, int], message: str) -> None:
    crashed = project.build(GUARDKIT_STATE_CRASH_AT=crash_at)
    assert crashed.returncode == -signal.SIGKILL, crashed.output
    assert {p.stem for p in project.artifacts.glob("*.json")} == files
    assert len(project.show()["turns"]) == recorded
    # What a kill leaves behind is consistent before any repair: every file validates.
    assert project.validate_worktree().returncode == 0
    assert len(temp_files(project)) == (1 if "before_replace" in crash_at else 0)

    resume = project.build("--resume")
    assert message in resume.stderr
    if "before_replace" in crash_at:
        assert "removed 1 temp file(s) left by an interrupted write" in resume.stderr
    assert_finished_like_uninterrupted(project, resume)
    assert project.counts() == expected_calls(**calls)
    assert temp_files(project) == []


def temp_files(proj: Project) -> list[Path]:
    """Temp files of atomic writes in the turn store and the task's directory."""
    return [*proj.artifacts.glob(f"{TEMP_PREFIX}*"), *(proj.worktree / TASK_REL).parent.glob(f"{TEMP_PREFIX}*")]


def test_resume_removes_a_stale_git_lock_left_by_a_killed_commit(project: Project) -> None:
    crashed = project.build(GUARDKIT_STATE_CRASH_AT="write.after_replace:9")
    assert crashed.returncode == -signal.SIGKILL
    # A kill during `git commit` leaves the worktree's index.lock behind; no git process holds it.
    lock = Path(git(project.worktree, "rev-parse", "--absolute-git-dir").strip()) / "index.lock"
    lock.write_bytes(b"")
    resume = project.build("--resume")
    assert "removed stale git lock" in resume.stderr
    assert not lock.exists()
    assert_finished_like_uninterrupted(project, resume)


def test_resume_removes_a_read_cache_temp_file_a_kill_left(project: Project) -> None:
    # A kill while a command saved its read cache (``.guardkit/cache/listing.json``) leaves the temp
    # file in the cache folder, of the main checkout or the worktree: a finished loop leaves none.
    crashed = project.build(GUARDKIT_STATE_CRASH_AT="write.after_replace:9")
    assert crashed.returncode == -signal.SIGKILL
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = [checkout / ".guardkit" / "cache" / f"{TEMP_PREFIX}listing.json.{dead.pid}.1000001"
            for checkout in (project.root, project.worktree)]
    for path in left:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"version": 3, "fil', encoding="utf-8")
    resume = project.build("--resume")
    assert_finished_like_uninterrupted(project, resume)
    assert [path for path in left if path.exists()] == []


# -- Ctrl-C and SIGTERM --------------------------------------------------------------------------

@pytest.mark.parametrize(("signum", "role"), [
    (signal.SIGINT, "player"), (signal.SIGTERM, "player"), (signal.SIGHUP, "player"), (signal.SIGINT, "coach")],
    ids=["SIGINT-player", "SIGTERM-player", "SIGHUP-player", "SIGINT-coach"])
def test_interrupt_during_an_agent_saves_state_and_resume_completes(project: Project, signum: int,
                                                                    role: str) -> None:
    loop = project.start_build(E2E_SLOW_ROLE=role, E2E_SLOW_TURN="2")
    wait_until(lambda: project.has_event("waiting", role, 2), proc=loop.proc, what=f"turn 2's {role}")
    agent = next(project.unfinished_agents())
    loop.signal(signum)
    stopped = loop.finish()
    assert stopped.returncode == 130, stopped.output
    # The way on is the command that was run, with --resume: real agent commands, quoted for the shell.
    hint = shlex.join(["guardkit-state", *project.build_args(), "--resume"])
    assert f"error: interrupted during turn 2 ({role}): state saved; continue with {hint}\n" in stopped.stderr
    # The loop stopped its agent itself: nothing is left running.
    wait_until(lambda: not group_alive(agent["pgid"]), what="the interrupted agent to exit", limit=10)
    assert [t["turn"] for t in project.show()["turns"]] == [1]

    pasted = shlex.split(stopped.stderr.strip().splitlines()[-1].split("continue with ", 1)[1])
    assert pasted[0] == "guardkit-state"
    resume = project.cli(*pasted[1:])  # pasted as it is
    assert_finished_like_uninterrupted(project, resume)
    assert project.counts() == expected_calls(**{f"{role}_2": 2})


def test_a_run_started_under_nohup_outlives_a_hangup(project: Project) -> None:
    # `nohup guardkit-state feature-build ... &` over SSH: the session drops (SIGHUP to the group)
    # while turn 2's Player works; the run asked to outlive the terminal, so it goes on to approval.
    slow = {"E2E_SLOW_ROLE": "player", "E2E_SLOW_TURN": "2", "E2E_SLOW_SECONDS": "2"}
    out_path, err_path = project.logdir / "nohup.out", project.logdir / "nohup.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(["nohup", str(GUARDKIT_STATE), *project.build_args()], cwd=project.root,
                                env=clean_env(**slow), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    run = Background(proc, project.build_args(), out_path, err_path)
    project.started.append(run)
    wait_until(lambda: project.has_event("waiting", "player", 2), proc=proc, what="turn 2's Player")
    run.signal(signal.SIGHUP)
    assert_finished_like_uninterrupted(project, run.finish())
    assert project.counts() == ONE_RUN


# -- refusals -------------------------------------------------------------------------------------

def test_resume_without_state_exits_2_says_how_to_start_and_creates_nothing(project: Project) -> None:
    run = project.build("--resume")
    assert run.returncode == 2, run.output
    assert (f"error: {TASK_ID} has no loop state to resume; start it with "
            f"'guardkit-state feature-build {TASK_ID} --player CMD --coach CMD'") in run.stderr
    assert not project.worktree.exists()
    assert git(project.root, "branch", "--list", project.branch) == ""
    assert project.invocations() == []


def test_unknown_task_exits_2(project: Project) -> None:
    run = project.cli("feature-build", "TASK-NOPE-001", "--player", "true", "--coach", "true")
    assert run.returncode == 2, run.output
    assert "no task file for TASK-NOPE-001" in run.stderr


def test_second_concurrent_build_of_the_same_task_fails_fast(project: Project) -> None:
    first = project.start_build(E2E_SLOW_ROLE="player", E2E_SLOW_TURN="1")
    wait_until(lambda: project.has_event("waiting", "player", 1), proc=first.proc, what="the first loop's Player")
    second = project.build()
    assert second.returncode == 2, second.output
    assert "another guardkit-state process holds this lock" in second.stderr
    assert f"{TASK_ID}.lock" in second.stderr
    assert first.proc.poll() is None  # the second did not wait for the first
    assert project.counts() == Counter({("player", 1): 1})
    first.signal(signal.SIGTERM)
    assert first.finish().returncode == 130
