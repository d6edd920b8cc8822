"""The judge (study §3.4): three votes per answer, dataset-aware grading, honest accuracy tables.

An LLM reads the question, the benchmark's reference and a system's response, and says CORRECT
or WRONG as JSON with a one-sentence reason. Each answer is judged ``n_votes`` times (distinct
``sample_index``, so neither the disk cache nor the in-flight de-duplication collapses them);
the paper reports the majority, the EverMemOS framework the mean ± std of the votes' accuracies.

What the judge is told depends on the benchmark and the question type, as in each benchmark's
own evaluation: LongMemEval tolerates off-by-one day counts for temporal questions, accepts old
plus updated information for knowledge updates, treats the preference answer as a rubric and
expects "not available" for abstention (``_abs``) questions; LoCoMo's adversarial category 5 is
left out by default (Mem0, EverMemOS) and, when included, expects "not mentioned"; PersonaMem v2
is judged against its correct reply (open-ended) or by the option letter (multiple choice).

Offline there is no LLM: a **lexical** rule (normalised token F1 and containment of the
reference's content words, thresholds below) stands in, and every output names it ``lexical``.
A judge reply that stays unparseable after the client's re-asks is ``UNJUDGED`` — shown,
counted and excluded, never silently WRONG.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memcost import paper, stats
from memcost.answers import SYSTEM_KINDS, answer_systems, load_answers, system_kind, system_name
from memcost.calls import OFFLINE
from memcost.choices import MC_SALT, MODES, MultipleChoice, multiple_choice, parse_choice
from memcost.datasets import DATASETS
from memcost.io import JsonlAppender, atomic_open, read_jsonl
from memcost.judgments import JUDGMENT_FIELDS, primary  # noqa: F401 - the file's owner
from memcost.judgments import read_judgments as load_judgments  # noqa: F401
from memcost.llm import ChatRequest, ChatResult, parse_json_object
from memcost.models import JUDGE_MODEL, LONG_CONTEXT_MODELS
from memcost.paths import DatasetPaths
from memcost.prompts import JUDGE_PROMPTS, Prompt
from memcost.prompts import get as get_prompt
from memcost.text import containment, content_words, token_f1, words
from memcost.tokens import count_tokens_batch

CORRECT, WRONG, UNJUDGED = stats.CORRECT, stats.WRONG, stats.UNJUDGED
LEXICAL = "lexical"  # judge_model of every offline vote: a word-overlap rule, not an LLM
LETTER_MATCH = "letter_match"  # judge_model of multiple-choice votes: the letter is compared
RULE = "rule"  # backend of multiple-choice votes and of answers that could not be judged




# ---------------------------------------------------------------------------------------------
# Dataset-aware grading instructions
# ---------------------------------------------------------------------------------------------
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
_LME_TYPES = {
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
        if category not in _LME_TYPES:
            raise ValueError(
                f"LongMemEval question {question_id!r} has type {category!r}, which has no "
                f"grading instruction (known: {', '.join(_LME_TYPES)})"
            )
        return INSTRUCTIONS[_LME_TYPES[category]]
    if dataset == "personamem_v2":
        return INSTRUCTIONS["personamem"]
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {', '.join(DATASETS)}")


# ---------------------------------------------------------------------------------------------
# What is judged
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgeItem:
    """One system's answer to one question, with everything the judge needs."""

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
    """Which questions are scored and which answers are judged, with the counts to print."""

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
            rows.append({
                "system": system,
                "answers": len(self.answers[system]),
                "scored": len(items),
                "answer_errors": sum(i.answer_error is not None for i in items),
                "missing_answers": len(self.missing_answers[system]),
            })
        return pd.DataFrame(rows)

    def describe(self) -> str:
        left_out = ", ".join(f"{n} {why}" for why, n in self.excluded.items() if n) or "none"
        text = (f"{self.dataset}: scoring {len(self.questions)} of {self.all_questions} "
                f"questions (left out: {left_out}); mode {self.mode}; "
                f"{len(self.items)} systems: {', '.join(self.items)}")
        return "\n".join([text, *(f"NOTE: {n}" for n in self.notes)])


def load_questions(ds: DatasetPaths) -> pd.DataFrame:
    """``data/questions.parquet``; missing means notebook 00 has not run for this dataset."""
    if not ds.questions.is_file():
        raise FileNotFoundError(
            f"{ds.questions}: no questions; run notebooks/00_prepare_data.ipynb for dataset "
            f"{ds.name!r} first"
        )
    return pd.read_parquet(ds.questions)


def scored_questions(
    questions: pd.DataFrame, dataset: str, *, include_adversarial: bool = False
) -> tuple[pd.DataFrame, dict[str, int]]:
    """The questions that count for accuracy, and how many were left out and why.

    LoCoMo's adversarial category (5) is left out unless ``include_adversarial``: Mem0's and
    EverMemOS's evaluations score the other 1,540 questions, and category 5 has no gold answer.
    """
    excluded: dict[str, int] = {}
    keep = pd.Series(True, index=questions.index)
    if dataset == "locomo" and not include_adversarial:
        adversarial = questions["category"].astype(str) == "adversarial"
        excluded["adversarial (LoCoMo category 5)"] = int(adversarial.sum())
        keep &= ~adversarial
    return questions.loc[keep].reset_index(drop=True), excluded


def _options(value: Any) -> list[str]:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(v) for v in list(value)]


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return ""
    return str(value)


def plan_judging(
    ds: DatasetPaths,
    questions: pd.DataFrame,
    *,
    dataset: str,
    systems: Sequence[str] = (),
    include_adversarial: bool = False,
    mode: str = "open_ended",
) -> JudgePlan:
    """Read the answer files and pair every answer with its question.

    ``systems`` empty: every answers file in the dataset folder. A named system without a file
    is an error naming the notebook that writes it; answers to question ids the dataset does not
    have are an error (they belong to another dataset or another selection of it).
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    notes = []
    if mode == "multiple_choice" and dataset != "personamem_v2":
        # A preset may set the mode for every dataset; only PersonaMem v2 has options.
        notes.append(f"mode 'multiple_choice' applies to personamem_v2 only; {dataset} is "
                     "judged open-ended")
        mode = "open_ended"
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
    for system in chosen:
        system_kind(system)
        frame = load_answers(ds, system)
        answers[system] = frame
        ids = frame["question_id"].astype(str)
        stray = sorted(set(ids) - known)
        if stray:
            raise ValueError(
                f"{ds.answers_file(system)}: {len(stray)} answers to question ids that dataset "
                f"{dataset!r} does not have (e.g. {stray[:5]}); the answers come from another "
                "dataset or another selection of it: rerun the answering notebook"
            )
        mine = []
        for record in frame.to_dict("records"):
            qid = str(record["question_id"])
            if qid in by_id:
                mine.append(_item(dataset, system, by_id[qid], record, mode))
        items[system] = mine
        answered = set(ids)
        missing[system] = [q for q in by_id if q not in answered]
    return JudgePlan(dataset, mode, scored, len(questions), excluded, items, missing, answers,
                     notes)


def _item(dataset: str, system: str, question: Mapping[str, Any], answer: Mapping[str, Any],
          mode: str) -> JudgeItem:
    qid = str(question["question_id"])
    category = _text(question.get("category"))
    options = _options(question.get("options"))
    error = _text(answer.get("error")) or None
    answer_mode = _text(answer.get("mode"))
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
        response=_text(answer.get("answer")),
        instruction=choose_instruction(dataset, category, qid,
                                       is_abstention=bool(question.get("is_abstention"))),
        is_abstention=bool(question.get("is_abstention")),
        adversarial_answer=_text(question.get("adversarial_answer")),
        wrong_options=tuple(options[1:]) if dataset == "personamem_v2" else (),
        answer_error=error,
        choice=choice,
    )


# ---------------------------------------------------------------------------------------------
# Requests, the reply parser and the offline (lexical) judge
# ---------------------------------------------------------------------------------------------
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
                    stage="judge",
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
    "judge_lenient": LexicalRule(containment=0.4, f1=0.3, need_both=False, rubric=0.1,
                                 option_f1=0.05),
    "judge_strict": LexicalRule(containment=0.8, f1=0.4, need_both=True, rubric=0.3,
                                option_f1=0.2),
}

_NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
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


def _numerals(text: str) -> str:
    """Number words as digits and ordinals without suffix, so "three" meets "3" and "9th" "9"."""
    text = _ORDINAL.sub(r"\1", text)
    return re.sub(r"[A-Za-z]+", lambda m: _NUMBER_WORDS.get(m.group(0).lower(), m.group(0)), text)


def abstains(text: str) -> bool:
    """Does the response say the information is not there?"""
    return bool(_ABSTAIN.search(text))


def lexical_verdict(item: JudgeItem, prompt_name: str = "judge") -> tuple[str, str]:
    """``(label, reason)`` of the offline judge: word overlap, with the benchmark's special cases.

    Abstention questions (LongMemEval ``_abs``, LoCoMo category 5) are CORRECT exactly when the
    response abstains; LongMemEval temporal counts accept off-by-one; preference rubrics and
    PersonaMem replies use the looser rules of :class:`LexicalRule`.
    """
    rule = LEXICAL_RULES[prompt_name]
    response, reference = _numerals(item.response), _numerals(item.reference)
    if not response.strip():
        return WRONG, "lexical: empty response"
    key = item.instruction.key
    if key in ("lme_abstention", "locomo_adversarial"):
        if abstains(response):
            return CORRECT, "lexical: the response says the information is not available"
        trap = containment(item.adversarial_answer, response) if item.adversarial_answer else 0.0
        extra = f" (it matches the trap answer {trap:.2f})" if trap >= 0.5 else ""
        return WRONG, f"lexical: the response answers an unanswerable question{extra}"
    if abstains(response) and containment(reference, response) < rule.containment:
        return WRONG, "lexical: the response abstains but the reference gives an answer"
    if key == "lme_temporal":
        gold = _COUNT.search(reference)
        if gold:
            n, unit = int(gold.group(1)), gold.group(2)
            said = {int(m.group(1)) for m in _COUNT.finditer(response) if m.group(2) == unit}
            if said & {n - 1, n, n + 1}:
                return CORRECT, f"lexical: {sorted(said)} {unit}s is within one of {n}"
    if key == "personamem":
        to_ref = token_f1(response, reference)
        to_wrong = max((token_f1(response, _numerals(o)) for o in item.wrong_options), default=0.0)
        ok = to_ref > to_wrong and to_ref >= rule.option_f1
        return (CORRECT if ok else WRONG,
                f"lexical: token F1 {to_ref:.2f} with the reference reply vs {to_wrong:.2f} with "
                f"the closest wrong option (needs more, and at least {rule.option_f1})")
    cover = containment(reference, response)
    if key == "lme_preference":
        ok = cover >= rule.rubric
        return (CORRECT if ok else WRONG,
                f"lexical: {cover:.2f} of the rubric's content words appear (needs {rule.rubric})")
    f1 = token_f1(response, reference)
    hits = (cover >= rule.containment, f1 >= rule.f1)
    ok = all(hits) if rule.need_both else any(hits)
    joiner = "and" if rule.need_both else "or"
    return (CORRECT if ok else WRONG,
            f"lexical: containment {cover:.2f}, token F1 {f1:.2f} (needs containment >= "
            f"{rule.containment} {joiner} F1 >= {rule.f1})")


def lexical_judge(request: ChatRequest) -> str:
    """The offline method of the judge stage: the lexical verdict as the JSON an LLM would give."""
    payload: JudgePayload = request.payload
    label, reason = lexical_verdict(payload.item, payload.prompt_name)
    return json.dumps({"reason": reason, "label": label})


# ---------------------------------------------------------------------------------------------
# Records and the run
# ---------------------------------------------------------------------------------------------
def _record(item: JudgeItem, *, vote: int, label: str, reason: str, judge_model: str,
            backend: str, prompt_name: str, prompt_version: str, mode: str, primary: bool,
            unjudged_cause: str | None = None, request_hash: str | None = None) -> dict[str, Any]:
    return {
        "question_id": item.question_id,
        "conversation_id": item.conversation_id,
        "system": item.system,
        "category": item.category,
        "vote": vote,
        "label": label,
        "reason": reason,
        "judge_model": judge_model,
        "backend": backend,
        "prompt_name": prompt_name,
        "prompt_version": prompt_version,
        "instruction": item.instruction.key,
        "mode": mode,
        "primary": primary,
        "unjudged_cause": unjudged_cause,
        "request_hash": request_hash,
    }


def rule_records(items: Sequence[JudgeItem], *, mode: str, prompt_names: Sequence[str],
                 n_votes: int, judge_label: str = LEXICAL) -> list[dict[str, Any]]:
    """Votes that need no judge call.

    An answer whose answering call failed is ``UNJUDGED`` (cause ``answer``) under every prompt
    and vote: it is counted apart, and as wrong only in the strict accuracy. A multiple-choice
    answer is one exact-match vote on its letter (a rule has no sampling noise to vote away).
    """
    out = []
    for item in items:
        if item.choice is not None:
            version = f"{LETTER_MATCH}@v1+{MC_SALT}"
            if item.answer_error is not None:
                out.append(_record(item, vote=0, label=UNJUDGED,
                                   reason=f"not judged: answering failed ({item.answer_error})",
                                   judge_model=LETTER_MATCH, backend=RULE,
                                   prompt_name=LETTER_MATCH, prompt_version=version, mode=mode,
                                   primary=True, unjudged_cause="answer"))
                continue
            letter = parse_choice(item.response, item.choice)
            if letter is None:
                label, reason = WRONG, "the answer names no single option letter"
            elif letter == item.choice.correct_letter:
                label, reason = CORRECT, f"picked {letter}, the correct option"
            else:
                label, reason = WRONG, (f"picked {letter}; the correct option is "
                                        f"{item.choice.correct_letter}")
            out.append(_record(item, vote=0, label=label, reason=reason,
                               judge_model=LETTER_MATCH, backend=RULE, prompt_name=LETTER_MATCH,
                               prompt_version=version, mode=mode, primary=True))
        elif item.answer_error is not None:
            for index, name in enumerate(prompt_names):
                prompt = judge_prompt(name)
                for vote in range(n_votes):
                    out.append(_record(
                        item, vote=vote, label=UNJUDGED,
                        reason=f"not judged: answering failed ({item.answer_error})",
                        judge_model=judge_label, backend=RULE, prompt_name=name,
                        prompt_version=prompt_version(prompt, item.instruction), mode=mode,
                        primary=index == 0, unjudged_cause="answer"))
    return out


def _request_identity(client: Any, model: str) -> str:
    endpoint = client.endpoint_for(model)
    return OFFLINE if endpoint is None else endpoint.identity


def _vote_key(request_hash: Any, system: Any, question_id: Any, vote: Any) -> tuple:
    return (str(request_hash), str(system), str(question_id), int(vote))


@dataclass
class JudgingRun:
    """What :func:`run_judging` did: all votes, and the counts to print."""

    judgments: pd.DataFrame
    sent: int  # votes asked of the judge this time
    reused: int  # votes kept from an earlier run of this notebook (same request, same answer)
    dropped: int  # earlier votes that no longer apply (other answers, prompts or settings)
    rule_votes: int
    judge_label: str  # "lexical" offline, the model otherwise


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
    """Judge every answer of the plan, appending each vote to ``judgments.jsonl`` as it arrives.

    Votes already in the file for the very same request (same prompt, instruction, answer, judge
    model and vote) are kept, so an interrupted notebook resumes where it stopped; votes that
    no longer apply, and ``UNJUDGED`` votes from a failed judge call, are dropped and asked again.
    The first prompt of ``prompt_names`` is the primary one (Table 3); the others feed the
    judge-sensitivity table.
    """
    prompt_names = list(prompt_names)
    if not prompt_names:
        raise ValueError("judge_prompts must name at least one prompt")
    for name in prompt_names:
        judge_prompt(name)
    path = Path(path)
    items = [i for system in plan.items.values() for i in system]
    identity = _request_identity(client, judge_model)
    offline = identity == OFFLINE
    judge_label = LEXICAL if offline else judge_model

    requests: list[ChatRequest] = []
    primary_of: dict[str, bool] = {}
    if plan.mode != "multiple_choice":
        for index, name in enumerate(prompt_names):
            batch = judge_requests(items, judge_model=judge_model, prompt_name=name,
                                   n_votes=n_votes, reasoning_effort=reasoning_effort,
                                   max_output_tokens=max_output_tokens)
            primary_of[name] = index == 0
            requests += batch
    keyed = {
        _vote_key(r.key(identity), r.tags["system"], r.tags["question_id"], r.sample_index): r
        for r in requests
    }

    kept: list[dict[str, Any]] = []
    earlier = read_jsonl(path, missing_ok=True)
    for record in earlier:
        if record.get("backend") == RULE or record.get("label") == UNJUDGED:
            continue
        key = _vote_key(record.get("request_hash"), record.get("system"),
                        record.get("question_id"), record.get("vote", -1))
        if key in keyed:
            record["primary"] = primary_of.get(str(record.get("prompt_name")), False)
            kept.append(record)
    done = {_vote_key(r["request_hash"], r["system"], r["question_id"], r["vote"]) for r in kept}
    rules = rule_records(items, mode=plan.mode, prompt_names=prompt_names, n_votes=n_votes,
                         judge_label=judge_label)
    # The file now holds exactly what still applies, in the order and the line format a first
    # run leaves (rule votes, then judge votes as they arrived, as JsonlAppender writes them):
    # a rerun with nothing left to ask rewrites it byte for byte.
    with atomic_open(path) as handle:
        for record in [*rules, *kept]:
            line = json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":"))
            handle.write(line + "\n")
    dropped = sum(r.get("backend") != RULE for r in earlier) - len(kept)

    pending = [r for k, r in keyed.items() if k not in done]
    appender = JsonlAppender(path, fsync=False)

    def write(result: ChatResult) -> None:
        payload: JudgePayload = result.request.payload
        request = result.request
        common = dict(vote=request.sample_index, judge_model=judge_label,
                      backend=result.backend,
                      prompt_name=payload.prompt_name, prompt_version=request.prompt_version,
                      mode=plan.mode, primary=primary_of[payload.prompt_name],
                      request_hash=request.key(identity))
        if result.error is not None or result.parse_error is not None:
            why = result.error or result.parse_error
            record = _record(payload.item, label=UNJUDGED, reason=f"judge failed: {why}",
                             unjudged_cause="judge", **common)
        else:
            record = _record(payload.item, label=result.parsed["label"],
                             reason=result.parsed["reason"], **common)
        appender.write(record)

    try:
        if pending:
            client.chat_many(pending, offline=lexical_judge, parse=parse_verdict,
                             on_result=write, desc=f"judge {plan.dataset}")
    finally:
        appender.close()
    return JudgingRun(
        judgments=load_judgments(path),
        sent=len(pending),
        reused=len(kept),
        dropped=dropped,
        rule_votes=len(rules),
        judge_label=judge_label if plan.mode != "multiple_choice" else LETTER_MATCH,
    )


# ---------------------------------------------------------------------------------------------
# Systems: what is there, what is missing
# ---------------------------------------------------------------------------------------------
def system_inventory(ds: DatasetPaths) -> pd.DataFrame:
    """The paper's three systems, whether their answers exist, and the optional variants found.

    Memory and long context with each model are Table 3; rolling window, no context and oracle
    are this repository's extra baselines (notebook 03) and optional.
    """
    found = answer_systems(ds)
    paper = [system_name("memory")] + [system_name("long_context", m) for m in LONG_CONTEXT_MODELS]
    rows = []
    for system in paper:
        rows.append({"system": system, "kind": system_kind(system), "in_paper": True,
                     "present": system in found, "writer": _writer(system)})
    for system in found:
        if system not in paper:
            rows.append({"system": system, "kind": system_kind(system), "in_paper": False,
                         "present": True, "writer": _writer(system)})
    for kind in SYSTEM_KINDS[2:]:
        if not any(system_kind(s) == kind for s in found):
            rows.append({"system": f"{kind}_<model>", "kind": kind, "in_paper": False,
                         "present": False, "writer": _writer(kind)})
    return pd.DataFrame(rows)


def _writer(system: str) -> str:
    return "02_answer_from_memory" if system == "memory" else "03_answer_long_context"


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------
def question_outcomes(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per prompt, system and question: the majority label and why it may be missing.

    Adds ``conversation_id``, ``category`` and ``cause`` (``answer`` when answering failed,
    ``judge`` when the judge never gave a verdict, else null).
    """
    keys = ["prompt_name", "system", "question_id"]
    votes = stats.majority_votes(judgments, keys)
    if votes.empty:
        return votes.assign(conversation_id=[], category=[], cause=[])
    first = judgments.groupby(keys, sort=True)[["conversation_id", "category"]].first()
    causes = (judgments.dropna(subset=["unjudged_cause"]).groupby(keys)["unjudged_cause"]
              .agg(lambda s: "answer" if "answer" in set(s) else "judge"))
    out = votes.join(first, on=keys).join(causes.rename("cause"), on=keys)
    out.loc[out["judged"], "cause"] = None
    return out


def _interval_row(correct: np.ndarray, clusters: np.ndarray, *, n_resamples: int,
                  seed: int) -> dict[str, float]:
    k, n = int(correct.sum()), int(correct.size)
    low, high = stats.wilson_interval(k, n)
    b_low, b_high = stats.cluster_bootstrap_interval(correct, clusters, n_resamples=n_resamples,
                                                     seed=seed)
    return {"wilson_low": low, "wilson_high": high, "bootstrap_low": b_low,
            "bootstrap_high": b_high}


def accuracy_table(
    judgments: pd.DataFrame,
    *,
    dataset: str,
    missing_answers: Mapping[str, Sequence[str]] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Table 3 for one dataset: one row per system, from the primary prompt's votes.

    ``accuracy`` is the majority accuracy over judged questions, with its Wilson and
    dialogue-cluster bootstrap 95% intervals; ``strict_accuracy`` counts answer errors and
    unjudged questions as wrong (= correct / n, the paper's "correct / all questions" when
    nothing failed); ``vote_mean ± vote_std`` is the EverMemOS-style spread of the votes' own
    accuracies.
    """
    main = primary(judgments)
    outcomes = question_outcomes(main)
    spread = stats.mean_std_over_votes(main, ["system"]).set_index("system")
    judges = main.loc[main["unjudged_cause"].ne("answer")]  # votes a judge actually gave
    rows = []
    for system, part in outcomes.groupby("system", sort=False):
        judged = part.loc[part["judged"]]
        correct = judged["correct"].to_numpy(dtype=bool)
        row = {
            "dataset": dataset,
            "system": system,
            "kind": system_kind(system),
            "judge_model": _single(judges.loc[judges["system"] == system, "judge_model"]),
            "backend": _single(judges.loc[judges["system"] == system, "backend"]),
            "prompt_name": _single(part["prompt_name"]),
            "n": len(part),
            "judged": len(judged),
            "correct": int(correct.sum()),
            "accuracy": correct.mean() if correct.size else math.nan,
            **_interval_row(correct, judged["conversation_id"].to_numpy(dtype=object),
                            n_resamples=n_resamples, seed=seed),
            "vote_mean": spread.loc[system, "vote_mean"] if system in spread.index else math.nan,
            "vote_std": spread.loc[system, "vote_std"] if system in spread.index else math.nan,
            "votes_per_question": int(main.loc[main["system"] == system]
                                      .groupby("question_id").size().max()),
            "strict_accuracy": correct.sum() / len(part) if len(part) else math.nan,
            "unjudged": int((~part["judged"]).sum()),
            "answer_errors": int((part["cause"] == "answer").sum()),
            "judge_failures": int((part["cause"] == "judge").sum()),
            "missing_answers": len((missing_answers or {}).get(system, ())),
            "conversations": int(judged["conversation_id"].nunique()),
            "bootstrap_resamples": n_resamples,
            "bootstrap_seed": seed,
        }
        rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        order = {s: (SYSTEM_KINDS.index(system_kind(s)), s) for s in table["system"]}
        table = table.sort_values("system", key=lambda s: s.map(order)).reset_index(drop=True)
    return table


def _single(values: pd.Series) -> str:
    found = sorted({str(v) for v in values.dropna()})
    return found[0] if len(found) == 1 else "+".join(found)


def category_table(judgments: pd.DataFrame, *, dataset: str) -> pd.DataFrame:
    """Accuracy per system and question category (majority of the primary prompt's votes)."""
    outcomes = question_outcomes(primary(judgments))
    rows = []
    for (system, category), part in outcomes.groupby(["system", "category"], sort=True):
        judged = part.loc[part["judged"]]
        k, n = int(judged["correct"].sum()), len(judged)
        low, high = stats.wilson_interval(k, n)
        rows.append({"dataset": dataset, "system": system, "category": category, "n": len(part),
                     "judged": n, "correct": k, "accuracy": k / n if n else math.nan,
                     "wilson_low": low, "wilson_high": high,
                     "strict_accuracy": k / len(part) if len(part) else math.nan})
    return pd.DataFrame(rows)


def mcnemar_table(judgments: pd.DataFrame, *, dataset: str, baseline: str = "memory"
                  ) -> pd.DataFrame:
    """Exact McNemar between ``baseline`` and every other system, on the questions both had
    judged (the primary prompt's majority). The pairing is what makes it fair: both systems
    answered the same questions, so only the questions where they disagree say which is better.
    """
    outcomes = question_outcomes(primary(judgments))
    judged = outcomes.loc[outcomes["judged"]]
    wide = judged.pivot(index="question_id", columns="system", values="correct")
    rows = []
    if baseline not in wide.columns:
        return pd.DataFrame(columns=["dataset", "system_a", "system_b", "n_paired", "p_value"])
    for other in wide.columns:
        if other == baseline:
            continue
        pair = wide[[baseline, other]].dropna()
        a, b = pair[baseline].astype(bool).to_numpy(), pair[other].astype(bool).to_numpy()
        result = stats.mcnemar_exact(a, b)
        rows.append({
            "dataset": dataset, "system_a": baseline, "system_b": other,
            "kind_b": system_kind(other), "n_paired": result.n,
            "both_correct": result.both_correct, "a_only_correct": result.a_only,
            "b_only_correct": result.b_only, "both_wrong": result.both_wrong,
            "accuracy_a": a.mean() if a.size else math.nan,
            "accuracy_b": b.mean() if b.size else math.nan,
            "difference_b_minus_a": (b.mean() - a.mean()) if a.size else math.nan,
            "p_value": result.p_value, "significant_5pct": result.p_value < 0.05,
        })
    return pd.DataFrame(rows)


def answer_length_table(judgments: pd.DataFrame, answers: Mapping[str, pd.DataFrame], *,
                        dataset: str) -> pd.DataFrame:
    """Answer length (o200k tokens) against judged correctness, per system.

    ``auc_longer_correct`` is the probability that a randomly chosen correct answer is longer
    than a randomly chosen wrong one (0.5: length says nothing). Lenient judges reward verbose
    answers, so a system that wins mostly by writing more shows up here (study §10).
    """
    from scipy.stats import mannwhitneyu

    outcomes = question_outcomes(primary(judgments))
    rows = []
    for system, part in outcomes.loc[outcomes["judged"]].groupby("system", sort=False):
        frame = answers.get(system)
        if frame is None or frame.empty:
            continue
        texts = frame.set_index(frame["question_id"].astype(str))["answer"].fillna("").astype(str)
        part = part.loc[part["question_id"].isin(texts.index)]
        lengths = np.array(count_tokens_batch(texts.loc[part["question_id"]].tolist()), dtype=float)
        ok = part["correct"].to_numpy(dtype=bool)
        good, bad = lengths[ok], lengths[~ok]
        auc = math.nan
        if good.size and bad.size:
            auc = float(mannwhitneyu(good, bad).statistic) / (good.size * bad.size)
        rows.append({
            "dataset": dataset, "system": system, "answers": int(lengths.size),
            "median_tokens": float(np.median(lengths)) if lengths.size else math.nan,
            "correct": int(good.size), "wrong": int(bad.size),
            "median_tokens_correct": float(np.median(good)) if good.size else math.nan,
            "median_tokens_wrong": float(np.median(bad)) if bad.size else math.nan,
            "mean_tokens_correct": float(good.mean()) if good.size else math.nan,
            "mean_tokens_wrong": float(bad.mean()) if bad.size else math.nan,
            "auc_longer_correct": auc,
        })
    return pd.DataFrame(rows)


def sensitivity_table(judgments: pd.DataFrame, *, dataset: str) -> pd.DataFrame:
    """Accuracy of every system under every judge prompt, and each system's gap to memory under
    the same prompt: if the gap moves with the prompt, part of it is the judge's."""
    outcomes = question_outcomes(judgments)
    rows = []
    for (name, system), part in outcomes.groupby(["prompt_name", "system"], sort=True):
        judged = part.loc[part["judged"]]
        rows.append({"dataset": dataset, "prompt_name": name, "system": system,
                     "n": len(part), "judged": len(judged),
                     "accuracy": judged["correct"].mean() if len(judged) else math.nan,
                     "strict_accuracy": judged["correct"].sum() / len(part)})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    memory = table.loc[table["system"] == "memory"].set_index("prompt_name")["accuracy"]
    table["gap_to_memory"] = table["accuracy"] - table["prompt_name"].map(memory)
    return table


# ---------------------------------------------------------------------------------------------
# Failure analysis (the paper's Table 6)
# ---------------------------------------------------------------------------------------------
TAG_TEMPORAL = "temporal marker lost"
TAG_UPDATE = "update not propagated"
TAG_COREFERENCE = "coreference"
TAG_NOT_RETRIEVED = "answer not in retrieved facts"
TAG_NONE = "untagged"
FAILURE_TAGS = (TAG_TEMPORAL, TAG_UPDATE, TAG_COREFERENCE, TAG_NOT_RETRIEVED, TAG_NONE)

_MONTHS = ("january february march april may june july august september october november "
           "december jan feb mar apr jun jul aug sep sept oct nov dec")
_DATE = re.compile(
    r"\b(?:" + "|".join(_MONTHS.split()) + r"|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)\b|\b(?:19|20)\d\d\b|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}\b",
    re.IGNORECASE,
)
_TEMPORAL_Q = re.compile(
    r"^\s*when\b|\bwhat (?:date|day|month|year|time)\b|\bhow long\b|"
    r"\bhow many (?:days|weeks|months|years)\b|\bwhich .* first\b", re.IGNORECASE)
_UPDATE_Q = re.compile(
    r"\b(?:now|currently|current|these days|anymore|still|latest|most recent|change[ds]?)\b",
    re.IGNORECASE)
_PRONOUN = re.compile(r"\b(?:he|she|they|him|her|his|hers|their|them|the user|user|someone|"
                      r"a friend|the person)\b", re.IGNORECASE)
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+)\b")


def _names(*texts: str) -> set[str]:
    """Capitalised words that are not the first word: the people and places a question names."""
    found: set[str] = set()
    for text in texts:
        for match in _NAME.finditer(text):
            word = match.group(1)
            if word.lower() not in _MONTHS.split() and word.lower() not in {"i", "what", "when"}:
                found.add(word.lower())
    return found


def tag_failure(question: str, reference: str, category: str, memory_answer: str,
                facts: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """Heuristic tags for a question memory got wrong (``facts``: the retrieved facts, each
    with ``text`` and, when known, ``status``). ``None`` facts: nothing can be checked.

    - *temporal marker lost*: a when/how-long question, and no retrieved fact that shares a word
      with the question carries an absolute date (month, weekday, year, numeric date);
    - *update not propagated*: a question about the current state, and a retrieved fact is
      superseded/deleted, or the memory answer repeats a retrieved fact that lacks the reference;
    - *coreference*: the question names someone, the facts that match its other words never do,
      and one of them says "he", "she", "the user", ...;
    - *answer not in retrieved facts*: fewer than half the reference's content words appear in
      any retrieved fact (retrieval or extraction lost it).
    """
    if facts is None:
        return []
    tags: list[str] = []
    texts = [_text(f.get("text")) for f in facts]
    q_words = set(content_words(question)) - _names(question)
    relevant = [t for t in texts if q_words & set(content_words(t))]
    temporal = category in ("temporal", "temporal-reasoning") or bool(_TEMPORAL_Q.search(question))
    if temporal and not any(_DATE.search(t) for t in relevant):
        tags.append(TAG_TEMPORAL)
    update = category == "knowledge-update" or bool(_UPDATE_Q.search(question))
    stale = any(_text(f.get("status")) in ("superseded", "deleted") for f in facts)
    echoed = [t for t in texts if memory_answer.strip() and
              containment(memory_answer, t) >= 0.5 and containment(reference, t) < 0.5]
    if update and (stale or echoed):
        tags.append(TAG_UPDATE)
    names = _names(question)
    if names and relevant:
        named = any(names & set(words(t)) for t in relevant)
        if not named and any(_PRONOUN.search(t) for t in relevant):
            tags.append(TAG_COREFERENCE)
    union = " ".join(texts)
    if containment(_numerals(reference), _numerals(union)) < 0.5:
        tags.append(TAG_NOT_RETRIEVED)
    return tags or [TAG_NONE]


def load_facts(ds: DatasetPaths) -> pd.DataFrame | None:
    """``memory/facts.parquet`` (notebook 01), or ``None`` when it is not there."""
    path = ds.memory / "facts.parquet"
    return pd.read_parquet(path) if path.is_file() else None


def failure_analysis(
    judgments: pd.DataFrame,
    answers: Mapping[str, pd.DataFrame],
    questions: pd.DataFrame,
    facts: pd.DataFrame | None,
    *,
    memory: str = "memory",
    shown_facts: int = 5,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Questions a long-context system got right and memory got wrong, with the retrieved facts
    and heuristic tags (Table 6 style), and the count per tag.

    Without ``facts`` (notebook 01 not run, or its file gone) the rows are still listed, with
    the retrieved fact ids only and no tags.
    """
    outcomes = question_outcomes(primary(judgments))
    judged = outcomes.loc[outcomes["judged"]]
    wide = judged.pivot(index="question_id", columns="system", values="correct")
    lc = [s for s in wide.columns if system_kind(s) == "long_context"]
    empty = (pd.DataFrame(columns=["question_id", "tags"]),
             pd.DataFrame({"tag": list(FAILURE_TAGS), "questions": 0}))
    if memory not in wide.columns or not lc or memory not in answers:
        return empty
    memory_wrong = wide[memory].eq(False)
    lc_right = wide[lc].eq(True)
    chosen = wide.index[memory_wrong & lc_right.any(axis=1)]
    q = questions.set_index(questions["question_id"].astype(str))
    mem = answers[memory].set_index(answers[memory]["question_id"].astype(str))
    fact_table = None
    if facts is not None and not facts.empty:
        fact_table = facts.set_index(facts["fact_id"].astype(str))
    rows = []
    for qid in chosen:
        right = [s for s in lc if lc_right.loc[qid, s]]
        lc_answers = answers[right[0]].set_index(answers[right[0]]["question_id"].astype(str))
        ids = [str(i) for i in _options(mem.loc[qid].get("retrieved_fact_ids"))] \
            if qid in mem.index else []
        retrieved = None
        if fact_table is not None:
            retrieved = [
                {"fact_id": i, "text": _text(fact_table.loc[i, "text"]),
                 "status": _text(fact_table.loc[i].get("status")),
                 "session_datetime": _text(fact_table.loc[i].get("session_datetime"))}
                for i in ids if i in fact_table.index
            ]
        question, reference = str(q.loc[qid, "question"]), str(q.loc[qid, "answer"])
        category = _text(q.loc[qid, "category"])
        memory_answer = _text(mem.loc[qid, "answer"]) if qid in mem.index else ""
        tags = tag_failure(question, reference, category, memory_answer, retrieved)
        shown = ""
        if retrieved:
            shown = " | ".join(
                f"[{f['session_datetime'][:10] or 'no date'}] {f['text']}"
                for f in retrieved[:shown_facts]
            )
        rows.append({
            "question_id": qid, "conversation_id": str(q.loc[qid, "conversation_id"]),
            "category": category, "question": question, "reference": reference,
            "memory_answer": memory_answer, "long_context_systems": ", ".join(right),
            "long_context_answer": _text(lc_answers.loc[qid, "answer"]),
            "retrieved": len(ids), "retrieved_facts": shown if retrieved is not None else
            "(facts.parquet not available: ids " + ", ".join(ids[:shown_facts]) + ")",
            "tags": "; ".join(tags),
        })
    table = pd.DataFrame(rows)
    counts = {tag: 0 for tag in FAILURE_TAGS}
    for value in table.get("tags", pd.Series(dtype=str)):
        for tag in filter(None, str(value).split("; ")):
            counts[tag] += 1
    return (table if not table.empty else empty[0],
            pd.DataFrame({"tag": list(counts), "questions": list(counts.values())}))


# ---------------------------------------------------------------------------------------------
# The paper's Table 3 next to this run's
# ---------------------------------------------------------------------------------------------
def comparability(answers: Mapping[str, pd.DataFrame], judge_backend: str, origin: str | None
                  ) -> tuple[bool, list[str]]:
    """Can this run's accuracies be set against the paper's? ``(ok, reasons they cannot)``."""
    reasons = []
    if judge_backend in (OFFLINE, LEXICAL):
        reasons.append("the judge is the offline lexical rule, not GPT-5-mini")
    offline = sorted(s for s, f in answers.items()
                     if not f.empty and (f["backend"].astype(str) == OFFLINE).any())
    if offline:
        reasons.append(f"answers of {', '.join(offline)} come from the offline backend")
    if origin == "sample":
        reasons.append("the data are the bundled synthetic samples, not the benchmark")
    elif origin is None:
        reasons.append("the data's origin is not recorded in the manifest")
    return (not reasons, reasons)


def paper_comparison(table3: pd.DataFrame, *, dataset: str, comparable: bool) -> pd.DataFrame:
    """The paper's Table 3 row for ``dataset`` next to this run's strict accuracy (both in %).

    The paper divides by all questions of the dataset, so the strict accuracy is the matching
    number; the majority over judged questions is shown too.
    """
    published = paper.TABLE3.get(dataset, {})
    mine = table3.set_index("system") if not table3.empty else pd.DataFrame()
    rows = []
    for system in [*published, *[s for s in mine.index if s not in published]]:
        here = mine.loc[system] if system in mine.index else None
        strict = 100 * float(here["strict_accuracy"]) if here is not None else math.nan
        rows.append({
            "dataset": dataset, "system": system,
            "paper_accuracy_pct": published.get(system, math.nan),
            "run_strict_accuracy_pct": strict,
            "run_accuracy_pct": 100 * float(here["accuracy"]) if here is not None else math.nan,
            "difference_pct": strict - published.get(system, math.nan),
            "comparable": comparable and system in published and here is not None,
        })
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Figure
# ---------------------------------------------------------------------------------------------
def plot_accuracy(table3: pd.DataFrame, categories: pd.DataFrame, *, dataset: str,
                  backend: str = "") -> Any:
    """Grouped bars: accuracy per system, overall and per category, with Wilson 95% intervals
    (overall: the dialogue-cluster bootstrap interval as a second, thicker whisker)."""
    import matplotlib.pyplot as plt

    from memcost import plots

    systems = list(table3["system"])
    groups = ["all"] + sorted(categories["category"].unique()) if not categories.empty else ["all"]
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(min(14.0, max(6.5, 0.42 * len(groups) * len(systems) + 2.5)),
                                    4.4))
    seen_kinds: dict[str, int] = {}
    for j, system in enumerate(systems):
        kind = system_kind(system)
        seen_kinds[kind] = seen_kinds.get(kind, 0) + 1
        hatch = ["", "//", "..", "xx"][(seen_kinds[kind] - 1) % 4]
        values, lows, highs = [], [], []
        for group in groups:
            if group == "all":
                row = table3.loc[table3["system"] == system].iloc[0]
            else:
                match = categories.loc[(categories["system"] == system)
                                       & (categories["category"] == group)]
                row = match.iloc[0] if not match.empty else None
            if row is None or pd.isna(row["accuracy"]):
                values.append(np.nan), lows.append(np.nan), highs.append(np.nan)
                continue
            values.append(row["accuracy"])
            lows.append(max(0.0, row["accuracy"] - row["wilson_low"]))
            highs.append(max(0.0, row["wilson_high"] - row["accuracy"]))
        x = np.arange(len(groups)) + (j - (len(systems) - 1) / 2) * width
        ax.bar(x, values, width * 0.92, color=plots.system_color(system), hatch=hatch,
               edgecolor="white", label=system)
        ax.errorbar(x, values, yerr=[lows, highs], fmt="none", ecolor="#333333", capsize=2,
                    linewidth=0.9)
        row = table3.loc[table3["system"] == system].iloc[0]
        if pd.notna(row["bootstrap_low"]):
            ax.vlines(x[0] + width * 0.22, row["bootstrap_low"], row["bootstrap_high"],
                      color="#444444", linewidth=3.2, alpha=0.6)
    ax.set_xticks(np.arange(len(groups)), [g.replace("-", "-\n", 1) if len(g) > 14 else g
                                           for g in groups], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy (majority of votes)")
    judge = _single(table3["judge_model"]) if not table3.empty else ""
    if judge == LEXICAL or backend == OFFLINE:
        judge = "the lexical rule (offline, not an LLM)"
    n = int(table3["n"].max()) if not table3.empty else 0
    ax.set_title(f"{dataset}: accuracy by system ({n} questions), judged by {judge}", loc="left",
                 fontsize=10)
    ax.text(0, -0.2, "thin whiskers: Wilson 95%; thick grey bar (overall): dialogue-cluster "
            "bootstrap 95%", transform=ax.transAxes, fontsize=7.5, color="#555555")
    ax.legend(fontsize=8, ncol=min(3, len(systems)), loc="upper left", bbox_to_anchor=(0, -0.26),
              frameon=False)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------
def step_metrics(table3: pd.DataFrame, plan: JudgePlan, run: JudgingRun, **extra: Any
                 ) -> dict[str, Any]:
    """What notebook 04 records: the accuracy numbers per system and the counts behind them."""
    def number(value: Any) -> float | None:
        return None if pd.isna(value) else round(float(value), 6)

    accuracy = {
        row.system: {
            "accuracy": number(row.accuracy), "strict_accuracy": number(row.strict_accuracy),
            "vote_mean": number(row.vote_mean), "vote_std": number(row.vote_std),
            "wilson_95": [number(row.wilson_low), number(row.wilson_high)],
            "bootstrap_95": [number(row.bootstrap_low), number(row.bootstrap_high)],
            "n": int(row.n), "judged": int(row.judged), "correct": int(row.correct),
            "unjudged": int(row.unjudged), "answer_errors": int(row.answer_errors),
            "judge_failures": int(row.judge_failures),
            "missing_answers": int(row.missing_answers),
            "judge_model": row.judge_model,
        }
        for row in table3.itertuples()
    }
    out = {
        "judge_model": run.judge_label,
        "mode": plan.mode,
        "systems": list(plan.items),
        "scored_questions": len(plan.questions),
        "all_questions": plan.all_questions,
        "excluded": plan.excluded,
        "accuracy": accuracy,
        "votes_sent": run.sent,
        "votes_reused": run.reused,
        "unjudged": int(table3["unjudged"].sum()) if not table3.empty else 0,
    }
    out.update({key: _jsonable(value) for key, value in extra.items()})
    return out


def _jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars unwrapped, NaN as null (the metrics file is JSON)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
