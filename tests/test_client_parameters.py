"""The client's parameters: a few shared ones (backend, base_url, max_cost_usd, price_overrides)
declared alike by every model-calling notebook, and one ``client`` mapping for the rest, settable
from a preset or the command line and handed to the one client unchanged."""

from __future__ import annotations

import pytest

from memcost.llm import make_client
from memcost.params import (
    CLIENT_SETTINGS,
    SHARED_PARAMETERS,
    merge_parameters,
    notebook_defaults,
    shared_params,
)
from memcost.paths import NOTEBOOKS_DIR
from memcost.run.presets import PresetError

CALLING = (
    "01_extract_facts",
    "02_answer_from_memory",
    "03_answer_long_context",
    "04_judge_answers",
)


def test_every_model_calling_notebook_declares_them_with_one_default():
    defaults = [notebook_defaults(NOTEBOOKS_DIR / f"{stem}.ipynb") for stem in CALLING]
    for name in (*SHARED_PARAMETERS, "client"):
        values = [d[name] for d in defaults if name in d]
        assert len(values) == len(CALLING), f"{name} missing from a model-calling notebook"
        assert all(v == values[0] for v in values), f"{name} has different defaults: {values}"
    for d in defaults:
        assert d["client"] == {} and not set(d) & set(CLIENT_SETTINGS)  # no plumbing of its own


def test_the_client_mapping_reaches_the_client_and_an_unknown_setting_is_refused():
    limits = {"gpt-5-mini": {"rpm": 500, "tpm": 500_000}}
    assert shared_params({"client": {"rate_limits": limits}})["rate_limits"] == limits
    with pytest.raises(
        ValueError,
        match=r"^parameter client: unknown setting\(s\) \['tpm_limit'\]; the client's settings "
        r"are api_key_env, model_backends, ",
    ):
        shared_params({"client": {"tpm_limit": 30_000}})
    with pytest.raises(
        ValueError, match=r"^parameter client.max_concurrency=0: expected a number at least 1$"
    ):
        shared_params({"client": {"max_concurrency": 0}})
    assert shared_params(
        {"backend": "offline", "other": 1, "client": {"request_timeout_s": 7.5}}
    ) == {"backend": "offline", "request_timeout_s": 7.5}
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['max_concurency'\]"):
        shared_params({"client": {"max_concurency": 3}})


def test_a_client_mapping_given_later_changes_only_what_it_names():
    preset = {
        "backend": "openai",
        "client": {"model_backends": {"a": "openrouter"}, "max_concurrency": 8},
    }
    merged = merge_parameters(preset, {"client": {"max_concurrency": 16}})
    assert merged["client"] == {"model_backends": {"a": "openrouter"}, "max_concurrency": 16}
    assert preset["client"]["max_concurrency"] == 8  # the preset itself is left as it was


def test_the_notebook_defaults_build_a_client_and_routing_reaches_it(run_paths, tmp_path):
    params = shared_params(notebook_defaults(NOTEBOOKS_DIR / "03_answer_long_context.ipynb"))
    routing = {"openai/gpt-oss-120b": {"order": ["deepinfra"], "allow_fallbacks": False}}
    client = make_client(
        run_paths,
        **{**params, "provider_routing": routing},
        progress=False,
    )
    try:
        assert client.config.provider_routing == routing
        assert client.config.prefix_requests_per_minute == 15
        assert client.backend == "offline"
    finally:
        client.close()


def test_a_preset_may_set_them(tmp_path):
    from memcost.run import discover_notebooks, resolve_preset
    from memcost.run.presets import validate_run

    settings = {
        "provider_routing": {"openai/gpt-oss-120b": {"order": ["x"]}},
        "rate_limits": {"gpt-5-mini": {"tpm": 1000}},
        "max_retries": 4,
        "prefix_requests_per_minute": 10,
    }
    preset = resolve_preset(
        "smoke",
        discover_notebooks(),
        steps=["00", "01", "02", "03", "04"],
        datasets=["locomo"],
        overrides={"client": settings},
    )
    validate_run(preset, discover_notebooks(), tmp_path / "run")  # no unknown key, no bad type
    assert {k: preset.parameters["client"][k] for k in settings} == settings
    assert not (tmp_path / "run").exists()


def test_a_client_setting_given_as_a_parameter_is_refused_naming_the_mapping(tmp_path):
    from memcost.run import discover_notebooks, resolve_preset

    with pytest.raises(PresetError) as refused:
        resolve_preset("smoke", discover_notebooks(), overrides={"max_concurrency": 16})
    assert str(refused.value) == (
        "-p max_concurrency=...: no notebook of preset smoke declares max_concurrency; it is "
        "one of the client's settings: client: {max_concurrency: ...}"
    )
    flat = tmp_path / "flat.yaml"
    flat.write_text(
        "datasets: [locomo]\nparameters:\n  execution: {judge: batch}\n", encoding="utf-8"
    )
    with pytest.raises(
        PresetError,
        match=r"flat.yaml: unknown parameter 'parameters.execution'; no notebook in this preset "
        r"declares it; it is one of the client's settings: client: \{execution: ...\}",
    ):
        resolve_preset(flat, discover_notebooks())
