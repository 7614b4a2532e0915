"""Turn ledgers carried through a real bare remote: which refs a worker imports as a task's ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from guardkit_state.git import turn_ledger
from guardkit_state.git.repo import GitRepo
from guardkit_state.remote.branches import fetch_refs
from guardkit_state.remote.ledgers import LEDGERS_PREFIX, RemoteLedgers
from tests.conftest import run_git
from tests.remote_support import clone, make_bare

FEAT, TASK = "FEAT-L", "TASK-L-001"


def _ledger_pushed(repo: GitRepo, ref: str) -> str:
    """A ledger commit naming HEAD as turn 1 of a task, pushed to ``ref``; HEAD's sha."""
    head = repo.text("rev-parse", "HEAD")
    message = f"guardkit turn ledger of {TASK}\n\n{head} 1 approve autobuild\n"
    sha = repo.run("commit-tree", repo.empty_tree(), "-m", message, pre=repo.identity_args())[1].decode().strip()
    run_git(repo.root, "push", "-q", "origin", f"{sha}:{ref}")
    return head


@pytest.mark.parametrize("nested", [f"x/{TASK}", f"old/x/{TASK}", "lower", f"{TASK}/x"])
def test_a_ledger_ref_at_another_depth_or_named_by_no_task_id_is_never_imported(
        git_repo: Path, tmp_path: Path, nested: str) -> None:
    bare = make_bare(tmp_path, git_repo)
    repo = GitRepo.discover(clone(bare.as_uri(), tmp_path / "machine"))
    assert repo is not None
    ledgers = RemoteLedgers(repo, "origin", FEAT)
    _ledger_pushed(repo, f"{LEDGERS_PREFIX}/{FEAT}/{nested}")
    assert fetch_refs(repo, "origin", ledgers.fetch_refspec(), timeout=30)[0] == 0
    assert ledgers.import_fetched() == 0  # (no crash on a name that is no task id)
    assert turn_ledger.entries(repo, TASK) == []
    # The task's own ledger ref is imported.
    run_git(repo.root, "push", "-q", "origin", f":{LEDGERS_PREFIX}/{FEAT}/{nested}")
    head = _ledger_pushed(repo, ledgers.ref(TASK))
    assert fetch_refs(repo, "origin", ledgers.fetch_refspec(), timeout=30)[0] == 0
    assert ledgers.import_fetched() == 1
    assert turn_ledger.entries(repo, TASK) == [turn_ledger.ProvenTurnCommit(head, 1, "approve", "autobuild")]
