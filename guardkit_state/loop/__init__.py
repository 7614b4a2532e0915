"""The Player/Coach loop: agents, pre-start checks, the run, and its typed progress events."""
