"""No credentials inside a URL (ragrig.core.urls): every URL field of the configuration, and
$RAGRIG_MLFLOW_URI, refuses a user:password part, a user part and secret-looking parameters
with one line naming the field and where the credentials go, never repeating the secret."""

from __future__ import annotations

import pytest

from ragrig.core.config import validate_section
from ragrig.core.errors import ConfigError
from ragrig.core.urls import credentials_in, redact, refuse_credentials

SECRET = "s3cr3tPW"
BAD = f"https://user:{SECRET}@host"


def _storage(url: str, field: str) -> dict:
    remote = {"url": "s3://bucket/prefix", field: url}
    return {"remote": remote}


def _generate(url: str) -> dict:
    return {"method": "openai_http", "base_url": url, "model": "m", "api_key_env": "KEY"}


def _judge(url: str) -> dict:
    return {"method": "overlap", "llm": {"backend": "openai_http", "base_url": url, "model": "m"}}


def _mlflow(key: str, url: str) -> dict:
    return {"mlflow": {key: url}}


def _dataset(url: str) -> dict:
    download = {"url": url, "checksum": {"value": "0" * 64}}
    return {"name": "x", "root": "data/x", "download": download}


# (section, raw config with the URL, field named, where the credentials go instead)
FIELDS = [
    ("storage", lambda u: _storage(u, "url"), "storage.remote.url", "AWS_SECRET_ACCESS_KEY"),
    (
        "storage",
        lambda u: _storage(u, "endpoint_url"),
        "storage.remote.endpoint_url",
        "AWS_SECRET_ACCESS_KEY",
    ),
    ("generate", _generate, "generate.base_url", "generate.api_key_env"),
    ("judge", _judge, "judge.llm.base_url", "judge.llm.api_key_env"),
    (
        "report",
        lambda u: _mlflow("tracking_uri", u),
        "report.mlflow.tracking_uri",
        "MLFLOW_TRACKING_PASSWORD",
    ),
    (
        "report",
        lambda u: _mlflow("artifact_location", u),
        "report.mlflow.artifact_location",
        "AWS_SECRET_ACCESS_KEY",
    ),
    (
        "report",
        lambda u: _mlflow("s3_endpoint_url", u),
        "report.mlflow.s3_endpoint_url",
        "AWS_SECRET_ACCESS_KEY",
    ),
    ("dataset", _dataset, "dataset.download.url", "public URL"),
]


def _refusal(section: str, raw: dict) -> str:
    with pytest.raises(ConfigError) as err:
        validate_section(section, raw)
    return str(err.value)


@pytest.mark.parametrize(("section", "raw", "field", "instead"), FIELDS, ids=[f[2] for f in FIELDS])
def test_every_url_field_refuses_a_password_in_one_line_without_it(section, raw, field, instead):
    msg = _refusal(section, raw(BAD))
    assert "\n" not in msg and SECRET not in msg, msg
    assert msg.startswith(f"{field}: credentials inside the URL are refused"), msg
    assert "https://***@host" in msg and instead in msg, msg


@pytest.mark.parametrize(("section", "raw", "field", "instead"), FIELDS, ids=[f[2] for f in FIELDS])
@pytest.mark.parametrize(
    "url",
    [
        "https://ghp_0123456789abcdef@host/v1",  # a user part alone: often a token
        f"https://host:9000/v1?X-Amz-Signature={SECRET}&X-Amz-Date=20260101",
        f"https://host/v1?api_key={SECRET}",
        f"https://host/v1?token={SECRET}",
        f"https://host/v1#access_token={SECRET}",
    ],
)
def test_user_parts_and_secret_parameters_are_refused_too(section, raw, field, instead, url):
    msg = _refusal(section, raw(url))
    assert "\n" not in msg and SECRET not in msg and "0123456789abcdef" not in msg, msg
    assert msg.startswith(f"{field}: credentials inside the URL are refused"), msg


@pytest.mark.parametrize(("section", "raw", "field", "instead"), FIELDS, ids=[f[2] for f in FIELDS])
def test_urls_without_credentials_pass(section, raw, field, instead):
    url = "s3://bucket/prefix" if field in {"storage.remote.url"} else "http://127.0.0.1:9000/v1"
    if field == "report.mlflow.artifact_location":
        url = "s3://ragrig-mlflow/artifacts?region=eu-west-1"
    validate_section(section, raw(url))


def test_postgres_tracking_uri_keeps_the_role_refuses_the_password():
    ok = "postgresql://ragrig@127.0.0.1:5433/ragrig"
    assert validate_section("report", _mlflow("tracking_uri", ok)).mlflow.tracking_uri == ok
    for bad in (
        f"postgresql://ragrig:{SECRET}@127.0.0.1:5433/ragrig",
        f"postgresql+psycopg2://ragrig:{SECRET}@h/db",
        f"postgresql://ragrig@h/db?password={SECRET}&sslmode=require",
    ):
        msg = _refusal("report", _mlflow("tracking_uri", bad))
        assert "\n" not in msg and SECRET not in msg, msg
        assert msg.startswith("report.mlflow.tracking_uri: credentials inside the URL are refused")
        assert "PGPASSWORD" in msg and "~/.pgpass" in msg and "password_env" in msg, msg
    msg = _refusal("report", _mlflow("tracking_uri", "http://tok@mlflow.lan:5000"))
    assert "MLFLOW_TRACKING_TOKEN" in msg and "tok@" not in msg


def test_composed_overrides_are_refused_before_params_are_written(tmp_path):
    from ragrig.compose.params import compose, validate_composition, write_params

    from ..conftest import PROJECT

    for override in (
        f"report.mlflow.tracking_uri=postgresql://u:{SECRET}@h/db",
        f"generate.base_url={BAD}/v1",
    ):
        extra = ["generate=openai_http"] if override.startswith("generate") else []
        cfg = compose(PROJECT / "conf", [*extra, override])
        with pytest.raises(ConfigError) as err:
            validate_composition(cfg)
        msg = str(err.value)
        assert "credentials inside the URL are refused" in msg, msg
        assert SECRET not in msg and "\n" not in msg, msg
        out = tmp_path / "params.yaml"
        with pytest.raises(ConfigError, match="credentials inside the URL are refused"):
            write_params(PROJECT / "conf", out, [*extra, override])
        assert not out.exists()


def test_ragrig_mlflow_uri_from_the_environment_is_refused(monkeypatch, tmp_path):
    from ragrig.tracking.run import ENV_URI, tracking_uri

    monkeypatch.setenv(ENV_URI, f"postgresql://ragrig:{SECRET}@h:5433/ragrig")
    with pytest.raises(ConfigError) as err:
        tracking_uri(None, tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"{ENV_URI}: credentials inside the URL are refused") and "\n" not in msg
    assert SECRET not in msg and "PGPASSWORD" in msg
    monkeypatch.setenv(ENV_URI, f"https://user:{SECRET}@mlflow.lan")
    with pytest.raises(ConfigError, match="MLFLOW_TRACKING_PASSWORD") as err:
        tracking_uri(None, tmp_path)
    assert SECRET not in str(err.value)
    monkeypatch.setenv(ENV_URI, "postgresql://ragrig@h:5433/ragrig")
    assert tracking_uri(None, tmp_path) == "postgresql+psycopg2://ragrig@h:5433/ragrig"
    # a raw (unvalidated) report.mlflow mapping, as `make ui` reads params.yaml, is refused too
    with pytest.raises(ConfigError, match="report.mlflow.tracking_uri: credentials"):
        tracking_uri(f"postgresql://ragrig:{SECRET}@h/db", tmp_path)


def test_the_rule_itself():
    assert credentials_in("http://127.0.0.1:8080/v1") is None
    assert credentials_in("postgresql://ragrig@h/db", allow_user=True) is None
    assert credentials_in("postgresql://ragrig:@h/db", allow_user=True) == "a user:password part"
    assert credentials_in("https://tok@h") == "a user part (often a token)"
    assert credentials_in("user:pw@host:9000") == "a user:password part"  # no scheme
    assert credentials_in("runs@2026/artifacts") is None  # a path, not a user part
    assert credentials_in("https://u:pa#ss@host/v1") == "a user:password part"  # unencoded '#'
    assert credentials_in("https://h/x?X-Amz-Credential=a&sig=b") == (
        "parameter 'X-Amz-Credential', 'sig'"
    )
    assert credentials_in("https://h/x?region=eu&page=2#top") is None
    assert (
        redact(f"https://u:{SECRET}@h/v1?key={SECRET}&page=2") == "https://***@h/v1?key=***&page=2"
    )
    assert redact(f"postgresql://u:{SECRET}@h/d", keep_user=True) == "postgresql://u:***@h/d"
    assert refuse_credentials("http://h:1/v1", "x.url", "env") == "http://h:1/v1"
    with pytest.raises(ConfigError, match=r"^x\.url: credentials inside the URL are refused"):
        refuse_credentials(BAD, "x.url", "use the environment")
