"""The synthetic workloads: deterministic per seed, inside the length band, cached on disk."""

from __future__ import annotations

import pandas as pd
import pytest

from memcost.text import count_tokens
from memcost_serving import workload as wl


def test_same_seed_same_conversation_other_seed_other_conversation():
    a = wl.workload_frame(wl.generate_workload(40, 100, seed=5))
    b = wl.workload_frame(wl.generate_workload(40, 100, seed=5))
    c = wl.workload_frame(wl.generate_workload(40, 100, seed=6))
    pd.testing.assert_frame_equal(a, b)
    assert a["text"].tolist() != c["text"].tolist()
    assert a["speaker"].nunique() == 2 and (a["speaker"].iloc[0] != a["speaker"].iloc[1])


@pytest.mark.parametrize("cell", [(15, 50), (15, 200), (60, 100), (40, 20)])
def test_every_turn_is_inside_the_band_and_the_mean_is_l(cell):
    n, size = cell
    turns = wl.generate_workload(n, size, seed=1)
    low, high = wl.length_band(size)
    assert len(turns) == n and [t.turn for t in turns] == list(range(n))
    assert all(low <= t.tokens <= high for t in turns)
    assert all(t.tokens == count_tokens(t.text) for t in turns)
    assert abs(sum(t.tokens for t in turns) / n - size) < 0.05 * size
    assert sum(len(t.facts) for t in turns) > 0  # planted facts for memory to find


def test_length_control_pads_short_turns_and_cuts_long_ones():
    padded, action = wl.control_length("Hi.", 100)
    assert action == "padded" and 85 <= count_tokens(padded) <= 115
    assert padded.startswith("Hi.") and wl.FILLER in padded
    long_text = " ".join(["The garden needs watering every single evening this summer."] * 40)
    cut, action = wl.control_length(long_text, 100)
    assert action == "cut" and count_tokens(cut) <= 115 and long_text.startswith(cut)
    same, action = wl.control_length(" ".join(["word"] * 100), 100)
    assert action == "ok"


def test_workloads_are_cached_per_cell_and_seed(tmp_path, monkeypatch):
    first = wl.cached_workload(tmp_path, 20, 50, 2)
    path = wl.workload_path(tmp_path, 20, 50, 2, "template")
    assert path.is_file()

    def refuse(*args, **kwargs):
        raise AssertionError("generated again instead of read from the cache")

    monkeypatch.setattr(wl, "generate_workload", refuse)
    assert wl.cached_workload(tmp_path, 20, 50, 2) == first
    with pytest.raises(AssertionError):
        wl.cached_workload(tmp_path, 20, 50, 3)


def test_a_block_generator_writes_twenty_turns_at_a_time_under_the_same_length_control():
    calls = []

    def block(start, count, size, speakers, recent):
        calls.append((start, count, len(recent)))
        return ["ok."] * count

    turns = wl.generate_workload(45, 30, seed=0, block_generator=block)
    assert calls == [(0, 20, 0), (20, 20, 4), (40, 5, 4)]
    assert all(t.length_action == "padded" for t in turns)
    low, high = wl.length_band(30)
    assert all(low <= t.tokens <= high for t in turns)
    with pytest.raises(ValueError, match="returned 1 messages"):
        wl.generate_workload(5, 30, seed=0, block_generator=lambda *a: ["one"])


def test_real_conversation_rows_become_a_workload():
    rows = pd.DataFrame(
        {
            "position": [1, 0],
            "speaker": ["Bob", "Ann"],
            "text": ["fine  thanks", "hello\nthere"],
            "image_caption": [None, "a cat"],
        }
    )
    turns = wl.real_workload(rows)
    assert [t.speaker for t in turns] == ["Ann", "Bob"]
    assert turns[0].text == "hello there [shares a photo: a cat]"
    assert turns[1].line_tokens == count_tokens("Bob: fine thanks\n")
