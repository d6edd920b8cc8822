"""o200k_base must work offline, from the shipped ranks file, and count as tiktoken does."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys

import pytest

from memcost import text as tokens


def test_known_encoding():
    # The ranks file's README gives this as the check of a correct o200k_base.
    assert tokens.encode("hello world") == [24912, 2375]
    assert tokens.get_encoding().name == "o200k_base"


def test_shipped_file_hash_is_the_one_tiktoken_expects():
    data = tokens.RANKS_FILE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == tokens.RANKS_SHA256
    assert len(data) == 3_613_922


def test_special_token_text_counts_as_ordinary_text():
    # A chat history may literally contain "<|endoftext|>"; it must be counted, not rejected.
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_batch_matches_single_and_keeps_order():
    texts = ["Caroline went to the LGBTQ support group on 7 May 2023.", "", "a" * 5000, "hi"] * 3
    assert tokens.count_tokens_batch(texts) == [tokens.count_tokens(t) for t in texts]
    assert tokens.count_tokens("") == 0


def test_long_text_count_is_remembered():
    tokens.clear_count_cache()
    text = "memory " * 1000
    first = tokens.count_tokens(text)
    assert len(tokens._counts) == 1
    assert tokens.count_tokens(text) == first == len(tokens.encode(text))


def test_works_without_network_or_tiktoken_cache(tmp_path):
    """A fresh process with an empty cache dir and no route to the internet still counts."""
    env = dict(
        os.environ,
        MEMCOST_CACHE_DIR=str(tmp_path / "cache"),
        TIKTOKEN_CACHE_DIR=str(tmp_path / "tk"),
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
    )
    code = "from memcost.text import encode; print(encode('hello world'))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[24912, 2375]"
    # the user's own TIKTOKEN_CACHE_DIR is left untouched
    assert not (tmp_path / "tk").exists()


def test_corrupt_ranks_file_is_a_clear_error(tmp_path, monkeypatch):
    bad = tmp_path / "o200k_base.tiktoken"
    bad.write_bytes(tokens.RANKS_FILE.read_bytes()[:-10])
    monkeypatch.setattr(tokens, "RANKS_FILE", bad)
    with pytest.raises(ValueError, match="corrupt.*git checkout"):
        tokens._verified_ranks_bytes()
    monkeypatch.setattr(tokens, "RANKS_FILE", tmp_path / "missing.tiktoken")
    with pytest.raises(FileNotFoundError, match="missing"):
        tokens._verified_ranks_bytes()


def test_truncate_to_tokens():
    text = "one two three four five six"
    cut = tokens.truncate_to_tokens(text, 3)
    assert tokens.count_tokens(cut) == 3 and text.startswith(cut)
    assert tokens.truncate_to_tokens(text, 100) == text


# Pieces of every kind o200k's pattern treats apart: newlines before spaces, slashes and words,
# a punctuation run before newlines and slashes (".\n/" is one chunk), digits, apostrophes,
# non-Latin letters, Unicode spaces and separators.
_PARTS = ["\n", "\n\n", "\r\n", " ", "  ", "\t", "/", ".", ".\n/", "a", "Word", "it's", "123",
          "4567", "é", "日本", "😀", "\u00a0", "\x1c", "-", "?!", "\u2028", "x/y", "\n/",
          " \n"]  # fmt: skip


def test_pieces_of_a_long_text_count_as_the_whole():
    rng = random.Random(7)
    encoding = tokens.get_encoding()
    for _ in range(400):
        text = "".join(rng.choice(_PARTS) for _ in range(rng.randint(50, 400)))
        for size in (1, 4, 16):
            pieces = tokens.split_where_o200k_splits(text, size)
            assert "".join(pieces) == text
            assert sum(len(encoding.encode_ordinary(p)) for p in pieces) == len(
                encoding.encode_ordinary(text)
            ), (text, pieces)


def test_prompts_that_repeat_a_history_tokenise_only_their_tails(monkeypatch):
    tokens.clear_count_cache()
    history = "".join(f"Caroline: I went to the support group on day {i}.\n" for i in range(2000))
    encoded: list[int] = []
    tokenise = tokens._tokenise
    monkeypatch.setattr(tokens, "_tokenise", lambda t: encoded.append(len(t)) or tokenise(t))
    first = tokens.count_tokens(history + "Question: when did she go?")
    assert first == len(tokens.encode(history + "Question: when did she go?"))
    assert sum(encoded) >= len(history)  # the first prompt is tokenised whole, in pieces
    encoded.clear()
    second = tokens.count_tokens(history + "Question: where did she go?")
    assert second == len(tokens.encode(history + "Question: where did she go?"))
    assert 0 < sum(encoded) < 3 * tokens._PIECE_CHARS < len(history) / 4  # only the tail
