"""The index's manifest on disk (``index/manifest.py``): saved atomically, read back, debris swept."""

from __future__ import annotations

from pathlib import Path

from guardkit_state.index.manifest import Manifest, load_manifest, save_manifest

from .helpers import killed_and_live_temp_files


def test_a_save_removes_the_temp_files_killed_writes_left_in_the_index_folder(tmp_path: Path) -> None:
    # The background indexer a loop starts after each turn writes the manifest (and the identity file)
    # in .guardkit/index/; one killed inside a write left its temp file there for good (no run's
    # tidy-up looks there). A save sweeps what dead writers left, never a live writer's (this process's).
    folder = tmp_path / ".guardkit" / "index"
    folder.mkdir(parents=True)
    _, live = killed_and_live_temp_files(folder, "manifest.json", '{"location": "emb')
    manifest = Manifest(location="embedded", group="g", embedder="e", dimension=4, synced_at="2026-11-29T00:00:00Z")
    save_manifest(tmp_path, manifest)
    assert load_manifest(tmp_path, "embedded") == manifest
    assert sorted(p.name for p in folder.iterdir()) == sorted(["manifest.json", live.name])
