"""Long-context answering (notebook 03, study §3.2): the whole history in every prompt.

Each question is answered by a model that reads the user's entire history, rendered with
session dates and speakers (:func:`memcost.data.render_sessions`), followed by the instructions,
the question's date and the question. Three baselines share the prompt and the answer-file
format and differ only in the history part: a **rolling window** of the last W turns (the
serving-cost study's baseline, study §9), **no context** (a floor: what can be answered without
any memory, study §10) and an **oracle** that keeps only the sessions holding the evidence (a
ceiling).

Why the code is shaped the way it is:

- **Prompt caching.** The history comes first, so every question about the same conversation
  starts with the same bytes (system message, opening line, history). The provider caches that
  prefix after the first question; :func:`answer_questions` therefore sends the first question
  of each conversation alone and the others once it has returned, conversations in parallel
  (``LLMClient.chat_groups``).
- **Counting once.** Each session is rendered and counted once; a prompt's size is the sum of
  its parts (system message, opening, the sessions it keeps, its question block). The parts end
  where o200k's pre-tokenizer always splits (after a newline, before a non-space), so the sum
  is exactly the count of the whole: 500 histories of 100k tokens are planned in seconds.
- **Limits before spending.** Every prompt is checked against its model's window before any
  call; one that does not fit stops the notebook with the conversation, its size and the limit,
  or (``overflow="truncate_oldest"``) loses its oldest sessions, the same ones for every
  question of the conversation, so the prefix stays shared.
- **Offline method.** Without a key the "model" is extractive: the turn of the history that
  shares the most words with the question (BM25), with its date. For multiple choice it picks
  the option the history supports best, and with no history the longest option, which is the
  known PersonaMem v2 bias (study §10) made visible.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from memcost import choices, data, prompts
from memcost.answers import AnswerWriter, load_answers, system_name
from memcost.llm import ChatRequest, ChatResult, LLMClient
from memcost.models import canonical_name, model_info, slug
from memcost.paths import DatasetPaths
from memcost.text import BM25, spoken_datetime, stable_hash
from memcost.tokens import count_tokens, count_tokens_batch

STAGE = "long_context"  # the ledger stage of every call made here
KINDS = ("long_context", "rolling_window", "no_context", "oracle")
BASELINES = ("rolling_window", "no_context", "oracle")
OVERFLOW_MODES = ("error", "truncate_oldest")
PROMPT = prompts.LONG_CONTEXT_ANSWER

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

# Offline answers (the extractive method's fixed replies).
NOT_MENTIONED = "Not mentioned in the conversations."
NO_HISTORY_ANSWER = "I don't know: no past conversations are available."
UNDECIDED = "I don't know."

# The user template is <opening>{history}<instructions>{question_block}: the first two parts are
# the same in every prompt and are counted once.
_HEAD, _TAIL = PROMPT.user.split("{history}")
_INSTRUCTIONS, _AFTER_BLOCK = _TAIL.split("{question_block}")
if _AFTER_BLOCK or "{" in _HEAD + _INSTRUCTIONS:
    raise RuntimeError(f"{PROMPT.id}: the user template must end with {{question_block}}")


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


# --- Histories: rendered and counted once --------------------------------------------------------


class Turn(NamedTuple):
    session: int  # session number as rendered (session_index + 1)
    when: str | None  # the session's ISO date
    speaker: str
    text: str  # the utterance, with a shared photo's caption


@dataclass(frozen=True)
class SessionBlock:
    """One session as it appears in a prompt: its rendering plus the separator that follows."""

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
    _turn_list: list[Turn] | None = field(default=None, repr=False)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sessions)

    def turn_list(self) -> list[Turn]:
        if self._turn_list is None:
            t = self.turns
            self._turn_list = [
                Turn(int(s) + 1, w if isinstance(w, str) else None, str(sp), _turn_text(x, c))
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


def _turn_text(text: Any, caption: Any) -> str:
    text = str(text)
    return f"{text} [shares a photo: {caption}]" if isinstance(caption, str) and caption else text


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    positions = frame["position"]
    return frame if positions.is_monotonic_increasing else frame.sort_values("position", kind="stable")


def _count_batched(texts: list[str], chunk_chars: int = 4_000_000) -> list[int]:
    """Token counts in batches of a few million characters: tiktoken's batch encoder returns
    every token id before we take the lengths, and 50M ids at once would need gigabytes."""
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


def build_histories(conversations: pd.DataFrame) -> dict[str, History]:
    """Every conversation of ``data/conversations.parquet`` rendered per session, with one
    batched token count over all sessions of all conversations."""
    pending: list[tuple[str, pd.DataFrame, list[tuple[int, str, str, frozenset[str]]]]] = []
    texts: list[str] = []
    for conversation_id, group in conversations.groupby("conversation_id", sort=False):
        ordered = _ordered(group)
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
        parts = []
        for index, rendered in data.render_sessions(ordered):
            text = rendered + data.SESSION_SEPARATOR
            parts.append((index, ids[index], text, frozenset(dias.get(index, ()))))
            texts.append(text)
        pending.append((str(conversation_id), ordered, parts))
    counts = iter(_count_batched(texts))
    histories: dict[str, History] = {}
    for conversation_id, ordered, parts in pending:
        blocks = tuple(
            SessionBlock(index + 1, session_id, text, next(counts), dias)
            for index, session_id, text, dias in parts
        )
        histories[conversation_id] = History(conversation_id, blocks, ordered)
    return histories


def history_table(histories: Mapping[str, History]) -> pd.DataFrame:
    """Per conversation: sessions, turns and the o200k tokens of its rendered history."""
    return pd.DataFrame(
        {
            "conversation_id": list(histories),
            "sessions": [len(h.sessions) for h in histories.values()],
            "turns": [len(h.turns) for h in histories.values()],
            "history_tokens": [h.tokens for h in histories.values()],
        }
    )


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

    def turns(self) -> list[Turn]:
        """The turns this context shows (for the offline method)."""
        if self.history is None:
            return []
        every = self.history.turn_list()
        if self.last_turns is not None:
            return every[-self.last_turns :] if self.last_turns else []
        keep = set(self.sessions)
        return [t for t in every if t.session in keep]


def _sessions_context(
    kind: str, history: History, blocks: Sequence[SessionBlock], dropped: Sequence[SessionBlock]
) -> Context:
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
    return _sessions_context("long_context", history, history.sessions, ())


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
    out = _sessions_context(context.kind, context.history, kept, dropped)
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
    texts = {}
    for cid, history in histories.items():
        tail = history.turns.iloc[-window_turns:]
        texts[cid] = "".join(t + data.SESSION_SEPARATOR for _, t in data.render_sessions(tail))
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


def oracle_sessions(history: History, evidence: Iterable[str]) -> list[SessionBlock]:
    """The sessions that hold a question's evidence: LongMemEval names sessions
    (``answer_session_ids``), LoCoMo names turns (``D3:7``) and the session holding each counts."""
    wanted = {str(e) for e in evidence}
    return [b for b in history.sessions if b.session_id in wanted or b.dia_ids & wanted]


# --- Questions: the block after the history ------------------------------------------------------


def shown_options(question_id: str, options: Sequence[str]) -> tuple[str, ...]:
    """The options in the order a model sees them: the order every notebook and the judge use
    (:func:`memcost.choices.multiple_choice`, fixed by the question id)."""
    return choices.multiple_choice(question_id, options).options


def option_letter(index: int) -> str:
    return choices.MC_LETTERS[index]


def question_block(question: str, *, date: str | None = None,
                   options: Sequence[str] | None = None) -> str:
    """The text after the history and the instructions: date, question, options."""
    out = ""
    if date:
        out += prompts.LONG_CONTEXT_DATE_LINE.format(date=spoken_datetime(date))
    out += prompts.LONG_CONTEXT_QUESTION_LINE.format(question=question)
    if options:
        listing = "\n".join(f"({option_letter(i)}) {o}" for i, o in enumerate(options))
        out += prompts.LONG_CONTEXT_OPTIONS.format(options=listing)
    return out


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _as_list(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(v) for v in value]


# --- Planning: every prompt sized and checked before any call ------------------------------------


@dataclass(frozen=True, eq=False)
class Plan:
    """One question for one system: its context, its question block and its size."""

    question_id: str
    conversation_id: str
    kind: str
    model: str
    system: str
    context: Context
    question_block: str
    options: tuple[str, ...] | None  # as shown, in order (multiple choice), else None
    question: str
    prompt_tokens: int  # o200k tokens of the message texts (what the offline backend reports)
    prefix_tokens: int  # of which the part shared by a conversation's questions (cacheable)
    limit: int

    @property
    def needed_tokens(self) -> int:
        """What the limit check compares: the prompt plus the chat format's overhead."""
        return self.prompt_tokens + FORMAT_OVERHEAD_TOKENS


@dataclass
class Planned:
    """Everything notebook 03 will send, sized and checked; nothing sent yet."""

    plans: list[Plan]
    fit: pd.DataFrame  # per model and system: prompts, limit, largest prompt, truncation
    skipped: pd.DataFrame  # questions a baseline cannot ask (oracle without evidence), and why
    histories: dict[str, History]
    generation: dict[str, dict[str, Any]]

    @property
    def systems(self) -> list[str]:
        return list(dict.fromkeys(p.system for p in self.plans))

    @property
    def models(self) -> list[str]:
        return list(dict.fromkeys(p.model for p in self.plans))

    def first_questions(self) -> set[tuple[str, str]]:
        """``(system, question_id)`` of the first question of each conversation per system: the
        one sent alone, whose prompt the provider has not seen yet."""
        seen: set[tuple[str, str]] = set()
        first: set[tuple[str, str]] = set()
        for p in self.plans:
            if (p.system, p.conversation_id) not in seen:
                seen.add((p.system, p.conversation_id))
                first.add((p.system, p.question_id))
        return first


def plan_questions(
    questions: pd.DataFrame,
    histories: Mapping[str, History],
    *,
    models: Sequence[str],
    baseline_models: Sequence[str] = (),
    kinds: Sequence[str] = ("long_context",),
    window_turns: int = 10,
    overflow: str = "error",
    mode: str = "open_ended",
    generation: Mapping[str, Mapping[str, Any]] | None = None,
) -> Planned:
    """Size every prompt of every system and check it against its model's limit.

    ``kinds`` picks the systems: ``long_context`` runs on ``models``, the baselines on
    ``baseline_models``. ``mode`` decides how questions with options (PersonaMem v2) are
    asked: ``open_ended`` (the question alone) or ``multiple_choice`` (options listed). Raises
    :class:`ContextOverflow` when a prompt does not fit and ``overflow`` is ``error``; nothing
    has been sent at that point.
    """
    if overflow not in OVERFLOW_MODES:
        raise ValueError(f"overflow must be one of {OVERFLOW_MODES}, got {overflow!r}")
    if mode not in choices.MODES:
        raise ValueError(f"mode must be one of {choices.MODES}, got {mode!r}")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; choose from {KINDS}")
    missing = sorted(set(questions["conversation_id"]) - set(histories))
    if missing:
        raise ValueError(f"questions about conversations with no history: {missing[:5]}")

    rows = list(
        zip(
            questions["question_id"].astype(str).tolist(),
            questions["conversation_id"].astype(str).tolist(),
            questions["question"].astype(str).tolist(),
            questions["question_date"].tolist(),
            questions["evidence"].tolist(),
            questions["options"].tolist(),
            strict=True,
        )
    )
    blocks: list[str] = []
    shown: list[tuple[str, ...] | None] = []
    for qid, _cid, question, date, _evidence, options in rows:
        opts = _as_list(options)
        show = shown_options(qid, opts) if (opts and mode == "multiple_choice") else None
        shown.append(show)
        blocks.append(question_block(question, date=_text_or_none(date), options=show))
    # Each part ends with a newline before a non-space, where o200k always splits, so the
    # count of a prompt is the sum of its parts' counts.
    system_tokens, head_tokens, instruction_tokens = count_tokens_batch(
        [PROMPT.system, _HEAD, _INSTRUCTIONS]
    )
    fixed_tokens = system_tokens + head_tokens + instruction_tokens
    block_tokens = count_tokens_batch(blocks)
    longest_block: dict[str, int] = defaultdict(int)
    for (_qid, cid, *_rest), tokens in zip(rows, block_tokens, strict=True):
        longest_block[cid] = max(longest_block[cid], tokens)

    settings = {m: generation_settings(m, generation) for m in [*models, *baseline_models]}
    limits = {m: prompt_limit(m, s) for m, s in settings.items()}
    windows = window_contexts(histories, window_turns) if "rolling_window" in kinds else {}
    empty_tokens = count_tokens(prompts.LONG_CONTEXT_NO_HISTORY)
    plans: list[Plan] = []
    skipped: list[dict[str, Any]] = []
    over: list[Plan] = []

    def available(model: str, cid: str) -> int:
        return limits[model] - FORMAT_OVERHEAD_TOKENS - fixed_tokens - longest_block[cid]

    for kind in [k for k in KINDS if k in kinds]:
        kind_models = models if kind == "long_context" else baseline_models
        for model in dict.fromkeys(kind_models):
            system = system_name(kind, model)
            shared: dict[tuple[Any, ...], Context] = {}  # one context object per history text
            for i, (qid, cid, question, _date, evidence, _options) in enumerate(rows):
                history = histories[cid]
                if kind == "long_context":
                    context = full_context(history)
                elif kind == "rolling_window":
                    context = windows[cid]
                elif kind == "no_context":
                    context = Context("no_context", cid, prompts.LONG_CONTEXT_NO_HISTORY,
                                      empty_tokens)
                else:
                    evidence_blocks = oracle_sessions(history, _as_list(evidence))
                    if not evidence_blocks:
                        skipped.append({"system": system, "question_id": qid,
                                        "conversation_id": cid,
                                        "reason": "no evidence session in the history"})
                        continue
                    context = _sessions_context("oracle", history, evidence_blocks, ())
                if overflow == "truncate_oldest" and context.history is not None and (
                    context.last_turns is None
                ):
                    context = truncate_oldest(context, available(model, cid))
                context = shared.setdefault(context.key, context)
                plan = Plan(
                    question_id=qid,
                    conversation_id=cid,
                    kind=kind,
                    model=model,
                    system=system,
                    context=context,
                    question_block=blocks[i],
                    options=shown[i],
                    question=question,
                    prompt_tokens=fixed_tokens + context.tokens + block_tokens[i],
                    prefix_tokens=system_tokens + head_tokens + context.tokens,
                    limit=limits[model],
                )
                if plan.needed_tokens > plan.limit:
                    over.append(plan)
                plans.append(plan)

    fit = fit_table(plans)
    if over:
        raise ContextOverflow(_overflow_message(over, len(plans)), fit)
    return Planned(
        plans=plans,
        fit=fit,
        skipped=pd.DataFrame(skipped, columns=["system", "question_id", "conversation_id",
                                               "reason"]),
        histories=dict(histories),
        generation={m: s for m, s in settings.items()},
    )


def _overflow_message(over: list[Plan], total: int) -> str:
    worst: dict[tuple[str, str], Plan] = {}
    for p in over:
        key = (p.model, p.conversation_id)
        if key not in worst or p.needed_tokens > worst[key].needed_tokens:
            worst[key] = p
    listed = sorted(worst.values(), key=lambda p: -p.needed_tokens)
    lines = [
        f"  conversation {p.conversation_id}: {p.needed_tokens:,} tokens > {p.limit:,} "
        f"({p.model}, {p.system})"
        for p in listed[:10]
    ]
    more = f"\n  ... and {len(listed) - 10} more" if len(listed) > 10 else ""
    return (
        f"{len(over)} of {total} prompts do not fit their model's context window, so nothing "
        "was sent. The prompt sizes include the history, the instructions, the question and "
        f"{FORMAT_OVERHEAD_TOKENS} tokens for the chat format; the limit leaves room for the "
        "answer:\n" + "\n".join(lines) + more + "\nSet overflow: truncate_oldest to drop the "
        "oldest sessions of those conversations (recorded per question as dropped_tokens), or "
        "leave the model out."
    )


def fit_table(plans: Sequence[Plan]) -> pd.DataFrame:
    """Per model and system: prompts, the limit, the largest prompt (with the chat-format
    margin, as the limit check sees it) and what truncation cost."""
    columns = ["model", "system", "prompts", "prompt_limit", "largest_prompt", "over_limit",
               "truncated_questions", "dropped_sessions", "dropped_tokens"]
    if not plans:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(
        {
            "model": [p.model for p in plans],
            "system": [p.system for p in plans],
            "needed": [p.needed_tokens for p in plans],
            "limit": [p.limit for p in plans],
            "dropped_sessions": [p.context.dropped_sessions for p in plans],
            "dropped_tokens": [p.context.dropped_tokens for p in plans],
        }
    )
    out = (
        frame.groupby(["model", "system"], sort=False)
        .agg(
            prompts=("needed", "size"),
            prompt_limit=("limit", "first"),
            largest_prompt=("needed", "max"),
            over_limit=("needed", lambda s: int((s > frame.loc[s.index, "limit"]).sum())),
            truncated_questions=("dropped_sessions", lambda s: int((s > 0).sum())),
            dropped_sessions=("dropped_sessions", "sum"),
            dropped_tokens=("dropped_tokens", "sum"),
        )
        .reset_index()
    )
    return out[columns]


def prompt_size_table(planned: Planned) -> pd.DataFrame:
    """Per system: prompt tokens per conversation (its largest question's prompt: what one
    request about that user carries), min / median / max over conversations, and in all."""
    frame = pd.DataFrame(
        {
            "system": [p.system for p in planned.plans],
            "model": [p.model for p in planned.plans],
            "conversation_id": [p.conversation_id for p in planned.plans],
            "prompt_tokens": [p.prompt_tokens for p in planned.plans],
        }
    )
    if frame.empty:
        return pd.DataFrame(columns=["system", "model", "conversations", "min", "median", "max",
                                     "questions", "total_prompt_tokens"])
    per = frame.groupby(["system", "model", "conversation_id"], sort=False)["prompt_tokens"]
    largest = per.max().reset_index()
    out = largest.groupby(["system", "model"], sort=False)["prompt_tokens"].agg(
        conversations="size", min="min", median="median", max="max").reset_index()
    totals = frame.groupby(["system", "model"], sort=False)["prompt_tokens"].agg(
        questions="size", total_prompt_tokens="sum").reset_index()
    return out.merge(totals, on=["system", "model"])


# --- Requests, the offline method and the answers ------------------------------------------------


@dataclass(frozen=True)
class OfflineJob:
    """What the offline method needs (the request's ``payload``; never sent)."""

    kind: str
    question: str
    options: tuple[str, ...] | None
    context: Context


def messages_for(plan: Plan) -> tuple[tuple[str, str], ...]:
    return PROMPT.messages(history=plan.context.text, question_block=plan.question_block)


def build_request(
    plan: Plan, *, dataset: str, settings: Mapping[str, Any] | None = None
) -> ChatRequest:
    """The request for one plan, with the model's generation settings and the ledger tags."""
    settings = dict(settings if settings is not None else generation_settings(plan.model))
    return ChatRequest(
        model=plan.model,
        messages=messages_for(plan),
        stage=STAGE,
        prompt_version=PROMPT.id,
        reasoning_effort=settings.get("reasoning_effort"),
        max_output_tokens=settings.get("max_output_tokens"),
        temperature=settings.get("temperature"),
        payload=OfflineJob(plan.kind, plan.question, plan.options, plan.context),
        tags={
            "dataset": dataset,
            "conversation_id": plan.conversation_id,
            "question_id": plan.question_id,
            "system": plan.system,
        },
    )


def group_plans(plans: Iterable[Plan]) -> list[list[Plan]]:
    """Plans that share a history text, in order: each group's first goes alone, so the
    provider has cached the shared prefix when the rest arrive."""
    groups: dict[tuple[Any, ...], list[Plan]] = {}
    for p in plans:
        groups.setdefault((p.model, p.system, *p.context.key), []).append(p)
    return list(groups.values())


class ExtractiveAnswerer:
    """The offline method: lexical overlap (BM25) between the question and the turns shown.

    It reads what the prompt shows and nothing else, so the variants differ offline exactly as
    they differ for a model: no history, a window, the evidence sessions, the whole history.
    """

    def __init__(self) -> None:
        self._indexes: dict[tuple[Any, ...], tuple[list[Turn], BM25]] = {}

    def _index(self, context: Context) -> tuple[list[Turn], BM25]:
        key = context.key
        if key not in self._indexes:
            turns = context.turns()
            self._indexes[key] = (turns, BM25([t.text for t in turns]))
        return self._indexes[key]

    def __call__(self, request: ChatRequest) -> str:
        job = request.payload
        if not isinstance(job, OfflineJob):
            raise TypeError("a long-context request's payload must be an OfflineJob")
        if job.context.history is None:  # no context
            if job.options:
                return choices.format_choice(job.options, choices.longest_option(job.options))
            return NO_HISTORY_ANSWER
        turns, index = self._index(job.context)
        if job.options:
            pick = choices.best_supported_option(job.options, [t.text for t in turns])
            return UNDECIDED if pick is None else choices.format_choice(job.options, pick)
        best = index.best(job.question) if turns else None
        if best is None:
            return NOT_MENTIONED
        turn = turns[best[0]]
        when = spoken_datetime(turn.when) if turn.when else f"session {turn.session}"
        return f"{turn.speaker} ({when}): {turn.text}"


def answer_record(result: ChatResult, plan: Plan) -> dict[str, Any]:
    """One line of ``answers_<system>.jsonl`` (docs/architecture.md)."""
    failed = result.error is not None
    return {
        "question_id": plan.question_id,
        "conversation_id": plan.conversation_id,
        "system": plan.system,
        "answer": "" if failed else result.text,
        **result.record_fields(),
        "context_tokens": plan.context.tokens,
        "dropped_tokens": plan.context.dropped_tokens,
        "dropped_sessions": plan.context.dropped_sessions,
        "options_shown": list(plan.options) if plan.options else None,
        **({"mode": "multiple_choice"} if plan.options else {}),
    }


def answer_questions(
    client: LLMClient,
    ds: DatasetPaths,
    planned: Planned,
    *,
    dataset: str,
    progress: bool | None = None,
) -> dict[str, int]:
    """Ask every planned question not answered yet, model by model, and append each answer to
    its system's file as it arrives. Returns the number of answers written per system.

    Within a model, each group of questions that share a history (a conversation) sends its
    first question alone and the rest after it has returned; groups run in parallel up to the
    client's ``max_concurrency``. A rerun skips answered questions and retries failed ones.
    """
    writers = {system: AnswerWriter(ds, system) for system in planned.systems}
    written: dict[str, int] = dict.fromkeys(planned.systems, 0)
    by_key = {(p.system, p.question_id): p for p in planned.plans}
    answerer = ExtractiveAnswerer()

    def on_result(result: ChatResult) -> None:
        tags = result.request.tags
        plan = by_key[(tags["system"], tags["question_id"])]
        writers[plan.system].write(answer_record(result, plan))
        written[plan.system] += 1

    try:
        for model in planned.models:
            todo = [
                p
                for p in planned.plans
                if p.model == model and p.question_id not in writers[p.system].done
            ]
            if not todo:
                continue
            settings = planned.generation.get(model) or generation_settings(model)
            groups = [
                [build_request(p, dataset=dataset, settings=settings) for p in group]
                for group in group_plans(todo)
            ]
            client.chat_groups(
                groups,
                first_alone=True,
                offline=answerer,
                on_result=on_result,
                desc=f"{STAGE} {slug(model)}",
                progress=progress,
            )
            del groups  # the prompts of one model are large; let them go before the next
    finally:
        for writer in writers.values():
            writer.close()
    return written


# --- What the notebook reports -------------------------------------------------------------------


def load_prepared(ds: DatasetPaths) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(conversations, questions)`` as notebook 00 wrote them."""
    for path in (ds.conversations, ds.questions):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: not found; run notebooks/00_prepare_data.ipynb for dataset "
                f"{ds.name!r} into this run first"
            )
    return pd.read_parquet(ds.conversations), pd.read_parquet(ds.questions)


def load_system_answers(ds: DatasetPaths, systems: Iterable[str]) -> pd.DataFrame:
    """The answers of ``systems`` in one frame (the latest record per question)."""
    frames = [load_answers(ds, s) for s in systems if ds.answers_file(s).is_file()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def shared_prefixes(planned: Planned, system: str) -> pd.DataFrame:
    """Per conversation: how many distinct prompt beginnings (everything up to ``</history>``)
    its questions' actual messages have. One means the provider can cache it for them all."""
    marker = "</history>"
    seen: dict[str, set[int]] = defaultdict(set)
    questions: dict[str, int] = defaultdict(int)
    prefix_tokens: dict[str, int] = {}
    for p in planned.plans:
        if p.system != system:
            continue
        (_, system_text), (_, user_text) = messages_for(p)
        prefix = system_text + "\x00" + user_text[: user_text.index(marker)]
        seen[p.conversation_id].add(stable_hash(prefix))
        questions[p.conversation_id] += 1
        prefix_tokens[p.conversation_id] = p.prefix_tokens
    return pd.DataFrame(
        {
            "conversation_id": list(seen),
            "questions": [questions[c] for c in seen],
            "distinct_prefixes": [len(v) for v in seen.values()],
            "prefix_tokens": [prefix_tokens[c] for c in seen],
        }
    )


def percentile(values: Sequence[float] | pd.Series, q: float) -> float:
    array = np.asarray(pd.Series(values).dropna(), dtype=float)
    return float(np.percentile(array, q)) if array.size else float("nan")


def answers_summary(answers: pd.DataFrame, planned: Planned) -> pd.DataFrame:
    """Per system: questions answered, errors, input tokens (total and per question), context
    tokens, truncation, latency p50/p95 and the measured cached share of input tokens from the
    second question of each conversation on (``NaN`` offline: there is no provider cache)."""
    first = planned.first_questions()
    rows = []
    for system in planned.systems:
        part = answers.loc[answers["system"] == system] if not answers.empty else answers
        n_planned = sum(p.system == system for p in planned.plans)
        model = next(p.model for p in planned.plans if p.system == system)
        if part.empty:
            rows.append({"system": system, "model": model, "planned": n_planned, "answered": 0})
            continue
        ok = part.loc[part["error"].isna()]
        later = ok.loc[[(system, q) not in first for q in ok["question_id"]]]
        offline = bool((part["backend"] == "offline").all())
        rows.append(
            {
                "system": system,
                "model": model,
                "planned": n_planned,
                "answered": len(ok),
                "errors": int(part["error"].notna().sum()),
                "prompt_tokens": int(ok["prompt_tokens"].sum()),
                "prompt_tokens_per_question": float(ok["prompt_tokens"].mean()),
                "context_tokens_per_question": float(ok["context_tokens"].mean()),
                "completion_tokens": int(ok["completion_tokens"].sum()),
                "reasoning_tokens": int(ok["reasoning_tokens"].sum()),
                "truncated_questions": int((ok["dropped_tokens"] > 0).sum()),
                "dropped_tokens": int(ok["dropped_tokens"].sum()),
                "latency_p50_s": percentile(ok["latency_s"], 50),
                "latency_p95_s": percentile(ok["latency_s"], 95),
                "later_questions": len(later),
                "cached_share_after_first": (
                    float("nan")
                    if offline or later.empty or later["prompt_tokens"].sum() == 0
                    else float(later["cached_prompt_tokens"].sum() / later["prompt_tokens"].sum())
                ),
                "assumed_share": 1.0,
                "backend": ",".join(sorted(part["backend"].astype(str).unique())),
            }
        )
    return pd.DataFrame(rows)


def context_sizes(planned: Planned, memory_answers: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per question and system: the tokens of context in front of the model. Memory's is the
    retrieved facts (notebook 02's ``retrieved_tokens``), when its answers exist."""
    frames = [
        pd.DataFrame(
            {
                "system": [p.system for p in planned.plans],
                "kind": [p.kind for p in planned.plans],
                "question_id": [p.question_id for p in planned.plans],
                "context_tokens": [p.context.tokens for p in planned.plans],
                "prompt_tokens": [p.prompt_tokens for p in planned.plans],
            }
        )
    ]
    if memory_answers is not None and not memory_answers.empty and (
        "retrieved_tokens" in memory_answers.columns
    ):
        frames.insert(
            0,
            pd.DataFrame(
                {
                    "system": "memory",
                    "kind": "memory",
                    "question_id": memory_answers["question_id"].astype(str),
                    "context_tokens": pd.to_numeric(memory_answers["retrieved_tokens"]),
                    "prompt_tokens": pd.to_numeric(memory_answers.get("prompt_tokens")),
                }
            ),
        )
    return pd.concat(frames, ignore_index=True)


def plot_context_sizes(sizes: pd.DataFrame, *, backend: str = "", subtitle: str = "") -> Any:
    """Context tokens per question, one row per system, on a log scale: memory's retrieved
    facts, the full history, the rolling window (and the other baselines when present)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from memcost import plots

    shown = sizes.loc[sizes["kind"].isin(["memory", "long_context", "rolling_window"])]
    systems = list(dict.fromkeys(shown["system"]))
    fig, ax = plt.subplots(figsize=(8.5, 0.9 + 0.55 * max(2, len(systems))))
    rng = np.random.default_rng(0)  # jitter only; fixed so the figure is the same every run
    for row, system in enumerate(systems):
        values = shown.loc[shown["system"] == system, "context_tokens"].astype(float)
        values = values.clip(lower=1)
        color = plots.system_color(system)
        ax.boxplot([values], positions=[row], vert=False, widths=0.5, showfliers=False,
                   medianprops={"color": color, "linewidth": 2},
                   boxprops={"color": color}, whiskerprops={"color": color},
                   capprops={"color": color})
        ax.scatter(values, row + rng.uniform(-0.18, 0.18, len(values)), s=10, alpha=0.5,
                   color=color, zorder=3)
        ax.annotate(f"median {np.median(values):,.0f}", (float(values.max()), row),
                    xytext=(8, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(range(len(systems)), systems)
    ax.invert_yaxis()
    ax.set_xscale("log")
    low, high = float(shown["context_tokens"].clip(lower=1).min()), float(
        shown["context_tokens"].max())
    ax.set_xlim(low / 2, max(high * 4, low * 20))  # at least a decade, room for the labels
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("context tokens per question (o200k, log scale)")
    ax.set_title("What each system puts in front of the model" + (f"\n{subtitle}" if subtitle
                                                                   else ""), loc="left")
    ax.grid(axis="y", visible=False)
    plots.label_backend(ax, backend)
    fig.tight_layout()
    return fig


def step_metrics(
    planned: Planned, summary: pd.DataFrame, *, backend: str, written: Mapping[str, int],
    ds: DatasetPaths,
) -> dict[str, Any]:
    """The numbers the report and the tests read from ``metrics/03_answer_long_context.json``."""
    tokens = [h.tokens for h in planned.histories.values()]

    def clean(value: Any) -> Any:
        if isinstance(value, float | np.floating):
            return None if np.isnan(value) else round(float(value), 6)
        if isinstance(value, np.integer):
            return int(value)
        return value

    offline = "backend" not in summary or bool(
        summary["backend"].fillna("offline").eq("offline").all()
    )
    return {
        "backend": backend,
        "prompt_version": PROMPT.id,
        "cache_measured": not offline,
        "cache_note": (
            "offline backend: no provider prompt cache, cached share not measured"
            if offline
            else "cached_share_after_first: provider-reported cached input tokens / input "
            "tokens of the 2nd and later questions of each conversation (assumed: 1.0)"
        ),
        "conversations": len(planned.histories),
        "questions": len({p.question_id for p in planned.plans}),
        "history_tokens": {
            "min": int(min(tokens)),
            "median": float(np.median(tokens)),
            "max": int(max(tokens)),
            "total": int(sum(tokens)),
        },
        "fit": [{k: clean(v) for k, v in r.items()} for r in planned.fit.to_dict("records")],
        "prompt_tokens_per_conversation": {
            r["system"]: {k: clean(r[k]) for k in ("min", "median", "max")}
            for r in prompt_size_table(planned).to_dict("records")
        },
        "skipped": planned.skipped.groupby("system").size().to_dict()
        if not planned.skipped.empty
        else {},
        "systems": {
            r["system"]: {k: clean(v) for k, v in r.items() if k != "system"}
            for r in summary.to_dict("records")
        },
        "answers_written_now": dict(written),
        "answer_files": [
            str(ds.answers_file(s).relative_to(ds.root))
            for s in planned.systems
            if ds.answers_file(s).is_file()
        ],
    }


__all__ = [
    "BASELINES",
    "FORMAT_OVERHEAD_TOKENS",
    "KINDS",
    "OVERFLOW_MODES",
    "PAPER_GENERATION",
    "Context",
    "ContextOverflow",
    "ExtractiveAnswerer",
    "History",
    "OfflineJob",
    "Plan",
    "Planned",
    "SessionBlock",
    "answer_questions",
    "answer_record",
    "answers_summary",
    "build_histories",
    "build_request",
    "context_limits",
    "context_sizes",
    "full_context",
    "generation_settings",
    "group_plans",
    "history_table",
    "load_prepared",
    "load_system_answers",
    "messages_for",
    "oracle_sessions",
    "plan_questions",
    "plot_context_sizes",
    "prompt_limit",
    "prompt_size_table",
    "question_block",
    "shared_prefixes",
    "shown_options",
    "step_metrics",
    "truncate_oldest",
    "window_contexts",
]
