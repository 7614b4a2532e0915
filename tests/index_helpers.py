"""Fixtures for the index tests (small, hand-written; no corpus files): turn files, task files,
feature plans, and a raw look at an embedded or server FalkorDB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guardkit_state.model import turn_state_id


def write_turn(root: Path, feature: str | None, task: str, n: int, coach: str, *, blockers: tuple[str, ...] = (),
               feedback: str | None = None, worktree: bool = False, **extra: Any) -> Path:
    """Write ``turn_state_turn_N.json`` for ``task`` (in the task's worktree when asked)."""
    base = root / ".guardkit" / "worktrees" / task if worktree else root
    directory = base / ".guardkit" / "autobuild" / task
    directory.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "id": turn_state_id(feature, task, n), "feature_id": feature, "task_id": task, "turn_number": n,
        "mode": "fresh_start" if n == 1 else "continuing_work",
        "player_summary": f"Worked on {task} in turn {n}", "player_decision": "implemented",
        "coach_decision": coach, "coach_feedback": feedback, "blockers_found": list(blockers),
        "acceptance_criteria_status": {
            "AC-001: Login returns JWT": "completed" if coach == "approved" else "in_progress",
        },
        "files_modified": ["src/auth.py"], "started_at": f"2026-01-01T{n // 60:02d}:{n % 60:02d}:00",
        "completed_at": f"2026-01-01T{n // 60:02d}:{n % 60:02d}:30",
    }
    data.update(extra)
    path = directory / f"turn_state_turn_{n}.json"
    path.write_text(json.dumps(data, indent=2))
    return path


def write_task(root: Path, task: str, title: str, *, status: str = "in_progress", feature: str | None = None,
               criteria: tuple[str, ...] = (), folder: str | None = None, **front: Any) -> Path:
    """A GuardKit task file ``tasks/<status>/TASK-ID.md`` with a title and checkbox criteria."""
    lines = ["---", f"id: {task}", f"title: {json.dumps(title)}", f"status: {status}"]
    if feature:
        lines.append(f"feature_id: {feature}")
    lines += [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    lines += ["---", "", f"# {title}", "", "## Acceptance Criteria", ""]
    lines += [f"- [ ] {text}" for text in criteria]
    path = root / "tasks" / (folder or status) / f"{task}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def write_plan(root: Path, feature: str, name: str, tasks: list[dict[str, Any]], *, status: str = "in_progress",
               groups: list[list[str]] | None = None, execution: dict[str, Any] | None = None) -> Path:
    """A GuardKit feature plan ``.guardkit/features/FEAT-X.yaml`` (JSON is valid YAML)."""
    data: dict[str, Any] = {"id": feature, "name": name, "status": status, "tasks": tasks}
    if groups is not None:
        data["orchestration"] = {"parallel_groups": groups}
    if execution is not None:
        data["execution"] = execution
    path = root / ".guardkit" / "features" / f"{feature}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def seed001_project(root: Path) -> Path:
    """Several tasks over two features: rejected turns, blockers, and a look-alike task id."""
    root.mkdir(parents=True, exist_ok=True)
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 1, "feedback", feedback="Missing token refresh mechanism")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 2, "rejected", blockers=("Unclear refresh window size",),
               feedback="Token refresh does not validate original token expiry")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-001", 3, "approved")
    write_turn(root, "FEAT-AUTH", "TASK-AUTH-0010", 1, "rejected", feedback="Tests fail on import")
    write_turn(root, "FEAT-CACHE", "TASK-CACHE-002", 1, "feedback", blockers=("Redis not available in CI",),
               feedback="Add a fake cache for tests")
    write_turn(root, "FEAT-CACHE", "TASK-CACHE-002", 2, "approved")
    return root


def keys(hits: list[Any]) -> list[str]:
    return [h.key for h in hits]


#: graphiti's own query shape for a group's facts (labels on both ends, the group filtered on the edge).
LABELLED_FACTS = "MATCH (n:Entity)-[e:RELATES_TO]->(m:Entity) WHERE e.group_id IN $groups RETURN count(e)"
ALL_FACTS = "MATCH ()-[e:RELATES_TO]->() RETURN count(e)"


def fact_counts(groups: list[str], *, socket_path: str | None = None,
                port: int | None = None) -> dict[str, tuple[int, int]]:
    """Per group: (facts graphiti's query shape finds, facts there are), read with FalkorDB's own client."""
    from falkordb import FalkorDB

    db = FalkorDB(unix_socket_path=socket_path) if socket_path else FalkorDB(host="127.0.0.1", port=port)
    counts = {}
    for group in groups:
        graph = db.select_graph(group)
        counts[group] = (graph.query(LABELLED_FACTS, {"groups": [group]}).result_set[0][0],
                         graph.query(ALL_FACTS).result_set[0][0])
    return counts


#: The tiny "meaning" the fake embeddings endpoint knows: words of one concept share a vector.
CONCEPTS = {
    "slow": "latency", "latency": "latency", "response": "latency", "p95": "latency", "sluggish": "latency",
    "time": "latency", "ms": "latency", "timeout": "latency",
    "crash": "failure", "exception": "failure", "traceback": "failure", "error": "failure",
    "login": "auth", "token": "auth", "jwt": "auth", "password": "auth",
}


class EmbeddingServer:
    """A local OpenAI-compatible ``/v1/embeddings`` endpoint with deterministic vectors (for tests).

    Each word maps to its concept (:data:`CONCEPTS`, else itself); a text's vector is its
    concepts hashed into ``dim`` dimensions, normalised. Every request's texts are recorded.
    """

    def __init__(self, dim: int = 64) -> None:
        import http.server
        import threading

        self.dim = dim
        self.requests: list[list[str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                owner.requests.append(list(texts))
                data = [{"object": "embedding", "index": i, "embedding": owner.vector(t)} for i, t in enumerate(texts)]
                payload = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def spec(self, model: str = "concepts-1") -> str:
        return f"openai:{model}@{self.url}"

    def vector(self, text: str) -> list[float]:
        import hashlib
        import math
        import re

        vec = [0.0] * self.dim
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            concept = CONCEPTS.get(word, word)
            vec[int(hashlib.sha256(concept.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def __enter__(self) -> EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
