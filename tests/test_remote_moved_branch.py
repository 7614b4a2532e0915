"""A task branch moved on the remote under a running turn (a person's push, a force push): the
worker never drops the turn it ran. Real clones of one bare remote, a worker in this process with
the scripted agents as subprocesses, and the person's push made from the Player's turn by git."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from guardkit_state.remote.worker import WorkerOptions, run_worker
from tests.feature_support import FEATURE_BRANCH, FEATURE_ID, FeatureProject, TaskSpec, git, make_feature
from tests.remote_support import clone, make_bare

TASK = "TASK-FB-001"
BRANCH = f"autobuild/{TASK}"
TASK_FILE = f"tasks/backlog/{TASK}-part.md"


def _person_pushes_at_turn(person: Path, turn: int, edit: str, *, force_to: str | None = None) -> str:
    """A shell line the Player runs: at ``turn`` (its first run only), a person's clone edits the
    task branch and pushes it (``force_to``: resets it there first and force-pushes) while the
    turn is still running."""
    here, mark = shlex.quote(str(person)), shlex.quote(str(person / ".git" / "pushed"))
    steps = [f"test ! -e {mark}", f"touch {mark}", f"cd {here}", "git fetch -q origin",
             f"git checkout -q -B work origin/{force_to or BRANCH}", edit, "git add -A",
             "git commit -qm 'a person edits the task'",
             f"git push -q {'--force ' if force_to else ''}origin HEAD:{BRANCH}"]
    return f'if [ "$GUARDKIT_TURN" = {turn} ]; then ( {" && ".join(steps)} ) >/dev/null 2>&1; fi'


def _project(tmp_path: Path, shell: str) -> tuple[FeatureProject, Path, Path]:
    """A one-task feature (approved at turn 3) whose Player runs ``shell`` each turn, its bare
    remote, this worker's clone, and a person's clone (``tmp_path/person``)."""
    project = make_feature(tmp_path, [TaskSpec(TASK, approve_at=3, shell=shell)])
    bare = make_bare(tmp_path, project.root)
    mine = clone(bare.as_uri(), tmp_path / "machine-1")
    clone(bare.as_uri(), tmp_path / "person")
    git(mine, "branch", FEATURE_BRANCH, "origin/main")
    git(mine, "push", "-q", "origin", FEATURE_BRANCH)
    return project, bare, mine


def _run(project: FeatureProject, mine: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, list[str]]:
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    notes: list[str] = []
    player, coach = project.agents()
    result = run_worker(mine, FEATURE_ID, player, coach, WorkerOptions(remote="origin", poll=0.1, max_turns=6),
                        on_note=notes.append)
    return result, notes


def _players(project: FeatureProject) -> list[int]:
    return [e["turn"] for e in project.invocations() if e["role"] == "player" and e["event"] == "start"]


def _turns(bare: Path, rev: str) -> list[tuple[int, str]]:
    text = git(bare, "show", f"{rev}:{TASK_FILE}")
    state = yaml.safe_load(text.split("---\n")[1])["autobuild_state"]
    return [(t["turn"], t["decision"]) for t in state["turns"]]


def test_a_persons_push_under_a_running_turn_is_merged_under_the_turn(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    edit = f"printf 'A note from a person.\\n' >> {TASK_FILE}"
    project, bare, mine = _project(tmp_path, _person_pushes_at_turn(tmp_path / "person", 2, edit))
    result, notes = _run(project, mine, monkeypatch)
    assert result.done, (result.reason, notes)  # type: ignore[attr-defined]
    assert _players(project) == [1, 2, 3]  # turn 2 ran once: its work is on the branch, not run again
    # The person's edit and every turn's work are on the merged feature branch.
    merged = git(bare, "show", f"{FEATURE_BRANCH}:{TASK_FILE}")
    assert "A note from a person." in merged
    assert git(bare, "show", f"{FEATURE_BRANCH}:src/{TASK}.txt").splitlines() == [
        f"{TASK} turn 1", f"{TASK} turn 2", f"{TASK} turn 3"]
    assert _turns(bare, FEATURE_BRANCH) == [(1, "feedback"), (2, "feedback"), (3, "approve")]
    assert any("moved on the remote under turn 2" in n and "merged" in n for n in notes), notes
    assert not any("dropped" in n for n in notes), notes


CRITERION = f"printf -- '- [ ] AC-002: it is documented\\n' >> {TASK_FILE}"
CONFLICT = f"printf 'a line of a person\\n' >> src/{TASK}.txt"


@pytest.mark.parametrize(("edit", "force", "why", "players", "src"), [
    (CRITERION, False, "the task file's acceptance criteria changed", [1, 2, 2, 3],
     [f"{TASK} turn 1", f"{TASK} turn 2", f"{TASK} turn 3"]),
    (CONFLICT, False, f"it conflicts with turn 2 in src/{TASK}.txt", [1, 2, 2, 3],
     [f"{TASK} turn 1", "a line of a person", f"{TASK} turn 2", f"{TASK} turn 3"]),
    (CONFLICT, True, "its history was rewritten (a force push)", [1, 2, 1, 2, 3],
     ["a line of a person", f"{TASK} turn 1", f"{TASK} turn 2", f"{TASK} turn 3"]),
], ids=["criteria-changed", "conflict", "force-push"])
def test_a_turn_the_moved_branch_does_not_merge_with_is_kept_on_its_ref_and_run_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str, force: bool, why: str, players: list[int],
        src: list[str]) -> None:
    shell = _person_pushes_at_turn(tmp_path / "person", 2, edit, force_to=FEATURE_BRANCH if force else None)
    project, bare, mine = _project(tmp_path, shell)
    result, notes = _run(project, mine, monkeypatch)
    assert result.done, (result.reason, notes)  # type: ignore[attr-defined]
    # The turn that ran under the move is kept, on the remote too, with its work and its records.
    [kept] = git(bare, "for-each-ref", "--format=%(refname)", "refs/guardkit/kept/").split()
    assert kept.startswith(f"refs/guardkit/kept/{FEATURE_ID}/{TASK}/")
    assert git(bare, "log", "-1", "--format=%s", kept).strip() == f"autobuild({TASK}): turn 2 feedback"
    assert git(bare, "show", f"{kept}:src/{TASK}.txt").splitlines() == [f"{TASK} turn 1", f"{TASK} turn 2"]
    [said] = [n for n in notes if kept in n]
    assert why in said and f"git push origin :{kept}" in said, said
    assert _players(project) == players  # turn 2 run again on what the person pushed
    assert git(bare, "show", f"{FEATURE_BRANCH}:src/{TASK}.txt").splitlines() == src
    assert _turns(bare, FEATURE_BRANCH) == [(1, "feedback"), (2, "feedback"), (3, "approve")]
    # show --remote names it.
    shown = subprocess.run([sys.executable, "-m", "guardkit_state", "show", FEATURE_ID, "--remote", "origin",
                            "--json"], cwd=mine, capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    [task] = json.loads(shown.stdout)["tasks"]
    assert task["kept"] == [{"ref": kept, "commit": f"autobuild({TASK}): turn 2 feedback"}]


def test_a_task_file_pushed_over_the_cap_is_never_read_nor_merged_under_a_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A push on top of the turn, the task file's criteria as they were but the file over the cap (a
    # blob of gigabytes; the cap monkeypatched small): unreadable, as on disk, so the turn is kept.
    from guardkit_state.features.standing import feature_git
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.remote.alignment import CloneAlignment
    from guardkit_state.remote.branches import RemoteBranches
    from guardkit_state.remote.ledgers import RemoteLedgers
    from guardkit_state.remote.turn_pushes import TurnPushes
    from guardkit_state.store import reads
    from tests.conftest import commit_on_branch, git_answer_sizes
    from tests.feature_support import task_text

    project = make_feature(tmp_path, [TaskSpec(TASK)])
    repo = GitRepo.discover(project.root)
    assert repo is not None
    fgit = feature_git(project.root, repo, FEATURE_ID)
    assert fgit is not None
    branches = RemoteBranches(repo, "origin")
    pushes = TurnPushes(repo, branches, RemoteLedgers(repo, "origin", FEATURE_ID),
                        CloneAlignment(repo, branches, fgit, FEATURE_ID, FEATURE_BRANCH, print), TASK,
                        lambda step, what: step(), lambda: True, print)
    turn = git(project.root, "rev-parse", "main").strip()
    tip = commit_on_branch(project.root, "main", TASK_FILE, (task_text(TASK) + "x" * 3000 + "\n").encode())
    assert pushes._why_not_merged(turn, tip) is None  # under the cap: the same criteria, merged
    monkeypatch.setattr(reads, "MAX_FILE_BYTES", 3000)
    answers = git_answer_sizes(monkeypatch)
    assert pushes._why_not_merged(turn, tip) == "the task file's acceptance criteria changed"
    assert max(answers) < 3000, answers
