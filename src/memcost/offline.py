"""The offline backend's classical stand-ins, one per stage a model serves (docs/architecture.md,
"The offline backend"); every record they produce is labelled ``offline``."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from memcost import answers
from memcost.llm import ChatRequest
from memcost.stats import CORRECT, WRONG
from memcost.text import (
    BM25,
    STOPWORDS,
    containment,
    content_words,
    day_text,
    jaccard,
    split_sentences,
    spoken_datetime,
    token_f1,
    words,
)

_CAPTION = re.compile(r"\s*\[shares a photo: (.*?)\]\s*$", re.DOTALL)
_FIRST_PERSON = re.compile(
    r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours)\b",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(r"\b(my|mine|our|ours)\b", re.IGNORECASE)
_FILLER_START = re.compile(
    r"^\W*(hi|hey|hello|thanks|thank you|talk soon|take care|see you|bye|good ?night|"
    r"congrat\w*|no way|wow|oh|ouch|haha|lol|sounds|of course|same here|me too|sure|cool|"
    r"nice|great|anyway|guess what|ok|okay|yes|no|yeah)\b",
    re.IGNORECASE,
)
_PROPER_NOUN = re.compile(r"(?<=[a-z,;:] )[A-Z][a-zA-Z'&-]+")
_DIGIT = re.compile(r"\d")


def person_name(speaker: str) -> str:
    """LoCoMo's names as they are, a role as "the user" (as the extraction prompt names people)."""
    return "the user" if speaker.strip().lower() in ("user", "the user") else speaker


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def informative_sentence(sentence: str) -> bool:
    """Does this sentence say something about its speaker? Not: fewer than three content words, a
    question not about the speaker's own, a greeting; yes: it mentions the speaker, a number or a
    name, or is long enough to carry a fact."""
    content = content_words(sentence)
    if len(content) < 3:
        return False
    first_person = bool(_FIRST_PERSON.search(sentence))
    if sentence.rstrip().endswith("?") and not _POSSESSIVE.search(sentence):
        return False
    if _FILLER_START.match(sentence) and not first_person and len(content) < 5:
        return False
    return (
        first_person
        or bool(_DIGIT.search(sentence))
        or bool(_PROPER_NOUN.search(sentence))
        or len(content) >= 6
    )


def offline_fact_text(sentence: str, speaker: str, when: str | None, verb: str = "said") -> str:
    name = person_name(speaker)
    day = day_text(when)
    if day:
        return f"On {day}, {name} {verb}: {sentence}"
    return f"{capitalise(name)} {verb}: {sentence}"


def offline_extract(request: ChatRequest) -> str:
    """The person's informative sentences, prefixed with speaker and date, as the extraction
    prompt's JSON."""
    segment = request.payload
    facts = []
    for m in segment.person_messages:
        text, caption = m.text, None
        found = _CAPTION.search(text)
        if found:
            text, caption = text[: found.start()], found.group(1).strip()
        for line in text.splitlines():
            for sentence in split_sentences(line):
                if informative_sentence(sentence):
                    facts.append(
                        {
                            "text": offline_fact_text(
                                sentence, m.speaker, segment.session_datetime
                            ),
                            "speaker": m.speaker,
                            "turns": [m.number],
                        }
                    )
        if caption:
            facts.append(
                {
                    "text": offline_fact_text(
                        caption, m.speaker, segment.session_datetime, verb="shared a photo"
                    ),
                    "speaker": m.speaker,
                    "turns": [m.number],
                }
            )
    return json.dumps({"facts": facts}, ensure_ascii=False)


# Offline update rule: which words say "how much / how often" and which say "what about".
_NUMBER_WORDS = frozenset(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty
    ninety hundred thousand million half dozen once twice thrice""".split()
)
_UNIT = r"(?:day|week|month|year|fortnight)"
_FREQUENCY = re.compile(
    r"\b(?:(?:once|twice|thrice|\w+ times?|\w+ (?:days?|evenings?|mornings?|nights?|hours?|"
    rf"sessions?|class(?:es)?|runs?|lessons?)) (?:a|an|per|each|every) {_UNIT}"
    r"|daily|weekly|monthly|yearly|nightly|every (?:other )?"
    r"(?:day|week|month|year|morning|evening|night|weekend))\b",
    re.IGNORECASE,
)
_TIME_WORDS = frozenset(
    """times time daily weekly monthly yearly nightly every per day days week weeks month months
    year years morning mornings evening evenings night nights weekend weekends hour hours minute
    minutes""".split()
)
_NEGATION = re.compile(
    r"\b(no longer|not any ?more|any ?more|stopped|quit|gave up|no more|cancell?ed|moved out)\b",
    re.IGNORECASE,
)
# Verbs and adverbs too common to tell two facts' subjects apart.
_LIGHT_WORDS = frozenset(
    """go goes going went gone get gets getting got make makes making made take takes taking
    took have has had having start starts started starting like likes liked love loves loved
    want wants wanted need needs needed try tries tried trying use uses used feel feels felt
    think thinks thought know knows knew say says said still now just also much many lot lots
    bit thing things something really finally already always usually up new old last next
    """.split()
)
_MONTHS_DAYS = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
    thursdays fridays saturdays sundays""".split()
)
_OFFLINE_PREFIX = re.compile(r"^(?:On [^,:]{3,40}, )?[^:]{1,60}? (?:said|shared a photo): ")
NEAR_DUPLICATE_JACCARD = 0.7
SUBJECT_OVERLAP = 0.5


def _body(text: str) -> str:
    return _OFFLINE_PREFIX.sub("", text, count=1)


# The update rule compares each candidate with many stored facts and each fact with many
# candidates: a text's words, subject and values are worked out once (pure functions of it).
@lru_cache(maxsize=1 << 16)
def _content_set(body: str) -> frozenset[str]:
    return frozenset(content_words(body))


@lru_cache(maxsize=1 << 16)
def _value_kinds(text: str) -> dict[str, frozenset[str]]:  # read only by its callers
    """A fact's frequency phrases, counts, and whether it says something stopped."""
    frequencies = [" ".join(words(m.group(0))) for m in _FREQUENCY.finditer(text)]
    rest = _FREQUENCY.sub(" ", text)
    kinds = {
        "frequency": frozenset(frequencies),
        "count": frozenset(t for t in words(rest) if t in _NUMBER_WORDS or t.isdigit()),
    }
    if _NEGATION.search(text):
        kinds["negation"] = frozenset({"negated"})
    return {k: v for k, v in kinds.items() if v}


@lru_cache(maxsize=1 << 16)
def _subject(text: str, names: frozenset[str]) -> frozenset[str]:
    skip = {w for n in names for w in words(n)} | {"user"}
    return frozenset(
        w
        for w in content_words(text)
        if w.split("'")[0] not in STOPWORDS  # contractions: "i've", "it's"
        and w not in _NUMBER_WORDS
        and w not in _TIME_WORDS
        and w not in _LIGHT_WORDS
        and w not in _MONTHS_DAYS
        and w not in skip
        and not w.isdigit()
    )


def lexical_decision(candidate: str, memory: str, *, names: Iterable[str] = ()) -> str | None:
    """The offline update rule for one candidate against one stored fact: ``NOOP`` for a
    near-duplicate (contained, or Jaccard ≥ 0.7); ``UPDATE`` when they share a subject word and a
    frequency changed, or (half the subject words shared) a count changed or the candidate says
    it stopped; else ``None``."""
    names = frozenset(names)
    cand_body, mem_body = _body(candidate), _body(memory)
    cand_words, mem_words = _content_set(cand_body), _content_set(mem_body)
    if not cand_words:
        return "NOOP"
    if cand_words <= mem_words or jaccard(cand_words, mem_words) >= NEAR_DUPLICATE_JACCARD:
        return "NOOP"
    cand_subject, mem_subject = _subject(cand_body, names), _subject(mem_body, names)
    shared = cand_subject & mem_subject
    if not shared:
        return None
    cand_values, mem_values = _value_kinds(cand_body), _value_kinds(mem_body)
    if _differs(cand_values, mem_values, "frequency"):
        return "UPDATE"  # a routine's frequency about the same thing: the newer one holds
    close = len(shared) / min(len(cand_subject), len(mem_subject)) >= SUBJECT_OVERLAP
    if close and "negation" in cand_values and "negation" not in mem_values:
        return "UPDATE"
    if close and _differs(cand_values, mem_values, "count"):
        return "UPDATE"
    return None


def _differs(a: Mapping[str, frozenset[str]], b: Mapping[str, frozenset[str]], kind: str) -> bool:
    return kind in a and kind in b and a[kind] != b[kind]


def offline_update(request: ChatRequest) -> str:
    """:func:`lexical_decision` against each candidate's compared facts, most similar first; NOOP
    over UPDATE, else ADD."""
    payload = request.payload
    memories = payload["memories"]
    names = {c["speaker"] for c in payload["candidates"]} | {
        m["speaker"] for m in memories.values()
    }
    decisions = []
    for cand in payload["candidates"]:
        found: dict[str, str] = {}
        for short in cand["compared"]:
            mem = memories[short]
            if mem["speaker"] != cand["speaker"]:
                continue
            verdict = lexical_decision(cand["text"], mem["text"], names=names)
            if verdict and verdict not in found:
                found[verdict] = short
        if "NOOP" in found:
            decision = {"event": "NOOP", "memory_id": found["NOOP"], "text": None}
        elif "UPDATE" in found:
            decision = {"event": "UPDATE", "memory_id": found["UPDATE"], "text": cand["text"]}
        else:
            decision = {"event": "ADD", "memory_id": None, "text": None}
        decisions.append({"fact": cand["number"], **decision})
    return json.dumps({"decisions": decisions}, ensure_ascii=False)


NO_INFORMATION = "I don't have that information."


def offline_reader(request: ChatRequest) -> str:
    """The retrieved line (not item: a chunk or summary holds many) that best matches the question
    (BM25), or :data:`NO_INFORMATION`; with options, the option the items support best."""
    facts = request.payload["facts"]
    options = request.payload.get("options")
    if options:
        pick = answers.best_supported_option(options, facts)
        return NO_INFORMATION if pick is None else answers.format_choice(options, pick)
    lines = [line for fact in facts for line in fact.splitlines() if line.strip()]
    best = BM25(lines).best(request.payload["question"]) if lines else None
    return NO_INFORMATION if best is None else lines[best[0]]


# The extractive method's fixed replies.
NOT_MENTIONED = "Not mentioned in the conversations."
NO_HISTORY_ANSWER = "I don't know: no past conversations are available."
UNDECIDED = "I don't know."


class HistoryTurn(NamedTuple):
    session: int  # session number as rendered (session_index + 1)
    when: str | None  # the session's ISO date
    speaker: str
    text: str  # the utterance, with a shared photo's caption


class ShownHistory(Protocol):
    """What a prompt carries between ``<history>`` and ``</history>``."""

    @property
    def key(self) -> Hashable: ...

    @property
    def history(self) -> Any: ...  # None: the prompt says there is no history

    def turns(self) -> list[HistoryTurn]: ...


@dataclass(frozen=True)
class OfflineJob:
    kind: str
    question: str
    options: tuple[str, ...] | None
    context: ShownHistory


class ExtractiveAnswerer:
    """The long-context stand-in: the shown turn that best matches the question (BM25), one index
    per distinct history."""

    def __init__(self) -> None:
        self._indexes: dict[Hashable, tuple[list[HistoryTurn], BM25]] = {}

    def _index(self, context: ShownHistory) -> tuple[list[HistoryTurn], BM25]:
        key = context.key
        if key not in self._indexes:
            turns = context.turns()
            self._indexes[key] = (turns, BM25([t.text for t in turns]))
        return self._indexes[key]

    def __call__(self, request: Any) -> str:
        job = request.payload
        if not isinstance(job, OfflineJob):
            raise TypeError("a long-context request's payload must be an OfflineJob")
        if job.context.history is None:  # no context
            if job.options:
                return answers.format_choice(job.options, answers.longest_option(job.options))
            return NO_HISTORY_ANSWER
        turns, index = self._index(job.context)
        if job.options:
            pick = answers.best_supported_option(job.options, [t.text for t in turns])
            return UNDECIDED if pick is None else answers.format_choice(job.options, pick)
        best = index.best(job.question) if turns else None
        if best is None:
            return NOT_MENTIONED
        return quote(turns[best[0]])


def quote(turn: HistoryTurn) -> str:
    when = spoken_datetime(turn.when, missing=f"session {turn.session}")
    return f"{turn.speaker} ({when}): {turn.text}"


LEXICAL = "lexical"  # judge_model of every offline vote: a word-overlap rule, not an LLM


class Instructed(Protocol):
    @property
    def key(self) -> str: ...


class Judged(Protocol):
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
    """The offline judge's thresholds for one prompt: CORRECT when ``containment`` (the reference's
    content words in the response) or ``f1`` reaches its threshold (``need_both``: both); a
    rubric needs ``rubric`` of its words; a PersonaMem reply must be closest to the reference and
    at least ``option_f1``."""

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

_NUMBER_VALUES = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_VALUES.update({"once": "1", "twice": "2", "thrice": "3"})
# a number word as a whole run of ASCII letters, in any case (the words are ASCII)
_NUMBER_WORD = re.compile(rf"(?<![A-Za-z])(?i:{'|'.join(_NUMBER_VALUES)})(?![A-Za-z])")
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


@lru_cache(maxsize=16_384)  # a reference is compared with every system's answer
def numerals(text: str) -> str:
    """Number words as digits, ordinals without suffix: "three" meets "3", "9th" "9"."""
    text = _ORDINAL.sub(r"\1", text)
    return _NUMBER_WORD.sub(lambda m: _NUMBER_VALUES.get(m.group(0).lower(), m.group(0)), text)


def abstains(text: str) -> bool:
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
    """``(label, reason)`` of the offline judge: word overlap, abstention questions CORRECT exactly
    when the response abstains, LongMemEval counts off by one accepted, rubrics and replies by
    :class:`LexicalRule`."""
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
    """The judge's stand-in: the lexical verdict as an LLM's JSON."""
    return _verdict_json(request.payload.item, request.payload.prompt_name)


@lru_cache(maxsize=4_096)  # an answer's votes ask the same question: the rule runs once
def _verdict_json(item: Judged, prompt_name: str) -> str:
    label, reason = lexical_verdict(item, prompt_name)
    return json.dumps({"reason": reason, "label": label})
