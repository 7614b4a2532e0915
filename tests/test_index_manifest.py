"""The index's manifest on disk (``index/manifest.py``): saved atomically, read back, debris swept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from guardkit_state.index.manifest import Manifest, load_manifest, save_manifest
from guardkit_state.store.fsio import TEMP_PREFIX


def test_a_save_removes_the_temp_files_killed_writes_left_in_the_index_folder(tmp_path: Path) -> None:
    # The background indexer a loop starts after each turn writes the manifest (and the identity file)
    # in .guardkit/index/; one killed inside a write left its temp file there for good (no run's
    # tidy-up looks there). A save sweeps what dead writers left, never a live writer's (this process's).
    folder = tmp_path / ".guardkit" / "index"
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    killed = folder / f"{TEMP_PREFIX}manifest.json.{dead.pid}.1000001"
    live = folder / f"{TEMP_PREFIX}identity.json.{os.getpid()}.1000002"
    for leftover in (killed, live):
        leftover.write_text('{"location": "emb', encoding="utf-8")
    manifest = Manifest(location="embedded", group="g", embedder="e", dimension=4, synced_at="2026-11-29T00:00:00Z")
    save_manifest(tmp_path, manifest)
    assert load_manifest(tmp_path, "embedded") == manifest
    assert sorted(p.name for p in folder.iterdir()) == sorted(["manifest.json", live.name])
