"""The long-context prompt: history first, question last (notebook 03, section 2).

Providers cache the beginning of a prompt, so everything that is the same for every question
about one user comes first (system message, opening line, history) and everything that changes
comes last (instructions, the question's date, the question, its options). The user template is
``<opening>{history}<instructions>{question_block}``; the opening and the instructions are the
same in every prompt and are counted once.
"""

from __future__ import annotations

from collections.abc import Sequence

from memcost import answers, prompts
from memcost.text import spoken_datetime

PROMPT = prompts.LONG_CONTEXT_ANSWER
HISTORY_END = "</history>"  # everything before it is the same for a conversation's questions

HEAD, _TAIL = PROMPT.user.split("{history}")
INSTRUCTIONS, _AFTER_BLOCK = _TAIL.split("{question_block}")
if _AFTER_BLOCK or "{" in HEAD + INSTRUCTIONS:
    raise RuntimeError(f"{PROMPT.id}: the user template must end with {{question_block}}")


def shown_options(question_id: str, options: Sequence[str]) -> tuple[str, ...]:
    """The options in the order a model sees them: the order every notebook and the judge use
    (:func:`memcost.answers.multiple_choice`, fixed by the question id)."""
    return answers.multiple_choice(question_id, options).options


def option_letter(index: int) -> str:
    return answers.MC_LETTERS[index]


def question_block(
    question: str, *, date: str | None = None, options: Sequence[str] | None = None
) -> str:
    """The text after the history and the instructions: date, question, options."""
    out = ""
    if date:
        out += prompts.LONG_CONTEXT_DATE_LINE.format(date=spoken_datetime(date))
    out += prompts.LONG_CONTEXT_QUESTION_LINE.format(question=question)
    if options:
        listing = "\n".join(f"({option_letter(i)}) {o}" for i, o in enumerate(options))
        out += prompts.LONG_CONTEXT_OPTIONS.format(options=listing)
    return out


def prompt_messages(history: str, block: str) -> tuple[tuple[str, str], ...]:
    """``((role, text), ...)``: the system message and the user message around ``history``."""
    return PROMPT.messages(history=history, question_block=block)


__all__ = [
    "HEAD",
    "HISTORY_END",
    "INSTRUCTIONS",
    "PROMPT",
    "option_letter",
    "prompt_messages",
    "question_block",
    "shown_options",
]
