"""PersonaMem multiple choice: one contract for the answering notebooks and the judge.

``questions.parquet`` lists a question's options with the correct answer first. The answering
notebooks (02, 03) show them in an order fixed by the question id and ask for a letter; the judge
(04) parses the letter back and compares it with the correct one. Both sides call
:func:`multiple_choice`, so they always agree on which letter is correct.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memcost.text import stable_hash, words

# How questions that come with options are asked: open-ended (the question alone, judged against
# the correct answer) or multiple choice (options listed, a letter expected, exact match).
MODES = ("open_ended", "multiple_choice")

MC_LETTERS = "ABCDEFGH"
MC_SALT = "personamem-mc@v1"  # part of the shuffle seed: change it and every order changes
MC_ANSWER_INSTRUCTION = (
    "Choose the option that best fits this user. Reply with the option's letter only "
    "(for example: B)."
)


@dataclass(frozen=True)
class MultipleChoice:
    """A question's options in the order they are shown, with their letters.

    Built by :func:`multiple_choice` from ``questions.parquet``'s ``options`` (correct answer
    first); the answering notebooks render it into their prompts and the judge parses the
    letter back, so both sides agree on which letter is correct.
    """

    question_id: str
    options: tuple[str, ...]  # in display order
    correct_letter: str

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(MC_LETTERS[: len(self.options)])

    def render(self) -> str:
        """``A. ...`` one option per line, for the answer prompt."""
        return "\n".join(
            f"{letter}. {text}" for letter, text in zip(self.letters, self.options, strict=True)
        )

    def option(self, letter: str) -> str:
        return self.options[self.letters.index(letter)]


def multiple_choice(question_id: str, options: Sequence[str]) -> MultipleChoice:
    """Shuffle ``options`` (``[correct, *wrong]``) in an order fixed by the question id.

    The order sorts the options by a stable hash of (salt, question id, original position), so
    it is the same in every process, on every machine and in every Python version, and the
    correct answer lands on each letter about equally often (an unshuffled list would always
    put it first).
    """
    options = [str(o) for o in options]
    if len(options) < 2:
        raise ValueError(f"question {question_id!r}: a multiple-choice question needs 2+ options")
    if len(options) > len(MC_LETTERS):
        raise ValueError(f"question {question_id!r}: more than {len(MC_LETTERS)} options")
    order = sorted(range(len(options)), key=lambda i: stable_hash(f"{MC_SALT}\n{question_id}\n{i}"))
    shown = tuple(options[i] for i in order)
    return MultipleChoice(question_id, shown, MC_LETTERS[order.index(0)])


_LETTER_ALONE = re.compile(r"^[\s*_(\[\"'`]*([A-Ha-h])[\s*_)\]\"'`.:]*$")
# Keywords in any case, the letter itself upper case ("the answer is a dog" names no option).
_LETTER_NAMED = re.compile(
    r"\b(?i:answer|option|choice|pick|choose|select)(?:\s+(?i:is))?\s*[:\-]?\s*"
    r"[*_(\[\"']*([A-H])\b(?!')"
)
_LETTER_LEAD = re.compile(r"^[\s*_(\[]*([A-H])[).:\]]")


def parse_choice(text: str, choice: MultipleChoice) -> str | None:
    """The option letter an answer picked, or ``None`` when it names no single option.

    Accepts a bare letter (``B``, ``(B)``, ``**B.**``), a named one (``Answer: B``, ``I'd pick
    option C``), a leading ``B)``/``B.``, or the full text of exactly one option.
    """
    stripped = text.strip()
    letters = set(choice.letters)
    for pattern in (_LETTER_ALONE, _LETTER_LEAD):
        found = pattern.match(stripped)
        if found and found.group(1).upper() in letters:
            return found.group(1).upper()
    named = set(_LETTER_NAMED.findall(stripped)) & letters
    if len(named) == 1:
        return named.pop()
    normal = " ".join(words(stripped))
    quoted = [
        letter
        for letter, option in zip(choice.letters, choice.options, strict=True)
        if " ".join(words(option)) and " ".join(words(option)) in normal
    ]
    return quoted[0] if len(quoted) == 1 else None


def format_choice(shown: Sequence[str], index: int) -> str:
    """How an offline answerer writes its pick among options in display order: ``(B) option
    text`` (what :func:`parse_choice` reads back)."""
    return f"({MC_LETTERS[index]}) {shown[index]}"


def longest_option(shown: Sequence[str]) -> int:
    """Index of the longest option: the no-context guess that exposes PersonaMem's bias (the
    correct option is the longest far more often than one time in four)."""
    return max(range(len(shown)), key=lambda i: (len(shown[i]), -i))


def best_supported_option(shown: Sequence[str], documents: Sequence[str]) -> int | None:
    """Index of the option whose words ``documents`` support best, or ``None`` when no option
    shares a content word with them.

    Each option is scored by its best BM25 match among the documents, divided by its number of
    distinct content words, so a long option gains nothing from length alone. The offline
    answerers use it over retrieved facts (memory) or history turns (long context).
    """
    from memcost.text import BM25, content_words

    if not documents:
        return None
    index = BM25(list(documents))
    scores = []
    for option in shown:
        n_words = max(1, len(set(content_words(option))))
        scores.append(max(index.scores(option), default=0.0) / n_words)
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return best if scores[best] > 0 else None
