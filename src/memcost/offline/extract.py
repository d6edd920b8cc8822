"""Offline extraction (the stand-in for the extraction model, study §2): sentence facts.

The person's informative sentences, each prefixed with the speaker and the session date, as the
JSON the extraction prompt asks for. A classical method: it cannot tell a fact from chatter as a
model can, and never resolves "last Sunday"; its memory is larger and blunter than a model's.

It reads the request's ``payload`` (the segment: ``person_messages`` with ``number``,
``speaker`` and ``text``, and ``session_datetime``), so it imports nothing of the memory stage.
"""

from __future__ import annotations

import json
import re

from memcost.llm import ChatRequest
from memcost.text import content_words, day_text, split_sentences

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
    """How facts name a speaker: LoCoMo's names as they are, a role as "the user" (the
    extraction prompt and this extractor name people the same way)."""
    return "the user" if speaker.strip().lower() in ("user", "the user") else speaker


def capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def informative_sentence(sentence: str) -> bool:
    """The offline extractor's test: does this sentence say something about its speaker?

    Dropped: very short sentences (fewer than three content words), questions unless they
    mention something of the speaker's ("my", "our": "a vet for my beagle?"), and greetings or
    reactions that do not mention the speaker. Kept: what remains if it mentions the
    speaker ("I", "my", "we"), a number, a name, or is long enough to carry a fact on its own.
    """
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
    """``On 8 May 2023, Maya said: <sentence>`` (no date: ``Maya said: ...``)."""
    name = person_name(speaker)
    day = day_text(when)
    if day:
        return f"On {day}, {name} {verb}: {sentence}"
    return f"{capitalise(name)} {verb}: {sentence}"


def offline_extract(request: ChatRequest) -> str:
    """Offline extraction: the person's informative sentences, prefixed with speaker and
    session date, as the JSON the extraction prompt asks for."""
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
