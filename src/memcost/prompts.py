"""Every prompt the study sends, as named, versioned constants (a changed text changes its version,
which every record carries)."""

from __future__ import annotations

import json
import string
from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    """A named, versioned chat prompt: an optional system message, a user template, and for a JSON
    reply its ``reply_schema``."""

    name: str
    version: str
    system: str
    user: str
    reply_schema: str | None = None  # JSON text of the reply's JSON schema

    @property
    def id(self) -> str:
        return f"{self.name}@{self.version}"

    def fields(self) -> set[str]:
        found = set()
        for text in (self.system, self.user):
            found |= {f for _, f, _, _ in string.Formatter().parse(text) if f}
        return found

    def messages(self, **values: str) -> tuple[tuple[str, str], ...]:
        """``((role, content), ...)``; a missing or unexpected field is an error naming it."""
        expected = self.fields()
        missing, extra = expected - set(values), set(values) - expected
        if missing or extra:
            raise KeyError(
                f"prompt {self.id}: missing fields {sorted(missing)}, unexpected {sorted(extra)}"
            )
        out: list[tuple[str, str]] = []
        if self.system:
            out.append(("system", self.system.format(**values)))
        out.append(("user", self.user.format(**values)))
        return tuple(out)


PROMPTS: dict[str, Prompt] = {}


def register(prompt: Prompt) -> Prompt:
    if prompt.name in PROMPTS and PROMPTS[prompt.name] != prompt:
        raise ValueError(f"prompt {prompt.name!r} is registered twice with different text")
    PROMPTS[prompt.name] = prompt
    return prompt


def get(name: str) -> Prompt:
    if name not in PROMPTS:
        raise KeyError(f"unknown prompt {name!r}; known: {', '.join(sorted(PROMPTS))}")
    return PROMPTS[name]


# --- Stage prompts are defined below, one block per stage, each registered by name. ----------


# --- JSON re-ask (every stage that parses JSON, via the model client) --------------------------
# Sent after a reply that does not parse: the bad reply and this correction are appended to the
# original request, so the re-ask is a new request with its own cache key.
JSON_REASK = register(
    Prompt(
        name="json_reask",
        version="v1",
        system="",
        user=(
            "Your previous reply could not be used: {error}. Reply again with only the JSON the "
            "instructions ask for: no prose, no code fences."
        ),
    )
)


# --- Judge (notebook 04, paper §3.4) -----------------------------------------------------------
# One main prompt and two variants that differ only in how generous the grading rules are, so
# the judge-sensitivity table shows how much of an accuracy gap is the judge's (the same
# published LoCoMo answers are reported to score very differently under lenient and strict judges).
# ``{instructions}`` is the dataset- and question-type-specific block from memcost.judge;
# ``{reference_label}`` names what the reference is (a gold answer, a rubric, an explanation).
_JUDGE_SYSTEM = (
    "You grade the answers of a personal assistant that remembers its past conversations with a "
    "user. For each one you compare the assistant's response with a reference written by the "
    "benchmark's authors and decide whether the response is CORRECT or WRONG."
)
_JUDGE_USER = """{instructions}

Question: {question}
{reference_label}: {reference}
Response to grade: {response}

Grading rules:
{rules}

Reply with only a JSON object, the reason first:
{{"reason": "<one sentence>", "label": "CORRECT" or "WRONG"}}"""

JUDGE_RULES = (
    "- Grade the content, not the form. Paraphrases, synonyms, another word order, a longer or "
    'friendlier answer, and other formats of dates, times, numbers and units ("7 May 2023", '
    '"May 7th, 2023", "2023-05-07"; "3", "three") are all fine.\n'
    "- A response that states what the reference requires is CORRECT even when it adds context, "
    "as long as nothing it adds contradicts the reference.\n"
    "- A response is WRONG when it gives a different fact (another name, date, number, place or "
    "person), leaves out part of what the question asks for, contradicts the reference, hedges "
    "between several candidate answers, or says it does not know while the reference gives an "
    "answer.\n"
    '- A date given relative to another date ("the week before 9 June 2023") is CORRECT when it '
    "denotes the same day or period as the reference."
)
JUDGE_LENIENT_RULES = (
    "- Be generous. If the response is about the same thing as the reference and gets its core "
    "fact right, it is CORRECT, even when it is longer, vaguer, or mixes in other material.\n"
    "- For questions about time, any mention of the same date or period counts, in any format "
    "and at any precision.\n"
    "- Only a response that misses the core fact, or contradicts it, is WRONG."
)
JUDGE_STRICT_RULES = (
    "- Be strict. The response is CORRECT only if it states every element the reference "
    "requires, precisely, commits to one answer, and contains nothing that contradicts the "
    "reference.\n"
    "- A vague or partly right response is WRONG. A date must name the same day, month or year "
    "as the reference, at the same precision or finer; a count must be the same number.\n"
    "- Different wording of the same facts is fine; different facts are not."
)


def _schema(properties: dict, required: list[str]) -> str:
    shape = {"type": "object", "properties": properties, "required": required}
    return json.dumps({**shape, "additionalProperties": False})  # in order: the reason first


_NULLABLE_TEXT = {"type": ["string", "null"]}
JUDGE_REPLY = _schema(
    {"reason": {"type": "string"}, "label": {"enum": ["CORRECT", "WRONG"]}}, ["reason", "label"]
)
EXTRACT_REPLY = _schema(
    {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "speaker": _NULLABLE_TEXT,
                    "turns": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["text", "speaker", "turns"],
            },
        }
    },
    ["facts"],
)
UPDATE_REPLY = _schema(
    {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "fact": {"type": "integer"},
                    "event": {"enum": ["ADD", "UPDATE", "DELETE", "NOOP"]},
                    "memory_id": _NULLABLE_TEXT,
                    "text": _NULLABLE_TEXT,
                },
                "required": ["fact", "event", "memory_id", "text"],
            },
        }
    },
    ["decisions"],
)

JUDGE = register(
    Prompt(
        name="judge",
        version="v1",
        system=_JUDGE_SYSTEM,
        reply_schema=JUDGE_REPLY,
        user=_JUDGE_USER.replace("{rules}", JUDGE_RULES.replace("{", "{{").replace("}", "}}")),
    )
)
JUDGE_LENIENT = register(
    Prompt(
        name="judge_lenient",
        version="v1",
        system=_JUDGE_SYSTEM,
        reply_schema=JUDGE_REPLY,
        user=_JUDGE_USER.replace(
            "{rules}", JUDGE_LENIENT_RULES.replace("{", "{{").replace("}", "}}")
        ),
    )
)
JUDGE_STRICT = register(
    Prompt(
        name="judge_strict",
        version="v1",
        system=_JUDGE_SYSTEM,
        reply_schema=JUDGE_REPLY,
        user=_JUDGE_USER.replace(
            "{rules}", JUDGE_STRICT_RULES.replace("{", "{{").replace("}", "}}")
        ),
    )
)
JUDGE_PROMPTS = ("judge", "judge_lenient", "judge_strict")

# --- Long-context answering (notebook 03, paper §3.2) ----------------------------------------
# One prompt for the whole history and for its variants (rolling window, no context, oracle):
# only the history part changes. The history comes first and the question last, so that every
# question about the same conversation shares one byte-identical prefix (system message, the
# opening line, the history) that the provider's prompt cache can serve. The opening stays short
# on purpose: OpenAI routes a request to a cache machine by its first ~256 tokens, and those
# should already belong to the conversation. The constants below are part of the prompt: change
# any of them and bump the version.

LONG_CONTEXT_ANSWER = register(
    Prompt(
        name="long_context_answer",
        version="v1",
        system=(
            "You are a personal assistant with a long memory. You answer from the record of "
            "past conversations you are given."
        ),
        user=(
            "Past conversations, oldest session first. Each session opens with its number and "
            "the date and time it took place; each line after that is one turn, "
            '"speaker: message".\n'
            "<history>\n"
            "{history}"
            "</history>\n\n"
            "Answer the question at the end from the history above.\n"
            '- In sessions between "user" and "assistant", the user is the person asking you '
            "now and the assistant is you.\n"
            "- Read all sessions. When something changed over time, the most recent session "
            "holds.\n"
            '- Work dates out from the session dates ("yesterday" in a session means the day '
            "before that session) and state dates and durations explicitly.\n"
            "- If the question asks for advice, a suggestion or a draft, give it in the way that "
            "suits what the history tells you about the person.\n"
            "- If the history does not contain the answer, say it is not mentioned; do not "
            "guess.\n"
            "- Be brief: a short phrase or one or two sentences, without your reasoning.\n\n"
            "{question_block}"
        ),
    )
)
# What the history part holds when a baseline gives the model no history at all.
LONG_CONTEXT_NO_HISTORY = "(no past conversations are available)\n\n"
# The question block: the question's date (when the dataset has one), the question, the options.
LONG_CONTEXT_DATE_LINE = "Current date: {date}\n"
LONG_CONTEXT_QUESTION_LINE = "Question: {question}\n"
LONG_CONTEXT_OPTIONS = (
    "Options:\n{options}\n"
    "Choose the option that fits best. Reply with its letter in brackets followed by its text, "
    "e.g. (A) ...\n"
)

# --- Memory: fact extraction, update phase, reader (paper §3.1) ---------------------
# The system messages carry no fields, so every request of a stage starts with the same prefix
# (what a provider's prompt cache can reuse); the per-call material goes in the user message.

MEMORY_EXTRACT = register(
    Prompt(
        name="memory_extract",
        version="v1",
        system=(
            "You keep the long-term memory of a personal assistant. You are shown one part of a "
            "conversation. Write down the facts about the people in it that would help in a "
            "later conversation with them.\n"
            "\n"
            "Rules:\n"
            "- Take facts only from the messages written by the people listed; any other "
            "messages (an assistant's, for example) are context, never a source.\n"
            "- Each fact is one short, self-contained sentence that names the person it is "
            'about: their name, or "the user" when no name is given. Never write "I", '
            '"he", "she" or "the speaker".\n'
            "- Keep specific details: names of people, pets and places, numbers, amounts, "
            "titles, frequencies and dates.\n"
            "- Give dates as calendar dates. The session date is stated above the messages: "
            'resolve relative expressions ("yesterday", "last Sunday", "next month") against '
            'it, e.g. "on 9 April 2023" or "in the week before 27 March 2023". Add the '
            "session date to facts about events when no better date is known.\n"
            "- Look for identity, family and relationships, work and studies, hobbies and "
            "routines, likes and dislikes, health, possessions, homes and places, travel, "
            "plans, events and milestones.\n"
            "- One piece of information per fact: split compound statements.\n"
            "- Leave out greetings, thanks, small talk, general knowledge, and questions that "
            "reveal nothing about the person.\n"
            "- If nothing is worth remembering, return an empty list.\n"
            "\n"
            "Reply with a JSON object and nothing else:\n"
            '{{"facts": [{{"text": "<the fact>", "speaker": "<whose message it comes from>", '
            '"turns": [<numbers of the messages it comes from>]}}]}}'
        ),
        user="Session date: {session_date}\nPeople: {people}\n\nMessages:\n{messages}",
        reply_schema=EXTRACT_REPLY,
    )
)

MEMORY_UPDATE = register(
    Prompt(
        name="memory_update",
        version="v1",
        system=(
            "You keep a personal assistant's long-term memory consistent. You are given facts "
            "just extracted from a conversation and the stored memories most similar to them. "
            "Decide for each new fact, in order, one event:\n"
            "- ADD: new information; it is stored as written.\n"
            "- UPDATE: it is about the same thing as a stored memory but changes it or adds "
            "detail (a new value, a later date, a correction). Name the memory and write the "
            "merged memory: one sentence with the current information, keeping the person's "
            "name, useful details and dates from both.\n"
            "- DELETE: it shows that a stored memory is no longer true and there is nothing new "
            "to store. Name the memory.\n"
            "- NOOP: the memory already holds this information.\n"
            "A stored memory that states an older value of the same thing must be updated, "
            "not kept beside the new one: the memory should never hold two contradicting "
            "facts. Use only the memory ids listed.\n"
            "\n"
            "Reply with a JSON object and nothing else, one decision per new fact:\n"
            '{{"decisions": [{{"fact": <number of the new fact>, "event": '
            '"ADD|UPDATE|DELETE|NOOP", "memory_id": "<id, or null for ADD>", '
            '"text": "<the merged memory for UPDATE, else null>"}}]}}'
        ),
        user="Stored memories:\n{memories}\n\nNew facts ({when}):\n{facts}",
        reply_schema=UPDATE_REPLY,
    )
)

MEMORY_READ = register(
    Prompt(
        name="memory_read",
        version="v1",
        system=(
            "You answer a question about a person from memories extracted from their past "
            "conversations. Each memory is marked with the date of the conversation it came "
            "from. Use only these memories. When memories disagree, the more recent one holds. "
            "For questions about when or how long, work from the memories' dates. If the "
            "memories do not contain the answer, say that you don't have that information. "
            "Answer in one short sentence or phrase."
        ),
        user="Memories:\n{memories}\n\n{date_line}Question: {question}",
    )
)


# --- The judge's grading instructions (notebook 04), one per benchmark and question type ------
# Chosen per question by memcost.judge.votes.choose_instruction; each version is part of
# the judge prompt's id in the ledger.


@dataclass(frozen=True)
class Instruction:
    """The dataset- and question-type-specific block of the judge prompt (``reference_label``: what
    the reference is, so a rubric is not read as an exact answer)."""

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
            'events relative to a session ("last Saturday", "the week before"): a response '
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
            'does not give this information (for example "not mentioned", "there is no '
            'information about that"). It is WRONG if it answers the question as asked, in '
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
