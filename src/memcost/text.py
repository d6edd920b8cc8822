"""Text utilities: lexical pieces for the offline methods, dates and photos as prompts show them.

Everything here is deterministic across processes and machines: no salted ``hash()``, no
randomness. The offline backend is built from these classical pieces so that it is obvious what
it is (word overlap), and never mistaken for an LLM.
"""

from __future__ import annotations

import hashlib
import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(])")
_ARTICLES = re.compile(r"\b(a|an|the)\b")

# A small English stop-word list: function words that carry no fact. Kept short on purpose so
# that words like "not", "never", "before" and "after" (which change meaning) still count.
STOPWORDS = frozenset(
    """
    a about above am an and any are as at be been being both but by can could did do does doing
    down during each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself nor of off on once
    only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your yours
    yourself yourselves s t ll d m re ve also oh ok okay yeah yes hey hi hello well really
    """.split()
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits; a trailing 's, 't, ... kept on its word)."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Word tokens without stop words."""
    return [w for w in words(text) if w not in STOPWORDS]


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def split_sentences(text: str) -> list[str]:
    """Split on sentence-ending punctuation followed by a capital or digit; keeps short texts
    whole. Good enough for chat turns, which are the only input here."""
    parts = [p.strip() for p in _SENTENCE_END.split(text.strip())]
    return [p for p in parts if p]


def token_f1(prediction: str, gold: str) -> float:
    """Token-level F1 between normalised answers (the SQuAD / LoCoMo F1)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common = Counter(pred) & Counter(ref)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred), overlap / len(ref)
    return 2 * precision * recall / (precision + recall)


def containment(gold: str, prediction: str) -> float:
    """Share of the gold answer's content words that appear in the prediction."""
    ref = set(content_words(gold)) or set(words(gold))
    if not ref:
        return 0.0
    pred = set(words(prediction))
    return len(ref & pred) / len(ref)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def stable_hash(text: str, *, bits: int = 64) -> int:
    """A hash that is the same in every process and on every machine (unlike ``hash()``)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=bits // 8).digest()
    return int.from_bytes(digest, "big")


class BM25:
    """Okapi BM25 over a small in-memory corpus of texts (content words only).

    The offline stand-in for "which text best matches this question": used by the offline
    reader and the extractive long-context answerer.
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.docs = [Counter(content_words(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg_len = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0
        df: Counter[str] = Counter()
        for counts in self.docs:
            df.update(counts.keys())
        n = len(self.docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = content_words(query)
        out = []
        for counts, length in zip(self.docs, self.lengths, strict=True):
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / self.avg_len) if self.avg_len else 0.0
            for term in terms:
                tf = counts.get(term, 0)
                if tf:
                    score += self.idf.get(term, 0.0) * tf * (self.k1 + 1) / (tf + norm)
            out.append(score)
        return out

    def best(self, query: str) -> tuple[int, float] | None:
        """Index and score of the best-matching document (ties: the earliest), or ``None`` when
        no document shares a content word with the query."""
        scores = self.scores(query)
        if not scores:
            return None
        index = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return (index, scores[index]) if scores[index] > 0 else None


# --- Dates and photos as every prompt writes them ---------------------------------------------


def spoken_datetime(iso: str | None, *, missing: str = "") -> str:
    """``2023-05-08T13:56:00`` → ``Monday 8 May 2023, 13:56``: weekday and a written-out date,
    because the gold answers of temporal questions are phrased that way. ``missing`` is returned
    for a conversation without dates."""
    if not iso:
        return missing
    moment = datetime.fromisoformat(iso)
    return f"{moment:%A} {moment.day} {moment:%B %Y, %H:%M}"


def day_text(iso: str | None) -> str:
    """``8 May 2023``: the form the benchmarks' gold answers use (empty without a date)."""
    if not iso:
        return ""
    moment = datetime.fromisoformat(iso)
    return f"{moment.day} {moment:%B %Y}"


def with_caption(text: str, caption: object) -> str:
    """A message with the photo it shares described after it, as LoCoMo's BLIP captions are."""
    if isinstance(caption, str) and caption:
        return f"{text} [shares a photo: {caption}]"
    return text
