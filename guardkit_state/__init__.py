"""guardkit-state: file-first, git-native memory for Player/Coach coding loops.

The public API, importable from the package itself::

    from guardkit_state import TurnLifecycle, record_turn, feature_build, TaskFile

Names are resolved lazily (PEP 562) so that ``guardkit-state --help`` does not pay for YAML,
JSON Schema and git imports it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # records
    "AutobuildState": "model", "CoachDecision": "model", "CompletionPromise": "model", "Criterion": "model",
    "CriterionVerification": "model", "GateResult": "model", "LedgerEntry": "model", "Outcome": "model",
    "PlayerReport": "model", "TurnEntry": "model", "TurnMode": "model", "TurnState": "model",
    # task files and turn files
    "TaskFile": "taskfile.document", "find_task": "taskfile.resolve", "extract_criteria": "taskfile.document",
    "StateUpdate": "taskfile.splice", "SpliceResult": "taskfile.splice",
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
    "Agent": "agents.protocol", "CallableAgent": "agents.protocol", "CommandAgent": "agents.protocol",
    "TurnRequest": "agents.protocol",
    "LoopOptions": "loop.run", "LoopResult": "loop.run", "feature_build": "loop.run", "run_task_loop": "loop.run",
    "build_feature": "features.build",
    "FeatureOptions": "features.build",
    "FeatureResult": "features.result",
    "TaskOutcome": "features.result",
    "FeatureInterrupted": "features.result",
    "FeatureNotStarted": "features.result",
    "FeaturePlan": "plans.plan", "load_plan": "plans.plan", "find_plan": "plans.plan",
    "plan_waves": "plans.waves", "PlanUpdate": "plans.plan_splice", "modify_plan": "plans.plan_writer",
    "update_plan": "plans.plan_writer", "validate_plan_file": "plans.plan_validation",
    "feature_view": "inspect.feature_view", "read_feature_log": "inspect.feature_log",
    "feature_status": "inspect.status", "LoopInterrupted": "loop.outcome",
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
    "FileBusyError": "errors", "FeaturePlanError": "errors", "WaveError": "errors",
    "FeatureNotFoundError": "errors", "NotADirectoryStateError": "errors",
}

# -- typing block (generated from _EXPORTS; tests/test_exported_members.py checks it) --
if TYPE_CHECKING:  # what mypy and editors see; at run time names load lazily (__getattr__)
    from guardkit_state.agents.protocol import Agent, CallableAgent, CommandAgent, TurnRequest
    from guardkit_state.config import ResolvedConfig, load_config
    from guardkit_state.errors import (
        AgentError,
        AlreadyRecordedError,
        AmbiguousTaskError,
        ConfigError,
        DuplicateKeyError,
        FeatureNotFoundError,
        FeaturePlanError,
        FileBusyError,
        FileTooLargeError,
        FrontmatterError,
        GitError,
        GuardkitStateError,
        IndexBackendError,
        InputError,
        InvalidTaskIdError,
        LockedError,
        MissingExtraError,
        NotADirectoryStateError,
        NotRegularFileError,
        ParseError,
        ResumeError,
        SchemaError,
        SchemaVersionError,
        TaskNotFoundError,
        TurnAlreadyRecordedError,
        TurnError,
        UnsafePathError,
        UnwritableFileError,
        WaveError,
        WriteVerificationError,
    )
    from guardkit_state.features.build import FeatureOptions, build_feature
    from guardkit_state.features.result import FeatureInterrupted, FeatureNotStarted, FeatureResult, TaskOutcome
    from guardkit_state.git.commits import commit_turn
    from guardkit_state.git.repo import GitRepo
    from guardkit_state.git.worktrees import WorktreeManager
    from guardkit_state.index import (
        EmbedderMismatchError,
        FileIndex,
        SearchHit,
        SearchResult,
        graphiti_status,
        make_filters,
        open_graphiti,
        search,
        update_graphiti,
    )
    from guardkit_state.inspect.feature_log import read_feature_log
    from guardkit_state.inspect.feature_view import feature_view
    from guardkit_state.inspect.review import turn_diff, turn_log
    from guardkit_state.inspect.status import TaskSummary, feature_status, repo_status
    from guardkit_state.loop.outcome import LoopInterrupted
    from guardkit_state.loop.run import LoopOptions, LoopResult, feature_build, run_task_loop
    from guardkit_state.model import (
        AutobuildState,
        CoachDecision,
        CompletionPromise,
        Criterion,
        CriterionVerification,
        GateResult,
        LedgerEntry,
        Outcome,
        PlayerReport,
        TurnEntry,
        TurnMode,
        TurnState,
    )
    from guardkit_state.plans.plan import FeaturePlan, find_plan, load_plan
    from guardkit_state.plans.plan_splice import PlanUpdate
    from guardkit_state.plans.plan_validation import validate_plan_file
    from guardkit_state.plans.plan_writer import modify_plan, update_plan
    from guardkit_state.plans.waves import plan_waves
    from guardkit_state.report import ReportResult, TaskReport, build_task_report, render_report, write_report
    from guardkit_state.store.jsonio import load_record
    from guardkit_state.store.schemas import validate_record
    from guardkit_state.store.turn_files import TurnStore
    from guardkit_state.taskfile.document import TaskFile, extract_criteria
    from guardkit_state.taskfile.handler import FrontmatterHandler
    from guardkit_state.taskfile.locate import TaskLocation, locate_task
    from guardkit_state.taskfile.resolve import Resolution, find_task, resolve_task
    from guardkit_state.taskfile.splice import SpliceResult, StateUpdate
    from guardkit_state.turns.context import render_continuation_context
    from guardkit_state.turns.ledger import CriteriaLedger
    from guardkit_state.turns.lifecycle import TurnLifecycle, TurnRecord, record_turn
    from guardkit_state.turns.resume import ResumePoint, resume_point
    from guardkit_state.turns.stall import detect_stall, feedback_signature
# -- end of typing block --

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
