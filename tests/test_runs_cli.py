"""``python -m memcost runs`` lists runs (a failed one with its status); ``clean`` deletes one;
the runner's log is one line per notebook, with cell output only in the log file."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml

from memcost.cli import main
from memcost.run import NotebookFailed, run_preset


def _notebook(path, body):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell(
            'run_dir: str = ""  # where\nfail: bool = False  # why',
            metadata={"tags": ["parameters"]},
        ),
        nbformat.v4.new_code_cell(body),
    ]
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def made_runs(tmp_path_factory) -> Path:
    """Two runs of a two-notebook folder: one finishes, one fails in its second notebook (made
    once; each test gets its own copy)."""
    tmp_path = tmp_path_factory.mktemp("runs_cli")
    folder = tmp_path / "nbs"
    folder.mkdir()
    _notebook(folder / "00_first.ipynb", "print('CELL-OUTPUT-MARKER ' * 3)")
    _notebook(folder / "01_second.ipynb", "assert not fail, 'asked to fail'")
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"datasets": [], "parameters": {}}))
    root = tmp_path / "runs"
    terminal = io.StringIO()
    with contextlib.redirect_stdout(terminal):
        run_preset(preset, run_name=str(root / "good"), notebooks_dir=folder)
        with pytest.raises(NotebookFailed):
            run_preset(
                preset, run_name=str(root / "bad"), notebooks_dir=folder, overrides={"fail": True}
            )
    (root / "terminal.txt").write_text(terminal.getvalue())
    return root


@pytest.fixture
def runs(made_runs, tmp_path) -> Path:
    return Path(shutil.copytree(made_runs, tmp_path / "runs"))


def test_runs_lists_a_finished_and_a_failed_run(runs, capsys):
    assert main(["runs", "--dir", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["name", "preset", "backend", "status"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert set(rows) == {"bad", "good"}
    assert rows["good"][1:4] == ["p", "—", "ok"]  # no backend set and no model call
    assert rows["bad"][3] == "failed"
    assert rows["good"][5] == "$0.00"  # nothing was called, nothing spent


def test_clean_deletes_a_run_and_refuses_other_folders(runs, capsys):
    assert main(["clean", "bad", "--dir", str(runs)]) == 0
    assert not (runs / "bad").exists() and (runs / "good").exists()
    assert main(["clean", "..", "--dir", str(runs)]) == 2
    assert main(["clean", "nope", "--dir", str(runs)]) == 2
    assert "is not a run" in capsys.readouterr().err


def test_clean_never_deletes_what_a_link_points_to_or_a_classs_notebooks(runs, capsys):
    (runs / "latest").symlink_to(runs / "good")
    assert main(["clean", "latest", "--dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert f"error: latest is a link to {runs / 'good'}, not a run: remove the link" in err
    assert (runs / "good" / "manifest.json").is_file()
    # a workshop folder a class's run wrote into: the run goes, the class's notebooks stay
    workshop = runs / "workshop"
    shutil.copytree(runs / "good", workshop)
    (workshop / "02_answer_from_memory.ipynb").write_text("{} edited by the class")
    (workshop / "previous-20261207-101500").mkdir()
    (workshop / "previous-20261207-101500" / "02_answer_from_memory.ipynb").write_text("{}")
    assert main(["clean", "workshop", "--dir", str(runs)]) == 0
    assert sorted(p.name for p in workshop.iterdir()) == [
        "02_answer_from_memory.ipynb",
        "previous-20261207-101500",
    ]
    assert (workshop / "02_answer_from_memory.ipynb").read_text() == "{} edited by the class"
    assert "kept the 2 notebook(s) a class works in there" in capsys.readouterr().out


def test_clean_asks_for_yes_before_it_deletes_paid_calls(runs, capsys):
    """A run's store of calls is what a resume reuses instead of paying again: a typo in
    ``clean`` must not throw away a paid run's calls."""
    from test_usage import record, write_ledger

    write_ledger(runs / "bad", [record("extract", "gpt-5-nano-2025-08-07", 1_000_000, 0)])
    assert main(["clean", "bad", "--dir", str(runs)]) == 2
    assert capsys.readouterr().err == (
        "error: bad holds paid model calls ($0.05 at list price) that a resume, or another "
        "run with client: {reuse_runs: [...]}, would reuse instead of paying again; delete it "
        "anyway with: python -m memcost clean bad --yes\n"
    )
    assert (runs / "bad" / "calls.sqlite").is_file()
    assert main(["clean", "bad", "--dir", str(runs), "--yes"]) == 0
    assert not (runs / "bad").exists()


def test_the_log_is_one_line_per_notebook_and_the_file_has_everything(runs):
    out = (runs / "terminal.txt").read_text()
    assert "notebook 1 of 2: 00_first: ok in" in out
    assert "notebook 2 of 2: 01_second: failed in" in out
    assert "ETA ~" in out  # after the first notebook, the second's ETA
    assert "CELL-OUTPUT-MARKER" not in out  # cell output only with --verbose
    log = next((runs / "good" / "logs").glob("run-*.log")).read_text()
    assert "notebook 2 of 2: 01_second" in log
    assert "CELL-OUTPUT-MARKER" in (runs / "good" / "logs" / "00_first.log").read_text()


@pytest.mark.parametrize(
    "text", ['{"steps": ', "[1, 2]", '"a string"'], ids=["torn", "a list", "a string"]
)
def test_a_damaged_manifest_is_one_line_and_never_hides_the_other_runs(tmp_path, capsys, text):
    from memcost.cli import main

    runs = tmp_path / "runs"
    for name in ("good", "bad"):
        (runs / name).mkdir(parents=True)
        (runs / name / "manifest.json").write_text('{"preset": {"name": "smoke"}}')
    (runs / "bad" / "manifest.json").write_text(text, encoding="utf-8")
    assert main(["runs", "--dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "good" in out and "smoke" in out
    assert next(ln for ln in out.splitlines() if ln.startswith("bad")).split()[3] == "unreadable"
    assert main(["report", str(runs / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith(f"error: {runs / 'bad' / 'manifest.json'}: ")
    assert "not a JSON object" in err or "corrupt manifest" in err


def test_a_run_on_a_torn_manifest_stops_in_one_line(tmp_path, capsys):
    from memcost.cli import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text('{"steps": ', encoding="utf-8")
    code = main(
        [
            "run",
            "--params",
            "smoke",
            "--datasets",
            "locomo",
            "--steps",
            "00",
            "--run-name",
            str(run_dir),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"error: {run_dir / 'manifest.json'}: corrupt manifest (line 1" in err


def test_clean_refuses_a_run_whose_postgresql_is_running(tmp_path, capsys):
    import os

    from memcost.cli import main

    runs = tmp_path / "runs"
    pgdata = runs / "pg" / "pgvector" / "pgdata"
    pgdata.mkdir(parents=True)
    (runs / "pg" / "manifest.json").write_text("{}", encoding="utf-8")
    # a live server's postmaster.pid: its first line is the server's pid (here: a live process)
    (pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n{pgdata}\n", encoding="utf-8")
    assert main(["clean", "pg", "--dir", str(runs)]) == 2
    err = capsys.readouterr().err
    assert f"PostgreSQL server (pid {os.getpid()}) is running on {pgdata}" in err
    assert (runs / "pg").is_dir()  # nothing deleted
    (pgdata / "postmaster.pid").write_text("2147483646\n", encoding="utf-8")  # a dead pid
    assert main(["clean", "pg", "--dir", str(runs)]) == 0
    assert not (runs / "pg").exists()


def test_the_status_says_what_actually_ran(tmp_path):
    """A run of notebooks opened by hand is judged by the notebooks' own records; a runner
    run of some of its preset's steps is partial, not ok."""
    from memcost.cli import run_status
    from memcost.paths import PARAMS_DIR
    from memcost.run.checks import StageStatus

    by_hand = {
        "steps": {
            "locomo/00_prepare_data": {"finished_at": "t", "wall_time_s": 3.0},
            "07_costs_today": {"finished_at": "t", "wall_time_s": 5.0},
        }
    }
    assert run_status(by_hand, tmp_path) == "ok (by hand)"
    by_hand["steps"]["locomo/01_extract_facts"] = {"status": "running"}
    assert run_status(by_hand, tmp_path) == "incomplete"
    (tmp_path / "report.md").write_text("report")
    smoke = {"path": str(PARAMS_DIR / "smoke.yaml"), "steps": ["00"]}  # --steps 00 recorded
    one = {"preset": smoke, "notebooks": {"locomo/00_prepare_data": {"status": "ok"}}}
    assert run_status(one, tmp_path) == "partial (steps 00)"
    cost = {
        "preset": {"path": str(PARAMS_DIR / "paper_cost_model.yaml"), "steps": []},
        "notebooks": {"05_analyse_costs": {"status": "ok"}, "07_costs_today": {"status": "ok"}},
    }
    assert run_status(cost, tmp_path) == "ok"
    votes = StageStatus("04_judge_answers", "locomo", "judge votes", 9, 2)
    cost["stage_status"] = {"locomo/04_judge_answers": votes.as_dict()}
    assert run_status(cost, tmp_path) == "ok, 2 items failed"  # let through by allow_failures


def test_clean_refuses_a_run_that_holds_its_lock_and_deletes_it_once_stopped(tmp_path, capsys):
    """`memcost clean` used to check only for a PostgreSQL server: a running run was deleted
    under it and its work lost. The run's lock says it is running."""
    import subprocess
    import sys
    import time

    from memcost.cli import main

    runs = tmp_path / "runs"
    (runs / "busy").mkdir(parents=True)
    (runs / "busy" / "manifest.json").write_text("{}", encoding="utf-8")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from memcost.run.runner import hold_run\n"
            "with hold_run(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)",
            str(runs / "busy"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["clean", "busy", "--dir", str(runs)]) == 2
        err = capsys.readouterr().err
        assert f"error: busy is running (pid {holder.pid} " in err
        assert "stop that run first" in err and "Traceback" not in err
        assert (runs / "busy" / "manifest.json").is_file()  # nothing deleted
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    assert main(["clean", "busy", "--dir", str(runs)]) == 0
    assert not (runs / "busy").exists()


def test_a_damaged_store_of_calls_marks_its_run_and_never_hides_the_others(tmp_path, capsys):
    """`memcost runs` stopped on a traceback when one run's calls.sqlite was damaged."""
    from memcost.cli import main

    runs = tmp_path / "runs"
    for name in ("good", "bad"):
        (runs / name).mkdir(parents=True)
        (runs / name / "manifest.json").write_text('{"preset": {"name": "smoke"}}')
    (runs / "bad" / "calls.sqlite").write_bytes(b"not a database, a torn copy" * 200)
    assert main(["runs", "--dir", str(runs)]) == 0
    out = capsys.readouterr().out
    bad = next(ln for ln in out.splitlines() if ln.startswith("bad "))
    assert "store of calls damaged" in bad and "good" in out and "Traceback" not in out
    assert f"bad: the run's store of calls {runs / 'bad' / 'calls.sqlite'} is damaged" in out
    assert "move it aside (mv " in out


def test_a_corrupt_manifest_prints_the_commands_that_resume_the_run(tmp_path, capsys):
    import shlex
    import subprocess

    from memcost.cli import main

    run_dir = tmp_path / "run"
    argv = ["run", "--params", "smoke", "--datasets", "locomo", "--steps", "00", "--quiet"]
    assert main([*argv, "--run-name", str(run_dir)]) == 0
    (run_dir / "manifest.json").write_text('{"steps": ', encoding="utf-8")
    capsys.readouterr()
    assert main([*argv, "--run-name", str(run_dir)]) == 2
    err = capsys.readouterr().err
    line = err.splitlines()[-1].strip()
    assert line.startswith(
        f"mv {run_dir / 'manifest.json'} {run_dir / 'manifest.json.damaged'} && "
    )
    resume = shlex.split(line.split(" && ", 1)[1])
    assert resume[:4] == ["python", "-m", "memcost", "run"] and str(run_dir) in resume
    # what it says, done as said, resumes the run
    subprocess.run(shlex.split(line.split(" && ", 1)[0]), check=True)
    assert main(resume[3:]) == 0
    assert (run_dir / "manifest.json.damaged").is_file() and (run_dir / "manifest.json").is_file()


def test_a_store_of_calls_the_run_cannot_write_prints_what_to_do_and_the_resume_command(
    tmp_path, capsys, monkeypatch
):
    import sqlite3

    import memcost.calls as calls_module
    from memcost.cli import main

    run_dir = tmp_path / "run"
    argv = ["run", "--params", "smoke", "--datasets", "locomo", "--steps", "00", "--quiet"]
    assert main([*argv, "--run-name", str(run_dir)]) == 0
    calls_module.CallStore(run_dir).close()  # the run has a store of calls

    def unwritable(self):  # what SQLite says of a store it may not write (root ignores modes)
        raise self._error(sqlite3.OperationalError("attempt to write a readonly database"))

    monkeypatch.setattr(calls_module.CallStore, "_open", unwritable)
    capsys.readouterr()
    assert main([*argv, "--run-name", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "then resume" in err and "damaged" not in err
    assert err.splitlines()[-1].strip().startswith("python -m memcost run --params smoke")


def test_version_a_mistyped_preset_and_a_missing_data_file_answer_in_one_line(tmp_path, capsys):
    from memcost import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert (
        done.value.code == 0
        and capsys.readouterr().out == f"memcost {__version__} (arXiv:2603.04814)\n"
    )
    assert main(["run", "--params", "smok", "--run-name", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "preset not found: smok; did you mean smoke?" in err and "serving_smoke" in err
    # a data_path that does not exist stops before the run directory is made
    run_dir = tmp_path / "b"
    assert main(["run", "--params", "smoke", "--run-name", str(run_dir),
                 "-p", f"data_path={tmp_path / 'nowhere.json'}"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nowhere.json'}: file not found (data_path for LoCoMo)" in err
    assert not run_dir.exists()
    assert "``" not in build_help()  # the help is plain text, not the docstring's markup


def build_help() -> str:
    from memcost.cli import build_parser

    return build_parser().format_help()


def test_a_finished_run_ends_with_what_it_found_and_what_it_cost(smoke_run):
    import pandas as pd

    from memcost.cli import result_lines

    lines = result_lines(smoke_run)
    assert [line.split(" ", 1)[0] for line in lines] == [
        "locomo",
        "longmemeval",
        "personamem",
        "This",
        "Today's",
        "bill:",
    ]
    table = pd.read_csv(smoke_run.dataset("locomo").tables / "table3_accuracy.csv")
    memory = table[
        (table["system"] == "memory_mem0_style") & (table["prompt_name"] == "judge")
    ].iloc[0]
    assert lines[0].startswith("locomo accuracy, the offline stand-ins (deterministic methods")
    assert f"memory mem0_style (offline): {100 * memory['accuracy']:.1f}%; " in lines[0]
    # no model answered offline: no model's name stands beside a score
    assert "long context (offline) 1: " in lines[0] and "gpt" not in lines[0]
    # notebook 05's Tables 4-5 against the paper's cells, and the break-even it found
    cells = pd.read_csv(smoke_run.tables / "table45_vs_paper.csv")
    table5 = pd.read_csv(smoke_run.tables / "table5_break_even.csv")
    assert lines[3] == (
        "This run's Tables 4-5 (notebook 05, the cost model of paper §3.5): "
        f"{int(cells['match'].sum())} of {len(cells)} published cells reproduced to 4 decimals; "
        "memory is cheaper per user from question "
        + ", ".join(
            f"{n} at {c // 1000}k" for c, n in table5[["context_tokens", "break_even_n"]].values
        )
        + " tokens of history."
    )
    assert "26 of 26 published cells" in lines[3] and "13 at 30k, 10 at 100k" in lines[3]
    # notebook 07's answer, as the report's first screen words it (no markdown)
    assert lines[-2].startswith(
        "Today's answer (notebook 07, computed from today's dated prices): with "
    ) and ("memory is cheaper from question " in lines[-2] and "**" not in lines[-2])
    assert lines[-1] == (
        "bill: $0.00 spent (offline: no model was called; the report prices the calls as an "
        "estimate)"
    )


def test_runs_counts_wall_time_once_for_notebooks_side_by_side_and_not_the_pause_before_a_resume():
    from memcost.manifest import wall_time_s

    def entry(seconds: float, finished: str) -> dict:
        return {"wall_time_s": seconds, "finished_at": f"2026-01-0{finished}+00:00"}

    manifest = {
        "notebooks": {
            "locomo/00": entry(10, "1T00:00:10"),  # 0-10 s
            "longmemeval/00": entry(10, "1T00:00:15"),  # 5-15 s, beside it
            "05": entry(5, "2T00:00:00"),  # resumed a day later
        }
    }
    assert wall_time_s(manifest) == 20.0  # 15 s, then 5 s; the sum of the three would say 25


def test_the_report_gives_the_same_wall_time_as_the_runs_listing(tmp_path):
    """Two datasets side by side: the report's "What ran" row says 15 s, as `memcost runs`
    does, and names the 20 s their notebooks took together."""
    from memcost.paths import RunPaths
    from memcost.run.report.page import what_ran
    from memcost.run.report.view import RunView

    def entry(seconds: float, finished: str) -> dict:
        return {"wall_time_s": seconds, "finished_at": f"2026-01-01T00:00:{finished}+00:00"}

    manifest = {"notebooks": {"locomo/00": entry(10, "10"), "longmemeval/00": entry(10, "15")}}
    rows = dict(what_ran(RunView(RunPaths(tmp_path / "run"), manifest)))
    assert rows["notebooks"] == "2 executed in 15 s (20 s of notebook time, datasets side by side)"
    manifest["notebooks"].pop("longmemeval/00")
    assert dict(what_ran(RunView(RunPaths(tmp_path / "run"), manifest)))["notebooks"] == (
        "1 executed in 10 s"
    )


def test_a_run_without_a_key_says_nothing_is_spent_before_it_shows_a_bill(smoke_run):
    printed = (smoke_run.root.parent / "run.log").read_text(encoding="utf-8")
    assert printed.splitlines()[0].startswith(
        "memcost: prices its estimates use (offline backend: nothing is spent)"
    )
    said = printed.index("offline backend: nothing is spent. What follows prices")
    assert said < printed.index("estimated bill of this run")


def test_a_run_that_went_on_past_failed_items_names_them_in_its_last_lines(tmp_path):
    from memcost.cli import result_lines
    from memcost.manifest import set_entry
    from memcost.paths import RunPaths
    from memcost.run.checks import StageStatus

    run = RunPaths(tmp_path / "run").ensure()
    for status in (
        StageStatus("01_extract_facts", "locomo", "segments", 11, 2, ("unparseable reply",)),
        StageStatus("02_answer_from_memory", "locomo", "answers", 4, 0),
    ):
        set_entry(run, "stage_status", f"locomo/{status.step}", status.as_dict())
    assert result_lines(run)[-2:] == [
        "FAILED items, left out of these numbers (allow_failures let the run go on):",
        "  01_extract_facts [locomo]: complete with failures (2 of 11 segments failed; "
        "unparseable reply)",
    ]


def test_a_run_that_called_no_model_says_so_in_its_last_lines(tmp_path):
    from memcost.cli import result_lines
    from memcost.paths import RunPaths

    assert result_lines(RunPaths(tmp_path / "run").ensure()) == [
        "bill: $0.00 spent (no model was called)"
    ]


def test_report_names_a_damaged_file_of_the_run_in_one_line(runs, capsys):
    from memcost.paths import RunPaths

    run = RunPaths(runs / "good")
    run.tables.mkdir(parents=True, exist_ok=True)
    run.table.table4.write_bytes(b"\xff\xfe\x00 not a table")
    (run.root / "metrics").mkdir(exist_ok=True)
    assert main(["report", str(run.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {run.table.table4}: not a readable CSV table (")
    assert err.endswith("or delete the file and the report leaves its section out")
    assert len(err.splitlines()) == 1
    run.table.table4.unlink()
    (run.root / "metrics" / "06_serving_cost_study.json").write_text('{"metrics": ')
    assert main(["report", str(run.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"error: {run.root / 'metrics' / '06_serving_cost_study.json'}: not valid"
    )


def test_a_run_stopped_by_its_budget_is_listed_as_such(tmp_path):
    from memcost.cli import run_status

    budget = {
        "status": "failed",
        "ename": "BudgetExceeded",
        "error": "cell 12: BudgetExceeded: ...",
    }
    fault = {"status": "failed", "ename": "ValueError", "error": "cell 3: ValueError: ..."}
    assert run_status({"notebooks": {"locomo/01": budget}}, tmp_path) == "stopped at its budget"
    assert run_status({"notebooks": {"locomo/01": fault}}, tmp_path) == "failed"
    both = {"notebooks": {"locomo/01": budget, "longmemeval/01": fault}}
    assert run_status(both, tmp_path) == "failed"  # a fault beside the budget stop is a fault


def test_answers_written_after_they_were_judged_are_called_out_of_date(
    tmp_path, monkeypatch, capsys
):
    """Notebook 02 run again on its own (another top_k) writes new answers; Table 3 is still
    the earlier answers' judgment: the last lines, the report's first screen and the command
    that judges them again say so. A resume that answers nothing new touches no file."""
    import os

    import pandas as pd

    from memcost import cli
    from memcost.paths import RunPaths
    from memcost.run.report.headline import out_of_date
    from memcost.run.report.view import RunView

    run = RunPaths(tmp_path / "run").ensure()
    ds = run.dataset("locomo").ensure()
    ds.data.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"question_id": ["q1"]}).to_parquet(ds.questions)
    ds.answers.mkdir(parents=True, exist_ok=True)
    answers = ds.answers / "answers_memory_mem0_style.jsonl"
    answers.write_text('{"question_id": "q1"}\n')
    ds.judgments.write_text('{"question_id": "q1"}\n')
    os.utime(answers, ns=(1_000_000_000, 1_000_000_000))
    os.utime(ds.judgments, ns=(2_000_000_000, 2_000_000_000))
    assert not ds.judged_before_answers()
    assert out_of_date(RunView.load(run)) is None
    os.utime(answers, ns=(3_000_000_000, 3_000_000_000))  # 02 ran again, after 04
    assert ds.judged_before_answers()
    assert out_of_date(RunView.load(run)).startswith(
        "**Out of date:** LoCoMo: answers were written after notebook 04 judged them"
    )
    monkeypatch.setattr(cli, "run_preset", lambda *args, **kwargs: run)
    code = cli.main(["run", "--params", "smoke", "--run-name", str(run.root), "--steps", "02"])
    out = capsys.readouterr().out
    assert code == 0
    assert "\nOut of date: LoCoMo: answers were written after notebook 04 judged them" in out
    assert (
        "Judge the new answers with:\n"
        f"  python -m memcost run --params smoke --run-name {run.root} --steps 04,05\n"
    ) in out
