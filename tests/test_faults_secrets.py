"""A planted key never reaches the disk or the terminal: credentials in base_url (user info or
a key-like query parameter) and a key given as api_key_env are refused before any notebook."""

from __future__ import annotations

import pytest

from memcost.cli import main
from memcost.run.presets import PresetError, check_api_key_env, looks_like_key

SECRET = "sk-" + "PLANTEDsecret0123456789abcdef"  # built here, so no key-like text is tracked


def refused(tmp_path, capsys, *overrides: str) -> str:
    run_dir = tmp_path / "run"
    argv = [
        "run",
        "--params",
        "smoke",
        "--run-name",
        str(run_dir),
        "--datasets",
        "locomo",
        "-p",
        "backend=custom",
        *[a for o in overrides for a in ("-p", o)],
    ]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 2
    assert SECRET not in out.err and SECRET not in out.out
    assert "api_key_env" in out.err and "Traceback" not in out.err
    assert not run_dir.exists()  # nothing recorded anywhere
    return out.err


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{SECRET}@proxy.example:8080/v1",
        f"http://{SECRET}@proxy.example/v1",
        f"https://proxy.example/v1?api-key={SECRET}",
        f"https://proxy.example/v1?foo=1&access_token={SECRET}",
        f"https://proxy.example/v1?key={SECRET}",
    ],
)
def test_a_base_url_with_a_credential_is_refused(tmp_path, capsys, url):
    err = refused(tmp_path, capsys, f"base_url={url}", "client={api_key_env: MY_PROXY_KEY}")
    assert "base_url carries a credential" in err
    assert "proxy.example" in err  # the public part is shown, to copy


def test_a_key_given_as_api_key_env_is_refused_without_echo(tmp_path, capsys):
    err = refused(
        tmp_path, capsys, "base_url=http://127.0.0.1:9/v1", f"client={{api_key_env: {SECRET}}}"
    )
    assert "looks like a key (not shown)" in err


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "MY_PROXY_KEY", "KEY_FOR_PROXY", "vllm_key"])
def test_variable_names_are_not_keys(name):
    assert not looks_like_key(name)
    check_api_key_env(name)


@pytest.mark.parametrize(
    "value", [SECRET, "sk_live_abc", "0f3a9c1e5b7d2468ace0f3a9c1e5", "abc-def"]
)
def test_key_like_values_are_refused(value):
    with pytest.raises(PresetError) as info:
        check_api_key_env(value)
    assert value not in str(info.value)


@pytest.mark.parametrize(
    "override",
    [
        f"client={{provider_routing: {{openai/gpt-oss-120b: {{order: [{SECRET}]}}}}}}",
        f"client={{model_backends: {{{SECRET}: openrouter}}}}",
    ],
)
def test_a_key_pasted_anywhere_in_the_parameters_is_refused_without_echo(
    tmp_path, capsys, override
):
    err = refused(tmp_path, capsys, "base_url=http://127.0.0.1:9/v1", override)
    assert "looks like a key (not shown); refused, nothing ran" in err


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://memcost:hunter2-pw@db.example:5432/memcost",
        "host=db.example dbname=memcost password=hunter2-pw",
    ],
)
def test_a_pgvector_password_is_refused_and_never_recorded(tmp_path, capsys, dsn):
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "--params",
                "smoke",
                "--run-name",
                str(run_dir),
                "--datasets",
                "locomo",
                "-p",
                f"pgvector_dsn={dsn}",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "hunter2" not in err and "pgvector_dsn carries a password" in err
    assert "PGPASSWORD" in err and not run_dir.exists()


def test_a_key_in_the_description_is_refused_before_the_manifest_records_it(tmp_path, capsys):
    preset = tmp_path / "mine.yaml"
    preset.write_text(f"description: try with {SECRET}\ndatasets: [locomo]\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    assert main(["run", "--params", str(preset), "--run-name", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert SECRET not in err and "description holds what looks like a key" in err
    assert not run_dir.exists()
