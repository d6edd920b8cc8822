"""Bad parameter values stop the run before the first notebook, in one line, with nothing
created: the five cases an audit found, through the command line."""

from __future__ import annotations

import pytest

from memcost.cli import main
from memcost.params import parameters_model, validate_parameters
from memcost.paths import NOTEBOOKS_DIR

CASES = [
    (
        ["-p", "client={max_concurrency: abc}"],
        "parameter client.max_concurrency='abc': expected an integer",
    ),
    (["-p", "max_cost_usd=ten"], "parameter max_cost_usd='ten': expected a number"),
    (["-p", "judge_prompts=[a, b"], "judge_prompts='[a, b'"),
    (["-p", "top_k=abc"], "parameter top_k='abc': expected an integer"),
    (
        ["--datasets", "LoCoMo"],
        "parameter datasets='LoCoMo': expected a dataset name; valid "
        "choices: locomo, longmemeval, personamem, personamem_v2",
    ),
    (["-p", "backend=openia"], "valid choices: offline, openai, openrouter, custom"),
    (["-p", "client={max_concurrency: 0}"], "expected a number at least 1"),
    (
        ["-p", "max_concurrency=16"],
        "-p max_concurrency=...: no notebook of preset smoke declares max_concurrency; it is "
        "one of the client's settings: client: {max_concurrency: ...}",
    ),
    (["-p", "judge_prompts=[judge, judge_lenent]"], "valid choices: judge, judge_lenient"),
    (["--steps", "02"], "step 02 needs locomo/data/questions.parquet, written by step 00"),
    (
        ["-p", "vector_store=pgvectr"],
        "parameter vector_store='pgvectr': expected one of the "
        "choices; valid choices: faiss, pgvector",
    ),
    (["-p", "pgvector_iterative_scan=fast"], "valid choices: off, relaxed_order, strict_order"),
    (["-p", "pgvector_layout=one_table"], "valid choices: shared, per_user"),
    (
        ["-p", "pgvector_dsn=host:5432 hunter2"],
        "parameter pgvector_dsn: expected a PostgreSQL connection URI",
    ),
    (
        ["-p", "client={execution: {extract:batch}}"],
        "'extract:batch' reads as one key with no "
        "value; write {extract: batch} with a space "
        "after the colon",
    ),
    # a search holds its results for a batch of questions: top_k=10^8 took 5.8 GB
    (["-p", "top_k=100000000"], "parameter top_k=100000000: expected a number from 1 to 10000"),
    (
        ["-p", "memory_systems=[mem0_style, {rag: {top_k: 100000000}}]"],
        "memory system rag: top_k=100000000: expected a whole number from 1 to 10000",
    ),
    (
        ["--datasets", "locomo,locomo"],
        "datasets names locomo more than once (locomo, locomo): each runs once",
    ),
    (
        ["-p", "memory_systems=[mem0_style, ragg]"],
        "parameter memory_systems: unknown memory system 'ragg'",
    ),
]


@pytest.mark.parametrize(("extra", "message"), CASES)
def test_a_bad_value_is_one_line_and_creates_nothing(tmp_path, capsys, extra, message):
    run_dir = tmp_path / "run"
    argv = ["run", "--params", "smoke", "--run-name", str(run_dir), "--datasets", "locomo", *extra]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a value it cannot read
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err and "memcost run --params" not in err  # no resume hint
    problems = [ln for ln in err.splitlines() if "error:" in ln]  # argparse adds its usage
    assert len(problems) == 1 and message in problems[0]
    assert not run_dir.exists()
    assert "hunter2" not in err  # a malformed dsn may hold a password: never repeated


def test_values_are_coerced_to_the_declared_type():
    model = parameters_model(
        tuple(NOTEBOOKS_DIR / f"{stem}.ipynb" for stem in ("01_extract_facts", "04_judge_answers"))
    )
    checked = validate_parameters(model, {"max_cost_usd": 10})
    assert checked == {"max_cost_usd": 10.0} and isinstance(checked["max_cost_usd"], float)
    assert validate_parameters(model, {"judge_prompts": ["judge", "judge_strict"]}) == {
        "judge_prompts": ["judge", "judge_strict"]
    }
    assert validate_parameters(model, {"extraction_model": 4}) == {"extraction_model": "4"}
    with pytest.raises(ValueError, match="^parameter update_phase='yes please': expected true or"):
        validate_parameters(model, {"update_phase": "yes please"})
    with pytest.raises(ValueError, match=r"^parameter max_cost_usd=True: expected a number$"):
        validate_parameters(model, {"max_cost_usd": True})
    with pytest.raises(ValueError, match=r"client.model_backends='openrouter': expected a dict"):
        validate_parameters(model, {"client": {"model_backends": "openrouter"}})


@pytest.mark.parametrize(
    "dsn",
    [
        "",
        "postgresql://postgres:@127.0.0.1:5432/memcost",
        "postgres://u@db/x",  # a password is refused: the environment holds it
        "host=localhost port=5432 dbname=x",
        "host=/tmp dbname='my db'",
    ],
)
def test_well_formed_dsns_pass(dsn):
    from memcost_pgvector import check_dsn

    check_dsn({"pgvector_dsn": dsn})


def test_an_unknown_name_typed_on_the_command_line_is_one_line_with_a_suggestion(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["run", "--params", "smoke", "--run-name", str(run_dir), "-p", "top_kk=3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not run_dir.exists()
    assert err == (
        "error: -p top_kk=...: no notebook of preset smoke declares top_kk; did you "
        "mean top_k? (each notebook's parameters cell lists its own)"
    )


def test_an_unknown_name_in_a_preset_file_is_one_line_naming_the_file(tmp_path, capsys):
    preset = tmp_path / "mine.yaml"
    preset.write_text(
        "datasets: [locomo]\nparameters:\n  judge_modle: gpt-5-mini\n", encoding="utf-8"
    )
    code = main(["run", "--params", str(preset), "--run-name", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: {preset}: unknown parameter 'parameters.judge_modle'")
    assert err.endswith("did you mean judge_model? (each notebook's parameters cell lists its own)")


@pytest.mark.parametrize("command", [["estimate", "--params", "smoke"], ["runs"]])
def test_a_malformed_today_is_one_line_before_any_command(monkeypatch, capsys, command):
    monkeypatch.setenv("MEMCOST_TODAY", "tomorrow")
    assert main(command) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: MEMCOST_TODAY must be a date as YYYY-MM-DD, got 'tomorrow' (unset it "
        "for today's date)"
    )


def test_a_relative_data_path_is_read_from_where_the_command_was_typed(tmp_path, monkeypatch):
    from memcost.run import discover_notebooks, resolve_preset

    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(tmp_path)
    preset = resolve_preset(
        "smoke",
        discover_notebooks(),
        datasets=["locomo"],
        overrides={"data_path": "mine/locomo10.json"},
    )
    assert preset.parameters["data_path"] == str(tmp_path / "mine" / "locomo10.json")
    empty = resolve_preset("smoke", discover_notebooks(), overrides={"data_path": ""})
    assert empty.parameters["data_path"] == ""  # empty stays empty: the bundled sample


def test_every_path_typed_is_read_from_where_the_command_was_typed(tmp_path, monkeypatch):
    """Relative published_dir and registry (a plugin's parameters) and run directories given as
    paths were read from notebooks/, where the kernels run; a bare run name stays runs/<name>."""
    from memcost.run import discover_notebooks, resolve_preset

    monkeypatch.chdir(tmp_path)
    notebooks = discover_notebooks()
    published = resolve_preset(
        "published",
        notebooks,
        overrides={"published_dir": "copies", "registry": "more/runs.yaml"},
    )
    assert published.parameters["published_dir"] == str(tmp_path / "copies")
    assert published.parameters["registry"] == str(tmp_path / "more" / "runs.yaml")
    costs = resolve_preset(
        "smoke",
        notebooks,
        overrides={
            "extra_run_dirs": ["../class/run-a", "run-b"],
            "client": {"reuse_runs": ["share/teacher", "smoke-1"], "env_file": "keys/.env"},
        },
    )
    assert costs.parameters["client"]["env_file"] == str(tmp_path / "keys" / ".env")
    assert costs.parameters["extra_run_dirs"] == [str(tmp_path / "../class/run-a"), "run-b"]
    assert costs.parameters["client"]["reuse_runs"] == [str(tmp_path / "share/teacher"), "smoke-1"]


@pytest.mark.parametrize(
    ("code", "text"), [(28, "No space left on device"), (30, "Read-only file system")]
)
def test_a_disk_that_cannot_be_written_is_one_line_with_the_path_and_the_resume(
    tmp_path, capsys, monkeypatch, code, text
):
    import memcost.run.runner as runner

    run_dir = tmp_path / "run"
    target = run_dir / "manifest.json"

    def unwritable(*args, **kwargs):
        raise OSError(code, text, str(target))

    monkeypatch.setattr(runner, "record_start", unwritable)
    assert (
        main(
            [
                "run",
                "--params",
                "smoke",
                "--datasets",
                "locomo",
                "--run-name",
                str(run_dir),
                "--quiet",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: cannot write {target}: {text}" in err
    assert f"memcost run --params smoke --run-name {run_dir} --datasets locomo" in err


PRESET_FILES = [
    (b"description: caf\xe9\ndatasets: [locomo]\n", "not UTF-8 text (byte 0xe9 at position 16)"),
    (b"datasets: [locomo]\nparameters: [1, 2]\n", "parameters must be a mapping, e.g. {top_k: 20}"),
    (b"datasets: [locomo]\nper_dataset: [locomo]\n", "per_dataset must be a mapping, e.g."),
    (b"datasets: [locomo]\nper_dataset:\n  locomo: [1]\n", "per_dataset.locomo must be a mapping"),
    (b"datasets: {locomo: 1}\n", "datasets must be a list, e.g. [locomo, longmemeval]"),
]


@pytest.mark.parametrize(("content", "message"), PRESET_FILES)
def test_a_preset_file_of_the_wrong_shape_is_one_line_naming_it(tmp_path, capsys, content, message):
    preset = tmp_path / "mine.yaml"
    preset.write_bytes(content)
    code = main(["run", "--params", str(preset), "--run-name", str(tmp_path / "run")])
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if "error:" in ln]
    assert code == 2 and line == f"error: {preset}: {line.split(f'{preset}: ', 1)[1]}"
    assert message in line and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_a_share_of_failures_that_is_not_a_fraction_is_refused(tmp_path, capsys):
    for value in ("nan", "inf", "-0.1", "1.5"):
        argv = ["run", "--params", "smoke", "--run-name", str(tmp_path / "run")]
        assert main([*argv, "--allow-failures", value]) == 2
        assert f"--allow-failures={float(value)!r}: expected a fraction from 0 to 1" in (
            capsys.readouterr().err
        )
        assert not (tmp_path / "run").exists()
