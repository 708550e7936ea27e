"""Object storage: `s3://BUCKET/KEY` URLs (a backup's place), and `[storage.NAME]`, the
settings of one bucket (its endpoint, region and where its credentials come from).

An `s3://BUCKET/...` URL uses the `[storage.NAME]` entry whose `bucket` is BUCKET; a bucket no
entry names is reached with the standard AWS settings alone (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_PROFILE`,
`~/.aws/config` and `~/.aws/credentials`, an instance or container role). Like a tenant's
`token_env`, an entry names the environment variables that hold its keys: a secret is never
in the file. The URL parser is pure; `syncd.storage` talks to the service.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, PlainValidator, PrivateAttr, SecretStr, field_validator, model_validator

from syncd.config.base import StrictModel
from syncd.errors import ConfigError, ConfigProblem
from syncd.logging import register_secret

__all__ = ["SCHEME", "ObjectUrl", "StorageConfig", "is_object_url", "parse_object_url"]

SCHEME = "s3://"
_BUCKET_RE = re.compile(r"\A[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]\Z")
"""S3's bucket names (3 to 63 characters: lower case letters, digits, '.', '-'), and '_' that
some S3-compatible services allow."""
_ENV_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_KEY_ENVS = ("access_key_id_env", "secret_access_key_env")


@dataclass(frozen=True, slots=True)
class ObjectUrl:
    """`s3://BUCKET/KEY`: an object (a backup, `KEY` ending `.db`) or, with `KEY` empty or
    ending in `/`, a prefix under which objects are kept (a backup job's `output`)."""

    bucket: str
    key: str = ""

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}"

    @property
    def is_prefix(self) -> bool:
        return not self.key or self.key.endswith("/")

    @property
    def folder(self) -> str:
        """The prefix the object is in (`backups/` for `backups/acme.db`; `` at the top)."""
        return self.key if self.is_prefix else self.key.rpartition("/")[0] + ("/" if "/" in self.key else "")

    @property
    def name(self) -> str:
        """The object's name within its prefix (`acme.db`)."""
        return self.key.rpartition("/")[2]

    def at(self, key: str) -> ObjectUrl:
        """Another object of the same bucket."""
        return ObjectUrl(self.bucket, key)


def is_object_url(text: object) -> bool:
    """Whether `text` is meant as an object storage URL (`s3://...`, any case)."""
    return isinstance(text, str) and text.strip().lower().startswith(SCHEME)


def parse_object_url(text: str, *, backup: bool | None = None) -> ObjectUrl:
    """`s3://BUCKET/KEY` parsed, ValueError saying what is wrong. `backup` True: it must name a
    backup object (`KEY` ending `.db`); False: a prefix (`s3://BUCKET/` or `s3://BUCKET/PREFIX/`,
    a missing final `/` added); None: either."""
    raw = text.strip()
    if not is_object_url(raw):
        raise ValueError(f"must be an s3://BUCKET/KEY URL, got {text!r}")
    rest = raw[len(SCHEME) :]
    bucket, _, key = rest.partition("/")
    if not _BUCKET_RE.match(bucket):
        raise ValueError(f"{text!r}: {bucket!r} is no bucket name (3 to 63 lower case letters, digits, '.', '-')")
    parts = urlsplit(raw)
    if parts.query or parts.fragment or "?" in raw or "#" in raw:
        raise ValueError(f"{text!r}: an object URL has no query or fragment")
    if any(ord(ch) < 0x20 or ch == "\\" for ch in key) or "//" in key or any(part in (".", "..") for part in key.split("/")):
        raise ValueError(f"{text!r}: the key must be a plain path (no '//', '.', '..', backslash or control character)")
    if key.startswith("/"):
        raise ValueError(f"{text!r}: the key must not start with '/'")
    url = ObjectUrl(bucket, key)
    if backup is True and (url.is_prefix or not key.endswith(".db") or len(url.name) <= len(".db")):
        raise ValueError(f"{text!r}: a backup in object storage is an object named NAME.db (s3://{bucket}/PREFIX/NAME.db)")
    if backup is False and not url.is_prefix:
        url = ObjectUrl(bucket, key + "/")
    return url


def _env_name(value: str | None) -> str | None:
    if value is not None and not _ENV_NAME_RE.match(value):
        raise ValueError(f"must be the name of an environment variable, got {value!r}")
    return value


def _http_url(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    text = value.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValueError(f"must be an http(s) URL, got {value!r}") from None
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain credentials: name their variables with access_key_id_env and secret_access_key_env")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"must be an http(s) URL without query or fragment, got {value!r}")
    return text.rstrip("/")


class StorageConfig(StrictModel):
    """One bucket of object storage (AWS S3, or a service that speaks its API: Cloudflare R2,
    MinIO, Google Cloud Storage's interoperability): an `s3://BUCKET/...` URL whose bucket is
    this entry's `bucket` is reached with these settings. Anything not given comes from the
    standard AWS places (the environment, `~/.aws/config` and `~/.aws/credentials`, a role)."""

    bucket: str
    """The bucket these settings are for: every `s3://BUCKET/...` URL naming it uses them (one
    entry a bucket)."""
    endpoint_url: Annotated[str | None, PlainValidator(_http_url)] = None
    """The service's endpoint: `https://ACCOUNT_ID.r2.cloudflarestorage.com` (R2),
    `http://127.0.0.1:9000` (MinIO), `https://storage.googleapis.com` (GCS); unset:
    `AWS_ENDPOINT_URL`, else AWS S3 of the region."""
    region: str | None = None
    """The region requests are signed for (`auto` for R2, `us-east-1` for MinIO and GCS); unset:
    `AWS_REGION`, else `AWS_DEFAULT_REGION` or the profile's."""
    profile: str | None = None
    """A profile of `~/.aws/config` and `~/.aws/credentials` to take the keys (and region) from;
    unset: `AWS_PROFILE`, else the default chain. Not with `access_key_id_env`."""
    access_key_id_env: str | None = None
    """The name of the environment variable holding the access key id (with
    `secret_access_key_env`); unset: the standard places (`AWS_ACCESS_KEY_ID`, a profile, a role)."""
    secret_access_key_env: str | None = None
    """The name of the environment variable holding the secret access key (with `access_key_id_env`)."""
    session_token_env: str | None = None
    """The name of the environment variable holding a session token, for temporary keys (with
    the other two)."""
    addressing_style: Literal["auto", "path", "virtual"] = "auto"
    """How the bucket is put in a request's URL: `path` (`ENDPOINT/BUCKET/KEY`: MinIO and most
    self-hosted services), `virtual` (`BUCKET.ENDPOINT/KEY`), `auto` (the library's choice:
    virtual on AWS)."""
    max_attempts: int = Field(default=5, ge=1, le=20)
    """Attempts of one request in all, the first one included: a 5xx, throttling, a dropped
    connection or a timeout is retried with backoff (a request is retried whole, so the object
    it writes is written once, complete)."""
    concurrency: int = Field(default=8, ge=1, le=64)
    """Uploads and downloads in flight at once for one backup."""

    _name: str = PrivateAttr(default="")
    _env: Mapping[str, str] | None = PrivateAttr(default=None)

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, value: str) -> str:
        if not _BUCKET_RE.match(value):
            raise ValueError(f"{value!r} is no bucket name (3 to 63 lower case letters, digits, '.', '-')")
        return value

    @field_validator("access_key_id_env", "secret_access_key_env", "session_token_env")
    @classmethod
    def _env_names(cls, value: str | None) -> str | None:
        return _env_name(value)

    @model_validator(mode="after")
    def _one_credential_source(self) -> StorageConfig:
        given = [key for key in _KEY_ENVS if getattr(self, key) is not None]
        if len(given) == 1:
            missing = next(key for key in _KEY_ENVS if key not in given)
            raise ValueError(f"give {missing} with {given[0]} (an access key is the pair)")
        if self.session_token_env is not None and not given:
            raise ValueError("session_token_env goes with access_key_id_env and secret_access_key_env")
        if given and self.profile is not None:
            raise ValueError("give either profile or access_key_id_env and secret_access_key_env, not both")
        return self

    @property
    def name(self) -> str:
        return self._name

    def keys(self) -> dict[str, SecretStr] | None:
        """The access key read from the variables named (None: none named, the standard chain
        finds them); each secret registered with the log masker first. A ConfigError when a
        variable is not set."""
        if self.access_key_id_env is None or self.secret_access_key_env is None:
            return None
        env = self._env if self._env is not None else os.environ
        found: dict[str, SecretStr] = {}
        for field, name in (("aws_access_key_id", self.access_key_id_env), ("aws_secret_access_key", self.secret_access_key_env),
                            ("aws_session_token", self.session_token_env)):  # fmt: skip
            if name is None:
                continue
            value = (env.get(name) or "").strip()
            if not value:
                where = f"storage.{self._name}." + {"aws_access_key_id": "access_key_id_env", "aws_secret_access_key": "secret_access_key_env",
                                                   "aws_session_token": "session_token_env"}[field]  # fmt: skip
                raise ConfigError(problems=[ConfigProblem(None, where, f"environment variable {name} is not set or empty")])
            register_secret(value)
            found[field] = SecretStr(value)
        return found
