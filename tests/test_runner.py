"""The papermill runner: presets, parameter validation, per-dataset runs, failures."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from memcost.run import NotebookFailed, PresetError, load_preset, run_preset
from memcost.run.runner import WORKERS as SWITCH


def _notebook(path: Path, params: str, body: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_markdown_cell("# test notebook"),
        nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(body),
    ]
    nbformat.write(nb, path)
    return path


@pytest.fixture
def notebooks(tmp_path) -> Path:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    _notebook(
        folder / "00_prepare.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which\nscale: int = 1  # factor',
        "from pathlib import Path\nassert scale < 5, f'scale {scale} too big'\n"
        "Path(run_dir, dataset).mkdir(parents=True, exist_ok=True)\n"
        "Path(run_dir, dataset, 'out.txt').write_text(str(scale * 2))",
    )
    _notebook(
        folder / "05_summarise.ipynb",
        'run_dir: str = ""  # where\nlabel: str = "x"  # a label',
        "from pathlib import Path\n"
        "found = sorted(p.parent.name for p in Path(run_dir).glob('*/out.txt'))\n"
        "Path(run_dir, 'summary.txt').write_text(label + ':' + ','.join(found))",
    )
    return folder


def _preset(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "preset.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_runs_per_dataset_then_run_wide(tmp_path, notebooks):
    preset = _preset(
        tmp_path,
        {
            "datasets": ["a", "b"],
            "parameters": {"scale": 2, "label": "L"},
            "per_dataset": {"b": {"scale": 3}},
        },
    )
    run = run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, stream=False)
    assert (run.root / "a" / "out.txt").read_text() == "4"
    assert (run.root / "b" / "out.txt").read_text() == "6"
    assert (run.root / "summary.txt").read_text() == "L:a,b"
    assert (run.root / "a" / "notebooks" / "00_prepare.ipynb").is_file()
    assert (run.root / "notebooks" / "05_summarise.ipynb").is_file()
    manifest = json.loads(run.manifest.read_text())
    assert set(manifest["notebooks"]) == {"a/00_prepare", "b/00_prepare", "05_summarise"}
    assert manifest["notebooks"]["b/00_prepare"]["parameters"]["scale"] == 3
    assert all(v["status"] == "ok" for v in manifest["notebooks"].values())


def test_notebooks_one_after_another_count_their_wall_time_once(tmp_path, notebooks, monkeypatch):
    # ends recorded to the second made each notebook overlap the next by up to a second, and
    # the report then said "datasets side by side" of a run that had one dataset
    from memcost.manifest import wall_time_s

    monkeypatch.setenv(SWITCH, "1")
    preset = _preset(tmp_path, {"datasets": ["a", "b"], "parameters": {"scale": 2}})
    run = run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, stream=False)
    manifest = json.loads(run.manifest.read_text())
    entries = manifest["notebooks"].values()
    assert all(re.search(r"T\d\d:\d\d:\d\d\.\d{3}\+00:00$", e["finished_at"]) for e in entries)
    summed = sum(e["wall_time_s"] for e in entries)
    assert summed - 0.01 <= wall_time_s(manifest) <= summed + 0.01


def test_steps_selects_notebooks(tmp_path, notebooks):
    preset = _preset(tmp_path, {"datasets": ["a"], "parameters": {"label": "only"}})
    run = run_preset(
        preset, run_name=str(tmp_path / "run"), steps=["5"], notebooks_dir=notebooks, stream=False
    )
    assert (run.root / "summary.txt").read_text() == "only:"
    assert not (run.root / "a").exists()


def test_unknown_parameter_names_key_and_the_nearest_valid_one(tmp_path, notebooks):
    preset = _preset(tmp_path, {"datasets": ["a"], "parameters": {"scael": 2}})
    with pytest.raises(PresetError) as info:
        run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, stream=False)
    message = str(info.value)
    assert "'parameters.scael'" in message and "did you mean scale?" in message
    assert len(message.splitlines()) == 1
    assert not (tmp_path / "run").exists()  # nothing runs before the preset is valid


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"dataset": ["a"]}, "unknown top-level key"),
        ({"datasets": ["a"], "parameters": {"run_dir": "x"}}, "set by the runner"),
        ({"datasets": ["a"], "per_dataset": {"z": {"scale": 1}}}, "not in datasets"),
        ({"datasets": [], "parameters": {"scale": 1}}, "'datasets:' is empty"),
    ],
)
def test_preset_errors(tmp_path, notebooks, body, match):
    with pytest.raises(PresetError, match=match):
        run_preset(
            _preset(tmp_path, body),
            run_name=str(tmp_path / "r"),
            notebooks_dir=notebooks,
            stream=False,
        )


def test_bad_yaml_and_missing_preset(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("parameters: [unclosed")
    with pytest.raises(PresetError) as caught:
        load_preset(bad)
    # one line, with where the problem is (PyYAML's own message draws the text under a caret)
    assert str(caught.value) == (
        f"{bad}: not valid YAML at line 1, column 22: expected ',' or ']', but got '<stream end>'"
    )
    with pytest.raises(PresetError, match="preset not found"):
        load_preset(tmp_path / "nope.yaml")


def test_failure_stops_and_points_at_partial_notebook(tmp_path, notebooks, monkeypatch):
    monkeypatch.setenv(SWITCH, "1")  # one notebook after another: b never starts
    preset = _preset(tmp_path, {"datasets": ["a", "b"], "parameters": {"scale": 9}})
    with pytest.raises(NotebookFailed) as info:
        run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, stream=False)
    exc = info.value
    assert "AssertionError: scale 9 too big" in str(exc)
    assert exc.output == tmp_path / "run" / "a" / "notebooks" / "00_prepare.ipynb"
    assert exc.output.is_file()
    assert not (tmp_path / "run" / "b").exists()  # stopped at the first failure
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["notebooks"]["a/00_prepare"]["status"] == "failed"
    # where and why, for the report's failures box
    error = manifest["notebooks"]["a/00_prepare"]["error"]
    assert error.startswith("cell ") and "AssertionError: scale 9 too big" in error


def test_a_failed_notebook_closes_its_own_record_as_failed(tmp_path, notebooks, monkeypatch):
    # The notebook's record opens as "running" and its last cell closes it; a notebook that
    # fails before that cell is recorded as failed there too, not as running for ever.
    monkeypatch.setenv(SWITCH, "1")
    _notebook(
        notebooks / "00_prepare.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which',
        "from memcost.manifest import start_step\nfrom memcost.paths import RunPaths\n"
        "start_step(RunPaths.from_param(run_dir), '00_prepare', dataset=dataset, parameters={})\n"
        "raise ValueError('no data')",
    )
    preset = _preset(tmp_path, {"datasets": ["a"], "steps": ["00"]})
    with pytest.raises(NotebookFailed):
        run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, stream=False)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["notebooks"]["a/00_prepare"]["status"] == "failed"
    assert manifest["steps"]["a/00_prepare"]["status"] == "failed"


@pytest.mark.slow  # 50 s; the smoke run of every session runs its datasets in parallel too
def test_datasets_in_processes_of_their_own_give_the_serial_run_and_stop_on_a_failure(
    tmp_path, notebooks, monkeypatch
):
    # offline, two datasets' notebooks run at once, each dataset in a process of its own: the
    # same files as one after another, and a notebook that fails stops the run before any
    # run-wide notebook
    monkeypatch.setenv(SWITCH, "2")
    _notebook(
        notebooks / "01_slow.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which\nscale: int = 1  # factor',
        "import os, time\nfrom pathlib import Path\nassert dataset != 'c', 'c fails'\n"
        "Path(run_dir, dataset, 'start').write_text(str(time.time()))\ntime.sleep(1.5)\n"
        "Path(run_dir, dataset, 'end').write_text(str(time.time()))\n"
        "Path(run_dir, dataset, 'threads').write_text(os.environ['OMP_NUM_THREADS'])",
    )
    preset = _preset(tmp_path, {"datasets": ["a", "b"], "parameters": {"scale": 2, "label": "L"}})
    run = run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, stream=False)
    assert (run.root / "summary.txt").read_text() == "L:a,b"
    spans = [
        tuple(float((run.root / d / f).read_text()) for f in ("start", "end")) for d in ("a", "b")
    ]
    assert max(s for s, _ in spans) < min(e for _, e in spans)  # they overlapped
    assert (run.root / "a" / "threads").read_text() == "1"  # one numerical thread per kernel
    manifest = json.loads(run.manifest.read_text())
    assert len(manifest["notebooks"]) == 5
    assert all(v["status"] == "ok" for v in manifest["notebooks"].values())
    log = next(run.logs.glob("run-*.log")).read_text()
    assert log.count("notebook 5 of 5: 05_summarise: ok") == 1

    preset = _preset(tmp_path, {"datasets": ["a", "c"], "parameters": {"scale": 2}})
    with pytest.raises(NotebookFailed, match="c fails") as failed:
        run_preset(preset, run_name=str(tmp_path / "bad"), notebooks_dir=notebooks, stream=False)
    assert failed.value.output == tmp_path / "bad" / "c" / "notebooks" / "01_slow.ipynb"
    assert not (tmp_path / "bad" / "summary.txt").exists()
    manifest = json.loads((tmp_path / "bad" / "manifest.json").read_text())
    assert manifest["notebooks"]["c/01_slow"]["status"] == "failed"
    assert manifest["notebooks"]["a/01_slow"]["status"] == "ok"  # it ran beside, and finished
    assert "05_summarise" not in manifest["notebooks"]


@pytest.mark.parametrize(
    ("overrides", "workers"),
    [
        ({}, 2),
        ({"backend": "openai"}, 1),  # paid: one budget and one account's limits, one at a time
        ({"vector_store": "pgvector"}, 1),  # one private PostgreSQL, started by the first user
        ({"memory_systems": ["mem0_style", "mem0"]}, 1),  # the mem0 library's default store
        ({"memory_systems": ["mem0_style", "hindsight"]}, 1),  # its database is that server
    ],
)
def test_only_an_offline_run_without_postgresql_runs_datasets_at_once(
    monkeypatch, overrides, workers
):
    from memcost.run import discover_notebooks
    from memcost.run.presets import resolve_preset
    from memcost.run.runner import dataset_workers

    monkeypatch.setenv(SWITCH, "2")
    preset = resolve_preset("smoke", discover_notebooks(), overrides=overrides)
    assert dataset_workers(preset, verbose=False) == workers
    assert dataset_workers(preset, verbose=True) == 1  # streamed output would interleave


def test_cli_reports_preset_error(tmp_path, notebooks, capsys):
    from memcost.cli import main

    code = main(["run", "--params", str(tmp_path / "missing.yaml")])
    assert code == 2
    assert "preset not found" in capsys.readouterr().err


def test_missing_key_stops_before_anything_runs(tmp_path, monkeypatch):
    folder = tmp_path / "nbs"
    folder.mkdir()
    _notebook(
        folder / "01_call.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which\nbackend: str = "offline"  # who',
        "raise SystemExit('must not run')",
    )
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    preset = _preset(tmp_path, {"datasets": ["a"], "parameters": {"backend": "openai"}})
    with pytest.raises(PresetError) as info:
        run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=folder, stream=False)
    assert "OPENAI_API_KEY" in str(info.value) and "offline" in str(info.value)
    assert not (tmp_path / "run").exists()
    # the same preset with the offline backend needs no key
    offline = _preset(tmp_path, {"datasets": ["a"], "parameters": {"backend": "offline"}})
    with pytest.raises(NotebookFailed):
        run_preset(offline, run_name=str(tmp_path / "run"), notebooks_dir=folder, stream=False)


def test_preset_with_an_unusable_endpoint_is_a_preset_error(tmp_path, monkeypatch):
    folder = tmp_path / "nbs"
    folder.mkdir()
    _notebook(
        folder / "01_call.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which\n'
        'backend: str = "offline"  # who\nbase_url: str = ""  # where to',
        "raise SystemExit('must not run')",
    )
    preset = _preset(tmp_path, {"datasets": ["a"], "parameters": {"backend": "custom"}})
    with pytest.raises(PresetError, match="needs base_url"):
        run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=folder, stream=False)
    assert not (tmp_path / "run").exists()


def test_cli_resume_hint_keeps_the_overrides_and_names_the_budget(
    tmp_path, notebooks, capsys, monkeypatch
):
    from memcost import cli
    from memcost.cli import main

    _notebook(
        notebooks / "01_spend.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which\n'
        'backend: str = "offline"  # who\nbase_url: str = ""  # where to\n'
        "max_cost_usd: float = 50.0  # limit",
        "from memcost.llm import BudgetExceeded\n"
        "raise BudgetExceeded('budget guard: the next call would pass max_cost_usd', "
        "spent_usd=0.0, limit_usd=max_cost_usd)",
    )
    monkeypatch.setattr(
        cli, "run_preset", functools.partial(cli.run_preset, notebooks_dir=notebooks)
    )
    preset = _preset(tmp_path, {"datasets": ["a"], "steps": ["00", "01"], "parameters": {}})
    code = main(
        [
            "run",
            "--params",
            str(preset),
            "--run-name",
            str(tmp_path / "run"),
            "--quiet",
            "--datasets",
            "a",
            "-p",
            "backend=custom",
            "-p",
            "base_url=http://127.0.0.1:9/v1",
            "-p",
            "max_cost_usd=0.01",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "01_spend.ipynb failed" in err and "BudgetExceeded" in err
    assert "stopped at its budget" in err
    # resuming as printed keeps the API backend (without it the run would go on offline)
    assert "--datasets a -p backend=custom -p base_url=http://127.0.0.1:9/v1" in err
    assert "-p max_cost_usd=<dollars>" in err and "max_cost_usd=0.01" not in err


def test_ctrl_c_ends_the_run_with_how_to_resume_not_a_traceback(
    tmp_path, notebooks, capsys, monkeypatch
):
    from memcost import cli
    from memcost.cli import main
    from memcost.run import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_notebook", interrupted)  # Ctrl-C in the first notebook
    monkeypatch.setenv(SWITCH, "1")
    monkeypatch.setattr(
        cli, "run_preset", functools.partial(cli.run_preset, notebooks_dir=notebooks)
    )
    preset = _preset(tmp_path, {"datasets": ["a"], "parameters": {"scale": 2}})
    run = tmp_path / "run"
    code = main(["run", "--params", str(preset), "--run-name", str(run), "-p", "scale=3"])
    out, err = capsys.readouterr()
    assert code == 130 and "Traceback" not in err
    assert "notebook 1 of 2: 00_prepare [a]: interrupted in" in out
    assert err.strip().splitlines()[0].startswith("interrupted: the notebooks that finished")
    resume = err.strip().splitlines()[-1].strip()
    assert resume == f"python -m memcost run --params {preset} --run-name {run} -p scale=3"
    (log,) = (run / "logs").glob("run-*.log")  # the log says why it ends where it does
    assert "\n=== interrupted (Ctrl-C) at " in log.read_text()


@pytest.mark.timeout(120)
def test_a_killed_kernel_is_a_failed_notebook_with_a_resume_hint(tmp_path, caplog):
    import nbformat

    from memcost.run import NotebookFailed, run_preset

    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        }
    )
    params = nbformat.v4.new_code_cell('run_dir: str = ""  # run directory')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        params,
        nbformat.v4.new_code_cell(
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would"
        ),
    ]
    nbformat.write(nb, notebooks / "00_die.ipynb")
    preset = tmp_path / "die.yaml"
    preset.write_text('steps: ["00"]\n', encoding="utf-8")
    with pytest.raises(NotebookFailed) as failed:
        run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks, quiet=True)
    message = str(failed.value)
    # cell 2 of the executed notebook (papermill puts its parameters cell before it)
    assert message.startswith(
        "00_die.ipynb failed in cell 2 (`import os, signal`): the notebook's kernel died"
    )
    assert "out of memory" in message and failed.value.ename == "DeadKernelError"
    # said once, in the run's words: not also nbclient's line (after Ctrl-C or SIGTERM, when the
    # kernel is stopped on purpose, that line was a false alarm above "interrupted")
    assert "Kernel died" not in caplog.text


def test_what_a_kernel_tells_the_runner_shows_and_its_cell_output_has_a_log(
    tmp_path, notebooks, capsys
):
    _notebook(
        notebooks / "00_prepare.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which',
        "import io\nfrom memcost.io import Bar, sign_of_life\n"
        "print('a table the notebook printed')\n"
        "sign_of_life('judge: 8 requests in flight, the oldest for 95 s')\n"
        "with Bar(total=4, desc='judge', file=io.StringIO(), mininterval=0) as bar:\n"
        "    bar.every_s = 0\n    bar.update(2)",
    )
    preset = _preset(tmp_path, {"datasets": ["a"], "steps": ["00"]})
    run = run_preset(preset, run_name=str(tmp_path / "run"), notebooks_dir=notebooks)
    out = capsys.readouterr().out.splitlines()
    assert "[memcost] [a] judge: 8 requests in flight, the oldest for 95 s" in out
    assert any(line.startswith("[memcost] [a] judge:  50% 2/4 [") for line in out), out
    assert not any("a table the notebook printed" in line for line in out)
    cells = (run.logs / "a-00_prepare.log").read_text()
    assert "a table the notebook printed" in cells
    log = next(run.logs.glob("run-*.log")).read_text()
    assert "[memcost] [a] judge: 8 requests in flight" in log


def _sleeping_datasets(tmp_path: Path, notebooks: Path) -> Path:
    """A preset of two datasets whose notebook 00 writes its kernel's pid, then sleeps."""
    _notebook(
        notebooks / "00_prepare.ipynb",
        'run_dir: str = ""  # where\ndataset: str = "a"  # which',
        "import os, time\nfrom pathlib import Path\n"
        "Path(run_dir, dataset).mkdir(parents=True, exist_ok=True)\n"
        "Path(run_dir, dataset, 'kernel.pid').write_text(str(os.getpid()))\n"
        "time.sleep(120)",
    )
    return _preset(tmp_path, {"datasets": ["a", "b"], "steps": ["00"]})


def test_datasets_side_by_side_end_with_a_runner_killed_outright(tmp_path, notebooks):
    """SIGKILL (the OOM killer, kill -9) leaves the runner no time to stop anything: its helper
    processes and their kernels notice it is gone and end within seconds, instead of running
    the datasets' notebooks on into a directory a resume is about to write."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    preset = _sleeping_datasets(tmp_path, notebooks)
    run_dir = tmp_path / "run"
    script = (
        "from pathlib import Path\nfrom memcost.run import run_preset\n"
        f"run_preset({str(preset)!r}, run_name={str(run_dir)!r}, "
        f"notebooks_dir=Path({str(notebooks)!r}), stream=False)\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, SWITCH: "2"}, cwd=tmp_path
    )
    helpers: list[psutil.Process] = []
    try:
        pids = [run_dir / d / "kernel.pid" for d in ("a", "b")]
        deadline = time.monotonic() + 90
        while not all(p.is_file() and p.read_text() for p in pids):
            assert runner.poll() is None and time.monotonic() < deadline, "kernels never started"
            time.sleep(0.2)
        helpers = psutil.Process(runner.pid).children(recursive=True)
        kernels = {int(p.read_text()) for p in pids}
        assert kernels <= {h.pid for h in helpers}  # each kernel runs under a helper process
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait()
        _, alive = psutil.wait_procs(helpers, timeout=15)
        assert not alive, [(p.pid, p.cmdline()[-1][:60]) for p in alive]
    finally:
        runner.kill()
        for process in helpers:
            with contextlib.suppress(psutil.Error):
                process.kill()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_ends_the_run_as_ctrl_c_does(tmp_path, notebooks, workers):
    """A job scheduler's time limit or ``kill`` sends SIGTERM to the runner alone: it stops as
    after Ctrl-C (the notebooks running marked interrupted, how to resume, no traceback), its
    datasets' processes with it, and exits 143 as a process ended by SIGTERM does."""
    import os
    import signal
    import subprocess
    import sys
    import time

    preset = _sleeping_datasets(tmp_path, notebooks)
    run_dir = tmp_path / "run"
    script = (
        "import functools, sys\nfrom pathlib import Path\nfrom memcost import cli\n"
        "cli.run_preset = functools.partial(cli.run_preset, "
        f"notebooks_dir=Path({str(notebooks)!r}))\n"
        f"sys.exit(cli.main(['run', '--params', {str(preset)!r}, "
        f"'--run-name', {str(run_dir)!r}]))\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", script],
        env={**os.environ, SWITCH: workers},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = [run_dir / d / "kernel.pid" for d in ("a", "b")[: int(workers)]]
        deadline = time.monotonic() + 90
        while not all(p.is_file() and p.read_text() for p in started):
            assert runner.poll() is None and time.monotonic() < deadline, "kernels never started"
            time.sleep(0.2)
        os.kill(runner.pid, signal.SIGTERM)
        out, err = runner.communicate(timeout=60)
    finally:
        runner.kill()
    assert runner.returncode == 143, err
    assert "Traceback" not in err and "ERROR" not in err, err
    assert (
        err.strip()
        .splitlines()[0]
        .startswith("interrupted (stopped by SIGTERM): the notebooks that finished")
    )
    assert err.strip().splitlines()[-1].strip() == (
        f"python -m memcost run --params {preset} --run-name {run_dir}"
    )
    assert out.count(": interrupted in ") == int(workers)  # each running notebook's last line
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {v["status"] for v in manifest["notebooks"].values()} == {"interrupted"}
    (log,) = (run_dir / "logs").glob("run-*.log")
    assert "\n=== interrupted (SIGTERM) at " in log.read_text()


def test_a_run_stopped_between_two_notebooks_is_listed_as_interrupted(tmp_path, capsys):
    """SIGTERM after one notebook finished and before the next began marked no notebook
    interrupted, and ``memcost runs`` listed the run as "incomplete"."""
    from memcost.cli import main, mark_interrupted

    run = tmp_path / "stopped"
    run.mkdir()
    manifest = {
        "run_name": "stopped",
        "runs": [{"started_at": "2026-12-07T10:00:00+00:00", "steps": ["00", "01"]}],
        "notebooks": {"locomo/00_prepare_data": {"status": "ok", "wall_s": 1.0}},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    mark_interrupted(str(run), "SIGTERM")
    recorded = json.loads((run / "manifest.json").read_text())["runs"][-1]
    assert recorded["interrupted_by"] == "SIGTERM" and recorded["ended_at"]
    assert main(["runs", "--dir", str(tmp_path)]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("stopped")]
    assert "interrupted" in line.split()


def test_a_kernel_killed_by_the_groups_signal_is_an_interruption_not_a_disk_fault(
    tmp_path, capsys, monkeypatch
):
    """SIGTERM to the process group killed a kernel first; the runner's reset connection was
    reported as "cannot write a file of the run: Connection reset by peer. Free space ..."."""
    import signal

    from memcost import cli

    def killed(*args, **kwargs):
        cli.STOP_SIGNALS.append(signal.SIGTERM)  # what the runner's own handler records
        raise ConnectionResetError(104, "Connection reset by peer")

    monkeypatch.setattr(cli, "run_preset", killed)
    argv = ["run", "--params", "smoke", "--datasets", "locomo", "--run-name", str(tmp_path / "r")]
    assert cli.main(argv) == 143
    err = capsys.readouterr().err
    assert "interrupted (stopped by SIGTERM)" in err and "Free space" not in err

    def reset(*args, **kwargs):  # the same error with no signal: said as it is
        raise ConnectionResetError(104, "Connection reset by peer")

    monkeypatch.setattr(cli, "run_preset", reset)
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "error: [Errno 104] Connection reset by peer. Resume" in err
    assert "Free space" not in err


def test_a_run_name_too_long_for_the_file_system_is_one_line(tmp_path, capsys):
    from memcost.cli import main

    name = str(tmp_path / ("x" * 256))
    assert main(["run", "--params", "smoke", "--datasets", "locomo", "--run-name", name]) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert "is longer than the file system allows: choose a shorter --run-name" in line
    assert "Free space" not in line
