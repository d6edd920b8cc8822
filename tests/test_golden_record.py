"""The bundled-sample run computes what it computed before: every table, answer, judge vote and
hand-over file of the smoke run against the golden record (``tests/golden.py``: text and counts
exactly, floats to 9 significant digits, latencies and timestamps aside). A change for speed or
tidiness must not change what the study computes; a dependency's release that moves only the
last digits of a float must not fail it."""

from __future__ import annotations

import csv
import os
import platform
import shutil
import subprocess
import sys

import pytest
from golden import GOLDEN, compare, compare_file, golden_record, report, run_record, update

from memcost.paths import REPO_ROOT

UPDATE = "MEMCOST_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_record.py"


def test_the_bundled_sample_run_computes_what_it_did_before(smoke_run):
    got = run_record(smoke_run.root)
    if os.environ.get("MEMCOST_UPDATE_GOLDEN") == "1":  # "0" or "" checks, as they read
        update(got)
    expected = golden_record()
    assert len(expected) > 90  # tables, answers, judge votes and data of the three datasets
    differences = compare(expected, got)
    assert not differences, (
        f"{len(differences)} output(s) of the bundled-sample run computed something else:\n"
        + "\n".join(report(differences))
        + f"\nIf the change is intended, record it: {UPDATE}"
    )


def _table(smoke_run, tmp_path, name="tables/figure1_cost_difference.csv"):
    """A copy of one of the smoke run's tables, as rows, and the record of its copy."""
    copy = tmp_path / "run"
    (copy / name).parent.mkdir(parents=True)
    shutil.copy(smoke_run.root / name, copy / name)
    with (copy / name).open(newline="") as handle:
        return copy, name, list(csv.reader(handle))


def _write(path, rows):
    with path.open("w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)


def test_a_float_moved_in_its_15th_digit_is_the_same_result(smoke_run, tmp_path):
    run, name, rows = _table(smoke_run, tmp_path)
    value = float(rows[1][1])
    assert value != 0
    rows[1][1] = repr(value * (1 + 3e-15))  # what another CPU's summation order does
    assert rows[1][1] != repr(value)
    _write(run / name, rows)
    assert compare_file(name, golden_record()[name], run_record(run)[name]) is None


def test_a_printed_digit_changed_fails_and_shows_the_row(smoke_run, tmp_path):
    run, name, rows = _table(smoke_run, tmp_path, "locomo/tables/table3_accuracy.csv")
    header = rows[0]
    column = header.index("accuracy")
    printed = rows[2][column]
    # Table 3 prints accuracy in percent at two decimals (57.68): move the last printed digit
    rows[2][column] = repr(float(printed) + 1e-4)
    _write(run / name, rows)
    diff = compare_file(name, golden_record()[name], run_record(run)[name])
    assert diff is not None
    assert f"row 2 accuracy: expected '{printed}', got '{rows[2][column]}'" in str(diff)


def test_a_changed_answer_or_count_fails(smoke_run, tmp_path):
    name = "locomo/answers/answers_memory_mem0_style.jsonl"
    expected = golden_record()[name]
    lines = expected.splitlines(keepends=True)
    assert compare_file(name, expected, "".join(lines)) is None
    wrong = lines[3].replace('"prompt_tokens": ', '"prompt_tokens": 1', 1)
    diff = compare_file(name, expected, "".join([*lines[:3], wrong, *lines[4:]]))
    assert diff is not None and "row 3 prompt_tokens: expected" in str(diff)
    assert compare_file(name, expected, "".join(lines[:-1])) is not None  # a row missing


def test_update_rewrites_only_what_changed(smoke_run, tmp_path):
    folder = tmp_path / "golden"
    shutil.copytree(GOLDEN, folder)
    got = golden_record(folder)
    name = "tables/figure1_cost_difference.csv"
    rows = list(csv.reader(got[name].splitlines()))
    rows[1][1] = repr(float(rows[1][1]) * (1 + 3e-15))
    noisy = "".join(",".join(r) + "\n" for r in rows)
    changed = update({**got, name: noisy, "locomo/tables/new.csv": "a\n1\n"}, folder)
    assert changed == ["locomo/tables/new.csv"]
    assert (folder / name).read_text() == got[name]  # the noise is not recorded


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 instruction-set names")
def test_the_record_holds_on_other_vector_instructions(tmp_path):
    """The smoke run with FAISS, numpy and OpenBLAS held to older vector instructions (what
    another CPU does to the order of a sum) computes the same study: offline inner products are
    exact, and floats are compared to 9 significant digits."""
    env = {
        **os.environ,
        "FAISS_SIMD_LEVEL": "NONE",
        "NPY_DISABLE_CPU_FEATURES": "X86_V3",
        "OPENBLAS_CORETYPE": "Nehalem",
    }
    run = tmp_path / "run"
    command = [sys.executable, "-m", "memcost", "run", "--params", "smoke", "--quiet"]
    done = subprocess.run(
        [*command, "--run-name", str(run)], cwd=REPO_ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    differences = compare(golden_record(), run_record(run))
    assert not differences, "\n".join(report(differences))
