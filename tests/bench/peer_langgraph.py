"""LangGraph's SQLite checkpointer as the peer: one graph step per turn, holding the same state.

A step is what LangGraph's Pregel loop does after a node runs: ``put_writes`` of the node's writes
(the new turn) and ``put`` of a checkpoint whose ``channel_values`` hold the whole state (the task id
and every turn's three reports so far). Default settings: ``SqliteSaver`` on a file connection
(WAL, SQLite's default ``synchronous=FULL``: a commit is durable when it returns). Installed only
for the benchmark (``pip install langgraph-checkpoint-sqlite``); :func:`available` says whether it is.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any


def available() -> str | None:
    """``None`` when the peer can run, else why not."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return "langgraph-checkpoint-sqlite not installed (pip install langgraph-checkpoint-sqlite)"
    return None


class LangGraphThread:
    """One task's loop as a LangGraph thread in its own SQLite database."""

    def __init__(self, db_path: Path, task_id: str) -> None:
        from langgraph.checkpoint.base import empty_checkpoint
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.db_path = Path(db_path)
        self.conn = sqlite3.connect(str(self.db_path), check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.task_id = task_id
        self.config: dict[str, Any] = {"configurable": {"thread_id": task_id, "checkpoint_ns": ""}}
        self.turns: list[dict[str, Any]] = []
        self.step = 0
        self._empty = empty_checkpoint
        self._put_checkpoint()  # the input checkpoint a graph run starts from (step -1)

    def _put_checkpoint(self) -> None:
        from langgraph.checkpoint.base.id import uuid6

        checkpoint = self._empty()
        checkpoint["id"] = str(uuid6(clock_seq=self.step))
        checkpoint["channel_values"] = {"task_id": self.task_id, "turns": list(self.turns)}
        checkpoint["channel_versions"] = {"task_id": 1, "turns": self.step + 1}
        checkpoint["versions_seen"] = {"loop": {"turns": self.step}}
        self.config = self.saver.put(self.config, checkpoint, {"source": "loop", "step": self.step, "parents": {}},
                                     {"turns": self.step + 1})

    def run_step(self, turn: dict[str, Any]) -> None:
        """Record one turn the way a graph step does: the node's writes, then the full checkpoint."""
        self.saver.put_writes(self.config, [("turns", turn)], task_id=str(uuid.uuid4()))
        self.step += 1
        self.turns.append(turn)
        self._put_checkpoint()

    def close(self) -> None:
        self.conn.close()

    def disk_bytes(self) -> int:
        """The database and its WAL/SHM files as they stand."""
        return sum(p.stat().st_size for p in self.db_path.parent.glob(self.db_path.name + "*"))


def get_tuple(db_path: Path, task_id: str) -> Any:
    """Resume as a LangGraph user would: open the database, load the thread's latest checkpoint."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(db_path), check_same_thread=False)
    try:
        found = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": task_id, "checkpoint_ns": ""}})
        assert found is not None
        return found
    finally:
        conn.close()
