"""Ask the planned questions and write the answers (notebook 03, section 5).

The history comes first in every prompt, so every question about the same conversation starts
with the same bytes. The provider caches that prefix after the first question:
:func:`answer_questions` therefore sends the first question of each conversation alone and the
others once it has returned, conversations in parallel (``LLMClient.chat_groups``). Each answer
is appended to its system's file as it arrives; a rerun skips answered questions and retries
failed ones. Without a key the extractive method of :mod:`memcost.offline` answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memcost.answers import AnswerWriter
from memcost.catalog import slug
from memcost.llm import ChatRequest, ChatResult, LLMClient
from memcost.longctx.context import generation_settings
from memcost.longctx.plan import Plan, Planned
from memcost.longctx.prompt import PROMPT, prompt_messages
from memcost.manifest import fingerprint
from memcost.offline import ExtractiveAnswerer, OfflineJob
from memcost.paths import DatasetPaths

STAGE = "long_context"  # the ledger stage of every call made here


def messages_for(plan: Plan) -> tuple[tuple[str, str], ...]:
    """The messages of one plan's prompt, exactly as sent."""
    return prompt_messages(plan.context.text, plan.question_block)


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


def system_fingerprint(client: LLMClient, ds: DatasetPaths, planned: Planned, system: str) -> str:
    """The settings one system's answers are made with (:mod:`memcost.manifest`): a rerun
    with another backend, model, prompt, generation setting or history answers again."""
    model = next(p.model for p in planned.plans if p.system == system)
    settings = planned.generation.get(model) or generation_settings(model)
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
    """Ask every planned question not answered yet, model by model, and append each answer to
    its system's file as it arrives. Returns the number of answers written per system.

    Within a model, each group of questions that share a history (a conversation) sends its
    first question alone and the rest after it has returned; groups run in parallel up to the
    client's ``max_concurrency``. A rerun skips answered questions and retries failed ones.
    """
    writers = {
        system: AnswerWriter(ds, system, system_fingerprint(client, ds, planned, system))
        for system in planned.systems
    }
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


__all__ = [
    "STAGE",
    "answer_questions",
    "answer_record",
    "build_request",
    "group_plans",
    "messages_for",
]
