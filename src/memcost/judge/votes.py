"""The judge's votes (notebook 04, paper §3.4): what it is told, what it answers, which votes a
resume keeps (docs/architecture.md, "The judge")."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memcost import stats
from memcost.answers import (
    MC_SALT,
    in_system_order,
    judgment_appender,
    judgment_record,
    parse_choice,
    read_judgments,
    rewrite_judgments,
)
from memcost.calls import OFFLINE
from memcost.io import read_jsonl
from memcost.judge.questions import JudgeItem, JudgePlan
from memcost.llm import CallResult, ChatRequest, parse_json_object
from memcost.offline import LEXICAL, lexical_judge
from memcost.paper import JUDGE_MODEL
from memcost.prompts import JUDGE_PROMPTS, Instruction, Prompt
from memcost.prompts import get as get_prompt
from memcost.stats import CORRECT, UNJUDGED, WRONG

STAGE = "judge"  # the ledger stage of every judge call
LETTER_MATCH = "letter_match"  # judge_model of multiple-choice votes: the letter is compared
RULE = "rule"  # backend of multiple-choice votes and of answers that could not be judged


@dataclass(frozen=True)
class JudgePayload:
    item: JudgeItem
    prompt_name: str


def judge_prompt(name: str) -> Prompt:
    if name not in JUDGE_PROMPTS:
        raise ValueError(f"unknown judge prompt {name!r}; choose from {', '.join(JUDGE_PROMPTS)}")
    return get_prompt(name)


def prompt_version(prompt: Prompt, instruction: Instruction) -> str:
    return f"{prompt.id}+{instruction.id}"


def check_votes(n_votes: int) -> None:
    """At least one vote, an odd number (a tie is not a majority)."""
    if n_votes < 1 or n_votes % 2 == 0:
        raise ValueError(
            f"n_votes={n_votes}: the judge's votes need a majority; use an odd number, at least "
            "1 (the paper's is 3, §3.4): an even number can tie, and a tie counts as wrong"
        )


def judge_requests(
    items: Sequence[JudgeItem],
    *,
    judge_model: str = JUDGE_MODEL,
    prompt_name: str = "judge",
    n_votes: int = 3,
    reasoning_effort: str | None = "high",
    max_output_tokens: int | None = None,
) -> list[ChatRequest]:
    """``n_votes`` requests per judgeable item, told apart by ``sample_index`` (failed answers and
    multiple choice: :func:`rule_records`)."""
    check_votes(n_votes)
    prompt = judge_prompt(prompt_name)
    out = []
    for item in items:
        if item.answer_error is not None or item.choice is not None:
            continue
        messages = prompt.messages(**item.prompt_values())
        for vote in range(n_votes):
            out.append(
                ChatRequest(
                    model=judge_model,
                    messages=messages,
                    stage=STAGE,
                    prompt_version=prompt_version(prompt, item.instruction),
                    sample_index=vote,
                    reasoning_effort=reasoning_effort or None,
                    max_output_tokens=max_output_tokens,
                    json_mode=True,
                    reply_schema=prompt.reply_schema,
                    payload=JudgePayload(item, prompt_name),
                    tags={
                        "dataset": item.dataset,
                        "conversation_id": item.conversation_id,
                        "question_id": item.question_id,
                        "system": item.system,
                        "vote": vote,
                    },
                )
            )
    return out


_LABEL_WORDS = {"CORRECT": CORRECT, "WRONG": WRONG, "INCORRECT": WRONG}


def parse_verdict(text: str) -> dict[str, str]:
    """``{"label", "reason"}`` from a JSON object (``label``, ``verdict`` or ``judgment``) or a bare
    label word; ``ValueError`` otherwise (the client re-asks)."""
    bare = text.strip().strip(".!*_`\"' ").upper()
    if bare in _LABEL_WORDS:
        return {"label": _LABEL_WORDS[bare], "reason": ""}
    obj = parse_json_object(text)
    raw = next((obj[k] for k in ("label", "verdict", "judgment", "judgement") if k in obj), None)
    if not isinstance(raw, str) or raw.strip().upper() not in _LABEL_WORDS:
        raise ValueError(f"the JSON has no label CORRECT or WRONG (got {raw!r})")
    reason = obj.get("reason", obj.get("explanation", ""))
    return {"label": _LABEL_WORDS[raw.strip().upper()], "reason": str(reason or "")}


def _record(
    item: JudgeItem,
    *,
    vote: int,
    label: str,
    reason: str,
    judge_model: str,
    backend: str,
    prompt_name: str,
    prompt_version: str,
    mode: str,
    primary: bool,
    unjudged_cause: str | None = None,
    request_hash: str | None = None,
) -> dict[str, Any]:
    return judgment_record(
        question_id=item.question_id,
        conversation_id=item.conversation_id,
        system=item.system,
        category=item.category,
        vote=vote,
        label=label,
        reason=reason,
        judge_model=judge_model,
        backend=backend,
        prompt_name=prompt_name,
        prompt_version=prompt_version,
        instruction=item.instruction.key,
        mode=mode,
        primary=primary,
        unjudged_cause=unjudged_cause,
        request_hash=request_hash,
    )


def _letter_vote(item: JudgeItem, mode: str) -> dict[str, Any]:
    assert item.choice is not None
    common = dict(
        vote=0,
        judge_model=LETTER_MATCH,
        backend=RULE,
        prompt_name=LETTER_MATCH,
        prompt_version=f"{LETTER_MATCH}@v1+{MC_SALT}",
        mode=mode,
        primary=True,
    )
    if item.answer_error is not None:
        return _record(
            item,
            label=UNJUDGED,
            reason=f"not judged: answering failed ({item.answer_error})",
            unjudged_cause="answer",
            **common,
        )
    letter = parse_choice(item.response, item.choice)
    if letter is None:
        label, reason = WRONG, "the answer names no single option letter"
    elif letter == item.choice.correct_letter:
        label, reason = CORRECT, f"picked {letter}, the correct option"
    else:
        label, reason = (
            WRONG,
            (f"picked {letter}; the correct option is {item.choice.correct_letter}"),
        )
    return _record(item, label=label, reason=reason, **common)


def rule_records(
    items: Sequence[JudgeItem],
    *,
    mode: str,
    prompt_names: Sequence[str],
    n_votes: int,
    judge_label: str = LEXICAL,
) -> list[dict[str, Any]]:
    """The votes that need no call: a failed answer UNJUDGED (cause ``answer``) under every prompt
    and vote; a multiple-choice answer one exact-match vote on its letter."""
    out = []
    for item in items:
        if item.choice is not None:
            out.append(_letter_vote(item, mode))
        elif item.answer_error is not None:
            for index, name in enumerate(prompt_names):
                prompt = judge_prompt(name)
                for vote in range(n_votes):
                    out.append(
                        _record(
                            item,
                            vote=vote,
                            label=UNJUDGED,
                            reason=f"not judged: answering failed ({item.answer_error})",
                            judge_model=judge_label,
                            backend=RULE,
                            prompt_name=name,
                            prompt_version=prompt_version(prompt, item.instruction),
                            mode=mode,
                            primary=index == 0,
                            unjudged_cause="answer",
                        )
                    )
    return out


def _request_identity(client: Any, model: str) -> str:
    endpoint = client.endpoint_for(model)
    return OFFLINE if endpoint is None else endpoint.identity


def _vote_key(request_hash: Any, system: Any, question_id: Any, vote: Any) -> tuple:
    return (str(request_hash), str(system), str(question_id), int(vote))


@dataclass
class JudgingRun:
    judgments: pd.DataFrame
    sent: int  # votes asked of the judge this time
    reused: int  # votes kept from an earlier run of this notebook (same request, same answer)
    dropped: int  # earlier votes that no longer apply (other answers, prompts or settings)
    rule_votes: int
    judge_label: str  # "lexical" offline, the model otherwise


def _all_requests(
    items: Sequence[JudgeItem], plan: JudgePlan, prompt_names: Sequence[str], **settings: Any
) -> tuple[list[ChatRequest], dict[str, bool]]:
    requests: list[ChatRequest] = []
    primary_of: dict[str, bool] = {}
    if plan.mode != "multiple_choice":
        for index, name in enumerate(prompt_names):
            requests += judge_requests(items, prompt_name=name, **settings)
            primary_of[name] = index == 0
    return requests, primary_of


def _vote(
    result: CallResult,
    *,
    identity: str,
    judge_label: str,
    mode: str,
    primary_of: Mapping[str, bool],
) -> dict[str, Any]:
    """One call's vote (``UNJUDGED`` when it failed or never parsed)."""
    payload: JudgePayload = result.request.payload
    request = result.request
    common = dict(
        vote=request.sample_index,
        judge_model=judge_label,
        backend=result.backend,
        prompt_name=payload.prompt_name,
        prompt_version=request.prompt_version,
        mode=mode,
        primary=primary_of[payload.prompt_name],
        request_hash=request.key(identity),
    )
    if result.error is not None or result.parse_error is not None:
        why = result.error or result.parse_error
        return _record(
            payload.item,
            label=UNJUDGED,
            reason=f"judge failed: {why}",
            unjudged_cause="judge",
            **common,
        )
    return _record(
        payload.item, label=result.parsed["label"], reason=result.parsed["reason"], **common
    )


def _still_to_ask(
    requests: Sequence[ChatRequest],
    identity: str,
    earlier: list[dict[str, Any]],
    primary_of: Mapping[str, bool],
    on_ledger: Collection[tuple[Any, ...]],
) -> tuple[list[dict[str, Any]], list[ChatRequest]]:
    """The earlier votes that answer one of ``requests`` exactly (rule and UNJUDGED votes are
    redone, and so is a vote whose call, ``(request_hash, vote, system, question_id)``, is not
    ``on_ledger``), and the requests none answers."""
    keyed = {
        _vote_key(r.key(identity), r.tags["system"], r.tags["question_id"], r.sample_index): r
        for r in requests
    }
    kept, done, unrecorded = [], set(), 0
    for record in earlier:
        if record.get("backend") == RULE or record.get("label") == UNJUDGED:
            continue
        call = ("request_hash", "vote", "system", "question_id")
        if tuple(record.get(name) for name in call) not in on_ledger:
            unrecorded += 1
            continue
        key = _vote_key(
            record.get("request_hash"),
            record.get("system"),
            record.get("question_id"),
            record.get("vote", -1),
        )
        if key in keyed:
            record["primary"] = primary_of.get(str(record.get("prompt_name")), False)
            kept.append(record)
            done.add(key)
    if unrecorded:
        print(
            f"memcost: {unrecorded} judge vote(s) have no call in the run's store of calls (its "
            "record was lost): asked again, so that the cost tables count them",
            file=sys.stderr,
            flush=True,
        )
    return kept, [r for key, r in keyed.items() if key not in done]


def run_judging(
    client: Any,
    plan: JudgePlan,
    path: str | Path,
    *,
    judge_model: str = JUDGE_MODEL,
    prompt_names: Sequence[str] = ("judge",),
    n_votes: int = 3,
    reasoning_effort: str | None = "high",
    max_output_tokens: int | None = None,
) -> JudgingRun:
    """Judge every answer of the plan, appending each vote to ``judgments.jsonl``; votes for the
    very same requests are kept, the rest asked again; the first prompt is the primary (Table 3)."""
    prompt_names = list(prompt_names)
    if not prompt_names:
        raise ValueError("judge_prompts must name at least one prompt")
    for name in prompt_names:
        judge_prompt(name)
    items = [i for system in plan.items.values() for i in system]
    identity = _request_identity(client, judge_model)
    judge_label = LEXICAL if identity == OFFLINE else judge_model
    requests, primary_of = _all_requests(
        items,
        plan,
        prompt_names,
        judge_model=judge_model,
        n_votes=n_votes,
        reasoning_effort=reasoning_effort,
        max_output_tokens=max_output_tokens,
    )
    earlier = read_jsonl(path, missing_ok=True)
    on_ledger = client.store.on_ledger(
        ("judge",), "request_hash", "sample_index", "system", "question_id"
    )
    kept, pending = _still_to_ask(requests, identity, earlier, primary_of, on_ledger)
    rules = rule_records(
        items, mode=plan.mode, prompt_names=prompt_names, n_votes=n_votes, judge_label=judge_label
    )
    # The file now holds exactly what still applies, in the order and the line format a first
    # run leaves (rule votes, then judge votes as they arrived): a rerun with nothing left to
    # ask rewrites it byte for byte.
    rewrite_judgments(path, [*rules, *kept])
    appender = judgment_appender(path)
    try:
        if pending:
            client.chat_many(
                pending,
                offline=lexical_judge,
                parse=parse_verdict,
                desc=f"judge {plan.dataset}",
                on_result=lambda result: appender.write(
                    _vote(
                        result,
                        identity=identity,
                        judge_label=judge_label,
                        mode=plan.mode,
                        primary_of=primary_of,
                    )
                ),
            )
    finally:
        appender.close()
    return JudgingRun(
        judgments=read_judgments(path),
        sent=len(pending),
        reused=len(kept),
        dropped=sum(r.get("backend") != RULE for r in earlier) - len(kept),
        rule_votes=len(rules),
        judge_label=judge_label if plan.mode != "multiple_choice" else LETTER_MATCH,
    )


def judge_one(
    client: Any,
    item: JudgeItem,
    path: str | Path,
    *,
    judge_model: str = JUDGE_MODEL,
    prompt_name: str = "judge",
    n_votes: int = 3,
    reasoning_effort: str | None = "high",
    max_output_tokens: int | None = None,
) -> pd.DataFrame:
    """One answer's votes under the primary prompt, one step at a time, stored as
    :func:`run_judging` stores them (no vote is paid twice)."""
    identity = _request_identity(client, judge_model)
    judge_label = LEXICAL if identity == OFFLINE else judge_model
    requests = judge_requests(
        [item],
        judge_model=judge_model,
        prompt_name=prompt_name,
        n_votes=n_votes,
        reasoning_effort=reasoning_effort,
        max_output_tokens=max_output_tokens,
    )
    earlier = read_jsonl(path, missing_ok=True)
    on_ledger = client.store.on_ledger(
        ("judge",), "request_hash", "sample_index", "system", "question_id"
    )
    votes, pending = _still_to_ask(requests, identity, earlier, {prompt_name: True}, on_ledger)
    if pending:
        with judgment_appender(path) as appender:

            def write(result: CallResult) -> None:
                record = _vote(
                    result,
                    identity=identity,
                    judge_label=judge_label,
                    mode="open_ended",
                    primary_of={prompt_name: True},
                )
                appender.write(record)
                votes.append(record)

            client.chat_many(
                pending,
                offline=lexical_judge,
                parse=parse_verdict,
                on_result=write,
                desc=f"judge {item.question_id}",
            )
    return pd.DataFrame(sorted(votes, key=lambda r: r["vote"]))


def question_outcomes(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per prompt, system and question: the majority label, ``conversation_id``,
    ``category`` and ``cause`` (``answer``, ``judge`` or null)."""
    keys = ["prompt_name", "system", "question_id"]
    votes = stats.majority_votes(judgments, keys)
    if votes.empty:
        return votes.assign(conversation_id=[], category=[], cause=[])
    first = judgments.groupby(keys, sort=True)[["conversation_id", "category"]].first()
    causes = (
        judgments.dropna(subset=["unjudged_cause"])
        .groupby(keys)["unjudged_cause"]
        .agg(lambda s: "answer" if "answer" in set(s) else "judge")
    )
    out = votes.join(first, on=keys).join(causes.rename("cause"), on=keys)
    out.loc[out["judged"], "cause"] = None
    return in_system_order(out, keys)
