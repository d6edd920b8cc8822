"""Atomic writes and append-only JSONL: nothing half-written, a torn tail survivable."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memcost import io


def test_atomic_open_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), io.atomic_open(target) as handle:
        handle.write("half of the new")
        raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]  # no temp file left behind


def test_write_parquet_and_json_roundtrip(tmp_path):
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    io.write_parquet(tmp_path / "f.parquet", frame)
    assert pd.read_parquet(tmp_path / "f.parquet").equals(frame)
    io.write_json(tmp_path / "m.json", {"k": [1, 2]})
    assert io.read_json(tmp_path / "m.json") == {"k": [1, 2]}


def test_read_json_names_file_and_position(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"a": 1,\n "b": }')
    with pytest.raises(ValueError, match=r"broken.json: not valid JSON at line 2, column 7"):
        io.read_json(path)


def test_jsonl_torn_tail_is_skipped_and_repaired(tmp_path):
    path = tmp_path / "calls.jsonl"
    with io.JsonlAppender(path) as out:
        out.write({"i": 1})
        out.write({"i": 2})
    with open(path, "a") as handle:  # a writer killed mid-record
        handle.write('{"i": 3, "text": "cut he')
    assert [r["i"] for r in io.read_jsonl(path)] == [1, 2]
    with io.JsonlAppender(path) as out:  # the next writer starts on a fresh line
        out.write({"i": 4})
    assert [r["i"] for r in io.read_jsonl(path)] == [1, 2, 4]


def test_jsonl_corrupt_complete_line_is_an_error(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"i": 1}) + "\n" + '{"i": 2,, }\n')
    with pytest.raises(ValueError, match="a.jsonl: line 2"):
        io.read_jsonl(path)
    assert io.read_jsonl(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        io.read_jsonl(tmp_path / "none.jsonl")
