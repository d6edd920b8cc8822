"""Offline observer, reflector and summariser: the stand-ins for the model calls of
observational memory (Mastra's, as the serving study measures it) and of hierarchical memory's
working summary.

Classical and deterministic. The observer writes one observation per informative sentence of
the messages it is shown (the extraction stand-in's test), naming the speaker and, where the
message has one, its date. The reflector keeps the latest observation of each (person, first
three content words): a later value of the same thing replaces the earlier one. The summariser
keeps the newest observations of the summary and the new messages that fit its word budget. A
model does all three from meaning; these do it from words.
"""

from __future__ import annotations

from collections.abc import Sequence

from memcost.offline.extract import informative_sentence, offline_fact_text
from memcost.text import content_words, split_sentences

# A message as the stand-ins read it: (speaker, text) or (speaker, text, ISO date or None).
Message = Sequence[str | None]


def _sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in split_sentences(line)]


def observation_lines(messages: Sequence[Message]) -> list[str]:
    """``- On 8 May 2023, Maya said: ...`` for every informative sentence, in order."""
    lines = []
    for message in messages:
        speaker, text = str(message[0]), str(message[1])
        when = message[2] if len(message) > 2 else None
        lines += [
            f"- {offline_fact_text(s, speaker, when)}"
            for s in _sentences(text)
            if informative_sentence(s)
        ]
    return lines


def standin_observe(messages: Sequence[Message]) -> str:
    """Observations of the unobserved messages, one line each."""
    return "\n".join(observation_lines(messages))


def _subject_key(observation: str) -> tuple[str, ...]:
    body = observation.split(": ", 1)[-1]
    return tuple(content_words(observation.split(" said", 1)[0]) + content_words(body)[:3])


def standin_reflect(observations: Sequence[str]) -> str:
    """Condensed observations: the latest observation of each (person, first three content
    words) survives, in the order they were made."""
    latest: dict[tuple[str, ...], int] = {}
    for i, obs in enumerate(observations):
        latest[_subject_key(obs)] = i
    return "\n".join(observations[i] for i in sorted(latest.values()))


def standin_summarise(summary: Sequence[str], messages: Sequence[Message], max_words: int) -> str:
    """The newest observations of ``summary`` plus the new messages, condensed as the reflector
    condenses, then cut from the oldest end to ``max_words`` words."""
    lines = standin_reflect([*summary, *observation_lines(messages)]).splitlines()
    kept: list[str] = []
    words = 0
    for line in reversed(lines):
        n = len(line.split())
        if kept and words + n > max_words:
            break
        kept.append(line)
        words += n
    return "\n".join(reversed(kept))
