"""guardkit-state: file-first, git-native memory for Player/Coach coding loops.

The public API, importable from the package itself::

    from guardkit_state import TurnLifecycle, record_turn, feature_build, TaskFile

Names are resolved lazily (PEP 562) so that ``guardkit-state --help`` does not pay for YAML,
JSON Schema and git imports it does not use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # records
    "AutobuildState": "model", "CoachDecision": "model", "CompletionPromise": "model", "Criterion": "model",
    "CriterionVerification": "model", "GateResult": "model", "LedgerEntry": "model", "Outcome": "model",
    "PlayerReport": "model", "TurnEntry": "model", "TurnMode": "model", "TurnState": "model",
    # task files and turn files
    "TaskFile": "taskfile.document", "find_task": "taskfile.resolve", "extract_criteria": "taskfile.document",
    "StateUpdate": "taskfile.splice.core", "SpliceResult": "taskfile.splice.core",
    "FrontmatterHandler": "taskfile.handler",
    "TurnStore": "store.turn_files",
    "TaskLocation": "taskfile.locate", "locate_task": "taskfile.locate",
    "Resolution": "taskfile.resolve", "resolve_task": "taskfile.resolve",
    "validate_record": "store.schemas", "load_record": "store.jsonio",
    # the lifecycle
    "TurnLifecycle": "turns.lifecycle", "TurnRecord": "turns.lifecycle", "record_turn": "turns.lifecycle",
    "CriteriaLedger": "turns.ledger", "detect_stall": "turns.stall", "feedback_signature": "turns.stall",
    "render_continuation_context": "turns.context",
    "ResumePoint": "turns.resume", "resume_point": "turns.resume",
    # the loop
    "Agent": "loop.agents", "CallableAgent": "loop.agents", "CommandAgent": "loop.agents",
    "TurnRequest": "loop.agents",
    "LoopOptions": "loop.run", "LoopResult": "loop.run", "feature_build": "loop.run",
    "build_feature": "features.build",
    "FeatureOptions": "features.build",
    "FeatureResult": "features.result",
    "TaskOutcome": "features.result",
    "FeatureInterrupted": "features.result",
    "TaskSummary": "inspect.status", "repo_status": "inspect.status",
    # configuration, git
    "load_config": "config", "ResolvedConfig": "config",
    "GitRepo": "git.repo", "commit_turn": "git.commits", "WorktreeManager": "git.worktrees",
    "turn_log": "inspect.review", "turn_diff": "inspect.review",
    # the search index (the file scan always; Graphiti when it can answer)
    "search": "index", "make_filters": "index", "FileIndex": "index", "SearchHit": "index", "SearchResult": "index",
    "open_graphiti": "index", "update_graphiti": "index", "graphiti_status": "index",
    "EmbedderMismatchError": "index",
    # the HTML report
    "TaskReport": "report", "ReportResult": "report", "build_task_report": "report",
    "render_report": "report", "write_report": "report",
    # errors
    "GuardkitStateError": "errors", "InputError": "errors", "ParseError": "errors",
    "FrontmatterError": "errors", "DuplicateKeyError": "errors", "SchemaError": "errors",
    "SchemaVersionError": "errors", "FileTooLargeError": "errors", "InvalidTaskIdError": "errors",
    "UnsafePathError": "errors", "ConfigError": "errors", "TaskNotFoundError": "errors",
    "AmbiguousTaskError": "errors", "TurnError": "errors", "TurnAlreadyRecordedError": "errors",
    "LockedError": "errors", "ResumeError": "errors", "GitError": "errors", "AgentError": "errors",
    "IndexBackendError": "errors", "MissingExtraError": "errors", "WriteVerificationError": "errors",
    "NotRegularFileError": "errors", "UnwritableFileError": "errors", "AlreadyRecordedError": "errors",
    "FileBusyError": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'guardkit_state' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
