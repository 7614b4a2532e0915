"""A repository shaped like GuardKit's own, built from the corpus (``../shared/corpus/guardkit``).

GuardKit's repository holds ~3,300 task files and 41 feature plans; the corpus keeps 1,019 of the
task files, every plan and a few loops' reports. The repository built here holds:

* every corpus task file, where the corpus has it (``tasks/<status>/...``);
* the 41 plans in ``.guardkit/features/``, and the corpus's ``autobuild/`` and
  ``autobuild-private/`` report folders under ``.guardkit/``;
* a task file at every ``file_path`` a plan names that the corpus lacks (229 of 340), made from a
  corpus task of the same status folder with the plan's id put in: GuardKit's repository has them
  (the tasks of :data:`CLOSED_BY_HAND` are in ``tasks/completed/`` instead, ``status: completed``,
  where GuardKit's ``/task-complete`` moved them while their plan still says ``planned``);
* more corpus task files under new ids (``TASK-B00001`` ...) until ``files`` task files exist
  ("scaled up": the corpus is a third of the real repository);

all committed in one git commit, as a clone of the real repository would be. Without the corpus
nothing is built (the callers fall back to their generated repositories and say so).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

GUARDKIT_FILES = 3_300
#: A task with GuardKit's own turn history in the corpus (25 turns, in FEAT-CR01): the task rows' subject.
TASK_ID = "TASK-CR-007"
#: A failed feature GuardKit ran (10 tasks, 59 turns): the feature rows' subject.
FEATURE_ID = "FEAT-CR01"
#: Features whose tasks were completed by hand in GuardKit's repository, their plans untouched.
CLOSED_BY_HAND = ("FEAT-1253", "FEAT-9FDE")

_TASK_NAME = re.compile(r"^[A-Z][A-Z0-9]*-[A-Z0-9.]+")


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy with a checkout's modes (the corpus is mounted read-only)."""
    shutil.copytree(src, dst, symlinks=True, copy_function=shutil.copyfile, dirs_exist_ok=True)
    for path in [dst, *dst.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _samples(tasks: Path) -> dict[str, list[Path]]:
    """Corpus task files by status folder (files named for their id)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(tasks.rglob("*.md")):
        if _TASK_NAME.match(path.name):
            found.setdefault(path.relative_to(tasks).parts[0], []).append(path)
    return found


def _with_id(raw: bytes, old_id: str, new_id: str) -> bytes:
    return raw.replace(old_id.encode(), new_id.encode())


def _old_id(path: Path) -> str:
    from guardkit_state.taskfile.discovery import task_id_from_filename

    return task_id_from_filename(path.name)


def make_guardkit_repo(root: Path, corpus: Path, *, files: int = GUARDKIT_FILES, seed: int = 38,
                       commit: bool = True) -> dict[str, Any]:
    """Build the repository at ``root`` (see the module); returns what it holds."""
    rng = random.Random(seed)
    _copy_tree(corpus / "tasks", root / "tasks")
    _copy_tree(corpus / "features", root / ".guardkit" / "features")
    for name in ("autobuild", "autobuild-private"):
        if (corpus / name).is_dir():
            _copy_tree(corpus / name, root / ".guardkit" / name)
    samples = _samples(corpus / "tasks")
    pool = [path for paths in samples.values() for path in paths]
    count = len(pool)
    planned = 0
    for plan in sorted((root / ".guardkit" / "features").glob("FEAT-*.yaml")):
        for task in (yaml.safe_load(plan.read_text(encoding="utf-8")) or {}).get("tasks") or []:
            file_path, task_id = task.get("file_path"), task.get("id")
            if not file_path or not task_id or (root / file_path).exists():
                continue
            parts = Path(file_path).parts
            folder = "completed" if plan.stem in CLOSED_BY_HAND else parts[1] if len(parts) > 2 else None
            sample = rng.choice(samples.get(folder, pool) if folder else pool)
            target = root / file_path
            if plan.stem in CLOSED_BY_HAND:
                target = root / "tasks" / "completed" / Path(*parts[2:])
            target.parent.mkdir(parents=True, exist_ok=True)
            text = _with_id(sample.read_bytes(), _old_id(sample), task_id)
            if plan.stem in CLOSED_BY_HAND:
                text = re.sub(rb"(?m)^status: *\S+", b"status: completed", text, count=1)
            target.write_bytes(text)
            planned += 1
            count += 1
    extra = 0
    while count < files:
        sample = rng.choice(pool)
        new_id = f"TASK-B{extra:05d}"
        old = _old_id(sample)
        target = root / sample.relative_to(corpus).parent / (new_id + sample.name[len(old):])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_with_id(sample.read_bytes(), old, new_id))
        extra += 1
        count += 1
    if commit:
        env = ["-c", "user.name=bench", "-c", "user.email=bench@example.com", "-c", "core.autocrlf=false"]
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "GuardKit-shaped"]):
            subprocess.run(["git", *env, *args], cwd=root, check=True, capture_output=True)
    named = [path for path in (root / "tasks").rglob("*.md") if _TASK_NAME.match(path.name)]
    with_state = sum(1 for path in named if b"\nautobuild_state:" in (raw := path.read_bytes())
                     or b"\nfeature_build:" in raw)
    return {"files": len(named), "with_state": with_state, "bytes": sum(path.stat().st_size for path in named),
            "corpus_files": len(pool), "plan_files_added": planned, "scaled_up": extra,
            "plans": len(list((root / ".guardkit" / "features").glob("FEAT-*.yaml"))),
            "source": f"built from {corpus}"}


def settle(root: Path) -> None:
    """Wait until every file under ``root`` was last changed longer ago than the caches' racy window
    (a file changed within it is read again rather than kept: ``store.stat_cache.RACY_NS``)."""
    from guardkit_state.store.stat_cache import RACY_NS

    newest = max((path.stat().st_ctime_ns for path in root.rglob("*") if path.is_file()), default=0)
    wait = (newest + RACY_NS - time.time_ns()) / 1e9
    if wait > 0:
        time.sleep(wait + 0.05)
