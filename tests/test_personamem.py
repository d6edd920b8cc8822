"""PersonaMem's 32k split, the paper's "PersonaMem v2": conversations are (shared context, end
index) pairs, a question sees only the messages before its end index, the options parse, and
every bad input stops in one line naming the file, the row and the field."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pandas as pd
import pytest

from memcost import data
from memcost.data.benchmark import BenchmarkData
from memcost.data.personamem import PERSONAMEM_QUESTION_TYPES
from memcost.data.sources import PERSONAMEM_CONTEXTS, PERSONAMEM_QUESTIONS
from memcost.paths import SAMPLE_DIR, DataError, RunPaths

FOLDER = SAMPLE_DIR / "personamem"


def _rows() -> list[dict[str, str]]:
    text = (FOLDER / PERSONAMEM_QUESTIONS).read_bytes().decode("utf-8")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _contexts() -> dict[str, list[dict[str, str]]]:
    lines = (FOLDER / PERSONAMEM_CONTEXTS).read_text(encoding="utf-8").splitlines()
    return {k: v for line in lines for k, v in json.loads(line).items()}


@pytest.fixture(scope="module")
def loaded() -> BenchmarkData:
    return data.load(data.resolve_source("personamem"))


def test_a_conversation_is_a_shared_context_up_to_an_end_index(loaded):
    rows, contexts = _rows(), _contexts()
    pairs = {(r["shared_context_id"], int(r["end_index_in_shared_context"])) for r in rows}
    ids = set(loaded.conversations["conversation_id"])
    assert ids == {f"{c}@{end}" for c, end in pairs}
    assert len(contexts) == 2 and len(ids) == len(pairs) == 8
    assert loaded.checks == {"shared_contexts": 2, "conversations": 8, "questions": 8}
    # the questions CSV is published with CRLF line endings, and it is read as such
    assert (FOLDER / PERSONAMEM_QUESTIONS).read_bytes().count(b"\r\n") == len(rows) + 1


def test_a_question_sees_only_the_messages_before_its_end_index(loaded):
    contexts = {k: v for k, v in _contexts().items()}
    by_id = {r["question_id"]: r for r in _rows()}
    for q in loaded.questions.itertuples():
        row = by_id[q.question_id]
        end = int(row["end_index_in_shared_context"])
        messages = contexts[row["shared_context_id"]]
        turns = loaded.conversations.loc[
            loaded.conversations["conversation_id"] == q.conversation_id
        ].sort_values("position")
        assert list(turns["text"]) == [m["content"] for m in messages[1:end]]
        assert list(turns["role"]) == [m["role"] for m in messages[1:end]]
        later = {m["content"] for m in messages[end:]}
        assert later and not later & set(turns["text"])  # nothing after its end index
    texts = set(loaded.conversations["text"])
    assert not any(t.startswith("Current user persona") for t in texts)  # the persona is not
    # dialogue: it stays out of the turns, and so out of Table 1
    ends = {int(r["end_index_in_shared_context"]) for r in _rows()}
    assert len(ends) == 8  # asked at eight different points


def test_the_options_parse_and_the_gold_answer_is_the_correct_option(loaded):
    by_id = {r["question_id"]: r for r in _rows()}
    for q in loaded.questions.itertuples():
        row = by_id[q.question_id]
        listed = json.loads(row["all_options"])
        letter = row["correct_answer"].strip("()")
        correct = listed["abcd".index(letter)][4:]
        assert q.answer == correct and list(q.options)[0] == correct
        assert sorted(q.options) == sorted(o[4:] for o in listed)
        assert q.question == row["user_question_or_message"]
        assert q.category == row["question_type"]
        assert q.category_id == PERSONAMEM_QUESTION_TYPES.index(q.category) + 1
        assert json.loads(q.extra)["correct_letter"] == letter


def _copy(tmp_path, edit=None, contexts=None):
    folder = tmp_path / "pm"
    shutil.copytree(FOLDER, folder)
    if edit is not None:
        rows = _rows()
        header = list(rows[0])
        edit(rows, header)
        buffer = io.StringIO()
        writer = csv.DictWriter(
            buffer, fieldnames=header, lineterminator="\r\n", extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(rows)
        (folder / PERSONAMEM_QUESTIONS).write_bytes(buffer.getvalue().encode("utf-8"))
    if contexts is not None:
        (folder / PERSONAMEM_CONTEXTS).write_text(contexts, encoding="utf-8")
    return folder


def _set(row: int, field: str, value: str):
    def edit(rows, header):
        rows[row][field] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda rows, header: header.remove("all_options"),
            r"questions_32k.csv: header \(line 1\): .*missing field\(s\) all_options$",
        ),
        (
            _set(2, "shared_context_id", "no-such-context"),
            r"questions_32k.csv: row 2 \(line 4, question_id '\w+'\): field shared_context_id: "
            r"'no-such-context' is not in shared_contexts_32k.jsonl",
        ),
        (
            _set(1, "end_index_in_shared_context", "999"),
            r"row 1 \(line 3, .*\): field end_index_in_shared_context: 999 is past the end of its "
            r"shared context \(\d+ messages\)",
        ),
        (
            _set(0, "all_options", json.dumps(["(a) yes", "(b) no", "(c) maybe"])),
            r"row 0 \(line 2, .*\): field all_options: expected a list \(JSON or a Python "
            r"literal\) of four strings",
        ),
        (
            _set(0, "all_options", json.dumps(["a) yes", "(b) no", "(c) maybe", "(d) never"])),
            r"row 0 \(line 2, .*\): field all_options: expected a list \(JSON or a Python "
            r"literal\) of four strings",
        ),
        (
            _set(3, "correct_answer", "c"),
            r"row 3 \(line 5, .*\): field correct_answer: expected an option letter such as \(c\)",
        ),
        (
            _set(4, "question_type", "guess_the_weather"),
            r"row 4 \(line 6, .*\): field question_type: 'guess_the_weather' is not one of",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_file_the_row_and_the_field(tmp_path, edit, message):
    folder = _copy(tmp_path, edit)
    with pytest.raises(DataError, match=message) as info:
        data.load(data.resolve_source("personamem", folder))
    assert "\n" not in str(info.value) and str(folder) in str(info.value)


def test_a_contexts_file_that_is_missing_or_torn_is_named(tmp_path):
    folder = _copy(tmp_path)
    (folder / PERSONAMEM_CONTEXTS).unlink()
    with pytest.raises(DataError, match=r"shared_contexts_32k.jsonl: file not found"):
        data.load(data.resolve_source("personamem", folder / PERSONAMEM_QUESTIONS))
    torn = '{"abc": [{"role": "user", "content": "hi"}]}\n{"ab'
    folder = _copy(tmp_path / "again", contexts=torn)
    with pytest.raises(DataError, match=r"shared_contexts_32k.jsonl: line 2: not JSON"):
        data.load(data.resolve_source("personamem", folder))


def test_data_path_may_be_the_folder_or_the_csv_beside_the_contexts(tmp_path):
    folder = _copy(tmp_path)
    by_folder = data.load(data.resolve_source("personamem", folder))
    by_csv = data.load(data.resolve_source("personamem", folder / PERSONAMEM_QUESTIONS))
    pd.testing.assert_frame_equal(by_folder.questions, by_csv.questions)
    assert {f.sha256 for f in by_folder.files} == {f.sha256 for f in by_csv.files}
    assert len(by_folder.files) == 2  # both files' bytes are on record


def test_notebook_00_writes_tables_1_and_2_from_files_in_this_schema(tmp_path):
    """``papermill 00_prepare_data.ipynb -p dataset personamem -p data_path <folder>``."""
    from memcost.paths import NOTEBOOKS_DIR
    from memcost.run.runner import execute_notebook

    folder = _copy(tmp_path)
    run_dir = tmp_path / "run"
    execute_notebook(
        NOTEBOOKS_DIR / "00_prepare_data.ipynb",
        tmp_path / "00.ipynb",
        {"run_dir": str(run_dir), "dataset": "personamem", "data_path": str(folder)},
    )
    ds = RunPaths(run_dir).dataset("personamem")
    table1 = pd.read_csv(ds.table.table1)
    table2 = pd.read_csv(ds.table.table2)
    assert len(table1) == len(table2) == 1
    for table in (table1, table2):
        assert {"n", "min", "max", "median", "mean"} <= set(table.columns)
    assert table1["n"].iloc[0] == 8 and table2["n"].iloc[0] == 8
    expected = data.prepare(data.load(data.resolve_source("personamem", folder)))
    assert table1["max"].iloc[0] == expected.table1["max"].iloc[0]
