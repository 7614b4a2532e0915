"""guardkit-state: file-first, git-native memory for Player/Coach coding loops.

The public API, importable from the package itself (every other name stays importable from its
module, ``guardkit_state.errors`` holding every error)::

    from guardkit_state import TaskFile, TurnLifecycle, record_turn, run_task_loop

Names are resolved lazily (PEP 562) so that ``guardkit-state --help`` does not pay for YAML,
JSON Schema and git imports it does not use. ``tests/test_exported_members.py`` keeps ``__all__``,
the lazy table, the typing block and the list in docs/README.md in step.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

__version__ = "0.1.0"

#: Each public name and the module it lives in.
_EXPORTS: dict[str, str] = {
    # the records
    "AutobuildState": "model", "CoachDecision": "model", "Criterion": "model", "Outcome": "model",
    "PlayerReport": "model", "TurnEntry": "model", "TurnMode": "model", "TurnState": "model",
    # the task file, its turn files, one turn
    "TaskFile": "taskfile.document", "FrontmatterHandler": "taskfile.handler", "StateUpdate": "taskfile.splice",
    "resolve_task": "taskfile.resolve", "TurnStore": "store.turn_files",
    "TurnLifecycle": "turns.lifecycle", "TurnRecord": "turns.lifecycle", "record_turn": "turns.lifecycle",
    # the loop of one task, a whole feature
    "Agent": "agents.protocol", "CallableAgent": "agents.protocol", "CommandAgent": "agents.protocol",
    "TurnRequest": "agents.protocol", "LoopOptions": "loop.run", "LoopResult": "loop.run",
    "LoopInterrupted": "loop.outcome", "run_task_loop": "loop.run",
    "FeatureOptions": "features.build", "build_feature": "features.build", "FeatureResult": "features.result",
    # the search index (its protocol; the file scan always, Graphiti when it can answer), the report
    "SearchIndex": "index", "FileIndex": "index", "SearchHit": "index", "SearchResult": "index", "search": "index",
    "write_report": "report",
    # the errors a caller tells apart (all of them: guardkit_state.errors)
    "GuardkitStateError": "errors", "InputError": "errors", "SchemaError": "errors", "TaskNotFoundError": "errors",
    "AlreadyRecordedError": "errors", "LockedError": "errors", "GitError": "errors", "AgentError": "errors",
}

__all__ = [
    "Agent", "AgentError", "AlreadyRecordedError", "AutobuildState", "CallableAgent", "CoachDecision", "CommandAgent",
    "Criterion", "FeatureOptions", "FeatureResult", "FileIndex", "FrontmatterHandler", "GitError",
    "GuardkitStateError", "InputError", "LockedError", "LoopInterrupted", "LoopOptions", "LoopResult", "Outcome",
    "PlayerReport", "SchemaError", "SearchHit", "SearchIndex", "SearchResult", "StateUpdate", "TaskFile",
    "TaskNotFoundError", "TurnEntry", "TurnLifecycle", "TurnMode", "TurnRecord", "TurnRequest", "TurnState",
    "TurnStore", "__version__", "build_feature", "record_turn", "resolve_task", "run_task_loop", "search",
    "write_report",
]

if _typing.TYPE_CHECKING:  # what mypy and editors see; at run time names load lazily (__getattr__)
    from guardkit_state.agents.protocol import Agent, CallableAgent, CommandAgent, TurnRequest
    from guardkit_state.errors import (
        AgentError,
        AlreadyRecordedError,
        GitError,
        GuardkitStateError,
        InputError,
        LockedError,
        SchemaError,
        TaskNotFoundError,
    )
    from guardkit_state.features.build import FeatureOptions, build_feature
    from guardkit_state.features.result import FeatureResult
    from guardkit_state.index import FileIndex, SearchHit, SearchIndex, SearchResult, search
    from guardkit_state.loop.outcome import LoopInterrupted
    from guardkit_state.loop.run import LoopOptions, LoopResult, run_task_loop
    from guardkit_state.model import (
        AutobuildState,
        CoachDecision,
        Criterion,
        Outcome,
        PlayerReport,
        TurnEntry,
        TurnMode,
        TurnState,
    )
    from guardkit_state.report import write_report
    from guardkit_state.store.turn_files import TurnStore
    from guardkit_state.taskfile.document import TaskFile
    from guardkit_state.taskfile.handler import FrontmatterHandler
    from guardkit_state.taskfile.resolve import resolve_task
    from guardkit_state.taskfile.splice import StateUpdate
    from guardkit_state.turns.lifecycle import TurnLifecycle, TurnRecord, record_turn


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'guardkit_state' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
