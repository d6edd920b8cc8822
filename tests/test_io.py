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


def test_written_files_honour_the_umask(tmp_path):
    import os
    import stat

    from memcost.io import write_json, write_text

    for mask, expected in ((0o022, 0o644), (0o027, 0o640)):
        old = os.umask(mask)
        try:
            write_json(tmp_path / "a.json", {"x": 1})
            write_text(tmp_path / "b.txt", "hello")
        finally:
            os.umask(old)
        for name in ("a.json", "b.txt"):
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == expected


def test_json_safe_unwraps_numpy_and_nulls_nan(tmp_path):
    import math

    import numpy as np

    from memcost.io import json_safe, read_jsonl, write_jsonl

    value = {"a": np.int64(3), "b": np.float32(0.5), "c": math.nan, "d": (1, np.array([2, 3]))}
    assert json_safe(value) == {"a": 3, "b": 0.5, "c": None, "d": [1, [2, 3]]}
    write_jsonl(tmp_path / "x.jsonl", [value, {"e": "é"}])
    assert read_jsonl(tmp_path / "x.jsonl") == [json_safe(value), {"e": "é"}]


def test_an_appender_syncs_each_record_or_at_most_as_often_as_asked(tmp_path, monkeypatch):
    synced: list[int] = []
    real_fsync = io.os.fsync
    monkeypatch.setattr(io.os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    with io.JsonlAppender(tmp_path / "each.jsonl") as out:
        for i in range(20):
            out.write({"i": i})
    assert len(synced) == 21  # every record, and the close
    synced.clear()
    with io.JsonlAppender(tmp_path / "bounded.jsonl", sync_every_s=3600) as out:
        for i in range(20):
            out.write({"i": i})
        assert synced == []  # flushed (a reader sees them), not yet synced
        assert len(io.read_jsonl(tmp_path / "bounded.jsonl")) == 20
    assert len(synced) == 1  # the close
