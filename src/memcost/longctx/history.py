"""Long context (notebook 03, paper §3.2): each history rendered and counted once, and what a prompt
shows of it: all of it, a rolling window, nothing, or the evidence sessions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from memcost import answers, prompts
from memcost.catalog import Declared, canonical_name, model_info
from memcost.data.benchmark import SESSION_SEPARATOR, render_sessions
from memcost.offline import HistoryTurn
from memcost.text import count_tokens, count_tokens_batch, spoken_datetime, with_caption

# tiktoken's batch encoder returns every token id before we take the lengths, and 50M ids at
# once would need gigabytes: histories are counted a few million characters at a time.
COUNT_CHUNK_CHARS = 4_000_000


@dataclass(frozen=True)
class SessionBlock:
    number: int  # session_index + 1, as the header says
    session_id: str
    text: str
    tokens: int  # o200k tokens of ``text``
    dia_ids: frozenset[str]  # LoCoMo turn ids in this session (evidence for the oracle)


@dataclass(eq=False)
class History:
    """One conversation, rendered session by session and counted once."""

    conversation_id: str
    sessions: tuple[SessionBlock, ...]
    turns: pd.DataFrame = field(repr=False)  # this conversation's rows, in order
    _turn_list: list[HistoryTurn] | None = field(default=None, repr=False)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sessions)

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.sessions)

    def turn_list(self) -> list[HistoryTurn]:
        if self._turn_list is None:
            t = self.turns
            self._turn_list = [
                HistoryTurn(
                    int(s) + 1, w if isinstance(w, str) else None, str(sp), with_caption(str(x), c)
                )
                for s, w, sp, x, c in zip(
                    t["session_index"].tolist(),
                    t["session_datetime"].tolist(),
                    t["speaker"].tolist(),
                    t["text"].tolist(),
                    t["image_caption"].tolist(),
                    strict=True,
                )
            ]
        return self._turn_list


def count_in_chunks(texts: list[str], chunk_chars: int = COUNT_CHUNK_CHARS) -> list[int]:
    """:func:`memcost.text.count_tokens_batch` over slices of at most ``chunk_chars``."""
    counts: list[int] = []
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (end == start or size + len(texts[end]) <= chunk_chars):
            size += len(texts[end])
            end += 1
        counts.extend(count_tokens_batch(texts[start:end]))
        start = end
    return counts


def rendered(turns: pd.DataFrame) -> str:
    return "".join(text + SESSION_SEPARATOR for _, text in render_sessions(turns))


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    positions = frame["position"]
    if positions.is_monotonic_increasing:
        return frame
    return frame.sort_values("position", kind="stable")


def _session_ids(ordered: pd.DataFrame) -> tuple[dict[int, str], dict[int, set[str]]]:
    """Per session index: its id, and the LoCoMo turn ids (``D3:7``) it holds."""
    ids: dict[int, str] = {}
    dias: dict[int, set[str]] = defaultdict(set)
    for index, session_id, dia in zip(
        ordered["session_index"].tolist(),
        ordered["session_id"].tolist(),
        ordered["dia_id"].tolist(),
        strict=True,
    ):
        ids.setdefault(int(index), str(session_id))
        if isinstance(dia, str) and dia:
            dias[int(index)].add(dia)
    return ids, dias


def build_histories(conversations: pd.DataFrame) -> dict[str, History]:
    """Every conversation rendered per session, with one batched count over all sessions."""
    pending: list[tuple[str, pd.DataFrame, list[tuple[int, str, str, frozenset[str]]]]] = []
    texts: list[str] = []
    for conversation_id, group in conversations.groupby("conversation_id", sort=False):
        ordered = _ordered(group)
        ids, dias = _session_ids(ordered)
        parts = []
        for index, session_text in render_sessions(ordered):
            text = session_text + SESSION_SEPARATOR
            parts.append((index, ids[index], text, frozenset(dias.get(index, ()))))
            texts.append(text)
        pending.append((str(conversation_id), ordered, parts))
    counts = iter(count_in_chunks(texts))
    histories: dict[str, History] = {}
    for conversation_id, ordered, parts in pending:
        blocks = tuple(
            SessionBlock(index + 1, session_id, text, next(counts), dia_ids)
            for index, session_id, text, dia_ids in parts
        )
        histories[conversation_id] = History(conversation_id, blocks, ordered)
    return histories


def history_table(histories: Mapping[str, History]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "conversation_id": list(histories),
            "sessions": [len(h.sessions) for h in histories.values()],
            "turns": [len(h.turns) for h in histories.values()],
            "history_tokens": [h.tokens for h in histories.values()],
        }
    )


PROMPT = prompts.LONG_CONTEXT_ANSWER
HISTORY_END = "</history>"  # everything before it is the same for a conversation's questions

HEAD, _TAIL = PROMPT.user.split("{history}")
INSTRUCTIONS, _AFTER_BLOCK = _TAIL.split("{question_block}")
if _AFTER_BLOCK or "{" in HEAD + INSTRUCTIONS:
    raise RuntimeError(f"{PROMPT.id}: the user template must end with {{question_block}}")


def shown_options(question_id: str, options: Sequence[str]) -> tuple[str, ...]:
    """The options in the order every notebook and the judge show them."""
    return answers.multiple_choice(question_id, options).options


def option_letter(index: int) -> str:
    return answers.MC_LETTERS[index]


def question_block(
    question: str, *, date: str | None = None, options: Sequence[str] | None = None
) -> str:
    """The text after the history: date, question, options."""
    out = ""
    if date:
        out += prompts.LONG_CONTEXT_DATE_LINE.format(date=spoken_datetime(date))
    out += prompts.LONG_CONTEXT_QUESTION_LINE.format(question=question)
    if options:
        listing = "\n".join(f"({option_letter(i)}) {o}" for i, o in enumerate(options))
        out += prompts.LONG_CONTEXT_OPTIONS.format(options=listing)
    return out


def prompt_messages(history: str, block: str) -> tuple[tuple[str, str], ...]:
    return PROMPT.messages(history=history, question_block=block)


KINDS = ("long_context", "rolling_window", "no_context", "oracle")
BASELINES = ("rolling_window", "no_context", "oracle")
OVERFLOW_MODES = ("error", "truncate_oldest")

# The paper's generation settings (paper §3.2), by model family. GPT-5 models take a reasoning
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
    """A prompt that does not fit its model's window (before any call)."""

    def __init__(self, message: str, fit: pd.DataFrame | None = None):
        super().__init__(message)
        self.fit = fit


# --- Generation settings and context limits ------------------------------------------------------


def generation_settings(
    model: str,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    capabilities: Declared | None = None,
) -> dict[str, Any]:
    """The request parameters for ``model``: the paper's for its family, then ``overrides`` under
    its name; a declared model answers within its declared output limit."""
    info = model_info(model, capabilities)
    settings = dict(PAPER_GENERATION.get(info.family, {}))
    if info.source == "model_capabilities":
        settings.setdefault("max_output_tokens", info.max_output_tokens)
    for name, values in (overrides or {}).items():
        if name == model or canonical_name(name) == canonical_name(model):
            unknown = sorted(set(values) - set(GENERATION_KEYS))
            if unknown:
                raise ValueError(
                    f"generation[{name!r}] has unknown keys {unknown}; use {list(GENERATION_KEYS)}"
                )
            settings.update(values)
    return {k: v for k, v in settings.items() if v is not None}


def prompt_limit(
    model: str, settings: Mapping[str, Any] | None = None, capabilities: Declared | None = None
) -> int:
    """The most prompt tokens ``model`` takes while leaving room for its answer."""
    info = model_info(model, capabilities)
    limit = info.prompt_limit
    reserved = (settings or {}).get("max_output_tokens")
    if reserved:
        limit = min(limit, info.context_window - int(reserved))
    return limit


def context_limits(
    models: Iterable[str],
    generation: Mapping[str, Mapping[str, Any]] | None = None,
    capabilities: Declared | None = None,
) -> pd.DataFrame:
    rows = []
    for model in dict.fromkeys(models):
        info = model_info(model, capabilities)
        settings = generation_settings(model, generation, capabilities)
        rows.append(
            {
                "model": model,
                "family": info.family,
                "context_window": info.context_window,
                "max_output_tokens": info.max_output_tokens,
                "answer_budget": settings.get("max_output_tokens"),
                "prompt_limit": prompt_limit(model, settings, capabilities),
                "settings": ", ".join(f"{k}={v}" for k, v in sorted(settings.items())),
            }
        )
    return pd.DataFrame(rows)


# --- Contexts: the history part of one prompt ----------------------------------------------------


@dataclass(frozen=True, eq=False)
class Context:
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
        """Identical keys mean identical history text."""
        return (self.kind, self.conversation_id, self.sessions, self.last_turns)

    def turns(self) -> list[HistoryTurn]:
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
    """A context of whole sessions (``dropped``: those left out to fit)."""
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
    return sessions_context("long_context", history, history.sessions)


def no_context(conversation_id: str) -> Context:
    text = prompts.LONG_CONTEXT_NO_HISTORY
    return Context("no_context", conversation_id, text, count_tokens(text))


def holds_evidence(session_id: str, dia_ids: AbstractSet[str], wanted: AbstractSet[str]) -> bool:
    """The oracle's rule: the evidence names the session (LongMemEval) or one of its turns (LoCoMo
    ``D3:7``)."""
    return session_id in wanted or not wanted.isdisjoint(dia_ids)


def oracle_sessions(history: History, evidence: Iterable[str]) -> list[SessionBlock]:
    wanted = {str(e) for e in evidence}
    return [b for b in history.sessions if holds_evidence(b.session_id, b.dia_ids, wanted)]


def oracle_asks(conversations: pd.DataFrame, questions: pd.DataFrame) -> pd.Series:
    """Which questions the oracle can ask (a session holds their evidence), from the turns alone."""
    sessions = {}
    for conversation_id, group in conversations.groupby("conversation_id", sort=False):
        ids, dias = _session_ids(_ordered(group))
        sessions[str(conversation_id)] = [(ids[i], dias.get(i, set())) for i in ids]
    return pd.Series(
        [
            any(holds_evidence(sid, dia, {str(e) for e in evidence}) for sid, dia in owned)
            for owned, evidence in zip(
                (sessions.get(str(c), []) for c in questions["conversation_id"]),
                questions["evidence"].map(lambda e: [] if e is None else list(e)),
                strict=True,
            )
        ],
        index=questions.index,
        dtype=bool,
    )


def oracle_context(history: History, evidence: Iterable[str]) -> Context | None:
    """The evidence sessions only (``None``: no session holds the evidence)."""
    blocks = oracle_sessions(history, evidence)
    return sessions_context("oracle", history, blocks) if blocks else None


def truncate_oldest(context: Context, available: int) -> Context:
    """``context`` without its oldest whole sessions, to fit ``available`` tokens;
    :class:`ContextOverflow` when not even the newest fits."""
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
    """Each conversation's last ``window_turns`` turns, rendered the same way (a cut session keeps
    its header)."""
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
