"""What sits between ``<history>`` and ``</history>``, and whether it fits (notebook 03,
sections 3 and 4).

Four kinds of context share one prompt: the **full** history (long context), a **rolling window**
of the last W turns (the serving-cost study's baseline, study §9), **no context** (a floor, study
§10) and an **oracle** that keeps only the sessions holding the evidence (a ceiling). Every
prompt is checked against its model's window before any call; one that does not fit stops the
notebook, or (``truncate_oldest``) loses its oldest whole sessions, the same ones for every
question of the conversation, so the prefix stays shared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from memcost import prompts
from memcost.catalog import canonical_name, model_info
from memcost.longctx.history import History, SessionBlock, rendered
from memcost.offline import HistoryTurn
from memcost.text import count_tokens, count_tokens_batch

KINDS = ("long_context", "rolling_window", "no_context", "oracle")
BASELINES = ("rolling_window", "no_context", "oracle")
OVERFLOW_MODES = ("error", "truncate_oldest")

# The paper's generation settings (study §3.2), by model family. GPT-5 models take a reasoning
# effort and no temperature; GPT-OSS-120B was run at temperature 0 with at most 2,000 tokens.
PAPER_GENERATION: dict[str, dict[str, Any]] = {
    "gpt-5": {"reasoning_effort": "low"},
    "gpt-oss": {"temperature": 0.0, "max_output_tokens": 2000},
}
GENERATION_KEYS = ("reasoning_effort", "max_output_tokens", "temperature")

# Tokens a request carries beyond the message texts we count: role markers, and a host's own
# preamble (GPT-OSS's harmony format opens with a system header). Only the limit check adds it.
FORMAT_OVERHEAD_TOKENS = 128


class ContextOverflow(ValueError):
    """A prompt that does not fit its model's window (raised before any call is made)."""

    def __init__(self, message: str, fit: pd.DataFrame | None = None):
        super().__init__(message)
        self.fit = fit


# --- Generation settings and context limits ------------------------------------------------------


def generation_settings(
    model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The request parameters for ``model``: the paper's for its family, then ``overrides``
    given under the model's name (with or without provider prefix and snapshot date)."""
    settings = dict(PAPER_GENERATION.get(model_info(model).family, {}))
    for name, values in (overrides or {}).items():
        if name == model or canonical_name(name) == canonical_name(model):
            unknown = sorted(set(values) - set(GENERATION_KEYS))
            if unknown:
                raise ValueError(
                    f"generation[{name!r}] has unknown keys {unknown}; use {list(GENERATION_KEYS)}"
                )
            settings.update(values)
    return {k: v for k, v in settings.items() if v is not None}


def prompt_limit(model: str, settings: Mapping[str, Any] | None = None) -> int:
    """The most prompt tokens ``model`` accepts while leaving room for its answer: the model's
    input limit, or its window minus the answer budget when that is smaller."""
    info = model_info(model)
    limit = info.prompt_limit
    reserved = (settings or {}).get("max_output_tokens")
    if reserved:
        limit = min(limit, info.context_window - int(reserved))
    return limit


def context_limits(
    models: Iterable[str], generation: Mapping[str, Mapping[str, Any]] | None = None
) -> pd.DataFrame:
    """One row per model: its window, the answer budget and the prompt limit used here."""
    rows = []
    for model in dict.fromkeys(models):
        info = model_info(model)
        settings = generation_settings(model, generation)
        rows.append(
            {
                "model": model,
                "family": info.family,
                "context_window": info.context_window,
                "max_output_tokens": info.max_output_tokens,
                "answer_budget": settings.get("max_output_tokens"),
                "prompt_limit": prompt_limit(model, settings),
                "settings": ", ".join(f"{k}={v}" for k, v in sorted(settings.items())),
            }
        )
    return pd.DataFrame(rows)


# --- Contexts: the history part of one prompt ----------------------------------------------------


@dataclass(frozen=True, eq=False)
class Context:
    """What a prompt carries between ``<history>`` and ``</history>``."""

    kind: str
    conversation_id: str
    text: str
    tokens: int
    sessions: tuple[int, ...] = ()  # session numbers kept (whole sessions)
    last_turns: int | None = None  # rolling window: the last N turns instead
    dropped_sessions: int = 0
    dropped_tokens: int = 0
    history: History | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple[Any, ...]:
        """Identical keys mean identical history text (the grouping and caching key)."""
        return (self.kind, self.conversation_id, self.sessions, self.last_turns)

    def turns(self) -> list[HistoryTurn]:
        """The turns this context shows (for the offline method)."""
        if self.history is None:
            return []
        every = self.history.turn_list()
        if self.last_turns is not None:
            return every[-self.last_turns :] if self.last_turns else []
        keep = set(self.sessions)
        return [t for t in every if t.session in keep]


def sessions_context(
    kind: str,
    history: History,
    blocks: Sequence[SessionBlock],
    dropped: Sequence[SessionBlock] = (),
) -> Context:
    """A context made of whole sessions of ``history`` (``dropped``: those left out to fit)."""
    return Context(
        kind=kind,
        conversation_id=history.conversation_id,
        text="".join(b.text for b in blocks),
        tokens=sum(b.tokens for b in blocks),
        sessions=tuple(b.number for b in blocks),
        dropped_sessions=len(dropped),
        dropped_tokens=sum(b.tokens for b in dropped),
        history=history,
    )


def full_context(history: History) -> Context:
    """Long context: every session of the history."""
    return sessions_context("long_context", history, history.sessions)


def no_context(conversation_id: str) -> Context:
    """The floor: the prompt says there is no history."""
    text = prompts.LONG_CONTEXT_NO_HISTORY
    return Context("no_context", conversation_id, text, count_tokens(text))


def oracle_sessions(history: History, evidence: Iterable[str]) -> list[SessionBlock]:
    """The sessions that hold a question's evidence: LongMemEval names sessions
    (``answer_session_ids``), LoCoMo names turns (``D3:7``) and the session holding each counts."""
    wanted = {str(e) for e in evidence}
    return [b for b in history.sessions if b.session_id in wanted or b.dia_ids & wanted]


def oracle_context(history: History, evidence: Iterable[str]) -> Context | None:
    """The ceiling: only the evidence sessions (``None`` when no session holds the evidence)."""
    blocks = oracle_sessions(history, evidence)
    return sessions_context("oracle", history, blocks) if blocks else None


def truncate_oldest(context: Context, available: int) -> Context:
    """``context`` without its oldest whole sessions, so that its history fits in ``available``
    tokens. Raises :class:`ContextOverflow` when not even the newest session fits."""
    if context.tokens <= available:
        return context
    assert context.history is not None and context.last_turns is None
    by_number = {b.number: b for b in context.history.sessions}
    blocks = [by_number[n] for n in context.sessions]
    kept: list[SessionBlock] = []
    total = 0
    for block in reversed(blocks):
        if total + block.tokens > available:
            break
        kept.append(block)
        total += block.tokens
    kept.reverse()
    if not kept:
        raise ContextOverflow(
            f"conversation {context.conversation_id}: even its newest session "
            f"({blocks[-1].tokens:,} tokens) does not fit the {available:,} tokens left for the "
            f"history ({context.kind}); truncate_oldest drops whole sessions only"
        )
    dropped = blocks[: len(blocks) - len(kept)]
    out = sessions_context(context.kind, context.history, kept, dropped)
    return replace(
        out,
        dropped_sessions=out.dropped_sessions + context.dropped_sessions,
        dropped_tokens=out.dropped_tokens + context.dropped_tokens,
    )


def window_contexts(histories: Mapping[str, History], window_turns: int) -> dict[str, Context]:
    """The rolling window of each conversation: its last ``window_turns`` turns, rendered the
    same way (a session cut by the window keeps its header). Every benchmark here asks its
    questions after the whole history, so these are the last turns before every question."""
    if window_turns < 1:
        raise ValueError(f"window_turns must be at least 1, got {window_turns}")
    texts = {cid: rendered(h.turns.iloc[-window_turns:]) for cid, h in histories.items()}
    counts = dict(zip(texts, count_tokens_batch(list(texts.values())), strict=True))
    return {
        cid: Context(
            kind="rolling_window",
            conversation_id=cid,
            text=texts[cid],
            tokens=counts[cid],
            last_turns=min(window_turns, len(histories[cid].turns)),
            history=histories[cid],
        )
        for cid in histories
    }


__all__ = [
    "BASELINES",
    "FORMAT_OVERHEAD_TOKENS",
    "GENERATION_KEYS",
    "KINDS",
    "OVERFLOW_MODES",
    "PAPER_GENERATION",
    "Context",
    "ContextOverflow",
    "context_limits",
    "full_context",
    "generation_settings",
    "no_context",
    "oracle_context",
    "oracle_sessions",
    "prompt_limit",
    "sessions_context",
    "truncate_oldest",
    "window_contexts",
]
