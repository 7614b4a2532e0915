"""guardkit-state: file-first, git-native memory for Player/Coach coding loops."""

from __future__ import annotations

__version__ = "0.1.0"
