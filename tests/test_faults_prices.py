"""Prices for any model: a model without a price stops the run before notebook 01 with one line
that works when followed; a custom backend may declare its models free or priced."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
import yaml
from fake_api.openai_server import FakeOpenAIServer
from fake_api.stages import stage_server
from llm_helpers import TEST_KEY, api_client, question

from memcost.calls import read_calls
from memcost.cli import main
from memcost.params import normalise_price_overrides, shared_params
from memcost.paths import REPO_ROOT

MODEL = "llama3.1:8b"


def run_args(tmp_path, *extra, base_url="http://127.0.0.1:9/v1", model=MODEL):
    """Steps 00 and 01 of the smoke preset on LoCoMo against ``base_url`` (``model``: the
    extraction model, ``None`` for the preset's)."""
    args = ["run", "--params", "smoke", "--run-name", str(tmp_path / "run")]
    args += ["--datasets", "locomo", "--steps", "00,01"]
    args += ["-p", "backend=custom", "-p", f"base_url={base_url}"]
    return [*args, *(["-p", f"extraction_model={model}"] if model else []), *extra]


def suggested(err: str) -> list[str]:
    """The first ``-p ...`` the message suggests, as shell words."""
    line = next(ln for ln in err.splitlines() if "error:" in ln)
    start = line.index("-p '")
    return shlex.split(line[start : line.index("' ", start) + 1])


def test_an_unknown_price_is_one_line_before_anything_runs(tmp_path, capsys):
    assert main(run_args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert f"no price for model '{MODEL}' (extraction_model)" in err
    assert "UnknownPriceError" not in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()
    hint = suggested(err)
    assert hint == ["-p", 'price_overrides={"llama3.1:8b": 0}']


def test_following_the_line_passes_validation_and_the_budget_bills_nothing(
    tmp_path, capsys, monkeypatch, run_paths
):
    from memcost.cli import build_parser
    from memcost.run.presets import PresetError, resolve_preset, validate_run
    from memcost.run.runner import discover_notebooks

    assert main(run_args(tmp_path)) == 2
    hints = suggested(capsys.readouterr().err)  # first: the price
    assert hints == ["-p", 'price_overrides={"llama3.1:8b": 0}']

    def validate(extra):
        args = build_parser().parse_args(run_args(tmp_path, *extra))
        preset = resolve_preset(
            args.params,
            discover_notebooks(),
            steps=["00", "01"],
            datasets=["locomo"],
            overrides=dict(args.overrides),
        )
        validate_run(preset, discover_notebooks(), tmp_path / "run")
        return preset

    # then, a model the registry does not know: one more line, which works when followed too
    with pytest.raises(PresetError) as info:
        validate(hints)
    assert f"unknown model '{MODEL}' (extraction_model)" in str(info.value)
    line = str(info.value)
    start = line.index("-p '")
    hints += shlex.split(line[start : line.index("' ", start) + 1])
    preset = validate(hints)
    overrides = preset.parameters["price_overrides"]
    assert overrides == {MODEL: {"input": 0.0, "cached_input": 0.0, "output": 0.0}}
    capabilities = preset.parameters["client"]["model_capabilities"]
    assert capabilities == {MODEL: {"context_window": 32768}}

    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        client = api_client(
            run_paths,
            server.url,
            tmp_path,
            max_cost_usd=0.01,
            **shared_params(
                {"price_overrides": {MODEL: 0}, "client": {"model_capabilities": capabilities}}
            ),
        )
        result = client.chat(question(1, model=MODEL, temperature=0, max_output_tokens=50))
        client.close()
    assert result.error is None
    (record,) = read_calls(run_paths.calls)
    assert record["model"] == MODEL and record["error"] is None


@pytest.mark.parametrize("value", [{MODEL: "free"}, {MODEL: -1}, [MODEL]])
def test_a_bad_price_names_the_entry(value):
    with pytest.raises(ValueError, match="price_overrides"):
        normalise_price_overrides(value)


BAD_PRICES = [
    # (the override, what the one line says): a negative price once passed the budget guard and
    # made every request look free; text and NaN once reached the arithmetic
    ("{gpt-5-mini: {input: -1, output: -1}}", "price_overrides['gpt-5-mini'].input=-1 must be"),
    ("{gpt-5-mini: {output: -0.5}}", "price_overrides['gpt-5-mini'].output=-0.5 must be"),
    ("{gpt-5-mini: {cached_input: -2}}", "price_overrides['gpt-5-mini'].cached_input=-2"),
    ("{gpt-5-mini: {input: abc}}", "price_overrides['gpt-5-mini'].input='abc' is not a number"),
    ("{gpt-5-mini: {input: .nan}}", "price_overrides['gpt-5-mini'].input=nan must be"),
    ("{gpt-5-mini: {input: .inf}}", "price_overrides['gpt-5-mini'].input=inf must be"),
    ("{gpt-5-mini: {batch_multiplier: -2}}", "batch_multiplier=-2 must be"),
    ("{gpt-5-mini: {flex_multiplier: 3}}", "flex_multiplier=3 must be between 0 and 1"),
    ("{gpt-5-mini: {input: true}}", "input=True is not a number"),
    ("{gpt-5-mini: {inptu: 0.1}}", "has unknown field(s) ['inptu']"),
    ("{text-embedding-3-small: -1}", "price_overrides['text-embedding-3-small']=-1 must be"),
]


@pytest.mark.parametrize(("override", "message"), BAD_PRICES)
def test_a_bad_price_stops_the_run_before_any_request(
    tmp_path, capsys, monkeypatch, override, message
):
    monkeypatch.setenv("MEMCOST_TEST_KEY", TEST_KEY)
    with FakeOpenAIServer(api_key=TEST_KEY) as server:
        typed = ["-p", "client={api_key_env: MEMCOST_TEST_KEY}", "-p", "max_cost_usd=0.002"]
        typed += ["-p", f"price_overrides={override}"]
        code = main(run_args(tmp_path, *typed, base_url=server.url, model=None))
        sent = len(server.requests)
    err = capsys.readouterr().err
    assert code == 2
    problems = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(problems) == 1 and message in problems[0], err
    assert "Traceback" not in err
    assert sent == 0
    assert not (tmp_path / "run").exists()


def test_a_client_built_in_python_checks_its_prices_too(run_paths, tmp_path):
    with pytest.raises(ValueError, match=r"price_overrides\['gpt-5-mini'\]\.output=-1 must be"):
        api_client(
            run_paths,
            "http://127.0.0.1:9/v1",
            tmp_path,
            max_cost_usd=0.01,
            price_overrides={"gpt-5-mini": {"output": -1}},
        )


def test_every_price_is_checked_where_it_is_made():
    from dataclasses import replace

    from memcost.catalog import PRICES, price_for

    row = PRICES["gpt-4o-mini"]
    with pytest.raises(ValueError, match=r"price of 'gpt-4o-mini' \(.+\): input=-0.15 must be"):
        replace(row, input=-0.15)
    with pytest.raises(ValueError, match="long_context_threshold=0.5 must be a whole number"):
        replace(row, long_context_threshold=0.5)
    # a plugin or notebook that hands overrides straight to the price table is checked as well
    with pytest.raises(ValueError, match=r"price_overrides\['gpt-4o-mini'\]\.input=-1"):
        price_for("gpt-4o-mini", {"gpt-4o-mini": {"input": -1}})
    assert price_for("gpt-4o-mini", {"gpt-4o-mini": {"input": 0}}).input == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_custom_model_declared_free_runs_notebook_01(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"datasets": ["locomo"], "steps": ["00", "01"]}))
    with stage_server(api_key=TEST_KEY, faults=False) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "memcost",
                "run",
                "--params",
                str(preset),
                "--run-name",
                str(tmp_path / "run"),
                "--quiet",
                "-p",
                "backend=custom",
                "-p",
                f"base_url={server.url}",
                "-p",
                "client={api_key_env: MEMCOST_TEST_KEY, "
                f'model_capabilities: {{"{MODEL}": {{}}}}}}',
                "-p",
                f"extraction_model={MODEL}",
                "-p",
                f'price_overrides={{"{MODEL}": 0}}',
            ],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=280,
            env={
                **__import__("os").environ,
                "MEMCOST_TEST_KEY": TEST_KEY,
                "MEMCOST_CACHE_DIR": str(tmp_path / "cache"),
            },
        )
    assert done.returncode == 0, done.stderr[-3000:]
    calls = read_calls(tmp_path / "run")
    assert {c["model"] for c in calls if c["stage"] == "extract"} == {MODEL}


def test_reservations_learn_what_the_provider_bills_above_the_list_price():
    # a host charging 27 times the listed price: once a charge is seen, the next request
    # reserves at that markup, so calls in flight cannot carry the spend past the budget
    from memcost.llm.accounting import Budget, BudgetStop
    from memcost.llm.requests import Usage

    budget = Budget(1.0)
    request = question(1)
    listed = budget.estimate(request)
    first = budget.reserve(request)
    assert first == pytest.approx(listed)
    usage = Usage(prompt_tokens=20, completion_tokens=10)
    list_cost = budget.cost(request.model, usage)
    budget.settle(first, request.model, usage, billed_usd=27 * list_cost)
    second = budget.reserve(request)
    assert second == pytest.approx(27 * budget.estimate(request))  # the list guess, marked up
    budget.settle(second, request.model, usage, billed_usd=27 * list_cost)
    with pytest.raises(BudgetStop):
        for _ in range(100_000):  # one call after another, each billed at the markup
            budget.settle(budget.reserve(request), request.model, usage, billed_usd=27 * list_cost)
    assert 1.0 - 27 * list_cost < budget.spent <= 1.0  # stopped before the budget, not after


def test_a_budget_below_a_cent_is_shown_as_it_is_not_as_nothing(tmp_path, capsys):
    assert main(run_args(tmp_path, "-p", "max_cost_usd=0.002", model=None)) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert "exceeds max_cost_usd $0.0020; nothing has been spent" in line  # once "$0.00"
