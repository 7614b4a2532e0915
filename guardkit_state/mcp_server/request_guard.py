"""Every MCP request read gets an answer: one the SDK's reader refuses is answered with an error.

The SDK reads each line of stdin with pydantic, whose JSON parser stops at a nesting depth of
about 200; what it cannot read reaches the server as an exception, which it logs and drops, and
the client waits for an answer that never comes. :class:`AnsweringReader` sits between the SDK's
read stream and its server: such a line that names a request (its ``id`` is read from its top
level alone, :func:`~guardkit_state.store.jsonio.top_level`) is answered with a JSON-RPC error
naming why (``JSON nested deeper than 64 levels ...``); the server goes on with the next line.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

from guardkit_state.errors import ParseError
from guardkit_state.store.jsonio import parse_json, top_level

log = logging.getLogger("guardkit_state.mcp_server")


def refusal(exc: Exception) -> SessionMessage | None:
    """The error answer to a request line the SDK could not read (``exc``, its reader's error);
    None when the line names no request (a notification, or no ``id`` can be read)."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors()
    # The line the SDK's reader was given, as its validation error keeps it.
    line: Any = next((error.get("input") for error in errors if error.get("loc") == ()), None)
    if not isinstance(line, str):
        return None
    try:
        envelope = top_level(line)
    except ParseError:
        return None
    ident = envelope.get("id") if isinstance(envelope, dict) and "method" in envelope else None
    if not isinstance(ident, (int, str)) or isinstance(ident, bool):
        return None
    try:
        parse_json(line, path="the request")
    except ParseError as read:
        code, reason = PARSE_ERROR, read.message
    else:
        code, reason = INVALID_REQUEST, str(errors[0].get("msg"))  # errors holds the line's error at least
    log.warning("request %r cannot be read (%s): answered with an error", ident, reason)
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=ident, error=ErrorData(
        code=code, message=f"error: the request cannot be read: {reason}")))


class AnsweringReader:
    """The SDK's read stream (``inner``), a request it could not read answered on ``write`` (the
    SDK's write stream); both as the SDK's stdio transport makes them."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender's context of the item received last (the SDK's dispatcher restores it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item: SessionMessage | Exception = await self._inner.receive()
            answer = refusal(item) if isinstance(item, Exception) else None
            if answer is None:
                return item
            await self._write.send(answer)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReader:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                        exc_tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None


__all__ = ["AnsweringReader", "refusal"]
