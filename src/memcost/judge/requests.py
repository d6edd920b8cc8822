"""The judge's requests and the reply parser (notebook 04, section 2).

An LLM reads the question, the benchmark's reference and a system's response, and says CORRECT
or WRONG as JSON with a one-sentence reason. Each answer is judged ``n_votes`` times (distinct
``sample_index``, so neither the disk cache nor the in-flight de-duplication collapses them).
Answers whose answering call failed, and multiple-choice answers (scored by their letter), are
not sent (:func:`memcost.judge.votes.rule_records`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memcost.judge.instructions import Instruction
from memcost.judge.questions import JudgeItem
from memcost.llm import ChatRequest, parse_json_object
from memcost.paper import JUDGE_MODEL
from memcost.prompts import JUDGE_PROMPTS, Prompt
from memcost.prompts import get as get_prompt
from memcost.stats import CORRECT, WRONG

STAGE = "judge"  # the ledger stage of every judge call
LETTER_MATCH = "letter_match"  # judge_model of multiple-choice votes: the letter is compared
RULE = "rule"  # backend of multiple-choice votes and of answers that could not be judged


@dataclass(frozen=True)
class JudgePayload:
    """What the offline method needs (rides on the request, never sent)."""

    item: JudgeItem
    prompt_name: str


def judge_prompt(name: str) -> Prompt:
    if name not in JUDGE_PROMPTS:
        raise ValueError(f"unknown judge prompt {name!r}; choose from {', '.join(JUDGE_PROMPTS)}")
    return get_prompt(name)


def prompt_version(prompt: Prompt, instruction: Instruction) -> str:
    """``judge@v1+lme_temporal@v1``: the prompt and the instruction block it carried."""
    return f"{prompt.id}+{instruction.id}"


def judge_requests(
    items: Sequence[JudgeItem],
    *,
    judge_model: str = JUDGE_MODEL,
    prompt_name: str = "judge",
    n_votes: int = 3,
    reasoning_effort: str | None = "high",
    max_output_tokens: int | None = None,
) -> list[ChatRequest]:
    """``n_votes`` requests per judgeable item, votes told apart by ``sample_index``.

    Items whose answer is an error, and multiple-choice items, are not sent (see
    :func:`rule_records`).
    """
    if n_votes < 1:
        raise ValueError("n_votes must be at least 1")
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
    """``{"label": CORRECT|WRONG, "reason": ...}`` from a judge reply; ``ValueError`` if none.

    Takes a JSON object (``label``, or ``verdict``/``judgment``), or a reply that is nothing but
    the label word. Anything else is unparseable: the client re-asks, and a reply that never
    parses becomes ``UNJUDGED``.
    """
    bare = text.strip().strip(".!*_`\"' ").upper()
    if bare in _LABEL_WORDS:
        return {"label": _LABEL_WORDS[bare], "reason": ""}
    obj = parse_json_object(text)
    raw = next((obj[k] for k in ("label", "verdict", "judgment", "judgement") if k in obj), None)
    if not isinstance(raw, str) or raw.strip().upper() not in _LABEL_WORDS:
        raise ValueError(f"the JSON has no label CORRECT or WRONG (got {raw!r})")
    reason = obj.get("reason", obj.get("explanation", ""))
    return {"label": _LABEL_WORDS[raw.strip().upper()], "reason": str(reason or "")}


__all__ = [
    "LETTER_MATCH",
    "RULE",
    "STAGE",
    "JudgePayload",
    "judge_prompt",
    "judge_requests",
    "parse_verdict",
    "prompt_version",
]
