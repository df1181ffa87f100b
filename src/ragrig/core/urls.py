"""The one rule for every URL ragrig takes (configuration, command line, environment): no
credentials inside it. A URL is printed in messages, written to params.yaml (hence to DVC's
lock and run-cache and to MLflow's params), to `.dvc/config.local` and onto command lines; a
secret in it would be too. Credentials go in the environment instead.

Refused: a userinfo part (`scheme://user:password@host`, and `scheme://user@host`, since a lone
user part is often a token), and a query, fragment or `;` parameter whose name says it holds a
secret (`?password=`, `?api_key=`, `?token=`, `X-Amz-Signature`, an Azure SAS `sig` ...). The
refusal is one line naming the field and where the credentials go; it shows the URL with the
secret parts replaced by `***`, never the secret.

`refuse_credentials` raises ConfigError, not ValueError, on purpose: pydantic would wrap a
ValueError in a ValidationError whose text repeats the input value (the secret) over several
lines; any other exception leaves the validator as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import unquote

from pydantic import AfterValidator

from ragrig.core.errors import ConfigError

# parameter names (lower case, without - _ . and spaces) that carry a secret, whole or as suffix
SECRET_NAMES = frozenset(
    {"key", "sig", "pwd", "pass", "auth", "authorization", "credential", "credentials"}
)
SECRET_SUFFIXES = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "accesskeyid",
    "secretkey",
    "privatekey",
    "signature",
    "credential",
    "sessionid",
)
_PARAM = re.compile(r"([?&#;])([^=&#;?]+)=([^&#;]*)")


def _split(url: str) -> tuple[str, str, str]:
    """(scheme with '://' or '', userinfo with its '@' or '', the rest). The authority ends at
    the first '/': a '#' or '?' left unencoded inside a password still counts as userinfo."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not sep and ":" not in userinfo:  # `folder@x/...` without a scheme: a path
        return "", "", url
    return scheme + sep, userinfo + at, host + slash + path


def _secret_name(name: str) -> bool:
    norm = re.sub(r"[-_.\s]", "", unquote(name)).lower()
    return norm in SECRET_NAMES or norm.endswith(SECRET_SUFFIXES)


def secret_parameters(url: str) -> list[str]:
    """Names of the parameters of `url` (query, fragment, `;`) that look like secrets."""
    return [m.group(2) for m in _PARAM.finditer(_split(url)[2]) if _secret_name(m.group(2))]


def redact(url: str, keep_user: bool = False) -> str:
    """`url` as a message may show it: the userinfo replaced by `***@` (`keep_user`: by
    `user:***@`, the user name kept), the values of secret-looking parameters by `***`."""
    scheme, userinfo, rest = _split(url)
    if userinfo:
        user, colon, _ = userinfo[:-1].partition(":")
        userinfo = f"{user}{':***' if colon else ''}@" if keep_user else "***@"

    def hide(m: re.Match[str]) -> str:
        return f"{m.group(1)}{m.group(2)}={'***' if _secret_name(m.group(2)) else m.group(3)}"

    return scheme + userinfo + _PARAM.sub(hide, rest)


def credentials_in(url: str, allow_user: bool = False) -> str | None:
    """What credential `url` holds ('a user:password part', 'a user part', "parameter
    'token'"), else None. `allow_user`: a user name alone passes (a PostgreSQL role name is
    not a secret; its password is)."""
    userinfo = _split(url)[1]
    if userinfo and (":" in userinfo or not allow_user):
        return "a user:password part" if ":" in userinfo else "a user part (often a token)"
    names = secret_parameters(url)
    if names:
        return "parameter " + ", ".join(repr(n) for n in dict.fromkeys(names))
    return None


def refuse_credentials(
    url: str,
    field: str,
    instead: str,
    written_to: str = "params.yaml",
    allow_user: bool = False,
) -> str:
    """`url` unchanged when it holds no credentials, else ConfigError with one line naming
    `field`, what was found (the URL redacted) and `instead`: where the credentials go."""
    found = credentials_in(url, allow_user)
    if found is None:
        return url
    raise ConfigError(
        f"{field}: credentials inside the URL are refused ({found} in {redact(url)}; it would "
        f"be printed and written to {written_to}); {instead}"
    )


AWS_ENV = "set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment"


def url_type(check: Callable[[str], str], optional: bool = False) -> Any:
    """The type of a URL field whose value `check` validates (None passes when `optional`):
    `Annotated[str, AfterValidator(...)]`, for `field: BaseURL = Field(...)`."""

    def validate(value: str | None) -> str | None:
        return value if value is None else check(value)

    return Annotated[str | None if optional else str, AfterValidator(validate)]


def no_credentials(
    field: str,
    instead: str,
    optional: bool = False,
    written_to: str = "params.yaml",
    allow_user: bool = False,
) -> Any:
    """The type of a URL field that refuses credentials (refuse_credentials)."""
    return url_type(
        lambda url: refuse_credentials(url, field, instead, written_to, allow_user), optional
    )
