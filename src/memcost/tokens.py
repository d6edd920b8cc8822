"""Token counting with tiktoken's ``o200k_base`` (GPT-4o / GPT-5 family), fully offline.

The ranks file ships inside the package (``assets/o200k_base.tiktoken``) and is checked against
the sha256 that tiktoken itself expects. tiktoken's own download is never needed: we hand the
shipped file to tiktoken through its cache directory, so tiktoken builds the encoding exactly as
it would after a download (same pattern, same special tokens) and checks the hash a second time.

All counts in the study (Tables 1-2, long-context prompt sizes, offline usage records) go
through :func:`count_tokens` / :func:`count_tokens_batch`.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence

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
    """The ``o200k_base`` encoding, built from the shipped ranks file (no network)."""
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
    """Token ids of ``text``; special-token strings in the text count as ordinary text."""
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
_counts: dict[bytes, int] = {}
_short: dict[str, int] = {}
_counts_lock = threading.Lock()


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def count_tokens(text: str) -> int:
    """Number of ``o200k_base`` tokens in ``text``."""
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
    """``text`` in pieces of at least ``min_chars`` characters (the last may be shorter), cut
    only where o200k's pre-tokenizer always ends a chunk, so that the pieces' counts add up to
    the count of the whole: after a newline, before a character that is neither white space
    nor ``/``. No chunk pattern of o200k runs across such a point: only white-space runs and a
    punctuation run's tail (``[\\r\\n/]*``, which is why ``".\\n/"`` stays whole) hold a newline.
    """
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


def count_tokens_batch(texts: Sequence[str], *, num_threads: int = 2) -> list[int]:
    """Token counts of many texts, with tiktoken's threaded batch encoder.

    Identical texts are counted once; long texts already counted in this process are not
    counted again. ``num_threads`` defaults to this project's 2-core target machine.
    """
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
    """The longest prefix of ``text`` that fits in ``max_tokens`` tokens."""
    ids = encode(text)
    return text if len(ids) <= max_tokens else decode(ids[:max_tokens])


def clear_count_cache() -> None:
    with _counts_lock:
        _counts.clear()


def tokenizer_info() -> dict[str, str]:
    """What to write into a manifest about the tokenizer."""
    return {
        "encoding": ENCODING_NAME,
        "ranks_sha256": RANKS_SHA256,
        "tiktoken": tiktoken.__version__,
    }


__all__ = [
    "ENCODING_NAME",
    "RANKS_SHA256",
    "clear_count_cache",
    "count_tokens",
    "count_tokens_batch",
    "decode",
    "encode",
    "get_encoding",
    "split_where_o200k_splits",
    "tokenizer_info",
    "truncate_to_tokens",
]
