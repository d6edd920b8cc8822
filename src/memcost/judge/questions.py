"""What is judged (notebook 04, section 1): the scored questions, and each system's answers paired
with what the judge needs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from memcost.answers import (
    MODES,
    SYSTEM_KINDS,
    MultipleChoice,
    answer_systems,
    load_answers,
    multiple_choice,
    read_not_asked,
    system_kind,
    system_name,
)
from memcost.data.benchmark import read_questions as load_questions
from memcost.paper import LONG_CONTEXT_MODELS, PAPER_MEMORY
from memcost.paths import DATASETS, WITH_OPTIONS, DatasetPaths
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


@dataclass(frozen=True)
class JudgeItem:
    dataset: str
    system: str
    question_id: str
    conversation_id: str
    category: str
    question: str
    reference: str
    response: str
    instruction: Instruction
    is_abstention: bool = False
    adversarial_answer: str = ""
    wrong_options: tuple[str, ...] = ()
    answer_error: str | None = None  # the answering call failed: nothing to judge
    choice: MultipleChoice | None = None  # PersonaMem multiple choice

    def prompt_values(self) -> dict[str, str]:
        wrong = "\n".join(f"- {o}" for o in self.wrong_options) or "- (none given)"
        return {
            "instructions": self.instruction.text.format(
                adversarial_answer=self.adversarial_answer or "(none given)", wrong_options=wrong
            ),
            "question": self.question,
            "reference_label": self.instruction.reference_label,
            "reference": self.reference,
            "response": self.response,
        }


@dataclass
class JudgePlan:
    dataset: str
    mode: str
    questions: pd.DataFrame  # the scored questions
    all_questions: int
    excluded: dict[str, int]  # reason -> questions left out of scoring
    items: dict[str, list[JudgeItem]]  # system -> answers to judge (scored questions only)
    missing_answers: dict[str, list[str]]  # system -> scored questions without an answer
    answers: dict[str, pd.DataFrame] = field(default_factory=dict)  # system -> answers file
    notes: list[str] = field(default_factory=list)  # what the notebook should print

    @property
    def systems(self) -> list[str]:
        return list(self.items)

    def summary(self) -> pd.DataFrame:
        rows = []
        for system, items in self.items.items():
            rows.append(
                {
                    "system": system,
                    "answers": len(self.answers[system]),
                    "scored": len(items),
                    "answer_errors": sum(i.answer_error is not None for i in items),
                    "missing_answers": len(self.missing_answers[system]),
                }
            )
        return pd.DataFrame(rows)

    def describe(self) -> str:
        left_out = ", ".join(f"{n} {why}" for why, n in self.excluded.items() if n) or "none"
        text = (
            f"{self.dataset}: scoring {len(self.questions)} of {self.all_questions} "
            f"questions (left out: {left_out}); mode {self.mode}; "
            f"{len(self.items)} systems: {', '.join(self.items)}"
        )
        return "\n".join([text, *(f"NOTE: {n}" for n in self.notes)])


def scored_questions(
    questions: pd.DataFrame, dataset: str, *, include_adversarial: bool = False
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The questions that count, and how many were left out and why: LoCoMo's adversarial category 5
    (no gold answer) unless ``include_adversarial``, as Mem0 and EverMemOS score."""
    excluded: dict[str, int] = {}
    keep = pd.Series(True, index=questions.index)
    if dataset == "locomo" and not include_adversarial:
        adversarial = questions["category"].astype(str) == "adversarial"
        excluded["adversarial (LoCoMo category 5)"] = int(adversarial.sum())
        keep &= ~adversarial
    return questions.loc[keep].reset_index(drop=True), excluded


def as_list(value: Any) -> list[str]:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(v) for v in list(value)]


def as_text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    return str(value)


def _judged_mode(dataset: str, mode: str, notes: list[str]) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "multiple_choice" and dataset not in WITH_OPTIONS:
        # A preset may set the mode for every dataset; only PersonaMem's questions have options.
        notes.append(
            f"mode 'multiple_choice' applies to {' and '.join(WITH_OPTIONS)} only; "
            f"{dataset} is judged open-ended"
        )
        return "open_ended"
    return mode


def _system_answers(ds: DatasetPaths, system: str, dataset: str, known: set[str]) -> pd.DataFrame:
    """One system's answers, checked against the dataset's question ids."""
    system_kind(system)
    frame = load_answers(ds, system)
    stray = sorted(set(frame["question_id"].astype(str)) - known)
    if stray:
        raise ValueError(
            f"{ds.answers_file(system)}: {len(stray)} answers to question ids that dataset "
            f"{dataset!r} does not have (e.g. {stray[:5]}); the answers come from another "
            "dataset or another selection of it: rerun the answering notebook"
        )
    return frame


def plan_judging(
    ds: DatasetPaths,
    questions: pd.DataFrame,
    *,
    dataset: str,
    systems: Sequence[str] = (),
    include_adversarial: bool = False,
    mode: str = "open_ended",
) -> JudgePlan:
    """Pair every answer (``systems`` empty: every answers file) with its question; a named system
    without a file, or an answer to an unknown question id, is an error."""
    notes: list[str] = []
    mode = _judged_mode(dataset, mode, notes)
    chosen = list(systems) or answer_systems(ds)
    if not chosen:
        raise FileNotFoundError(
            f"{ds.answers}: no answers_<system>.jsonl files; run notebooks/"
            "02_answer_from_memory.ipynb and/or notebooks/03_answer_long_context.ipynb for "
            f"dataset {dataset!r} first"
        )
    scored, excluded = scored_questions(questions, dataset, include_adversarial=include_adversarial)
    known = set(questions["question_id"].astype(str))
    by_id = {str(r["question_id"]): r for r in scored.to_dict("records")}
    items: dict[str, list[JudgeItem]] = {}
    missing: dict[str, list[str]] = {}
    answers: dict[str, pd.DataFrame] = {}
    not_asked = read_not_asked(ds)
    for system in chosen:
        frame = answers[system] = _system_answers(ds, system, dataset, known)
        items[system] = [
            judge_item(dataset, system, by_id[str(record["question_id"])], record, mode)
            for record in frame.to_dict("records")
            if str(record["question_id"]) in by_id
        ]
        answered = set(frame["question_id"].astype(str))
        unasked = {q: why for q, why in not_asked.get(system, {}).items() if q in by_id}
        missing[system] = [q for q in by_id if q not in answered and q not in unasked]
        if unasked:
            reasons = ", ".join(sorted(set(unasked.values())))
            notes.append(
                f"{system}: {len(unasked)} question(s) not asked ({reasons}), left out of its "
                "accuracy: not failures"
            )
    return JudgePlan(
        dataset, mode, scored, len(questions), excluded, items, missing, answers, notes
    )


def judge_item(
    dataset: str, system: str, question: Mapping[str, Any], answer: Mapping[str, Any], mode: str
) -> JudgeItem:
    qid = str(question["question_id"])
    category = as_text(question.get("category"))
    options = as_list(question.get("options"))
    error = as_text(answer.get("error")) or None
    answer_mode = as_text(answer.get("mode"))
    if answer_mode and answer_mode != mode:
        raise ValueError(
            f"answers of {system!r} were produced in mode {answer_mode!r} but the judge runs in "
            f"mode {mode!r}: set the same mode in both notebooks"
        )
    choice = None
    if mode == "multiple_choice":
        if not options:
            raise ValueError(f"question {qid!r} has no options for multiple choice")
        choice = multiple_choice(qid, options)
    return JudgeItem(
        dataset=dataset,
        system=system,
        question_id=qid,
        conversation_id=str(question["conversation_id"]),
        category=category,
        question=str(question["question"]),
        reference=str(question["answer"]),
        response=as_text(answer.get("answer")),
        instruction=choose_instruction(
            dataset, category, qid, is_abstention=bool(question.get("is_abstention"))
        ),
        is_abstention=bool(question.get("is_abstention")),
        adversarial_answer=as_text(question.get("adversarial_answer")),
        wrong_options=tuple(options[1:]) if dataset in WITH_OPTIONS else (),
        answer_error=error,
        choice=choice,
    )


def system_inventory(ds: DatasetPaths) -> pd.DataFrame:
    """The paper's three systems, whether their answers exist, and the optional baselines found."""
    found = answer_systems(ds)
    paper = [PAPER_MEMORY] + [system_name("long_context", m) for m in LONG_CONTEXT_MODELS]
    rows = []
    for system in paper:
        rows.append(
            {
                "system": system,
                "kind": system_kind(system),
                "in_paper": True,
                "present": system in found,
                "writer": _writer(system),
            }
        )
    for system in found:
        if system not in paper:
            rows.append(
                {
                    "system": system,
                    "kind": system_kind(system),
                    "in_paper": False,
                    "present": True,
                    "writer": _writer(system),
                }
            )
    for kind in SYSTEM_KINDS[2:]:
        if not any(system_kind(s) == kind for s in found):
            rows.append(
                {
                    "system": f"{kind}_<model>",
                    "kind": kind,
                    "in_paper": False,
                    "present": False,
                    "writer": _writer(kind),
                }
            )
    return pd.DataFrame(rows)


def _writer(system: str) -> str:
    memory = system.partition("_")[0] == "memory"  # a system, or a bare kind
    return "02_answer_from_memory" if memory else "03_answer_long_context"


__all__ = [
    "JudgeItem",
    "JudgePlan",
    "as_list",
    "as_text",
    "load_questions",
    "plan_judging",
    "scored_questions",
    "system_inventory",
]
