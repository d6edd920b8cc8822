"""Token counting with the shipped o200k_base (no network), and the deterministic lexical pieces of
the offline methods."""

from __future__ import annotations

import hashlib
import math
import os
import re
import string
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

import tiktoken

from memcost.paths import ASSETS_DIR, CACHE_DIR

ENCODING_NAME = "o200k_base"
RANKS_FILE = ASSETS_DIR / "o200k_base.tiktoken"
RANKS_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# tiktoken caches a download under sha1(<blob URL>); we place the shipped file under that name.
_RANKS_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_CACHE_KEY = hashlib.sha1(_RANKS_URL.encode()).hexdigest()

_env_lock = threading.Lock()


def _verified_ranks_bytes() -> bytes:
    if not RANKS_FILE.is_file():
        raise FileNotFoundError(
            f"the o200k_base ranks file is missing: {RANKS_FILE}. It ships with the repository; "
            "restore it with `git checkout -- src/memcost/assets/o200k_base.tiktoken`."
        )
    data = RANKS_FILE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != RANKS_SHA256:
        raise ValueError(
            f"the o200k_base ranks file is corrupt: {RANKS_FILE} has sha256 {digest}, expected "
            f"{RANKS_SHA256}. Restore it with "
            "`git checkout -- src/memcost/assets/o200k_base.tiktoken`."
        )
    return data


_build_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def get_encoding() -> tiktoken.Encoding:
    global _encoding
    # Worker threads often ask for it at the same moment; build it once, under a lock, so they
    # do not race on the cache file below.
    if _encoding is None:
        with _build_lock:
            if _encoding is None:
                _encoding = _build_encoding()
    return _encoding


def _build_encoding() -> tiktoken.Encoding:
    data = _verified_ranks_bytes()
    cache_dir = CACHE_DIR / "tiktoken"
    cached = cache_dir / _CACHE_KEY
    if not cached.is_file() or hashlib.sha256(cached.read_bytes()).hexdigest() != RANKS_SHA256:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, cached)
    # tiktoken reads TIKTOKEN_CACHE_DIR when it builds an encoding; point it at our copy only for
    # that moment so a user's own setting is left as it was.
    with _env_lock:
        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
        try:
            encoding = tiktoken.get_encoding(ENCODING_NAME)
        finally:
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
    return encoding


def encode(text: str) -> list[int]:
    """Token ids; special-token strings count as ordinary text."""
    return get_encoding().encode_ordinary(text)


def decode(tokens: Sequence[int]) -> str:
    return get_encoding().decode(list(tokens))


# Long histories are counted many times (Table 1, prompt sizes, offline usage); remember their
# counts by content hash so each distinct text is tokenised once per process. Shorter texts
# repeat too (every request's instructions): they are remembered by the text itself, in a table
# emptied when it grows large, so that a long run does not keep every segment it counted.
# A long text is counted in pieces, each remembered: the prompts about one conversation repeat
# its history and differ in their last lines, so a prompt costs the tokenisation of its tail.
_LONG_TEXT = 2_000  # characters; longer texts are remembered by a digest, not the text
_PIECE_CHARS = 2_000  # a long text is cut into pieces of at least this many characters
_SHORT_KEPT = 50_000  # short texts remembered at most
_counts: dict[tuple[int, int], int] = {}
_short: dict[str, int] = {}
_counts_lock = threading.Lock()


def _key(text: str) -> tuple[int, int]:
    """A long text's key in this process's table (a digest cost more than the lookup it served)."""
    return hash(text), len(text)


def count_tokens(text: str) -> int:
    if len(text) < _LONG_TEXT:
        n = _short.get(text)
        if n is None:
            n = _tokenise(text)
            if len(_short) >= _SHORT_KEPT:
                _short.clear()
            _short[text] = n
        return n
    key = _key(text)
    with _counts_lock:
        if key in _counts:
            return _counts[key]
    pieces = split_where_o200k_splits(text, _PIECE_CHARS)
    n = _tokenise(text) if len(pieces) == 1 else sum(map(count_tokens, pieces))
    with _counts_lock:
        _counts[key] = n
    return n


def _tokenise(text: str) -> int:
    return len(get_encoding().encode_ordinary(text))


def split_where_o200k_splits(text: str, min_chars: int) -> list[str]:
    """``text`` in pieces of at least ``min_chars`` cut only where o200k's pre-tokenizer always ends
    a chunk (after a newline, before a character neither white space nor ``/``), so the pieces'
    counts add up to the whole's."""
    pieces: list[str] = []
    start, end = 0, len(text)
    while end - start >= 2 * min_chars:
        cut = text.find("\n", start + min_chars)
        while cut != -1 and cut + 1 < end and (text[cut + 1].isspace() or text[cut + 1] == "/"):
            cut = text.find("\n", cut + 1)
        if cut == -1 or cut + 1 >= end:
            break
        pieces.append(text[start : cut + 1])
        start = cut + 1
    pieces.append(text[start:])
    return pieces


_BATCH_FROM = 32  # texts from which the threaded batch encoder pays


def count_tokens_batch(texts: Sequence[str], *, num_threads: int = 2) -> list[int]:
    """Token counts of many texts with tiktoken's threaded encoder; identical and already counted
    long texts once, a few texts here (a thread pool per batch costs more)."""
    if len(texts) < _BATCH_FROM:
        return [count_tokens(text) for text in texts]
    unique: dict[str, int | None] = dict.fromkeys(texts)
    todo: list[str] = []
    for text in unique:
        if len(text) >= _LONG_TEXT:
            with _counts_lock:
                known = _counts.get(_key(text))
            if known is not None:
                unique[text] = known
                continue
        todo.append(text)
    if todo:
        encoded = get_encoding().encode_ordinary_batch(todo, num_threads=num_threads)
        for text, ids in zip(todo, encoded, strict=True):
            unique[text] = len(ids)
            if len(text) >= _LONG_TEXT:
                with _counts_lock:
                    _counts[_key(text)] = len(ids)
    return [unique[text] for text in texts]  # type: ignore[misc]


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    ids = encode(text)
    return text if len(ids) <= max_tokens else decode(ids[:max_tokens])


def clear_count_cache() -> None:
    with _counts_lock:
        _counts.clear()


def tokenizer_info() -> dict[str, str]:
    return {
        "encoding": ENCODING_NAME,
        "ranks_sha256": RANKS_SHA256,
        "tiktoken": tiktoken.__version__,
    }


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
    """Lower-cased word tokens (a trailing 's, 't kept on its word)."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]


_PUNCTUATION_TO_SPACE = str.maketrans(dict.fromkeys(string.punctuation, " "))


def normalize_answer(text: str) -> str:
    """SQuAD-style normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION_TO_SPACE)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def split_sentences(text: str) -> list[str]:
    """Split at sentence ends followed by a capital or digit (chat turns only)."""
    parts = [p.strip() for p in _SENTENCE_END.split(text.strip())]
    return [p for p in parts if p]


def token_f1(prediction: str, gold: str) -> float:
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
    ref = set(content_words(gold)) or set(words(gold))
    if not ref:
        return 0.0
    pred = set(words(prediction))
    return len(ref & pred) / len(ref)


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def stable_hash(text: str, *, bits: int = 64) -> int:
    """The same in every process and on every machine (unlike ``hash()``)."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=bits // 8).digest()
    return int.from_bytes(digest, "big")


class BM25:
    """Okapi BM25 over a small corpus (content words): the offline "which text best matches this
    question"."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.docs = [Counter(content_words(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg_len = (sum(self.lengths) / len(self.lengths)) if self.lengths else 0.0
        self.norms = [
            k1 * (1 - b + b * length / self.avg_len) if self.avg_len else 0.0
            for length in self.lengths
        ]
        # term -> [(document, term frequency)]: a query visits only the documents holding its
        # terms (a question against a 600-turn history touches a few dozen turns, not 600)
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, counts in enumerate(self.docs):
            for term, tf in counts.items():
                self.postings.setdefault(term, []).append((i, tf))
        n = len(self.docs)
        self.idf = {
            term: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5))
            for term, p in self.postings.items()
        }

    def scores(self, query: str) -> list[float]:
        out = [0.0] * len(self.docs)
        norms, k1 = self.norms, self.k1
        for term in content_words(query):  # per document, terms added in the query's order
            idf = self.idf.get(term, 0.0)
            for i, tf in self.postings.get(term, ()):
                out[i] += idf * tf * (k1 + 1) / (tf + norms[i])
        return out

    def best(self, query: str) -> tuple[int, float] | None:
        """Index and score of the best match (ties: the earliest), ``None`` when none shares
        a word."""
        scores = self.scores(query)
        if not scores:
            return None
        index = max(range(len(scores)), key=lambda i: (scores[i], -i))
        return (index, scores[index]) if scores[index] > 0 else None


# --- Dates and photos as every prompt writes them ---------------------------------------------


def spoken_datetime(iso: str | None, *, missing: str = "") -> str:
    """``Monday 8 May 2023, 13:56``, as temporal gold answers phrase dates; ``missing``
    without one."""
    if not iso:
        return missing
    moment = datetime.fromisoformat(iso)
    return f"{moment:%A} {moment.day} {moment:%B %Y, %H:%M}"


def day_text(iso: str | None) -> str:
    """``8 May 2023`` (empty without a date)."""
    if not iso:
        return ""
    moment = datetime.fromisoformat(iso)
    return f"{moment.day} {moment:%B %Y}"


def with_caption(text: str, caption: object) -> str:
    """A message with the photo it shares described after it (LoCoMo's BLIP captions)."""
    if isinstance(caption, str) and caption:
        return f"{text} [shares a photo: {caption}]"
    return text
