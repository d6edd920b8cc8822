"""What the judge is told (notebook 04, section 2): one grading instruction per benchmark and
question type, as in each benchmark's own evaluation.

LongMemEval tolerates off-by-one day counts for temporal questions, accepts old plus updated
information for knowledge updates, treats the preference answer as a rubric and expects "not
available" for abstention (``_abs``) questions; LoCoMo's adversarial category 5, when scored,
expects "not mentioned"; PersonaMem v2 is judged against its correct reply, with the benchmark's
wrong options shown as wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from memcost.datasets import DATASETS


@dataclass(frozen=True)
class Instruction:
    """The dataset- and question-type-specific block of the judge prompt.

    ``text`` may use ``{adversarial_answer}`` and ``{wrong_options}``; ``reference_label`` says
    what the reference is, so the judge does not read a rubric as an exact answer.
    """

    key: str
    version: str
    reference_label: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.key}@{self.version}"


_LME_CONTAINS = (
    "The question is about the user's earlier chat sessions with the assistant. The response is "
    "CORRECT if it contains the reference answer, is equivalent to it, or works through all the "
    "steps that lead to it. It is WRONG if it holds only part of the information the reference "
    "requires."
)
_LOCOMO = (
    "The question is about a long conversation between two people, held over many dated "
    "sessions; the reference answer comes from that conversation."
)
INSTRUCTIONS: dict[str, Instruction] = {
    i.key: i
    for i in (
        Instruction("locomo", "v1", "Reference answer", _LOCOMO),
        Instruction(
            "locomo_temporal",
            "v1",
            "Reference answer",
            _LOCOMO + " The question asks when something happened. The conversation often dates "
            "events relative to a session (\"last Saturday\", \"the week before\"): a response "
            "giving the same date or period as the reference, absolutely or relative to a date "
            "it names, is CORRECT; a different date or period is WRONG.",
        ),
        Instruction(
            "locomo_adversarial",
            "v1",
            "Expected behaviour",
            "The question is about a long conversation between two people, but it cannot be "
            "answered from it: it asks about something nobody said, or attributes to one person "
            "what concerns the other. The response is CORRECT only if it says the conversation "
            "does not give this information (for example \"not mentioned\", \"there is no "
            "information about that\"). It is WRONG if it answers the question as asked, in "
            "particular with this answer, which belongs to something else in the conversation: "
            "{adversarial_answer}",
        ),
        Instruction("lme_contains", "v1", "Reference answer", _LME_CONTAINS),
        Instruction(
            "lme_temporal",
            "v1",
            "Reference answer",
            _LME_CONTAINS + " Counts of days, weeks, months or years that are off by one are "
            "still CORRECT (for example 19 days when the reference says 18): whether the first "
            "and the last day are both counted is a matter of convention.",
        ),
        Instruction(
            "lme_knowledge_update",
            "v1",
            "Reference answer",
            "The question is about the user's earlier chat sessions with the assistant. The "
            "user's information changed over time and the question asks for the current state. "
            "A response that also mentions earlier information is CORRECT as long as it gives "
            "the updated answer (the reference) as the current one; a response that gives the "
            "old information as current is WRONG.",
        ),
        Instruction(
            "lme_preference",
            "v1",
            "Rubric",
            "The user asks for a recommendation, and the rubric describes the personalised "
            "response the user would want. The response does not have to cover every point of "
            "the rubric: it is CORRECT if it recalls and uses the user's personal information "
            "correctly, and WRONG if it ignores that information or contradicts it.",
        ),
        Instruction(
            "lme_abstention",
            "v1",
            "Explanation",
            "This question cannot be answered from the user's chat history; the explanation "
            "says what is missing. The response is CORRECT if it says the information is not "
            "available or incomplete (it may mention related things the user did say). It is "
            "WRONG if it answers as if the missing information were known.",
        ),
        Instruction(
            "personamem",
            "v1",
            "Reference reply",
            "The user asks for a personalised reply. The reference is a reply that respects "
            "what the user told the assistant earlier about their preferences and "
            "circumstances; the response need not resemble it in wording, length or form. The "
            "response is CORRECT if it is consistent with the same preference or personal "
            "information as the reference. It is WRONG if it ignores or contradicts it, or "
            "makes the same choice as one of these replies, which the benchmark marks as "
            "wrong:\n{wrong_options}",
        ),
    )
}
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
    if dataset == "personamem_v2":
        return INSTRUCTIONS["personamem"]
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")


__all__ = ["INSTRUCTIONS", "LME_TYPES", "Instruction", "choose_instruction"]
