"""Secrets stay in the environment: parameters that carry a credential are refused.

Parameters are recorded verbatim (the manifest, each notebook's metrics, papermill's injected
cell), so a key inside one would be written to disk. :func:`check_secrets` refuses, before any
notebook starts, a ``base_url`` with user info (``http://user:key@host``) or a key-like query
parameter (``?api-key=...``), an ``api_key_env`` that is not a variable name (a key pasted
where its variable's name belongs), a ``pgvector_dsn`` with a password, and a key-shaped token
anywhere else (a value or a mapping key of any parameter, the preset's description); the
messages never repeat the secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from memcost.run.presets import PresetError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PREFIX = re.compile(r"^(sk|pk|rk|ghp|xox[a-z])[-_]")
# A key-shaped token inside any text: a provider prefix and a long run of key characters.
_KEY_TOKEN = re.compile(r"(?<![A-Za-z0-9])(?:sk|pk|rk|ghp|xox[a-z])[-_][A-Za-z0-9_-]{16,}")
_SECRET_QUERY = re.compile(r"key|token|secret|sig|auth|pass|credential|access", re.IGNORECASE)
HOW = (
    "keys never go in parameters (they are recorded in the manifest and the executed "
    "notebooks): put the key in an environment variable (or .env) and pass that variable's "
    "name as api_key_env, e.g. -p 'client={api_key_env: MY_PROXY_KEY}'"
)


def looks_like_key(value: str) -> bool:
    """A key rather than a variable name: not a valid name, a key prefix, or a long mix of
    lower-case letters and digits."""
    if not _ENV_NAME.match(value) or _KEY_PREFIX.match(value):
        return True
    return len(value) >= 24 and bool(re.search(r"[a-z]", value)) and bool(re.search(r"\d", value))


def public_url(url: str) -> str:
    """``url`` without user info and without its query (what may be shown and recorded)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def check_base_url(url: str) -> None:
    parts = urlsplit(url)
    secret_params = [
        name
        for name, _ in parse_qsl(parts.query, keep_blank_values=True)
        if _SECRET_QUERY.search(name)
    ]
    if parts.username or parts.password:
        where = "user info (user:key@host)"
    elif secret_params:
        where = f"the query parameter {secret_params[0]!r}"
    else:
        return
    raise PresetError(
        f"parameter base_url carries a credential in {where}; refused, nothing "
        f"ran. Pass base_url={public_url(url)} and the secret through the "
        f"environment: {HOW}"
    )


def check_api_key_env(value: str) -> None:
    if value and looks_like_key(value):
        raise PresetError(
            "parameter api_key_env holds what looks like a key (not shown), not "
            f"the name of an environment variable; refused, nothing ran. {HOW}"
        )


def texts(value: Any, where: str) -> list[tuple[str, str]]:
    """Every string in ``value`` (mapping keys included), with the parameter it sits in."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, Mapping):
        return [t for k, v in value.items() for t in [*texts(k, where), *texts(v, f"{where}.{k}")]]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in texts(v, where)]
    return []


def check_no_key(value: Any, where: str) -> None:
    """A key-shaped token anywhere in ``value`` is refused, naming where it is (never it)."""
    for place, text in texts(value, where):
        if _KEY_TOKEN.search(text):
            raise PresetError(
                f"{place} holds what looks like a key (not shown); refused, nothing ran. {HOW}"
            )


def check_dsn_password(dsn: str) -> None:
    if not dsn:
        return
    pairs = dict(re.findall(r"(\w+)\s*=\s*('[^']*'|\S+)", dsn)) if "://" not in dsn else {}
    if urlsplit(dsn).password if "://" in dsn else pairs.get("password"):
        raise PresetError(
            "parameter pgvector_dsn carries a password (not shown); refused, "
            "nothing ran. Give the dsn without it and the password through the "
            "environment, where PostgreSQL's client reads it: PGPASSWORD, or a "
            "~/.pgpass file"
        )


def check_secrets(values: Mapping[str, Any], description: str = "") -> None:
    """Refuse a block of parameters that carries a credential (:class:`PresetError`)."""
    check_no_key(description, "description")
    if isinstance(values.get("pgvector_dsn"), str):
        check_dsn_password(values["pgvector_dsn"])
    settings = values.get("client") if isinstance(values.get("client"), Mapping) else {}
    if isinstance(settings.get("api_key_env"), str):
        check_api_key_env(settings["api_key_env"])
    if isinstance(values.get("base_url"), str):
        check_base_url(values["base_url"])
    for name, value in values.items():
        check_no_key(value, f"parameter {name}")
