"""The turns' clock: the time a turn records."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = ["utc_now"]
