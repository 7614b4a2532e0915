"""The optional Graphiti index: offline, embedded by default, idempotent, rebuildable.

Records (:mod:`.records`) are written straight into Graphiti's graph model (:mod:`.graph_writes`);
searches use graphiti's hybrid retrieval (:mod:`.graph_reads`). No LLM is ever called; embeddings
come from the embedder the index records (:mod:`.embedder_spec`, :mod:`.offline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from guardkit_state.index.base import IndexStatus, SearchHit, SyncReport
from guardkit_state.index.config_records import load_system_records
from guardkit_state.index.graph_connection import GraphConnection
from guardkit_state.index.graph_meta import drop_graph, is_falkor, read_meta
from guardkit_state.index.graph_reads import index_status, search_index
from guardkit_state.index.graph_writes import apply_changes, delete_records, list_episodes
from guardkit_state.index.manifest import (
    Manifest,
    RecordMeta,
    common_terms,
    config_source_paths,
    project_source_paths,
    save_manifest,
    source_signatures,
)
from guardkit_state.index.query import Filters
from guardkit_state.index.records import SYSTEM_GROUPS, IndexRecord, project_groups, stable_uuid
from guardkit_state.index.retention import retained
from guardkit_state.index.sources import load_project_records

if TYPE_CHECKING:  # graphiti-core is imported (behind the extra's check) by graph_connection
    from graphiti_core.driver.driver import GraphDriver
    from graphiti_core.nodes import EpisodicNode


class GraphitiIndex(GraphConnection):
    """The Graphiti index of one checkout: seed, sync, prune, rebuild, search, status (a context manager)."""

    name = "graphiti"

    def _claim_identity(self) -> None:
        """Writers store the checkout's identity (a read never does)."""
        self.groups = project_groups(self.repo_root, create=True)

    def seed(self) -> SyncReport:
        """Upsert this project's configuration groups (role constraints, gate configs, modes)."""
        self._claim_identity()
        records, reason = load_system_records(self.repo_root, groups=self.groups)
        report = SyncReport(notes=[reason] if reason else [])
        by_group: dict[str, list[IndexRecord]] = {self.groups[g]: [] for g in SYSTEM_GROUPS}
        for record in records:
            by_group.setdefault(record.group_id, []).append(record)
        if not reason:
            for group, items in by_group.items():
                self._converge(group, items, report)
        self._save_snapshot()
        self._write_manifest(seeded=True)
        return report

    def sync(self, *, dry_run: bool = False, full: bool = False) -> SyncReport:
        """Converge the project's turns, tasks and features with the files (retention applied)."""
        self._claim_identity()
        sources = source_signatures(self.repo_root, project_source_paths(self.repo_root))
        loaded = load_project_records(self.repo_root, self.project_group)
        report = SyncReport(dry_run=dry_run, problems=[str(p) for p in loaded.problems])
        keep, dropped = retained(loaded.records, self.repo_root)
        report.pruned_by_retention = [r.key for r in dropped]
        trusted = None if full else self._trusted_hashes()
        self._converge(self.project_group, keep, report, dry_run=dry_run, trusted=trusted)
        if not dry_run:
            self._save_snapshot()
            self._write_manifest(records=keep, pruned=dropped, sources=sources, common=common_terms(keep))
        return report

    def prune(self, *, dry_run: bool = False) -> SyncReport:
        """Apply retention only: remove indexed turns the policy drops."""
        self._claim_identity()
        loaded = load_project_records(self.repo_root, self.project_group)
        _, dropped = retained(loaded.records, self.repo_root)
        report = SyncReport(dry_run=dry_run, pruned_by_retention=[r.key for r in dropped])
        drop = {r.key for r in dropped}

        async def work(driver: GraphDriver) -> list[EpisodicNode]:
            gdriver = await self.prepare(driver, self.project_group)
            victims = [ep for ep in (await list_episodes(gdriver, self.project_group)).values() if ep.name in drop]
            if not dry_run:
                await delete_records(gdriver, self.project_group, victims)
            return victims

        victims = self._run(work)
        report.removed = sorted(ep.name for ep in victims)
        if not dry_run and victims:
            self._save_snapshot()
            if self.manifest is not None:
                for key in report.removed:
                    meta = self.manifest.records.pop(key, None)
                    if meta is not None:
                        self.manifest.pruned[key] = meta
                save_manifest(self.repo_root, self.manifest)
        return report

    def rebuild(self) -> SyncReport:
        """Drop every group this checkout owns and rebuild them from the files (switching embedder if asked)."""
        self._claim_identity()
        self._spec = self.asked or self.embedder_spec()

        async def drop(driver: GraphDriver) -> None:
            if not self.uri and is_falkor(driver):
                # The embedded database is this checkout's alone: graphs under an old identity
                # (the checkout moved, or its first commit came after the first sync) go too.
                for name in await driver.client.list_graphs():  # type: ignore[attr-defined]
                    if str(name) not in self.groups.values():
                        await drop_graph(driver, str(name))
            for group in self.groups.values():
                await self.prepare(driver, group, reset=True)

        self._run(drop)
        self.manifest = None
        report = self.seed()
        synced = self.sync(full=True)
        for name in ("added", "updated", "removed", "problems"):
            getattr(report, name).extend(getattr(synced, name))
        report.unchanged += synced.unchanged
        report.pruned_by_retention = synced.pruned_by_retention
        report.notes += self.notes
        return report

    def _trusted_hashes(self) -> dict[str, str] | None:
        """What the manifest says the index holds (record uuid -> content hash prefix), when it can be trusted."""
        manifest = self.manifest
        if manifest is None or manifest.group != self.project_group:
            return None
        return {stable_uuid(self.project_group, key): meta.hash for key, meta in manifest.records.items()}

    def _converge(self, group: str, desired: list[IndexRecord], report: SyncReport, *, dry_run: bool = False,
                  trusted: dict[str, str] | None = None) -> None:
        """Make ``group`` hold exactly ``desired`` (by uuid and content hash)."""

        async def work(driver: GraphDriver) -> None:
            stored: dict[str, EpisodicNode] | None
            if dry_run:
                gdriver = await self.group_driver(driver, group)
                meta = await read_meta(gdriver, group)
                stored = await list_episodes(gdriver, group) if meta is not None and meta.current else {}
            else:
                gdriver = await self.prepare(driver, group)
                fresh = group in self.created
                self.created.discard(group)
                stored = {} if fresh else None if trusted is not None else await list_episodes(gdriver, group)
            await apply_changes(gdriver, group, desired, report, embedder=self.embedder_client(), stored=stored,
                                trusted=trusted, dry_run=dry_run)

        self._run(work)

    def _write_manifest(self, *, records: list[IndexRecord] | None = None, pruned: list[IndexRecord] | None = None,
                        sources: dict[str, list[int]] | None = None, seeded: bool = False,
                        common: list[str] | None = None) -> None:
        old = self.manifest
        manifest = Manifest(location=self.manifest_key, group=self.project_group, embedder=self.embedder_spec().name,
                            dimension=self._dimension or self.embedder_spec().known_dimension or 0,
                            synced_at=datetime.now(UTC).isoformat(timespec="seconds"),
                            sources=dict(old.sources) if old is not None and old.group == self.project_group else {},
                            records={r.key: RecordMeta.of(r) for r in records} if records is not None
                            else dict(old.records) if old else {},
                            pruned={r.key: RecordMeta.of(r) for r in pruned} if pruned is not None
                            else dict(old.pruned) if old else {},
                            seeded=seeded or bool(old and old.seeded),
                            common_terms=common if common is not None else list(old.common_terms) if old else [])
        if sources is not None:
            config = {p: s for p, s in manifest.sources.items() if p in config_source_paths()}
            manifest.sources = sources | config
        if seeded:
            manifest.sources |= source_signatures(self.repo_root, config_source_paths())
        save_manifest(self.repo_root, manifest)
        self.manifest = manifest

    def search(self, query: str, *, groups: Sequence[str] | None = None, limit: int = 10,
               filters: Filters | None = None) -> list[SearchHit]:
        """Records matching ``query`` (and ``filters``), best first (see :mod:`.graph_reads`)."""
        return search_index(self, query, groups=groups, limit=limit, filters=filters or Filters())

    def status(self) -> IndexStatus:
        """Counts per group, and how the project group compares with the files."""
        return index_status(self)
