"""The offline backend's plumbing (a stage's classical method timed and counted in place of a model)
and the embedders' batching and hashing (docs/architecture.md, "The offline backend")."""

from __future__ import annotations

import base64
import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from memcost.calls import OFFLINE  # noqa: F401 - the offline backend's name, for the client
from memcost.catalog import API_MAX_INPUT_TOKENS, API_MAX_INPUTS, REQUEST_TOKENS, TOKEN_MARGIN
from memcost.llm.requests import ChatRequest, EmbeddingRequest, Usage
from memcost.text import count_tokens, count_tokens_batch, truncate_to_tokens, words

OfflineMethod = Callable[[ChatRequest], str]


def prompt_tokens(request: ChatRequest | EmbeddingRequest) -> int:
    """o200k tokens of the message contents or the embedding inputs."""
    if isinstance(request, EmbeddingRequest):
        return sum(count_tokens_batch(list(request.inputs)))
    return sum(count_tokens(content) for _, content in request.messages)


def run_chat(method: OfflineMethod | None, request: ChatRequest) -> tuple[str, Usage, float]:
    if method is None:
        raise ValueError(
            f"the offline backend needs the {request.stage} stage's offline method: pass "
            "offline=<callable(ChatRequest) -> str> (or choose an API backend)"
        )
    t0 = time.perf_counter()
    text = method(request)
    latency = time.perf_counter() - t0
    if not isinstance(text, str):
        raise TypeError(f"an offline method must return str, got {type(text).__name__}")
    usage = Usage(prompt_tokens=prompt_tokens(request), completion_tokens=count_tokens(text))
    return text, usage, latency


def run_embedding(
    embed: Callable[[list[str]], np.ndarray], request: EmbeddingRequest
) -> tuple[np.ndarray, Usage, float]:
    t0 = time.perf_counter()
    vectors = embed(list(request.inputs))
    latency = time.perf_counter() - t0
    usage = Usage(prompt_tokens=prompt_tokens(request))
    return vectors, usage, latency


# --- Embedders -------------------------------------------------------------------------------

DEFAULT_DIMS = 1_536  # text-embedding-3-small
GRID = 2.0**11  # offline vectors' components are multiples of 1 / GRID (exact inner products)


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, float32; zero rows stay zero."""
    out = np.asarray(vectors, dtype=np.float32)
    if out.ndim != 2:
        raise ValueError(f"expected a 2-d array, got shape {out.shape}")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (out / norms).astype(np.float32, copy=False)


def encode_vectors(vectors: np.ndarray) -> dict[str, object]:
    arr = np.ascontiguousarray(vectors, dtype="<f4")
    return {"shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def decode_vectors(data: dict[str, object]) -> np.ndarray:
    shape = tuple(int(x) for x in data["shape"])  # type: ignore[union-attr]
    raw = base64.b64decode(str(data["b64"]))
    return np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)


def plan_batches(
    texts: Sequence[str],
    *,
    max_inputs: int = API_MAX_INPUTS,
    max_tokens: int = REQUEST_TOKENS,
    max_input_tokens: int = int(API_MAX_INPUT_TOKENS * TOKEN_MARGIN),
) -> tuple[list[list[int]], list[str], int]:
    """Split ``texts`` in order into batches within the API's limits: ``(batches of indices, texts
    with over-long ones truncated, number truncated)``."""
    counts = count_tokens_batch(list(texts))
    fitted: list[str] = []
    truncated = 0
    for text, n in zip(texts, counts, strict=True):
        if n > max_input_tokens:
            fitted.append(truncate_to_tokens(text, max_input_tokens))
            truncated += 1
        else:
            fitted.append(text)
    counts = [min(n, max_input_tokens) for n in counts]
    batches: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for i, n in enumerate(counts):
        if current and (len(current) >= max_inputs or tokens + n > max_tokens):
            batches.append(current)
            current, tokens = [], 0
        current.append(i)
        tokens += n
    if current:
        batches.append(current)
    return batches, fitted, truncated


@lru_cache(maxsize=1 << 18)
def _bucket(feature: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    h = int.from_bytes(digest, "little")
    # The low bits choose the bucket, the top bit the sign: collisions then cancel on average
    # instead of adding up.
    return h % dims, (1.0 if h >> 63 else -1.0)


class HashingEmbedder:
    """Offline embedder: signed feature hashing of word unigrams and bigrams, sublinear tf, on a
    grid of 2^-11."""

    def __init__(self, dims: int = DEFAULT_DIMS):
        if dims <= 0:
            raise ValueError("dims must be positive")
        self.dims = dims

    def features(self, text: str) -> Counter[str]:
        tokens = words(text)
        feats: Counter[str] = Counter(tokens)
        feats.update(f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False))
        return feats

    def embed_one(self, text: str) -> np.ndarray:
        values: dict[int, float] = {}
        # Features in sorted order and an exactly rounded norm (fsum): the same floats on every
        # machine, where numpy's SIMD-dependent summation order might differ in the last bit.
        for feature, tf in sorted(self.features(text).items()):
            index, sign = _bucket(feature, self.dims)
            values[index] = values.get(index, 0.0) + sign * (1.0 + math.log(tf))
        vec = np.zeros(self.dims, dtype=np.float32)
        norm = math.sqrt(math.fsum(v * v for v in values.values()))
        if norm > 0:
            # on the grid: unit length to within ~1e-3, and inner products exact (module doc)
            for index, value in values.items():
                vec[index] = round(value / norm * GRID) / GRID
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self.embed_one(text)
        return out

    __call__ = embed
