"""The four served systems, as state machines stepped one turn at a time.

At every turn a system *retrieves*, then *answers* the new message, then an *ingest gate* may
fire (study §3). Each step returns one row per stage that happened, with the tokens the stage's
call used and the system's state, so that the cost of a turn can be explained by the state that
caused it (the memory-state model of notebook 06, §6).

- ``full_history``: the answer prompt carries every previous turn.
- ``rolling_window``: it carries the last ``window`` turns.
- ``mem0``: the main study's ``mem0_style`` (the paper's pipeline): every ``ingest_interval``
  turns the new turns go through fact extraction and the update phase (ADD / UPDATE / DELETE /
  NOOP against the most similar stored facts); each turn retrieves the ``top_k`` facts most
  similar to the message.
- ``observational``: the main study's observational memory: an *observer* turns the
  un-observed messages into observations once they reach ``observer_tokens``; a *reflector*
  condenses the observations once they reach ``reflector_tokens``; each turn retrieves the top
  observation.

The two memory systems are served by :mod:`memcost.serving.memory_systems`. History lines are
counted once, when the workload is made, so a 400-turn full-history replay never tokenises its
history again (see :class:`memcost.serving.engines.Call`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memcost.prompts import SERVING_ANSWER
from memcost.serving.engines import Call, Engine, Reply
from memcost.serving.workload import Turn, render_line
from memcost.text import content_words

SYSTEMS = ("full_history", "rolling_window", "mem0", "observational")
EMPTY_CONTEXT = "(nothing yet)\n"


@dataclass(frozen=True)
class ServingConfig:
    """The study's settings (§3), all notebook parameters."""

    window: int = 10
    ingest_interval: int = 10
    mem0_top_k: int = 10
    om_top_k: int = 1
    observer_tokens: int = 30_000
    reflector_tokens: int = 40_000


def fact_words(text: str) -> frozenset[str]:
    return frozenset(content_words(text.split(": ", 1)[-1]))


def stage_row(stage: str, reply: Reply, **extra: Any) -> dict[str, Any]:
    return {
        "stage": stage,
        "prompt_tokens": reply.prompt_tokens,
        "cached_tokens": reply.cached_tokens,
        "output_tokens": reply.output_tokens,
        "reasoning_tokens": reply.reasoning_tokens,
        "backend": reply.backend,
        "error": reply.error,
        **extra,
    }


def answer_call(
    title: str,
    lines: Sequence[str],
    line_tokens: Sequence[int],
    turn: Turn,
    items: Sequence[str],
    item_words: Sequence[frozenset[str]],
    system: str,
) -> Call:
    """The answer request: the context lines (already counted) and the latest message."""
    context, counts = (list(lines), list(line_tokens)) if lines else ([EMPTY_CONTEXT], [None])
    tail = f"Latest message from {turn.speaker}:\n{' '.join(turn.text.split())}\n"
    return Call(
        "answer",
        SERVING_ANSWER,
        [f"{title}:\n", *context, tail],
        [None, *counts, None],
        payload=(turn.text, items, item_words),
        tags={"system": system, "turn": turn.turn},
    )


class ServedSystem:
    """Shared bookkeeping: the rows of one turn and the gate state of the last one."""

    name = ""

    def __init__(self, config: ServingConfig):
        self.config = config

    def state(self) -> dict[str, Any]:
        return {"memory_items": 0, "memory_tokens": 0, "pending_tokens": 0}

    def step(self, turn: Turn, engine: Engine) -> list[dict[str, Any]]:
        raise NotImplementedError


class FullHistory(ServedSystem):
    name = "full_history"

    def __init__(self, config: ServingConfig):
        super().__init__(config)
        self.lines: list[str] = []
        self.counts: list[int] = []
        self.texts: list[str] = []
        self.words: list[frozenset[str]] = []

    def context(self) -> slice:
        return slice(0, len(self.lines))

    def state(self) -> dict[str, Any]:
        part = self.context()
        return {
            "memory_items": len(self.lines[part]),
            "memory_tokens": sum(self.counts[part]),
            "pending_tokens": 0,
        }

    def step(self, turn: Turn, engine: Engine) -> list[dict[str, Any]]:
        part = self.context()
        state = self.state()
        call = answer_call(
            "Conversation so far",
            self.lines[part],
            self.counts[part],
            turn,
            self.texts[part],
            self.words[part],
            self.name,
        )
        rows = [stage_row("answer", engine(call), gate_fired=False, gate_reason="", **state)]
        self.lines.append(render_line(turn.speaker, turn.text))
        self.counts.append(turn.line_tokens)
        self.texts.append(turn.text)
        self.words.append(frozenset(content_words(turn.text)))
        return rows


class RollingWindow(FullHistory):
    name = "rolling_window"

    def context(self) -> slice:
        return slice(max(0, len(self.lines) - self.config.window), len(self.lines))
