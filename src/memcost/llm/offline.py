"""Plumbing for the offline backend: run a stage's classical method in place of a model.

The stage module supplies the method (``Callable[[ChatRequest], str]``, reading
``request.payload``); this module times it and reports usage as the o200k token counts of the
prompt it was given and of the text it returned, so the ledger of an offline run can be priced
as if the configured models had answered. Nothing here touches the network or the disk cache,
and nothing depends on the process (no salted ``hash()``, no clock in the outputs).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from memcost.calls import OFFLINE  # noqa: F401 - the offline backend's name, for the client
from memcost.llm.requests import ChatRequest, EmbeddingRequest, Usage
from memcost.tokens import count_tokens, count_tokens_batch

OfflineMethod = Callable[[ChatRequest], str]


def prompt_tokens(request: ChatRequest) -> int:
    """o200k tokens of the message contents (the chat format adds a few per message; ignored,
    it is noise next to the contents)."""
    return sum(count_tokens(content) for _, content in request.messages)


def run_chat(method: OfflineMethod | None, request: ChatRequest) -> tuple[str, Usage, float]:
    """``(text, usage, latency_s)`` of the offline method on ``request``."""
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
    usage = Usage(prompt_tokens=sum(count_tokens_batch(list(request.inputs))))
    return vectors, usage, latency
