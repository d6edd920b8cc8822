"""The judge offline (notebook 04): a lexical rule, not a language model.

A response is CORRECT when enough of the reference's content words appear in it (containment) or
its token F1 with the reference is high enough; abstention questions need an explicit "not
mentioned / don't know"; temporal counts accept off-by-one; rubrics and PersonaMem replies use
looser rules. It is deterministic, so its votes always agree, and every vote it gives is named
:data:`LEXICAL` in the outputs: it reads words, not meaning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memcost.stats import CORRECT, WRONG
from memcost.text import containment, token_f1

LEXICAL = "lexical"  # judge_model of every offline vote: a word-overlap rule, not an LLM


class Instructed(Protocol):
    """The grading instruction an item carries (only its key matters here)."""

    @property
    def key(self) -> str: ...


class Judged(Protocol):
    """One answer to judge, as the judge stage describes it (a ``JudgeItem``)."""

    @property
    def response(self) -> str: ...
    @property
    def reference(self) -> str: ...
    @property
    def instruction(self) -> Instructed: ...
    @property
    def adversarial_answer(self) -> str: ...
    @property
    def wrong_options(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class LexicalRule:
    """Thresholds of the offline judge for one prompt variant.

    A response is CORRECT when ``containment`` (share of the reference's content words found in
    the response) or ``f1`` (SQuAD token F1) reaches its threshold (``need_both``: both must).
    Rubrics (LongMemEval preference) are long, so only ``rubric`` of their content words need to
    appear. PersonaMem replies: the response must be closer (token F1) to the reference reply
    than to every wrong option, and at least ``option_f1`` close to it.
    """

    containment: float
    f1: float
    need_both: bool
    rubric: float
    option_f1: float


LEXICAL_RULES: dict[str, LexicalRule] = {
    "judge": LexicalRule(containment=0.6, f1=0.5, need_both=False, rubric=0.2, option_f1=0.1),
    "judge_lenient": LexicalRule(
        containment=0.4, f1=0.3, need_both=False, rubric=0.1, option_f1=0.05
    ),
    "judge_strict": LexicalRule(containment=0.8, f1=0.4, need_both=True, rubric=0.3, option_f1=0.2),
}

_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update({"once": "1", "twice": "2", "thrice": "3"})
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b", re.IGNORECASE)
_ABSTAIN = re.compile(
    r"\b(not (?:been )?(?:mentioned|stated|specified|provided|available|known|given|said|"
    r"discussed|enough)|no (?:information|mention|record|details?|indication|data)|"
    r"(?:do|does|did)n'?t (?:know|mention|say|have)|(?:do|does|did) not (?:know|mention|say|"
    r"have)|cannot (?:be )?(?:determine|tell|answer|find|say)|can't (?:determine|tell|answer|"
    r"find|say)|unknown|never (?:mentioned|said|told)|insufficient information|unanswerable|"
    r"information (?:is )?(?:incomplete|missing))\b",
    re.IGNORECASE,
)
_COUNT = re.compile(r"\b(\d+)\s+(day|week|month|year)s?\b")


def numerals(text: str) -> str:
    """Number words as digits and ordinals without suffix, so "three" meets "3" and "9th" "9"."""
    text = _ORDINAL.sub(r"\1", text)
    return re.sub(r"[A-Za-z]+", lambda m: _NUMBER_WORDS.get(m.group(0).lower(), m.group(0)), text)


def abstains(text: str) -> bool:
    """Does the response say the information is not there?"""
    return bool(_ABSTAIN.search(text))


def _unanswerable(item: Judged, response: str) -> tuple[str, str]:
    if abstains(response):
        return CORRECT, "lexical: the response says the information is not available"
    trap = containment(item.adversarial_answer, response) if item.adversarial_answer else 0.0
    extra = f" (it matches the trap answer {trap:.2f})" if trap >= 0.5 else ""
    return WRONG, f"lexical: the response answers an unanswerable question{extra}"


def _off_by_one(reference: str, response: str) -> tuple[str, str] | None:
    gold = _COUNT.search(reference)
    if not gold:
        return None
    n, unit = int(gold.group(1)), gold.group(2)
    said = {int(m.group(1)) for m in _COUNT.finditer(response) if m.group(2) == unit}
    if said & {n - 1, n, n + 1}:
        return CORRECT, f"lexical: {sorted(said)} {unit}s is within one of {n}"
    return None


def _closest_reply(
    item: Judged, response: str, reference: str, rule: LexicalRule
) -> tuple[str, str]:
    to_ref = token_f1(response, reference)
    to_wrong = max((token_f1(response, numerals(o)) for o in item.wrong_options), default=0.0)
    ok = to_ref > to_wrong and to_ref >= rule.option_f1
    return (
        CORRECT if ok else WRONG,
        f"lexical: token F1 {to_ref:.2f} with the reference reply vs {to_wrong:.2f} with "
        f"the closest wrong option (needs more, and at least {rule.option_f1})",
    )


def _overlap(response: str, reference: str, rule: LexicalRule) -> tuple[str, str]:
    cover = containment(reference, response)
    f1 = token_f1(response, reference)
    hits = (cover >= rule.containment, f1 >= rule.f1)
    ok = all(hits) if rule.need_both else any(hits)
    joiner = "and" if rule.need_both else "or"
    return (
        CORRECT if ok else WRONG,
        f"lexical: containment {cover:.2f}, token F1 {f1:.2f} (needs containment >= "
        f"{rule.containment} {joiner} F1 >= {rule.f1})",
    )


def lexical_verdict(item: Judged, prompt_name: str = "judge") -> tuple[str, str]:
    """``(label, reason)`` of the offline judge: word overlap, with the benchmark's special cases.

    Abstention questions (LongMemEval ``_abs``, LoCoMo category 5) are CORRECT exactly when the
    response abstains; LongMemEval temporal counts accept off-by-one; preference rubrics and
    PersonaMem replies use the looser rules of :class:`LexicalRule`.
    """
    rule = LEXICAL_RULES[prompt_name]
    response, reference = numerals(item.response), numerals(item.reference)
    if not response.strip():
        return WRONG, "lexical: empty response"
    key = item.instruction.key
    if key in ("lme_abstention", "locomo_adversarial"):
        return _unanswerable(item, response)
    if abstains(response) and containment(reference, response) < rule.containment:
        return WRONG, "lexical: the response abstains but the reference gives an answer"
    if key == "lme_temporal":
        close = _off_by_one(reference, response)
        if close is not None:
            return close
    if key == "personamem":
        return _closest_reply(item, response, reference, rule)
    if key == "lme_preference":
        cover = containment(reference, response)
        return (
            CORRECT if cover >= rule.rubric else WRONG,
            f"lexical: {cover:.2f} of the rubric's content words appear (needs {rule.rubric})",
        )
    return _overlap(response, reference, rule)


def lexical_judge(request: Any) -> str:
    """The offline method of the judge stage: the lexical verdict as the JSON an LLM would give.
    The request's payload carries the item (``.item``) and the judge prompt's name
    (``.prompt_name``)."""
    payload = request.payload
    label, reason = lexical_verdict(payload.item, payload.prompt_name)
    return json.dumps({"reason": reason, "label": label})


__all__ = [
    "LEXICAL",
    "LEXICAL_RULES",
    "LexicalRule",
    "abstains",
    "lexical_judge",
    "lexical_verdict",
    "numerals",
]
