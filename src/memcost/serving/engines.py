"""Who answers a serving call: the offline stand-ins, or a model through the project's client.

An answer is a :class:`Call`: a system message plus a user message made of newline-terminated
*parts* whose o200k counts may be known already (history lines are counted once, when the
workload is made): the offline engine adds those counts instead of tokenising a 400-turn
history again at every turn. A memory system's own calls (extraction, update phase, observer,
reflector) are the main study's requests, sent with :meth:`OfflineEngine.chat` or
:meth:`ClientEngine.chat` (the :class:`memcost.memory.stored.Calls` of a live memory).

Offline, every call is answered by a deterministic classical method (the memory systems' own
stand-ins; word overlap for the answer) and its usage is the real o200k count of the prompt it
would send and of what the method returned; everything it produces is labelled ``offline``.
With a key, the same prompt goes through :class:`memcost.llm.LLMClient` (cached, metered,
budget-guarded), never to a provider directly. The similarity search runs here in both modes,
with the offline embedder: the study prices its few query and fact tokens as the embedding
model (the ``retrieve`` and ``ingest_embed`` rows), and a serving run needs no embedding API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from memcost.llm import ChatRequest, ChatResult, LLMClient
from memcost.llm.offline import HashingEmbedder, run_chat
from memcost.prompts import Prompt
from memcost.text import content_words, count_tokens

OFFLINE = "offline"
REPLY_WORDS = 30  # the offline answer quotes at most this many words of its best context item


@dataclass
class Call:
    """One request of the replay, before it is sent."""

    kind: str  # answer
    prompt: Prompt
    parts: list[str]  # the user message, in newline-terminated parts (joined = the message)
    part_tokens: list[int | None] = field(default_factory=list)  # known counts (None: count)
    payload: Any = None  # what the offline method reads
    tags: dict[str, Any] = field(default_factory=dict)

    def user_text(self) -> str:
        return "".join(self.parts)

    def prompt_tokens(self) -> int:
        """o200k tokens of the system message plus the user message, summed part by part."""
        known = self.part_tokens + [None] * (len(self.parts) - len(self.part_tokens))
        total = count_tokens(self.prompt.system) if self.prompt.system else 0
        for part, n in zip(self.parts, known, strict=True):
            total += count_tokens(part) if n is None else n
        return total


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int  # visible output tokens (reasoning excluded)
    reasoning_tokens: int
    backend: str
    error: str | None = None


# --------------------------------------------------------------------------- offline methods
def standin_answer(message: str, items: Sequence[str], item_words: Sequence[frozenset[str]]) -> str:
    """A short reply quoting the context item that shares most content words with the message
    (the most recent one on ties); a plain acknowledgement when nothing overlaps."""
    words = frozenset(content_words(message))
    best, best_score = -1, 0
    for i, other in enumerate(item_words):
        score = len(words & other)
        if score and score >= best_score:
            best, best_score = i, score
    if best < 0:
        return "Thanks for telling me, noted."
    quoted = " ".join(items[best].split()[:REPLY_WORDS])
    return f"Thanks for telling me. I remember this: {quoted}"


# --------------------------------------------------------------------------- engines
_EMBEDDER = HashingEmbedder()


def embed_locally(texts: list[str], *, model: str = "", tags: Any = None) -> np.ndarray:
    """The similarity search's vectors, in both modes (see the module's docstring)."""
    return _EMBEDDER.embed(texts)


def reply_of(result: ChatResult) -> Reply:
    """A client result as a serving row reads it (visible output, reasoning apart)."""
    usage = result.usage
    visible = max(usage.completion_tokens - usage.reasoning_tokens, 0)
    return Reply(
        result.text,
        usage.prompt_tokens,
        usage.cached_prompt_tokens,
        visible,
        usage.reasoning_tokens,
        result.backend,
        result.error or result.parse_error,
    )


class OfflineEngine:
    """Deterministic classical stand-ins; usage = o200k counts of the prompt and the reply."""

    backend = OFFLINE
    embed = staticmethod(embed_locally)

    def __call__(self, call: Call) -> Reply:
        if call.kind != "answer":
            raise ValueError(f"no offline method for serving call kind {call.kind!r}")
        text = standin_answer(*call.payload)
        return Reply(text, call.prompt_tokens(), 0, count_tokens(text), 0, OFFLINE)

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str = "",
    ) -> ChatResult:
        """A memory system's request answered by its own stand-in, as the client would offline
        (a reply its parser refuses is a failed call)."""
        text, usage, latency = run_chat(offline, request)
        parsed, parse_error = None, None
        if parse is not None:
            try:
                parsed = parse(text)
            except ValueError as exc:
                parse_error = f"unusable reply: {exc}"
        return ChatResult(
            request,
            text,
            usage,
            "",
            OFFLINE,
            OFFLINE,
            False,
            latency,
            1,
            parsed=parsed,
            parse_error=parse_error,
        )


class ClientEngine:
    """The same calls sent through the project's client, as one model at one reasoning effort."""

    def __init__(
        self,
        client: LLMClient,
        model: str,
        reasoning_effort: str = "",
        max_output_tokens: int | None = None,
    ):
        self.client, self.model, self.effort = client, model, reasoning_effort or None
        self.max_output_tokens = max_output_tokens
        self.backend = client.backend_for(model)

    embed = staticmethod(embed_locally)

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str = "",
    ) -> ChatResult:
        """A memory system's request (made for this engine's model) through the client."""
        return self.client.chat(request, offline=offline, parse=parse)

    def request(self, call: Call) -> ChatRequest:
        messages = (("system", call.prompt.system), ("user", call.user_text()))
        return ChatRequest(
            model=self.model,
            messages=messages,
            stage="read",
            prompt_version=call.prompt.id,
            reasoning_effort=self.effort,
            max_output_tokens=self.max_output_tokens,
            payload=call,
            tags={
                "system": call.tags.get("system"),
                "serving_stage": call.kind,
                **{k: v for k, v in call.tags.items() if k != "system"},
            },
        )

    def __call__(self, call: Call) -> Reply:
        result = self.client.chat(self.request(call), offline=lambda r: standin_answer(*r.payload))
        return reply_of(result)


Engine = Callable[[Call], Reply]


class TurnCalls:
    """A live memory's calls at one turn of one served system: the engine's, with the serving
    tags every ledger record of the replay carries (system, serving stage, turn)."""

    def __init__(self, engine: Any, system: str, turn: int):
        self.engine, self.system, self.turn = engine, system, turn

    def chat(
        self,
        request: ChatRequest,
        offline: Callable[[ChatRequest], str],
        parse: Callable[[str], Any] | None = None,
        *,
        stage: str,
    ) -> ChatResult:
        tags = {**request.tags, "system": self.system, "serving_stage": stage, "turn": self.turn}
        return self.engine.chat(replace(request, tags=tags), offline, parse, stage=stage)

    def embed(self, texts: list[str], *, model: str, tags: Any) -> np.ndarray:
        return self.engine.embed(texts, model=model, tags=tags)
