"""Which grading instruction the judge is told (notebook 04, section 2): one per benchmark and
question type, as in each benchmark's own evaluation. The wording is in :mod:`memcost.prompts`
(:data:`~memcost.prompts.INSTRUCTIONS`), with every other prompt.

LongMemEval tolerates off-by-one day counts for temporal questions, accepts old plus updated
information for knowledge updates, treats the preference answer as a rubric and expects "not
available" for abstention (``_abs``) questions; LoCoMo's adversarial category 5, when scored,
expects "not mentioned"; PersonaMem is judged against its correct reply, with the benchmark's
wrong options shown as wrong.
"""

from __future__ import annotations

from memcost.paths import DATASETS, WITH_OPTIONS
from memcost.prompts import INSTRUCTIONS, Instruction

LME_TYPES = {
    "single-session-user": "lme_contains",
    "single-session-assistant": "lme_contains",
    "multi-session": "lme_contains",
    "temporal-reasoning": "lme_temporal",
    "knowledge-update": "lme_knowledge_update",
    "single-session-preference": "lme_preference",
}


def choose_instruction(
    dataset: str, category: str, question_id: str = "", *, is_abstention: bool = False
) -> Instruction:
    """The grading instruction for one question (LongMemEval: per type, ``_abs`` first)."""
    if dataset == "locomo":
        if category == "adversarial":
            return INSTRUCTIONS["locomo_adversarial"]
        return INSTRUCTIONS["locomo_temporal" if category == "temporal" else "locomo"]
    if dataset == "longmemeval":
        # LongMemEval marks abstention by the id suffix, whatever the question type.
        if question_id.endswith("_abs") or is_abstention:
            return INSTRUCTIONS["lme_abstention"]
        if category not in LME_TYPES:
            raise ValueError(
                f"LongMemEval question {question_id!r} has type {category!r}, which has no "
                f"grading instruction (known: {', '.join(LME_TYPES)})"
            )
        return INSTRUCTIONS[LME_TYPES[category]]
    if dataset in WITH_OPTIONS:
        return INSTRUCTIONS["personamem"]
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")


__all__ = ["INSTRUCTIONS", "LME_TYPES", "Instruction", "choose_instruction"]
