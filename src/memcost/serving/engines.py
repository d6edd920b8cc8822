"""Who answers a serving call: the offline stand-ins, or a model through the project's client.

A *call* is one model request of the replay (an extraction, an update phase, an observer or
reflector pass, an answer). Its prompt is a system message plus a user message made of
newline-terminated *parts* whose o200k counts may be known already (history lines are counted
once, when the workload is made): the offline engine adds those counts instead of tokenising a
400-turn history again at every turn.

Offline, every call is answered by a deterministic classical method (sentence filters, word
overlap) and its usage is the real o200k count of the prompt it would send and of what the
method returned; everything it produces is labelled ``offline``. With a key, the same prompt goes
through :class:`memcost.llm.LLMClient` (cached, metered, budget-guarded), never to a provider
directly. This module is the one place the serving stage borrows the memory stage's offline
rules from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memcost.llm import ChatRequest, LLMClient
from memcost.offline.extract import informative_sentence, offline_fact_text
from memcost.offline.observe import standin_observe, standin_reflect
from memcost.offline.update import lexical_decision
from memcost.prompts import Prompt
from memcost.text import content_words, split_sentences
from memcost.tokens import count_tokens

OFFLINE = "offline"
# The ledger's stage labels (memcost.llm.STAGES) for each serving call kind; the exact kind
# rides along as the ``serving_stage`` tag.
LEDGER_STAGE = {
    "extract": "extract",
    "update": "update",
    "observer": "extract",
    "reflector": "update",
    "answer": "read",
    "generate": "extract",
}
REPLY_WORDS = 30  # the offline answer quotes at most this many words of its best context item


@dataclass
class Call:
    """One request of the replay, before it is sent."""

    kind: str  # extract | update | observer | reflector | answer | generate
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
# The observer and reflector stand-ins are observational memory's, shared with the main study.
def _sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in split_sentences(line)]


def standin_extract(messages: Sequence[tuple[str, str]]) -> str:
    """The memory stage's rule: every informative sentence becomes a fact, as JSON."""
    facts = [
        {"text": offline_fact_text(s, speaker, None), "speaker": speaker, "turns": [i + 1]}
        for i, (speaker, text) in enumerate(messages)
        for s in _sentences(text)
        if informative_sentence(s)
    ]
    return json.dumps({"facts": facts}, ensure_ascii=False)


def standin_update(candidates: Sequence[dict[str, Any]]) -> str:
    """The memory stage's lexical update rule over each candidate's compared memories."""
    decisions = []
    for i, cand in enumerate(candidates):
        found: dict[str, str] = {}
        for short, memory in cand["compared"]:
            verdict = lexical_decision(cand["text"], memory, names=cand["names"])
            if verdict and verdict not in found:
                found[verdict] = short
        if "NOOP" in found:
            decisions.append(
                {"fact": i + 1, "event": "NOOP", "memory_id": found["NOOP"], "text": None}
            )
        elif "UPDATE" in found:
            decisions.append(
                {
                    "fact": i + 1,
                    "event": "UPDATE",
                    "memory_id": found["UPDATE"],
                    "text": cand["text"],
                }
            )
        else:
            decisions.append({"fact": i + 1, "event": "ADD", "memory_id": None, "text": None})
    return json.dumps({"decisions": decisions}, ensure_ascii=False)


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


def offline_text(call: Call) -> str:
    """The offline method of ``call.kind`` on its payload."""
    p = call.payload
    if call.kind == "extract":
        return standin_extract(p)
    if call.kind == "update":
        return standin_update(p)
    if call.kind == "observer":
        return standin_observe(p)
    if call.kind == "reflector":
        return standin_reflect(p)
    if call.kind == "answer":
        return standin_answer(*p)
    raise ValueError(f"no offline method for serving call kind {call.kind!r}")


# --------------------------------------------------------------------------- engines
class OfflineEngine:
    """Deterministic classical stand-ins; usage = o200k counts of the prompt and the reply."""

    backend = OFFLINE

    def __call__(self, call: Call) -> Reply:
        text = offline_text(call)
        return Reply(text, call.prompt_tokens(), 0, count_tokens(text), 0, OFFLINE)


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

    def request(self, call: Call) -> ChatRequest:
        messages = (("system", call.prompt.system), ("user", call.user_text()))
        return ChatRequest(
            model=self.model,
            messages=messages,
            stage=LEDGER_STAGE[call.kind],
            prompt_version=call.prompt.id,
            reasoning_effort=self.effort,
            max_output_tokens=self.max_output_tokens,
            json_mode=call.kind in ("extract", "update"),
            payload=call,
            tags={
                "system": call.tags.get("system"),
                "serving_stage": call.kind,
                **{k: v for k, v in call.tags.items() if k != "system"},
            },
        )

    def __call__(self, call: Call) -> Reply:
        result = self.client.chat(self.request(call), offline=lambda r: offline_text(r.payload))
        usage = result.usage
        visible = max(usage.completion_tokens - usage.reasoning_tokens, 0)
        return Reply(
            result.text,
            usage.prompt_tokens,
            usage.cached_prompt_tokens,
            visible,
            usage.reasoning_tokens,
            result.backend,
            result.error,
        )


Engine = Callable[[Call], Reply]


def parse_facts(text: str) -> list[dict[str, Any]]:
    """Facts of an extraction reply (offline JSON or a model's), tolerating a broken reply."""
    try:
        data = json.loads(_json_part(text))
        return [f for f in data.get("facts", []) if isinstance(f, dict) and f.get("text")]
    except (ValueError, AttributeError):
        return []


def parse_decisions(text: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(_json_part(text))
        return [d for d in data.get("decisions", []) if isinstance(d, dict)]
    except (ValueError, AttributeError):
        return []


def _json_part(text: str) -> str:
    found = re.search(r"\{.*\}", text, re.DOTALL)
    return found.group(0) if found else text
