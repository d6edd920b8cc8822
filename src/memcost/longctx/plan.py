"""Every long-context prompt sized and checked against its model's window before any call, then
asked a conversation at a time (notebook 03)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from memcost import answers
from memcost.answers import AnswerWriter, system_name
from memcost.calls import ANSWER_STAGES
from memcost.catalog import Declared, slug
from memcost.llm import CallResult, ChatRequest, LLMClient
from memcost.longctx.history import (
    FORMAT_OVERHEAD_TOKENS,
    HEAD,
    INSTRUCTIONS,
    KINDS,
    OVERFLOW_MODES,
    PROMPT,
    Context,
    ContextOverflow,
    History,
    full_context,
    generation_settings,
    no_context,
    oracle_context,
    prompt_limit,
    prompt_messages,
    question_block,
    shown_options,
    truncate_oldest,
    window_contexts,
)
from memcost.manifest import fingerprint
from memcost.offline import ExtractiveAnswerer, OfflineJob
from memcost.paths import DatasetPaths
from memcost.text import count_tokens_batch


@dataclass(frozen=True, eq=False)
class Plan:
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
        """The prompt plus the chat format's overhead."""
        return self.prompt_tokens + FORMAT_OVERHEAD_TOKENS


@dataclass
class Planned:
    """Everything notebook 03 will send, sized and checked."""

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
        """``(system, question_id)`` of each conversation's first question per system,
        sent alone."""
        seen: set[tuple[str, str]] = set()
        first: set[tuple[str, str]] = set()
        for p in self.plans:
            if (p.system, p.conversation_id) not in seen:
                seen.add((p.system, p.conversation_id))
                first.add((p.system, p.question_id))
        return first


class Question(NamedTuple):
    question_id: str
    conversation_id: str
    question: str
    evidence: list[str]
    block: str
    options: tuple[str, ...] | None
    block_tokens: int


@dataclass(frozen=True)
class FixedParts:
    system: int
    head: int
    instructions: int

    @property
    def total(self) -> int:
        return self.system + self.head + self.instructions


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _as_list(value: Any) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(v) for v in value]


def _check_arguments(
    questions: pd.DataFrame,
    histories: Mapping[str, History],
    kinds: Sequence[str],
    overflow: str,
    mode: str,
) -> None:
    if overflow not in OVERFLOW_MODES:
        raise ValueError(f"overflow must be one of {OVERFLOW_MODES}, got {overflow!r}")
    if mode not in answers.MODES:
        raise ValueError(f"mode must be one of {answers.MODES}, got {mode!r}")
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; choose from {KINDS}")
    missing = sorted(set(questions["conversation_id"]) - set(histories))
    if missing:
        raise ValueError(f"questions about conversations with no history: {missing[:5]}")


def question_rows(questions: pd.DataFrame, mode: str) -> list[Question]:
    """Each question's block counted in one batch; each part ends where o200k always splits, so a
    prompt's count is its parts' sum."""
    rows = []
    for qid, cid, question, date, evidence, options in zip(
        questions["question_id"].astype(str).tolist(),
        questions["conversation_id"].astype(str).tolist(),
        questions["question"].astype(str).tolist(),
        questions["question_date"].tolist(),
        questions["evidence"].tolist(),
        questions["options"].tolist(),
        strict=True,
    ):
        opts = _as_list(options)
        show = shown_options(qid, opts) if (opts and mode == "multiple_choice") else None
        block = question_block(question, date=_text_or_none(date), options=show)
        rows.append(Question(qid, cid, question, _as_list(evidence), block, show, 0))
    counts = count_tokens_batch([r.block for r in rows])
    return [r._replace(block_tokens=n) for r, n in zip(rows, counts, strict=True)]


def fixed_parts() -> FixedParts:
    return FixedParts(*count_tokens_batch([PROMPT.system, HEAD, INSTRUCTIONS]))


def _context(
    kind: str, history: History, question: Question, windows: Mapping[str, Context]
) -> Context | None:
    if kind == "long_context":
        return full_context(history)
    if kind == "rolling_window":
        return windows[question.conversation_id]
    if kind == "no_context":
        return no_context(question.conversation_id)
    return oracle_context(history, question.evidence)


@dataclass
class _System:
    kind: str
    model: str
    limit: int
    overflow: str
    room: Mapping[str, int]  # per conversation: tokens left for the history

    @property
    def name(self) -> str:
        return system_name(self.kind, self.model)


def _plan_system(
    system: _System,
    rows: Sequence[Question],
    histories: Mapping[str, History],
    windows: Mapping[str, Context],
    fixed: FixedParts,
    skipped: list[dict[str, Any]],
) -> list[Plan]:
    shared: dict[tuple[Any, ...], Context] = {}
    plans = []
    for row in rows:
        context = _context(system.kind, histories[row.conversation_id], row, windows)
        if context is None:
            skipped.append(
                {
                    "system": system.name,
                    "question_id": row.question_id,
                    "conversation_id": row.conversation_id,
                    "reason": "no evidence session in the history",
                }
            )
            continue
        if (
            system.overflow == "truncate_oldest"
            and context.history is not None
            and (context.last_turns is None)
        ):
            context = truncate_oldest(context, system.room[row.conversation_id])
        context = shared.setdefault(context.key, context)
        plans.append(
            Plan(
                question_id=row.question_id,
                conversation_id=row.conversation_id,
                kind=system.kind,
                model=system.model,
                system=system.name,
                context=context,
                question_block=row.block,
                options=row.options,
                question=row.question,
                prompt_tokens=fixed.total + context.tokens + row.block_tokens,
                prefix_tokens=fixed.system + fixed.head + context.tokens,
                limit=system.limit,
            )
        )
    return plans


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
    capabilities: Declared | None = None,
) -> Planned:
    """Size every prompt of every system (``kinds``; ``long_context`` on ``models``, baselines on
    ``baseline_models``; ``mode``: questions with options open or listed) against its model's
    limit; :class:`ContextOverflow` before anything is sent when one does not fit and
    ``overflow`` is ``error``."""
    _check_arguments(questions, histories, kinds, overflow, mode)
    rows = question_rows(questions, mode)
    fixed = fixed_parts()
    longest_block: dict[str, int] = defaultdict(int)
    for row in rows:
        longest_block[row.conversation_id] = max(
            longest_block[row.conversation_id], row.block_tokens
        )
    settings = {
        m: generation_settings(m, generation, capabilities) for m in [*models, *baseline_models]
    }
    windows = window_contexts(histories, window_turns) if "rolling_window" in kinds else {}
    plans: list[Plan] = []
    skipped: list[dict[str, Any]] = []
    for kind in [k for k in KINDS if k in kinds]:
        for model in dict.fromkeys(models if kind == "long_context" else baseline_models):
            limit = prompt_limit(model, settings[model], capabilities)
            room = {
                cid: limit - FORMAT_OVERHEAD_TOKENS - fixed.total - block
                for cid, block in longest_block.items()
            }
            system = _System(kind, model, limit, overflow, room)
            plans += _plan_system(system, rows, histories, windows, fixed, skipped)
    fit = fit_table(plans)
    over = [p for p in plans if p.needed_tokens > p.limit]
    if over:
        raise ContextOverflow(_overflow_message(over, len(plans)), fit)
    return Planned(
        plans=plans,
        fit=fit,
        skipped=pd.DataFrame(
            skipped, columns=["system", "question_id", "conversation_id", "reason"]
        ),
        histories=dict(histories),
        generation=settings,
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
    """Per model and system: prompts, the limit, the largest prompt with the chat-format margin,
    what truncation cost."""
    columns = [
        "model",
        "system",
        "prompts",
        "prompt_limit",
        "largest_prompt",
        "over_limit",
        "truncated_questions",
        "dropped_sessions",
        "dropped_tokens",
    ]
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
    """Per system: the prompt tokens of each conversation's largest question, over conversations and
    in all."""
    frame = pd.DataFrame(
        {
            "system": [p.system for p in planned.plans],
            "model": [p.model for p in planned.plans],
            "conversation_id": [p.conversation_id for p in planned.plans],
            "prompt_tokens": [p.prompt_tokens for p in planned.plans],
        }
    )
    if frame.empty:
        return pd.DataFrame(
            columns=[
                "system",
                "model",
                "conversations",
                "min",
                "median",
                "max",
                "questions",
                "total_prompt_tokens",
            ]
        )
    per = frame.groupby(["system", "model", "conversation_id"], sort=False)["prompt_tokens"]
    largest = per.max().reset_index()
    out = (
        largest.groupby(["system", "model"], sort=False)["prompt_tokens"]
        .agg(conversations="size", min="min", median="median", max="max")
        .reset_index()
    )
    totals = (
        frame.groupby(["system", "model"], sort=False)["prompt_tokens"]
        .agg(questions="size", total_prompt_tokens="sum")
        .reset_index()
    )
    return out.merge(totals, on=["system", "model"])


STAGE = "long_context"  # the ledger stage of every call made here


def messages_for(plan: Plan) -> tuple[tuple[str, str], ...]:
    return prompt_messages(plan.context.text, plan.question_block)


def build_request(
    plan: Plan, *, dataset: str, settings: Mapping[str, Any] | None = None
) -> ChatRequest:
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
    """Plans that share a history text, in order (each group's first goes alone)."""
    groups: dict[tuple[Any, ...], list[Plan]] = {}
    for p in plans:
        groups.setdefault((p.model, p.system, *p.context.key), []).append(p)
    return list(groups.values())


def answer_record(result: CallResult, plan: Plan) -> dict[str, Any]:
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


def system_fingerprint(client: LLMClient, ds: DatasetPaths, planned: Planned, system: str) -> str:
    """The settings one system's answers are made with: another backend, model, prompt, setting or
    history answers again."""
    model = next(p.model for p in planned.plans if p.system == system)
    settings = planned.generation[model]
    return fingerprint(
        stage=STAGE,
        client=client,
        models=[model],
        prompts=[PROMPT.id],
        parameters={"system": system, **settings},
        inputs=[ds.conversations],
    )


def answer_questions(
    client: LLMClient,
    ds: DatasetPaths,
    planned: Planned,
    *,
    dataset: str,
    progress: bool | None = None,
) -> dict[str, int]:
    """Ask every planned question not answered yet, appending each answer as it arrives; a
    conversation's first question goes alone and its others after it. The answers written per
    system."""
    answers.write_not_asked(ds, planned.skipped, [*planned.systems, *planned.skipped["system"]])
    recorded = client.store.on_ledger(ANSWER_STAGES, "system", "question_id")
    writers = {
        system: AnswerWriter(
            ds,
            system,
            system_fingerprint(client, ds, planned, system),
            {str(q) for s, q in recorded if s == system},
        )
        for system in planned.systems
    }
    written: dict[str, int] = dict.fromkeys(planned.systems, 0)
    by_key = {(p.system, p.question_id): p for p in planned.plans}
    answerer = ExtractiveAnswerer()

    def on_result(result: CallResult) -> None:
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
            settings = planned.generation[model]
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
