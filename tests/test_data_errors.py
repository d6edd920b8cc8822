"""memcost.data on bad input: every error names the file, the record and what is wrong; the
downloads say how to work offline; the LoCoMo category counts are checked on a full-size file."""

from __future__ import annotations

import copy
import csv
import json
import shutil
import warnings
from pathlib import Path

import pytest

from memcost import data
from memcost.data.benchmark import DataWarning
from memcost.data.locomo import LOCOMO_CATEGORY_COUNTS, LOCOMO_FULL_SAMPLES, load_locomo
from memcost.data.longmemeval import load_longmemeval
from memcost.data.sources import (
    LOCOMO_REVISION,
    PERSONAMEM_QUESTIONS,
    PERSONAMEM_V2_CSV,
    download_dataset,
)
from memcost.paths import SAMPLE_DIR, DataError

LOCOMO = SAMPLE_DIR / "locomo" / "locomo10.json"
LONGMEMEVAL = SAMPLE_DIR / "longmemeval" / "longmemeval_s_cleaned.json"
ORACLE = SAMPLE_DIR / "longmemeval" / "longmemeval_oracle.json"
PERSONAMEM = SAMPLE_DIR / "personamem_v2"


def _raw(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _write_json(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# --- Bad input: each error names the file and what is wrong -------------------------------------


def test_unknown_dataset_lists_valid_ones():
    with pytest.raises(
        DataError,
        match="unknown dataset 'locomo10'; valid datasets: locomo, "
        "longmemeval, personamem, personamem_v2",
    ):
        data.check_dataset("locomo10")
    with pytest.raises(DataError, match="valid datasets"):
        data.resolve_source("PersonaMem")


def test_missing_file(tmp_path):
    missing = tmp_path / "nope" / "locomo10.json"
    with pytest.raises(DataError, match=f"{missing}: file not found"):
        data.resolve_source("locomo", missing)
    with pytest.raises(DataError, match=f"{missing}: file not found"):
        load_locomo(missing)
    with pytest.raises(DataError, match="folder has no LoCoMo file"):
        data.resolve_source("locomo", tmp_path)


def test_missing_personamem_history_names_row_and_link(tmp_path):
    root = tmp_path / "pm"
    shutil.copytree(PERSONAMEM, root)
    (root / "data/chat_history_32k/chat_history_persona2.json").unlink()
    with pytest.raises(
        DataError,
        match=r"benchmark\.csv: row \d+ \(pm-\d+, line \d+, "
        r"persona_id '2'\): chat history not found: "
        r"'data/chat_history_32k/chat_history_persona2\.json'",
    ):
        data.load(data.resolve_source("personamem_v2", root))


@pytest.mark.parametrize(
    ("dataset", "path", "message"),
    [
        ("locomo", LONGMEMEVAL, "looks like a LongMemEval file, not a LoCoMo file"),
        ("locomo", ORACLE, "pass dataset='longmemeval'"),
        ("longmemeval", LOCOMO, "looks like a LoCoMo file, not a LongMemEval file"),
        (
            "locomo",
            PERSONAMEM / PERSONAMEM_V2_CSV,
            "looks like PersonaMem-v2 release's questions CSV",
        ),
        (
            "locomo",
            SAMPLE_DIR / "personamem" / PERSONAMEM_QUESTIONS,
            "looks like PersonaMem (32k split)'s questions CSV, not a LoCoMo JSON file; pass "
            "dataset='personamem'",
        ),
        (
            "locomo",
            PERSONAMEM / "data/chat_history_32k/chat_history_persona0.json",
            "looks like a PersonaMem-v2 release chat history",
        ),
        (
            "personamem_v2",
            LOCOMO,
            "looks like a LoCoMo JSON file, not PersonaMem v2's benchmark CSV",
        ),
    ],
)
def test_wrong_dataset_for_the_file(dataset, path, message):
    with pytest.raises(DataError) as info:
        data.load(data.resolve_source(dataset, path))
    assert str(path.name) in str(info.value) and message in str(info.value)


def test_corrupt_json_names_file_and_position(tmp_path):
    text = LOCOMO.read_text(encoding="utf-8")
    bad = tmp_path / "locomo10.json"
    bad.write_text(text[:5000], encoding="utf-8")  # cut off mid-file
    with pytest.raises(
        DataError,
        match=rf"{bad}: not valid JSON at line \d+, column \d+ "
        r"\(char \d+\)",
    ):
        load_locomo(bad)
    lme = tmp_path / "lme.json"
    lme.write_text('[{"question_id": "q1",, }]', encoding="utf-8")
    with pytest.raises(
        DataError, match=r"lme\.json: not valid JSON at line 1, column 23 \(char 22\)"
    ):
        load_longmemeval(lme)


def _locomo_copy() -> list:
    return copy.deepcopy(_raw(LOCOMO))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d[0]["qa"][3].pop("question"),
            r"sample 'conv-1' \(index 0\), qa\[3\]: missing field 'question'",
        ),
        (
            lambda d: d[1]["qa"][0].pop("answer"),
            r"sample 'conv-2' \(index 1\), qa\[0\]: missing field 'answer' \(category 4\)",
        ),
        (
            lambda d: d[0]["qa"][2].update(category="multi-hop"),
            r"qa\[2\]: field 'category' should be an integer 1-5, got 'multi-hop'",
        ),
        (
            lambda d: d[0]["qa"][2].update(evidence=[3]),
            r"qa\[2\]: field 'evidence' should be a list of dialogue ids",
        ),
        (
            lambda d: d[0]["conversation"]["session_2"][1].update(text=42),
            r"sample 'conv-1' \(index 0\), session_2\[1\] \(dia_id D2:2\): field 'text' should be "
            r"a string, got int 42",
        ),
        (
            lambda d: d[1]["conversation"]["session_3"][0].pop("speaker"),
            r"sample 'conv-2' \(index 1\), session_3\[0\]: missing field 'speaker'",
        ),
        (lambda d: d[1].pop("qa"), r"sample 'conv-2' \(index 1\): missing field 'qa'"),
        (
            lambda d: d[0]["conversation"].pop("session_4_date_time"),
            r"sample 'conv-1' \(index 0\): missing field 'session_4_date_time'",
        ),
        (
            lambda d: d[0]["conversation"].update(session_5_date_time="noon on 8 May 2023"),
            r"sample 'conv-1' \(index 0\), session_5_date_time: cannot parse date "
            r"'noon on 8 May 2023'",
        ),
        (
            lambda d: d[1].update(sample_id="conv-1"),
            r"sample 'conv-1' \(index 1\): sample_id appears twice",
        ),
        (lambda d: d.__setitem__(1, ["conv-2"]), r"sample 1: expected an object, got list"),
        (lambda d: d[0].pop("sample_id"), r"sample 0: missing field 'sample_id'"),
    ],
)
def test_bad_locomo_record_names_record(tmp_path, mutate, message):
    broken = _locomo_copy()
    mutate(broken)
    path = _write_json(tmp_path / "locomo10.json", broken)
    with pytest.raises(DataError, match=message) as info:
        load_locomo(path)
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d[2].pop("haystack_dates"),
            r"question_id '\w+' \(index 2\): missing field 'haystack_dates'",
        ),
        (
            lambda d: d[0]["haystack_dates"].pop(),
            r"haystack_session_ids \(\d\), haystack_dates \(\d\) and haystack_sessions \(\d\) must "
            r"have the same length",
        ),
        (
            lambda d: d[1].update(question_date="May 20th"),
            r"question_id '\w+' \(index 1\), question_date: cannot parse date 'May 20th'",
        ),
        (
            lambda d: d[3]["haystack_dates"].__setitem__(1, "2023-05-20 02:21"),
            r"question_id '\w+' \(index 3\), haystack_dates\[1\] \(session '\w+'\): cannot parse "
            r"date '2023-05-20 02:21'",
        ),
        (
            lambda d: d[4]["haystack_sessions"][0][0].update(content=None),
            r"question_id '\w+' \(index 4\), session '\w+' turn 0: field 'content' should be a "
            r"string, got NoneType",
        ),
        (
            lambda d: d[4]["haystack_sessions"][0][1].update(role="bot"),
            r"turn 1: unknown role 'bot'",
        ),
        (
            lambda d: d[5]["haystack_sessions"][0][0].update(has_answer="yes"),
            r"field 'has_answer' should be true/false",
        ),
        (
            lambda d: d[6].update(answer=None),
            r"\(index 6\): field 'answer' should be a string or "
            r"an integer or a number, got NoneType",
        ),
    ],
)
def test_bad_longmemeval_record_names_record(tmp_path, mutate, message):
    broken = copy.deepcopy(_raw(LONGMEMEVAL))
    mutate(broken)
    path = _write_json(tmp_path / "longmemeval_s_cleaned.json", broken)
    with pytest.raises(DataError, match=message) as info:
        load_longmemeval(path)
    assert str(info.value).startswith(f"{path}: ")


def test_a_file_of_the_wrong_shape_says_what_it_should_hold(tmp_path):
    path = _write_json(tmp_path / "locomo10.json", {"conv-1": _raw(LOCOMO)[0]})
    with pytest.raises(DataError, match=r"expected a JSON list of LoCoMo samples, got dict"):
        load_locomo(path)
    path = _write_json(tmp_path / "longmemeval_s_cleaned.json", [*_raw(LONGMEMEVAL)[:2], 7])
    with pytest.raises(DataError, match=r": question 2: expected an object, got int$"):
        load_longmemeval(path)
    twice = [_raw(LONGMEMEVAL)[0]] * 2
    path = _write_json(tmp_path / "longmemeval_s_cleaned.json", twice)
    qid = twice[0]["question_id"]
    with pytest.raises(DataError, match=rf"question_id '{qid}' \(index 1\): question_id appears"):
        load_longmemeval(path)


def _personamem_copy(tmp_path: Path) -> tuple[Path, list[dict], list[str]]:
    root = tmp_path / "pm"
    shutil.copytree(PERSONAMEM, root)
    with open(root / PERSONAMEM_V2_CSV, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        return root, list(reader), list(reader.fieldnames or [])


def _write_csv(root: Path, rows: list[dict], header: list[str]) -> Path:
    path = root / PERSONAMEM_V2_CSV
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda rows, header: rows[5].update(correct_answer=" "),
            r"row 5 \(pm-5, line 7, persona_id '\d'\): column 'correct_answer' is empty",
        ),
        (
            lambda rows, header: rows[2].update(incorrect_answers="three wrong answers"),
            r"row 2 \(pm-2, .*\): column 'incorrect_answers' should be a list of strings",
        ),
        (
            lambda rows, header: rows[7].update(user_query="{'role': 'user'}"),
            r"row 7 \(pm-7, .*\): column 'user_query' has no text 'content'",
        ),
        (
            lambda rows, header: rows[7].update(user_query="{'role': 'user', 'content': "),
            r"row 7 \(pm-7, .*\): column 'user_query' is not a \{role, content\} literal",
        ),
        (
            lambda rows, header: header.remove("pref_type"),
            r"not a PersonaMem v2 benchmark CSV: missing column\(s\) pref_type",
        ),
    ],
)
def test_bad_personamem_row_names_row(tmp_path, mutate, message):
    root, rows, header = _personamem_copy(tmp_path)
    mutate(rows, header)
    if "pref_type" not in header:
        for row in rows:
            row.pop("pref_type", None)
    path = _write_csv(root, rows, header)
    with pytest.raises(DataError, match=message) as info:
        data.load(data.resolve_source("personamem_v2", root))
    assert str(info.value).startswith(f"{path.resolve()}: ")


def test_bad_personamem_history_names_history_file(tmp_path):
    root, _, _ = _personamem_copy(tmp_path)
    history = root / "data/chat_history_32k/chat_history_persona1.json"
    obj = json.loads(history.read_text(encoding="utf-8"))
    obj["chat_history"][3]["role"] = "narrator"
    history.write_text(json.dumps(obj), encoding="utf-8")
    with pytest.raises(
        DataError,
        match=r"chat_history_persona1\.json: chat_history\[3\]: "
        r"unknown role 'narrator'",
    ):
        data.load(data.resolve_source("personamem_v2", root))
    history.write_text('{"chat_history": [', encoding="utf-8")
    with pytest.raises(DataError, match=r"chat_history_persona1\.json: not valid JSON at line 1"):
        data.load(data.resolve_source("personamem_v2", root))


def test_download_without_network_says_how_to_use_data_path(tmp_path, monkeypatch):
    with pytest.raises(
        DataError,
        match=r"could not download LoCoMo from http://127\.0\.0\.1:9/"
        r".*pass data_path=",
    ):
        download_dataset("locomo", raw_dir=tmp_path, endpoint="http://127.0.0.1:9", timeout=5)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    for dataset in ("longmemeval", "personamem_v2"):
        with pytest.raises(DataError, match=r"could not download .*pass data_path="):
            download_dataset(dataset, raw_dir=tmp_path)
    # PersonaMem's 32k split is two files: the advice names both, the error the missing one
    with pytest.raises(
        DataError,
        match=r"could not download questions_32k\.csv from https://huggingface\.co/datasets/"
        r"bowen-upenn/PersonaMem/resolve/.*fetch questions_32k\.csv and "
        r"shared_contexts_32k\.jsonl another way and pass data_path=",
    ):
        download_dataset("personamem", raw_dir=tmp_path)
    assert not list(tmp_path.rglob("*.json")) and not list(tmp_path.rglob("*.csv"))


def test_a_data_path_is_read_where_the_preset_downloads(tmp_path):
    # what the failed download above advises, given on top of a preset with download: true
    copy_ = tmp_path / "locomo10.json"
    shutil.copy(LOCOMO, copy_)
    source = data.resolve_source("locomo", copy_, download=True, raw_dir=tmp_path / "raw")
    assert source.origin == "local" and Path(source.path) == copy_
    assert not (tmp_path / "raw").exists()  # nothing fetched


def test_download_reuses_a_file_already_there(tmp_path):
    target = tmp_path / "locomo" / LOCOMO_REVISION / "locomo10.json"
    target.parent.mkdir(parents=True)
    shutil.copy(LOCOMO, target)
    source = download_dataset("locomo", raw_dir=tmp_path, endpoint="http://127.0.0.1:9")
    assert source.path == target and source.origin == "download"
    assert source.resolved_revision == LOCOMO_REVISION
    assert source.url.endswith(f"/{LOCOMO_REVISION}/data/locomo10.json")


# --- LoCoMo category check on a full-size file ---------------------------------------------------


def _full_locomo(counts: dict[int, int]) -> list[dict]:
    base = _raw(LOCOMO)[0]
    samples = []
    questions = [c for c, n in counts.items() for _ in range(n)]
    for i in range(LOCOMO_FULL_SAMPLES):
        sample = {"sample_id": f"conv-{i}", "conversation": base["conversation"], "qa": []}
        for category in questions[i::LOCOMO_FULL_SAMPLES]:
            item = {"question": "q?", "evidence": ["D1:1"], "category": category}
            item.update({"adversarial_answer": "x"} if category == 5 else {"answer": "a"})
            sample["qa"].append(item)
        samples.append(sample)
    return samples


def test_locomo_category_counts_checked_on_full_file(tmp_path):
    good = _write_json(tmp_path / "good.json", _full_locomo(LOCOMO_CATEGORY_COUNTS))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        loaded = load_locomo(good)
    assert loaded.checks["locomo_category_counts"]["ok"] is True
    assert len(loaded.questions) == 1986
    swapped = {1: 841, 2: 321, 3: 96, 4: 282, 5: 446}  # single-hop and multi-hop mixed up
    bad = _write_json(tmp_path / "bad.json", _full_locomo(swapped))
    with pytest.warns(DataWarning, match="LoCoMo CATEGORY COUNTS DIFFER"):
        loaded = load_locomo(bad)
    assert loaded.checks["locomo_category_counts"]["ok"] is False
    assert any("expected  282, found  841" in note for note in loaded.notes)


def test_personamem_as_published_mixed_options_and_repeated_personas(tmp_path):
    """The published questions_32k.csv writes all_options as JSON in some rows and as a Python
    literal in others, and a shared context repeats "Current user persona" system messages where
    the persona changes: both formats load alike, system messages are not dialogue, and a file
    other than the pinned one loads with one line naming both hashes."""
    import csv
    import json as _json

    from memcost.data.personamem import PERSONAMEM_32K_COLUMNS

    root = tmp_path / "personamem"
    root.mkdir()
    persona = {"role": "system", "content": "Current user persona: a teacher."}
    update = {"role": "system", "content": "Current user persona: a teacher who now runs."}
    dialogue = [
        {"role": "user", "content": "I started running on Sundays."},
        {"role": "assistant", "content": "Great, how far do you go?"},
    ]
    context = [persona, *dialogue, update, *dialogue]
    (root / "shared_contexts_32k.jsonl").write_text(_json.dumps({"ctx": context}) + "\n")
    options = ["(a) Run a 5k.", "(b) Sleep in.", "(c) Knit.", "(d) Bake."]
    rows = [
        {"question_id": "q-json", "all_options": _json.dumps(options)},
        {"question_id": "q-literal", "all_options": repr(options)},  # single quotes
    ]
    header = list(PERSONAMEM_32K_COLUMNS)
    with open(root / PERSONAMEM_QUESTIONS, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    **dict.fromkeys(header, "1"),
                    **row,
                    "question_type": "recall_user_shared_facts",
                    "user_question_or_message": "What should I do on Sunday?",
                    "correct_answer": "(a)",
                    "shared_context_id": "ctx",
                    "end_index_in_shared_context": str(len(context)),
                }
            )
    loaded = data.load(data.resolve_source("personamem", root))
    questions = loaded.questions.set_index("question_id")
    assert list(questions.loc["q-json", "options"]) == list(questions.loc["q-literal", "options"])
    assert list(questions.loc["q-literal", "options"])[0] == "Run a 5k."
    assert loaded.conversations["role"].tolist() == ["user", "assistant"] * 2  # no persona
    assert len(loaded.notes) == 1
    note = loaded.notes[0]
    assert (
        note.startswith(f"{PERSONAMEM_QUESTIONS}: sha256 ") and "is not the pinned cccd34cf" in note
    )


@pytest.mark.parametrize("dataset", ["locomo", "longmemeval"])
def test_a_lone_surrogate_in_a_data_file_is_one_line_naming_the_file(tmp_path, dataset):
    """JSON may escape half of a UTF-16 pair ("\\ud800"), which no text can hold: the error
    named no file."""
    source_file = LOCOMO if dataset == "locomo" else LONGMEMEVAL
    text = source_file.read_text(encoding="utf-8")
    marker = '"content": "' if dataset == "longmemeval" else '"text": "'
    at = text.index(marker) + len(marker)
    bad = tmp_path / source_file.name
    bad.write_text(text[:at] + "\\ud800" + text[at:], encoding="utf-8")
    with pytest.raises(DataError) as caught:
        data.load(data.resolve_source(dataset, str(bad), download=False))
    assert str(caught.value) == (
        f"{bad}: holds text that is not valid Unicode ('\\ud800': surrogates not allowed); "
        "fix the file or download it again"
    )
