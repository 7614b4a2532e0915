"""Benchmark: recording a turn and resuming a loop, next to the disk's floor and LangGraph's SqliteSaver.

For each history length a task repository is built through the library (so its files are the real
thing), then:

* **record** — ``repeat`` more turns through one long-lived :class:`TurnLifecycle`, as a loop uses it
  (``begin_turn``, ``record_player``, ``record_coach``, ``complete_turn``: validate, write the three
  JSON files and splice the frontmatter, all atomic with fsync). The reports are the agents' output:
  they are built before the clock starts. The history lengths take turns, record by record, so the
  rows (and "200 prior turns vs 1") are measured under the same conditions. Interleaved with each turn:
  the **floor** (the same four files' bytes written with temp + fsync + replace + directory fsync,
  nothing parsed or validated) and a **LangGraph step** (``put_writes`` + ``put`` of a checkpoint
  holding the same state, in a database holding the same history). Twice: with Player reports that
  carry their completion promises, and without (**no promises**: only turn 1's report has them, so
  every later turn recovers them from turn 1, the farthest look-back there is).
* **record_turn** — one more turn through the public :func:`record_turn`, as ``guardkit-state
  record`` runs it: each call finds and reads the task file afresh (settled), takes the lock, and
  records the turn. Every sample starts from the same repository with exactly the row's prior
  turns (the task file and turn files put back off the clock, as new bytes: no cache of this
  process knows them, so the read parses them as a new process's would), on histories of their own
  (the record case above moves its histories on), with the setup's objects frozen out of the
  garbage collector's way (a ``guardkit-state record`` process holds none of them).
* **resume** — a new process's work, timed in a new process: each sample is a fresh interpreter
  (never the process that built the histories, whose caches are warm) that imports the lifecycle
  and resume modules off the clock (what they import lazily is on it, as a new process pays),
  then times ``TurnLifecycle.open`` + ``resume_point`` + ``context_for``, reading the
  bytes resume reads (the task file and the last turn state: the floor) and
  ``SqliteSaver.get_tuple`` (connection opened, latest checkpoint loaded), in an order that rotates
  from sample to sample so no side always finds the page cache warmed by the other.
* **storage** — bytes on disk after 50 turns: ours (the task's turn files plus what the turns added
  to the task file) and SqliteSaver's database, against the turns' own bytes (the canonical JSON of the
  three reports per turn plus the turn's frontmatter entry).
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from guardkit_state.store.turn_files import FILE_PATTERNS
from guardkit_state.turns.lifecycle import TurnLifecycle, record_turn

from . import peer_langgraph
from .common import (
    TASK_ID,
    coach_decision,
    floor_write,
    make_task_repo,
    median_ms,
    player_report,
    ratio,
    timed_ms,
)

RECORD_AT = (1, 10, 25, 50, 200)  # 25: where the LangGraph target is set
RECORD_TURN_AT = (1, 50, 200)  # through record_turn (a new process's view)
RESUME_AT = (1, 25, 200)
STORAGE_AT = 50
WARMUP = 2


class History:
    """A task repository with ``turns`` recorded turns, and its LangGraph twin."""

    def __init__(self, root: Path, turns: int, *, langgraph: bool, promises: bool = True) -> None:
        self.root = root
        self.promises = promises
        self.task_path = make_task_repo(root)
        self.initial_task_bytes = self.task_path.stat().st_size
        self.lifecycle = TurnLifecycle.open(root, TASK_ID, max_turns=100_000)
        self.peer = peer_langgraph.LangGraphThread(root / "langgraph.sqlite", TASK_ID) if langgraph else None
        self.floor_dir = root / "floor"
        (self.floor_dir / "tasks").mkdir(parents=True)
        (self.floor_dir / "autobuild").mkdir()
        for _ in range(turns):
            self.record()
            if self.peer is not None:
                self.peer.run_step(self.turn_content(self.lifecycle.recorded_turns))
        self.next_number = turns + 1

    def player(self, turn: int) -> dict[str, Any]:
        """Turn ``turn``'s Player report; without promises (after turn 1) unless this history keeps them."""
        report = player_report(turn)
        if not self.promises and turn > 1:
            del report["completion_promises"]
        return report

    def reports(self, number: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Turn ``number``'s (default: the next one's) Player report and Coach decision, as the
        agents hand them over."""
        number = number or self.lifecycle.recorded_turns + 1
        return self.player(number), coach_decision(number)

    def record(self, reports: tuple[dict[str, Any], dict[str, Any]] | None = None) -> None:
        """One turn, as a loop records it (``reports``: the agents' output, built beforehand)."""
        player, coach = reports or self.reports()
        lifecycle = self.lifecycle
        lifecycle.begin_turn()
        lifecycle.record_player(player)
        lifecycle.record_coach(coach)
        lifecycle.complete_turn()

    def record_turn(self, reports: tuple[dict[str, Any], dict[str, Any]]) -> int:
        """One turn through the public ``record_turn`` (a fresh view of the task each time); its number."""
        player, coach = reports
        number = record_turn(self.root, TASK_ID, player, coach, max_turns=100_000).turn_state.turn_number
        self.next_number = number + 1
        return number

    def turn_files(self, turn: int) -> list[Path]:
        store = self.lifecycle.store
        return [store.path(kind, turn) for kind in FILE_PATTERNS]

    def turn_content(self, turn: int) -> dict[str, Any]:
        """The turn's three records as dicts: the state a LangGraph user would keep for it."""
        store = self.lifecycle.store
        return {kind: json.loads(store.path(kind, turn).read_bytes()) for kind in FILE_PATTERNS}

    def floor(self, turn: int) -> float:
        """Write the bytes of ``turn``'s four files the cheapest durable way; returns ms."""
        blobs = [(self.floor_dir / "autobuild" / p.name, p.read_bytes()) for p in self.turn_files(turn)]
        blobs.append((self.floor_dir / "tasks" / self.task_path.name, self.task_path.read_bytes()))
        return timed_ms(lambda: [floor_write(path, data) for path, data in blobs])

    def own_bytes(self) -> int:
        """The turns' own content: canonical JSON of the three records + each frontmatter entry."""
        import yaml

        total = sum(p.stat().st_size for n in range(1, self.lifecycle.recorded_turns + 1) for p in self.turn_files(n))
        state = self.lifecycle.task.state
        assert state is not None
        for entry in state.turns:
            total += len(yaml.safe_dump([entry.to_dict()], sort_keys=False, allow_unicode=True).encode())
        return total

    def our_disk_bytes(self) -> int:
        """Everything the turns put on disk: the artifact directory and the task file's growth."""
        files = [p for p in self.lifecycle.store.directory.rglob("*") if p.is_file()]
        return sum(p.stat().st_size for p in files) + self.task_path.stat().st_size - self.initial_task_bytes

    def close(self) -> None:
        if self.peer is not None:
            self.peer.close()


def run(*, record_at: tuple[int, ...] = RECORD_AT, resume_at: tuple[int, ...] = RESUME_AT,
        storage_at: int | None = STORAGE_AT, repeat: int = 15, langgraph: bool = True,
        record_turn_at: tuple[int, ...] | None = None) -> dict[str, Any]:
    """Run the record (with and without promises, looped and through ``record_turn``), resume and
    storage cases; medians (ms) and ratios. ``record_turn_at`` defaults to the record sizes in
    :data:`RECORD_TURN_AT`."""
    skipped = peer_langgraph.available() if langgraph else "disabled"
    use_peer = skipped is None
    if record_turn_at is None:
        record_turn_at = tuple(n for n in record_at if n in RECORD_TURN_AT) or record_at[:1]
    result: dict[str, Any] = {"record": [], "record_no_promises": [], "record_turn": [], "resume": [],
                              "storage": None, "repeat": repeat, "langgraph": skipped or "langgraph-checkpoint-sqlite"}
    with tempfile.TemporaryDirectory(prefix="gks-bench-turns-") as tmp:
        if storage_at:
            history = History(Path(tmp) / "storage", storage_at, langgraph=use_peer)
            try:
                result["storage"] = _storage(history)
            finally:
                history.close()
        for promises in (True, False):
            sizes = sorted(set(record_at) | (set(resume_at) if promises else set()))
            histories = {}
            try:
                for turns in sizes:
                    histories[turns] = History(Path(tmp) / f"h{turns}-{promises}", turns, langgraph=use_peer,
                                               promises=promises)
                if promises:
                    result["resume"] = [_resume_case(histories[turns], turns, repeat) for turns in sizes
                                        if turns in resume_at]
                result["record" if promises else "record_no_promises"] = _record_cases(
                    {turns: histories[turns] for turns in sizes if turns in record_at}, repeat)
            finally:
                for history in histories.values():
                    history.close()
        for promises in (True, False):
            result["record_turn"] += [_record_turn_case(History(Path(tmp) / f"rt{turns}-{promises}", turns,
                                                                langgraph=False, promises=promises), turns, repeat)
                                      for turns in record_turn_at]
    return result


def _record_cases(histories: dict[int, History], repeat: int) -> list[dict[str, Any]]:
    """One row per history length; the lengths take turns, record by record (in a rotating order),
    so that a machine slowing down or speeding up during the run weighs on every row alike."""
    samples: dict[int, tuple[list[float], list[float], list[float]]] = {n: ([], [], []) for n in histories}
    order = list(histories)
    if not order:  # `--only resume`: no record rows asked for
        return []
    for i in range(WARMUP + repeat):
        for turns in order[i % len(order):] + order[:i % len(order)]:
            history = histories[turns]
            reports = history.reports()  # the agents' output: made before the clock starts, as in a loop
            sample = timed_ms(lambda: history.record(reports))
            number = history.lifecycle.recorded_turns
            floor_sample = history.floor(number)
            peer_sample = None
            if history.peer is not None:
                content = history.turn_content(number)  # building the dicts is not LangGraph's cost
                peer_sample = timed_ms(lambda: history.peer.run_step(content))
            if i < WARMUP:
                continue
            ours, floor, peer = samples[turns]
            ours.append(sample)
            floor.append(floor_sample)
            if peer_sample is not None:
                peer.append(peer_sample)
    return [_row({"prior_turns": turns}, *samples[turns]) for turns in histories]


def _record_turn_case(history: History, turns: int, repeat: int) -> dict[str, Any]:
    """``record_turn`` of turn ``turns + 1`` on a repository holding exactly ``turns`` recorded turns
    (put back before every sample), next to the floor (no LangGraph column) and to the floor plus
    two strict parses of the task file's frontmatter (the read's and the write's verification: what
    a record cannot do without)."""
    from guardkit_state.taskfile.frontmatter import parse_frontmatter

    ours: list[float] = []
    floor: list[float] = []
    parses: list[float] = []
    task_bytes = history.task_path.read_bytes()
    task_text = task_bytes.decode("utf-8")
    kept = set(history.lifecycle.store.directory.rglob("*"))
    reports = history.reports(turns + 1)
    gc.collect()
    gc.freeze()  # the histories and reports built above are the bench's, not a record process's
    try:
        for i in range(WARMUP + repeat):
            for path in set(history.lifecycle.store.directory.rglob("*")) - kept:
                path.unlink()
            history.task_path.write_bytes(task_bytes)  # new bytes to every cache: read as a new process would
            numbers: list[int] = []
            sample = timed_ms(lambda: numbers.append(history.record_turn(reports)))
            assert numbers == [turns + 1], numbers
            floor_sample = history.floor(turns + 1)
            parse_sample = timed_ms(lambda: parse_frontmatter(task_text))
            if i >= WARMUP:
                ours.append(sample)
                floor.append(floor_sample)
                parses.append(parse_sample)
    finally:
        gc.unfreeze()
    row = _row({"prior_turns": turns, "promises": history.promises}, ours, floor, [])
    row["parse_ms"] = median_ms(parses)
    row["ours/(floor+2 parses)"] = ratio(row["ours_ms"], row["floor_ms"] + 2 * row["parse_ms"])
    return row


def _row(case: dict[str, Any], ours: list[float], floor: list[float], peer: list[float]) -> dict[str, Any]:
    """One table row: medians of the three series and our ratios to the floor and to LangGraph."""
    row: dict[str, Any] = {**case, "ours_ms": median_ms(ours), "floor_ms": median_ms(floor),
                           "langgraph_ms": median_ms(peer) if peer else None}
    row["ours/floor"] = ratio(row["ours_ms"], row["floor_ms"])
    row["ours/langgraph"] = ratio(row["ours_ms"], row["langgraph_ms"])
    return row


#: One resume sample in a fresh interpreter: imports off the clock, then the three sides in ``order``.
_RESUME_CHILD = """
import json, sys, time
from pathlib import Path
from guardkit_state.turns.lifecycle import TurnLifecycle
from guardkit_state.turns.resume import resume_point
root, task_id, order, db = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4]
paths = [Path(p) for p in sys.argv[5:]]
if db:
    from tests.bench.peer_langgraph import get_tuple

def ours():
    lifecycle = TurnLifecycle.open(root, task_id)
    point = resume_point(lifecycle.task, lifecycle.store)
    assert point.next_turn == lifecycle.recorded_turns + 1
    lifecycle.context_for(point.next_turn)

def floor():
    for path in paths:
        with open(path, "rb") as handle:
            handle.read()

sides = {"ours": ours, "floor": floor, "peer": (lambda: get_tuple(Path(db), task_id)) if db else None}
out = {}
for name in order:
    if sides[name] is not None:
        start = time.perf_counter()
        sides[name]()
        out[name] = (time.perf_counter() - start) * 1000.0
print(json.dumps(out))
"""


def _resume_sample(history: History, paths: list[Path], order: list[str]) -> dict[str, float]:
    db = str(history.peer.db_path) if history.peer is not None else ""
    done = subprocess.run([sys.executable, "-c", _RESUME_CHILD, str(history.root), TASK_ID, ",".join(order), db,
                           *map(str, paths)], cwd=Path(__file__).resolve().parents[2], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the resume sample failed: {done.stderr[-500:]}")
    sample: dict[str, float] = json.loads(done.stdout)
    return sample


def _resume_case(history: History, turns: int, repeat: int) -> dict[str, Any]:
    store = history.lifecycle.store
    read_paths = [history.task_path, store.path("turn_state", turns)]
    ours: list[float] = []
    floor: list[float] = []
    peer: list[float] = []
    orders = (["ours", "floor", "peer"], ["floor", "peer", "ours"], ["peer", "ours", "floor"])
    for i in range(WARMUP + repeat):
        sample = _resume_sample(history, read_paths, list(orders[i % len(orders)]))
        if i < WARMUP:
            continue
        ours.append(sample["ours"])
        floor.append(sample["floor"])
        if "peer" in sample:
            peer.append(sample["peer"])
    return _row({"turns": turns, "process": "fresh per sample"}, ours, floor, peer)


def _storage(history: History) -> dict[str, Any]:
    own = history.own_bytes()
    ours = history.our_disk_bytes()
    row: dict[str, Any] = {"turns": history.lifecycle.recorded_turns, "own_bytes": own, "ours_bytes": ours,
                           "langgraph_bytes": None}
    if history.peer is not None:
        # Closed first: SQLite folds its WAL into the database on the last close, the state a user keeps.
        history.peer.close()
        row["langgraph_bytes"] = history.peer.disk_bytes()
        history.peer = None
    row["ours/own"] = ratio(ours, own)
    row["langgraph/own"] = ratio(row["langgraph_bytes"], own)
    return row


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
