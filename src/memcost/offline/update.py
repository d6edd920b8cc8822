"""Offline update phase (the stand-in for the update model, study §2): a lexical rule.

For each new fact, against each stored fact of the same speaker it was compared with (most
similar first): a near-duplicate is NOOP; the same subject with a changed value (a frequency
such as "twice a week", a count, or "stopped") is an UPDATE that replaces the stored fact;
otherwise ADD. A classical rule, not an imitation of a model.

It reads the request's ``payload`` (``candidates`` with ``number``, ``text``, ``speaker`` and
``compared`` short ids; ``memories`` by short id), so it imports nothing of the memory stage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from memcost.llm import ChatRequest
from memcost.text import STOPWORDS, content_words, jaccard, words

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
    """A fact without the offline extractor's "On <date>, <name> said:" prefix."""
    return _OFFLINE_PREFIX.sub("", text, count=1)


def _value_kinds(text: str) -> dict[str, frozenset[str]]:
    """A fact's values by kind: frequency phrases ("three times a week"), counts (numbers
    outside those phrases), and whether it says something stopped."""
    frequencies = [" ".join(words(m.group(0))) for m in _FREQUENCY.finditer(text)]
    rest = _FREQUENCY.sub(" ", text)
    kinds = {
        "frequency": frozenset(frequencies),
        "count": frozenset(t for t in words(rest) if t in _NUMBER_WORDS or t.isdigit()),
    }
    if _NEGATION.search(text):
        kinds["negation"] = frozenset({"negated"})
    return {k: v for k, v in kinds.items() if v}


def _subject(text: str, names: Iterable[str]) -> set[str]:
    skip = {w for n in names for w in words(n)} | {"user"}
    return {
        w
        for w in content_words(text)
        if w.split("'")[0] not in STOPWORDS  # contractions: "i've", "it's"
        and w not in _NUMBER_WORDS
        and w not in _TIME_WORDS
        and w not in _LIGHT_WORDS
        and w not in _MONTHS_DAYS
        and w not in skip
        and not w.isdigit()
    }


def lexical_decision(candidate: str, memory: str, *, names: Iterable[str] = ()) -> str | None:
    """The offline update rule for one candidate against one stored fact (same speaker).

    ``NOOP`` when the candidate is a near-duplicate (its content words are contained in the
    fact's, or their Jaccard similarity is at least 0.7). ``UPDATE`` when both share a subject
    word (after dropping names, numbers, time words and common verbs) and a value changed:
    both state a frequency ("twice a week") and they differ; or, when at least half of the
    smaller set of subject words is shared, both state a count and they differ, or the
    candidate says something stopped. Otherwise ``None``.
    """
    names = list(names)
    cand_body, mem_body = _body(candidate), _body(memory)
    cand_words, mem_words = set(content_words(cand_body)), set(content_words(mem_body))
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
    """Offline update phase: :func:`lexical_decision` against each candidate's compared facts
    of the same speaker, most similar first; NOOP wins over UPDATE, else ADD."""
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
