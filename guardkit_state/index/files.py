"""The always-available index: scan the turn state files (and the configuration) and rank them.

No database and no extra: it reads ``turn_state_turn_N.json`` files (worktree copies win), the
turns task files list in their frontmatter without such a file, and the configuration entities,
and ranks them with the same local rule the Graphiti backend uses to rerank, so ``guardkit-state
search`` answers the same way with or without Graphiti. Scanning 200
turn files takes a few tens of milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from guardkit_state.index.base import SearchHit, rank
from guardkit_state.index.frontmatter_turns import load_frontmatter_turn_records
from guardkit_state.index.records import IndexRecord, load_system_records, load_turn_state_records, resolve_group

log = logging.getLogger("guardkit_state.index")


class FileIndex:
    """Search by scanning the files; nothing to build, nothing to go stale."""

    name = "files"

    def __init__(self, repo_root: Path) -> None:
        self.repo_root = Path(repo_root)

    def records(self, groups: Sequence[str] | None = None) -> list[IndexRecord]:
        """Every record the files define, optionally only those of ``groups``."""
        wanted = {resolve_group(g, self.repo_root) for g in groups} if groups else None
        records = list(load_turn_state_records(self.repo_root).records)
        # Turns GuardKit's loop listed in a task file without leaving a turn-state file are history too.
        known = {(r.task_id or "", r.turn_number or 0) for r in records}
        records.extend(load_frontmatter_turn_records(self.repo_root, known))
        try:
            system, reason = load_system_records(self.repo_root)
        except Exception as exc:
            log.warning("configuration not searchable: %s", exc)
            system, reason = [], str(exc)
        if reason:
            log.debug("system groups: %s", reason)
        records.extend(system)
        if wanted is not None:
            records = [r for r in records if r.group_id in wanted]
        return records

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10) -> list[SearchHit]:
        """Records matching ``query``, best first."""
        return rank(query, self.records(groups), limit=limit)
