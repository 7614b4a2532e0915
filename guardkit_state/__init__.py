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
    "TaskFile": "taskfile", "find_task": "taskfile", "extract_criteria": "taskfile",
    "StateUpdate": "splice", "SpliceResult": "splice",
    "TurnStore": "artifacts",
    "TaskLocation": "locate", "locate_task": "locate", "Resolution": "resolve", "resolve_task": "resolve",
    "validate_record": "schemas", "load_record": "jsonio",
    # the lifecycle
    "TurnLifecycle": "turns", "TurnRecord": "turns", "record_turn": "turns",
    "CriteriaLedger": "criteria", "detect_stall": "stall", "feedback_signature": "stall",
    "render_continuation_context": "context",
    "ResumePoint": "resume", "resume_point": "resume",
    # the loop
    "Agent": "agents", "CallableAgent": "agents", "CommandAgent": "agents", "TurnRequest": "agents",
    "LoopOptions": "loop", "LoopResult": "loop", "feature_build": "loop",
    "TaskSummary": "status", "repo_status": "status",
    # configuration, git
    "load_config": "config", "ResolvedConfig": "config",
    "GitRepo": "gitstore", "commit_turn": "gitstore", "WorktreeManager": "worktrees",
    "turn_log": "review", "turn_diff": "review",
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
