"""Coding agents one word away: presets as data, one envelope for every agent's output.

``agent_for("claude", repo_root)`` is the Player or Coach a ``--player``/``--coach`` value names.
"""

from __future__ import annotations

from guardkit_state.agents.envelope import AgentEnvelope, read_envelope
from guardkit_state.agents.preset_agent import PresetAgent, agent_for
from guardkit_state.agents.presets import AgentPreset, load_presets

__all__ = ["AgentEnvelope", "AgentPreset", "PresetAgent", "agent_for", "load_presets", "read_envelope"]
