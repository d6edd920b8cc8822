"""memcost.data: loaders on the bundled samples, date parsers, table conventions, the hand-over
files (bad input: test_data_errors.py)."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pyarrow.parquet as pq
import pytest

from memcost import data, paper
from memcost.data.benchmark import (
    CONVERSATION_COLUMNS,
    QUESTION_COLUMNS,
    BenchmarkData,
    conversation_stats_path,
    read_conversation_stats,
    read_prepared,
    session_header,
)
from memcost.data.locomo import LOCOMO_ABSTENTION_ANSWER, load_locomo, parse_locomo_datetime
from memcost.data.longmemeval import LONGMEMEVAL_TYPES, parse_longmemeval_datetime
from memcost.data.prepare import (
    conversation_stats,
    question_tokens,
    round_half_up,
    summarize_counts,
    table1,
    table2,
)
from memcost.data.sources import PERSONAMEM_V2_CSV
from memcost.paths import SAMPLE_DIR, DataError
from memcost.text import count_tokens

LOCOMO = SAMPLE_DIR / "locomo" / "locomo10.json"
LONGMEMEVAL = SAMPLE_DIR / "longmemeval" / "longmemeval_s_cleaned.json"
ORACLE = SAMPLE_DIR / "longmemeval" / "longmemeval_oracle.json"
PERSONAMEM = SAMPLE_DIR / "personamem_v2"


@pytest.fixture(scope="module")
def locomo() -> BenchmarkData:
    return data.load(data.resolve_source("locomo"))


@pytest.fixture(scope="module")
def longmemeval() -> BenchmarkData:
    return data.load(data.resolve_source("longmemeval"))


@pytest.fixture(scope="module")
def personamem() -> BenchmarkData:
    return data.load(data.resolve_source("personamem_v2"))


def _raw(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# --- Dates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00"),
        ("10:37 am on 27 June, 2023", "2023-06-27T10:37:00"),
        ("12:09 am on 13 January, 2023", "2023-01-13T00:09:00"),
        ("12:30 pm on 1 February, 2024", "2024-02-01T12:30:00"),
        ("7:05 PM on 29 February, 2024", "2024-02-29T19:05:00"),
        ("9:00 am on 3 Sept, 2023", "2023-09-03T09:00:00"),
    ],
)
def test_parse_locomo_datetime(text, iso):
    assert parse_locomo_datetime(text) == iso


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2023/05/20 (Sat) 02:21", "2023-05-20T02:21:00"),
        ("2023/12/31 (Sun) 23:59", "2023-12-31T23:59:00"),
        ("2024/02/29 (Thu) 00:00", "2024-02-29T00:00:00"),
    ],
)
def test_parse_longmemeval_datetime(text, iso):
    assert parse_longmemeval_datetime(text) == iso


@pytest.mark.parametrize(
    "text",
    [
        "1:56 pm on 8 Mey, 2023",
        "13:56 pm on 8 May, 2023",
        "1:56 pm on 30 February, 2023",
        "8 May 2023",
        "",
        "2023/05/20 (Sat) 02:21",
    ],
)
def test_parse_locomo_datetime_rejects(text):
    with pytest.raises(DataError, match="cannot parse date"):
        parse_locomo_datetime(text)


@pytest.mark.parametrize(
    "text", ["2023/13/20 (Sat) 02:21", "20/05/2023 02:21", "1:56 pm on 8 May, 2023"]
)
def test_parse_longmemeval_datetime_rejects(text):
    with pytest.raises(DataError, match="cannot parse date"):
        parse_longmemeval_datetime(text)


# --- Table conventions ---------------------------------------------------------------------------


def test_upper_median_and_half_up_rounding():
    # Even n: the upper median is sorted[n // 2], not the average of the two middle values.
    assert summarize_counts([4, 1, 3, 2], mean_decimals=0) == {
        "n": 4,
        "min": 1,
        "max": 4,
        "median": 3,
        "mean": 3,
    }  # mean 2.5 rounds up, not to even
    assert summarize_counts([5, 1, 3], mean_decimals=0)["median"] == 3
    assert summarize_counts([10, 20], mean_decimals=0)["median"] == 20
    assert summarize_counts([1, 2, 2, 2], mean_decimals=1)["mean"] == 1.8  # 1.75
    assert summarize_counts([0, 0, 0, 1], mean_decimals=1)["mean"] == 0.3  # 0.25
    assert summarize_counts([0, 0, 0, 1], mean_decimals=0)["mean"] == 0
    assert round_half_up(2.5) == 3 and round(2.5) == 2
    with pytest.raises(ValueError):
        summarize_counts([], mean_decimals=0)


def test_tables_have_exact_columns_and_rounding():
    t1 = table1("locomo", pd.DataFrame({"text_tokens": [9690, 17788, 19242, 15000]}))
    assert list(t1.columns) == ["dataset", "n", "min", "max", "median", "mean"]
    assert t1.iloc[0].tolist() == ["LoCoMo", 4, 9690, 19242, 17788, 15430]
    t2 = table2("locomo", [4, 28, 11, 12, 5])
    assert t2.iloc[0].tolist() == ["LoCoMo", 5, 4, 28, 11, 12.0]
    assert t2.to_csv(index=False).splitlines()[1] == "LoCoMo,5,4,28,11,12.0"


def test_paper_locomo_rows_come_out_with_the_paper_conventions():
    # Ten conversation counts with the paper's LoCoMo n/min/max/upper median/mean. A lower or
    # averaged median (17,114) or banker's rounding would not reproduce the row.
    conversations = [9690, 12000, 14000, 15000, 16440, 17788, 18000, 18500, 19000, 19242]
    questions = [4] + [11] * 1000 + [13] * 984 + [28]
    prepared = SimpleNamespace(
        data=SimpleNamespace(dataset="locomo"),
        table1=table1("locomo", pd.DataFrame({"text_tokens": conversations})),
        table2=table2("locomo", questions),
    )
    assert prepared.table1.iloc[0].tolist() == ["LoCoMo", *paper.TABLE1["locomo"]]
    assert prepared.table2.iloc[0].tolist() == ["LoCoMo", *paper.TABLE2["locomo"]]
    assert data.paper_comparison(prepared)["matches_paper"].all()
    prepared.table1 = table1("locomo", pd.DataFrame({"text_tokens": conversations[1:]}))
    assert not data.paper_comparison(prepared)["matches_paper"].iloc[0]


def test_table_text_joins_utterances_in_order_without_speakers_or_dates(tmp_path):
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_2_date_time": "9:00 am on 2 May, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Second session."}],
            "session_1_date_time": "8:00 am on 1 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hello there."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Hi Ann!"},
            ],
        },
        "qa": [{"question": "Who said hi?", "answer": "Bo", "evidence": ["D1:2"], "category": 4}],
    }
    loaded = load_locomo(_write_json(tmp_path / "locomo10.json", [sample]))
    expected = "Hello there.\nHi Ann!\nSecond session."
    shuffled = loaded.conversations.sample(frac=1, random_state=3)
    assert data.table_text(shuffled) == expected
    stats = conversation_stats(loaded.conversations, loaded.questions)
    assert stats["text_tokens"].tolist() == [count_tokens(expected)]
    assert stats["history_tokens"].tolist() == [count_tokens(data.render_history(shuffled))]
    assert question_tokens(loaded.questions) == [count_tokens("Who said hi?")]


def test_render_history_heads_sessions_with_dates(locomo):
    text = data.render_history(locomo.conversation("conv-1"))
    lines = text.splitlines()
    raw = _raw(LOCOMO)[0]["conversation"]
    first = parse_locomo_datetime(raw["session_1_date_time"])
    assert lines[0] == session_header(1, first)
    assert lines[0].startswith("[Session 1 · ") and lines[0].endswith("]")
    assert lines[1] == f"Maya: {raw['session_1'][0]['text']}"
    assert text.count("[Session ") == 6
    window = data.render_history(locomo.conversation("conv-1").tail(3))
    assert window.startswith("[Session 6 · ") and window.count("\n") == 3
    assert "[shares a photo: a photo of a half painted mural" in text
    header = session_header(3, "2023-05-08T13:56:00")
    assert header == "[Session 3 · Monday 8 May 2023, 13:56]"
    assert session_header(1, None) == "[Session 1]"


# --- Loaders on the bundled samples --------------------------------------------------------------


def test_locomo_sample(locomo):
    conv, qs = locomo.conversations, locomo.questions
    assert list(conv.columns) == list(CONVERSATION_COLUMNS)
    assert list(qs.columns) == list(QUESTION_COLUMNS)
    raw = _raw(LOCOMO)
    assert conv["conversation_id"].unique().tolist() == ["conv-1", "conv-2"]
    assert len(qs) == sum(len(s["qa"]) for s in raw) == 33
    assert qs.groupby("category_id").size().to_dict() == {1: 5, 2: 7, 3: 2, 4: 13, 5: 6}
    assert set(conv["role"]) == {"user"}
    # a specific turn and its session date
    turn = conv[(conv["conversation_id"] == "conv-1") & (conv["dia_id"] == "D1:4")].iloc[0]
    assert turn["speaker"] == "Jonas" and "beagle called Pretzel" in turn["text"]
    assert turn["session_datetime"] == "2023-03-01T14:59:00"
    assert turn["session_id"] == "session_1" and turn["session_index"] == 0
    photo = conv[(conv["conversation_id"] == "conv-1") & (conv["dia_id"] == "D2:7")].iloc[0]
    assert photo["image_caption"].startswith("a photo of a half painted mural")
    # positions run 0..n-1 per conversation, sessions in numeric order
    for _, group in conv.groupby("conversation_id"):
        assert group["position"].tolist() == list(range(len(group)))
        assert group["session_datetime"].is_monotonic_increasing
    # questions: ids, categories, answers as strings, adversarial handling
    q0 = qs.set_index("question_id").loc["conv-1-q0"]
    assert (q0["question"], q0["answer"], q0["category"], q0["category_id"]) == (
        "What breed is Jonas's dog?",
        "A beagle",
        "single_hop",
        4,
    )
    assert list(q0["evidence"]) == ["D1:4"]
    integer = qs.set_index("question_id").loc["conv-1-q6"]
    assert integer["answer"] == "3" and isinstance(integer["answer"], str)
    adversarial = qs[qs["category_id"] == 5]
    assert (
        adversarial["is_abstention"].all() and not qs[qs["category_id"] != 5]["is_abstention"].any()
    )
    assert (adversarial["answer"] == LOCOMO_ABSTENTION_ANSWER).all()
    trap = qs.set_index("question_id").loc["conv-1-q16"]
    assert (trap["question"], trap["adversarial_answer"]) == (
        "What breed is Maya's dog?",
        "A beagle",
    )
    # the item whose evidence is a printed list in the raw file
    printed = qs.set_index("question_id").loc["conv-2-q11"]
    assert isinstance(raw[1]["qa"][11]["evidence"], str)
    assert list(printed["evidence"]) == ["D1:5"]
    assert qs["options"].isna().all() and qs["question_date"].isna().all()
    assert locomo.checks["locomo_category_counts"]["checked"] is False  # not the full file


def test_locomo_sessions_are_ordered_numerically(tmp_path):
    conversation = {"speaker_a": "A", "speaker_b": "B"}
    numbers = list(range(1, 12))
    random.Random(1).shuffle(numbers)
    for n in numbers:
        conversation[f"session_{n}"] = [{"speaker": "A", "dia_id": f"D{n}:1", "text": f"s{n}"}]
        conversation[f"session_{n}_date_time"] = f"10:00 am on {n} March, 2023"
    sample = {
        "sample_id": "conv-9",
        "conversation": conversation,
        "qa": [{"question": "q?", "answer": "a", "evidence": [], "category": 4}],
    }
    loaded = load_locomo(_write_json(tmp_path / "locomo10.json", [sample]))
    conv = loaded.conversations
    assert conv["session_id"].tolist() == [f"session_{n}" for n in range(1, 12)]
    assert conv["session_index"].tolist() == list(range(11))
    assert data.table_text(conv) == "\n".join(f"s{n}" for n in range(1, 12))


def test_longmemeval_sample(longmemeval):
    conv, qs = longmemeval.conversations, longmemeval.questions
    raw = _raw(LONGMEMEVAL)
    assert len(qs) == len(raw) == 11
    assert qs["question_id"].tolist() == qs["conversation_id"].tolist()
    assert set(qs["category"]) == set(LONGMEMEVAL_TYPES)
    assert qs["is_abstention"].sum() == 2
    assert qs[qs["is_abstention"]]["question_id"].str.endswith("_abs").all()
    assert qs["category_id"].isna().all() and qs["adversarial_answer"].isna().all()
    first = raw[0]
    row = qs.iloc[0]
    assert row["question"] == first["question"] and row["answer"] == str(first["answer"])
    assert row["question_date"] == parse_longmemeval_datetime(first["question_date"])
    assert list(row["evidence"]) == first["answer_session_ids"]
    books = qs[qs["question"].str.startswith("How many books")].iloc[0]
    assert books["answer"] == "3"  # an integer in the file
    # turns: roles, evidence flags, chronological sessions
    assert set(conv["role"]) == {"user", "assistant"}
    assert conv["speaker"].equals(conv["role"])
    assert conv["has_answer"].dtype == bool and conv["has_answer"].sum() == sum(
        t.get("has_answer", False) for item in raw for s in item["haystack_sessions"] for t in s
    )
    first_turns = conv[conv["conversation_id"] == first["question_id"]]
    assert first_turns["session_id"].unique().tolist() == first["haystack_session_ids"]
    for _, group in conv.groupby("conversation_id"):
        assert group["session_datetime"].is_monotonic_increasing
        assert group["position"].tolist() == list(range(len(group)))
    flagged = conv[conv["has_answer"]]
    assert flagged["session_id"].str.startswith("answer_").all()


def test_longmemeval_oracle_sessions_are_sorted_by_date(longmemeval):
    oracle = data.load(data.resolve_source("longmemeval", longmemeval_file="oracle"))
    raw = _raw(ORACLE)
    assert any(item["haystack_dates"] != sorted(item["haystack_dates"]) for item in raw)
    for _, group in oracle.conversations.groupby("conversation_id"):
        assert group["session_datetime"].is_monotonic_increasing
    # every oracle turn is an evidence-session turn of the S file, in the same order
    s_conv = longmemeval.conversations
    evidence_turns = s_conv[s_conv["session_id"].str.startswith("answer_")]
    assert oracle.conversations["text"].tolist() == evidence_turns["text"].tolist()


def test_personamem_sample(personamem):
    conv, qs = personamem.conversations, personamem.questions
    with open(PERSONAMEM / PERSONAMEM_V2_CSV, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(qs) == len(rows) == 12
    assert sorted(conv["conversation_id"].unique()) == [
        "chat_history_persona0",
        "chat_history_persona1",
        "chat_history_persona2",
    ]
    assert qs["question_id"].tolist() == [f"pm-{i}" for i in range(12)]
    for row, q in zip(rows, qs.itertuples(), strict=True):
        # link resolution: each question belongs to the history its row links to
        assert q.conversation_id == Path(row["chat_history_32k_link"]).stem
        assert q.conversation_id == f"chat_history_persona{row['persona_id']}"
        assert q.category == row["pref_type"]
        assert len(q.options) == 4 and q.options[0] == q.answer == row["correct_answer"]
        assert list(q.options[1:]) == json.loads(row["incorrect_answers"])
        assert q.question in row["user_query"] and not q.question.startswith("{")
        extra = json.loads(q.extra)
        assert extra["persona_id"] == row["persona_id"] and extra["updated"] in ("True", "False")
        assert "correct_answer" not in extra
    assert not qs["is_abstention"].any() and qs["evidence"].map(len).eq(0).all()
    assert conv["session_datetime"].isna().all() and (conv["session_id"] == "history").all()
    firsts = conv.groupby("conversation_id").head(1)
    assert (firsts["role"] == "system").all()
    assert firsts["text"].str.startswith("You are an AI assistant").all()


def test_personamem_link_with_machine_prefix_is_rerooted(tmp_path):
    root = tmp_path / "pm"
    shutil.copytree(PERSONAMEM, root)
    csv_path = root / PERSONAMEM_V2_CSV
    text = csv_path.read_text(encoding="utf-8").replace(
        "data/chat_history_32k/", "/home/someone/PersonaMem-v2/data/chat_history_32k/"
    )
    csv_path.write_text(text, encoding="utf-8")
    loaded = data.load(data.resolve_source("personamem_v2", root))
    assert loaded.conversations["conversation_id"].nunique() == 3
    assert all("chat_history_32k" in f.path for f in loaded.files[1:])


def test_resolve_source_accepts_folders_and_files(tmp_path):
    assert data.resolve_source("locomo").origin == "sample"
    assert data.resolve_source("locomo", LOCOMO.parent).path == LOCOMO.resolve()
    assert data.resolve_source("longmemeval", LONGMEMEVAL).origin == "local"
    pm = data.resolve_source("personamem_v2", PERSONAMEM / PERSONAMEM_V2_CSV)
    assert pm.root == PERSONAMEM.resolve()
    # a local copy wins over download (what a failed download advises on top of a preset)
    assert data.resolve_source("locomo", LOCOMO, download=True).origin == "local"
    with pytest.raises(DataError, match="unknown LongMemEval file 'x'.*s, m, oracle"):
        data.resolve_source("longmemeval", longmemeval_file="x")


# --- Selection -----------------------------------------------------------------------------------


def test_select_limits_and_drops_unasked_conversations(locomo, longmemeval):
    first = data.select(locomo, limit_conversations=1)
    assert first.conversations["conversation_id"].unique().tolist() == ["conv-1"]
    assert len(first.questions) == 19
    few = data.select(locomo, limit_questions=5)
    assert few.questions["question_id"].tolist() == [f"conv-1-q{i}" for i in range(5)]
    assert few.conversations["conversation_id"].unique().tolist() == ["conv-1"]
    lme = data.select(longmemeval, limit_questions=3)
    assert lme.conversations["conversation_id"].nunique() == 3
    assert lme.selection["questions"] == 3 and lme.selection["of_questions"] == 11
    with pytest.raises(ValueError, match="limit_questions"):
        data.select(locomo, limit_questions=-1)


def test_seeded_samplers_are_reproducible_and_cover_conversations(longmemeval, personamem):
    a = data.select(longmemeval, sample_conversations=5, seed=7)
    b = data.select(longmemeval, sample_conversations=5, seed=7)
    c = data.select(longmemeval, sample_conversations=5, seed=8)
    assert a.questions["question_id"].tolist() == b.questions["question_id"].tolist()
    assert a.questions["question_id"].tolist() != c.questions["question_id"].tolist()
    order = longmemeval.questions["question_id"].tolist()
    kept = a.questions["question_id"].tolist()
    assert kept == [q for q in order if q in kept]  # source order is kept
    for seed in range(20):
        s = data.select(personamem, sample_questions=4, seed=seed)
        assert len(s.questions) == 4
        assert s.questions["conversation_id"].nunique() == 3  # every history keeps a question
    both = data.select(personamem, sample_conversations=2, sample_questions=3, seed=1)
    assert both.conversations["conversation_id"].nunique() == 2 and len(both.questions) == 3


# --- Writing -------------------------------------------------------------------------------------


def test_write_prepared_files_and_schemas(run_paths, personamem):
    prepared = data.prepare(data.select(personamem))
    ds = run_paths.dataset("personamem_v2")
    written = data.write_prepared(ds, prepared)
    for path in written.values():
        assert path.is_file()
    schema = pq.read_schema(ds.questions)
    assert str(schema.field("options").type) == "list<element: string>"
    assert str(schema.field("evidence").type) == "list<element: string>"
    assert str(schema.field("category_id").type) == "int64"
    locomo_like = pq.read_schema(ds.conversations)
    assert str(locomo_like.field("has_answer").type) == "bool"
    back = pd.read_parquet(ds.questions)
    assert list(back["options"].iloc[0]) == list(prepared.data.questions["options"].iloc[0])
    table1 = (ds.tables / "table1_conversation_tokens.csv").read_text().splitlines()
    assert table1[0] == "dataset,n,min,max,median,mean"
    assert table1[1].startswith("PersonaMem-v2 release,3,")
    assert (
        "| dataset | n | min | max | median | mean |"
        in (ds.tables / "table2_question_tokens.md").read_text()
    )
    data.record_provenance(run_paths, prepared.data)
    manifest = json.loads(run_paths.manifest.read_text())
    files = manifest["provenance"]["personamem_v2"]["files"]
    assert len(files) == 4 and all(len(f["sha256"]) == 64 for f in files)


def test_readers_give_back_what_was_written(run_paths, locomo):
    ds = run_paths.dataset("locomo")
    with pytest.raises(
        FileNotFoundError,
        match=r"conversation_stats\.parquet: not found; run "
        r"notebooks/00_prepare_data\.ipynb",
    ):
        read_conversation_stats(ds)
    prepared = data.prepare(data.select(locomo))
    data.write_prepared(ds, prepared)
    conversations, questions = read_prepared(ds)
    assert conversations["text"].tolist() == locomo.conversations["text"].tolist()
    assert questions["question_id"].tolist() == locomo.questions["question_id"].tolist()
    stats = read_conversation_stats(ds)
    assert conversation_stats_path(ds) == ds.data / "conversation_stats.parquet"
    assert stats["history_tokens"].tolist() == prepared.stats["history_tokens"].tolist()
    assert stats["text_tokens"].tolist() == [
        count_tokens(data.table_text(locomo.conversation(c))) for c in stats["conversation_id"]
    ]


@pytest.mark.parametrize("dataset", ["locomo", "longmemeval", "personamem_v2"])
def test_native_excerpt_is_the_raw_record(dataset):
    source = data.resolve_source(dataset)
    loaded = data.load(source)
    conversation_id = loaded.conversations["conversation_id"].iloc[-1]
    excerpt = data.native_excerpt(source, conversation_id, turns=2)
    first_turns = loaded.conversation(conversation_id)["text"].tolist()[:2]
    if dataset == "locomo":
        raw = next(s for s in _raw(LOCOMO) if s["sample_id"] == conversation_id)
        assert excerpt["sample_id"] == conversation_id and excerpt["qa[0]"] == raw["qa"][0]
        assert [t["text"] for t in excerpt["session_1[:2]"]] == first_turns
    elif dataset == "longmemeval":
        raw = next(q for q in _raw(LONGMEMEVAL) if q["question_id"] == conversation_id)
        assert excerpt["question"] == raw["question"]
        assert excerpt["haystack_sessions[0][:2]"] == raw["haystack_sessions"][0][:2]
    else:
        assert conversation_id in excerpt["chat_history_32k_link"]
        assert [m["content"] for m in excerpt["chat_history[:2]"]] == first_turns
