"""The client's parameters are shared notebook parameters: declared alike by every model-calling
notebook, settable from a preset, and handed to the one client unchanged."""

from __future__ import annotations

from memcost.llm import make_client
from memcost.params import CLIENT_PARAMETERS, notebook_defaults, shared_params
from memcost.paths import NOTEBOOKS_DIR

CALLING = ("01_extract_facts", "02_answer_from_memory", "03_answer_long_context",
           "04_judge_answers")


def test_every_model_calling_notebook_declares_them_with_one_default():
    defaults = [notebook_defaults(NOTEBOOKS_DIR / f"{stem}.ipynb") for stem in CALLING]
    for name in CLIENT_PARAMETERS:
        values = [d[name] for d in defaults if name in d]
        assert len(values) == len(CALLING), f"{name} missing from a model-calling notebook"
        assert all(v == values[0] for v in values), f"{name} has different defaults: {values}"


def test_a_zero_token_limit_means_no_throttle():
    assert "tpm_limit" not in shared_params({"tpm_limit": 0})
    assert shared_params({"tpm_limit": 30_000})["tpm_limit"] == 30_000


def test_the_notebook_defaults_build_a_client_and_routing_reaches_it(run_paths, tmp_path):
    params = shared_params(notebook_defaults(NOTEBOOKS_DIR / "03_answer_long_context.ipynb"))
    routing = {"openai/gpt-oss-120b": {"order": ["deepinfra"], "allow_fallbacks": False}}
    client = make_client(run_paths, **{**params, "provider_routing": routing},
                         cache_path=tmp_path / "cache.sqlite", progress=False)
    try:
        assert client.config.provider_routing == routing
        assert client.config.prefix_requests_per_minute == 15
        assert client.backend == "offline"
    finally:
        client.close()


def test_a_preset_may_set_them(tmp_path):
    from memcost.run import discover_notebooks, resolve_preset
    from memcost.run.validate import validate_run

    overrides = {"provider_routing": {"openai/gpt-oss-120b": {"order": ["x"]}},
                 "tpm_limit": 1000, "max_backoff_s": 60, "prefix_requests_per_minute": 10}
    preset = resolve_preset("smoke", discover_notebooks(), steps=["00", "01", "02", "03", "04"],
                            datasets=["locomo"], overrides=overrides)
    validate_run(preset, discover_notebooks(), tmp_path / "run")  # no unknown key, no bad type
    assert {k: preset.parameters[k] for k in overrides} == overrides
    assert not (tmp_path / "run").exists()
