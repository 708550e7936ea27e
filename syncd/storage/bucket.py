"""One bucket of object storage, through aiobotocore: the few calls a backup needs (put a
file, get one, head, list, delete), each failure told in words.

Why aiobotocore: it is botocore (the AWS SDK's core, kept by AWS) on aiohttp, which syncd
already runs on; so credentials come from every standard place with nothing written here
(the environment, `AWS_PROFILE` and `~/.aws`, SSO, an instance or container role), requests
are signed by botocore, and its `standard` retry mode retries 5xx, throttling and dropped
connections with backoff. (obstore, the other candidate, reads no `~/.aws` profile without
boto3 beside it.)

Settings for every S3-compatible service: checksums only where the API requires one
(`when_required`; the CRC32 headers botocore adds by default are refused by some R2, MinIO
and GCS versions), with a Content-MD5 on every upload instead, which all of them check: an
object is stored as it was sent or not at all. A file larger than `PART_SIZE` goes up in
parts (a multipart upload is invisible until completed, and aborted when it fails).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from syncd.config import Settings
from syncd.config.storage import ObjectUrl, StorageConfig
from syncd.errors import SyncdError, first_failure
from syncd.files import create_private

__all__ = ["PART_SIZE", "Bucket", "ObjectInfo", "ObjectStoreError", "open_bucket"]

PART_SIZE = 16 * 1024 * 1024
"""A file up to this size is one PUT; a larger one goes up in parts of this size."""
_CHUNK = 1 << 16
_TIMEOUTS = {"connect_timeout": 10, "read_timeout": 60}


def _quiet_library_logs() -> None:
    """botocore says at info level where it found the keys and the endpoint, on every client:
    noise between syncd's own lines. Its warnings and errors still come through (a level an
    operator set on these loggers is left alone)."""
    for name in ("botocore", "aiobotocore"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


class ObjectStoreError(SyncdError):
    """A request to object storage failed (after its retries): what, where, and why in words."""


async def for_each_object(items: Iterable[str], each: Callable[[str], Awaitable[None]]) -> None:
    """`each(item)` for every item in one task group (the caller bounds how many at once): the
    first ObjectStoreError is raised as itself, not inside a group, so it ends the command as
    one line."""
    try:
        async with anyio.create_task_group() as group:
            for item in items:
                group.start_soon(each, item)
    except BaseExceptionGroup as group_error:
        failure = first_failure(group_error)
        if isinstance(failure, ObjectStoreError):
            raise failure from None
        raise


@dataclass(frozen=True)
class ObjectInfo:
    """An object as a listing or a HEAD tells it."""

    key: str
    size: int
    modified: float
    """Its LastModified, the service's clock (seconds since the epoch)."""
    metadata: Mapping[str, str]


_WORDS = {
    "NoSuchBucket": "no such bucket",
    "AccessDenied": "access denied: check the keys and what the bucket's policy allows them",
    "InvalidAccessKeyId": "the access key id is unknown to the service",
    "SignatureDoesNotMatch": "the secret access key does not match the access key id",
    "ExpiredToken": "the session token has expired",
    "InvalidBucketName": "the bucket name is refused by the service",
    "EntityTooLarge": "the object is larger than the service accepts",
    "BadDigest": "the bytes the service received differ from those sent (Content-MD5)",
    "NoSuchKey": "no such object",
    "404": "no such object",
}


def describe(exc: BaseException, attempts: int) -> str:
    """Why a request failed, in words (botocore's errors, a network failure)."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "")
        answered = exc.response.get("ResponseMetadata", {})
        status = int(answered.get("HTTPStatusCode") or 0)
        attempts = int(answered["RetryAttempts"]) + 1 if isinstance(answered.get("RetryAttempts"), int) else attempts
        message = " ".join(str(error.get("Message") or "").split())
        words = _WORDS.get(code)
        if words is None:
            words = f"the service answered HTTP {status}" + (f" {code}" if code and code != str(status) else "")
            if message:
                words += f" ({message})"
            if status >= 500 or code in ("SlowDown", "Throttling", "RequestTimeout"):
                words += f", {attempts} attempt{'s' if attempts != 1 else ''} in all"
        return words
    if isinstance(exc, BotoCoreError):
        text = " ".join(str(exc).split())
        name = type(exc).__name__
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            return "no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, or the storage's access_key_id_env"
        if name in ("EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError", "ProxyConnectionError"):
            return f"{text}, {attempts} attempt{'s' if attempts != 1 else ''} in all"
        return text
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


def _is_missing(exc: BaseException) -> bool:
    """The request failed because there is no such object (S3 says it three ways)."""
    return _code(exc) in ("404", "NoSuchKey", "NotFound")


def _code(exc: BaseException) -> str | None:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "")
    return None


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


def _read_part(path: Path, offset: int, size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read(size)


class Bucket:
    """An open client of one bucket (`open_bucket`); every method raises ObjectStoreError."""

    def __init__(self, client: Any, name: str, attempts: int, concurrency: int) -> None:
        self._client, self.name, self.attempts, self.concurrency = client, name, attempts, concurrency

    def url(self, key: str) -> ObjectUrl:
        return ObjectUrl(self.name, key)

    def _failed(self, what: str, key: str, exc: BaseException) -> ObjectStoreError:
        return ObjectStoreError(f"{what} {self.url(key)} failed: {describe(exc, self.attempts)}")

    async def head(self, key: str) -> ObjectInfo | None:
        """The object at `key`, or None when there is none."""
        try:
            answer = await self._client.head_object(Bucket=self.name, Key=key)
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise self._failed("reading", key, exc) from None
        return ObjectInfo(key, int(answer.get("ContentLength") or 0), answer["LastModified"].timestamp(), dict(answer.get("Metadata") or {}))

    async def list(self, prefix: str, *, recursive: bool = True) -> list[ObjectInfo]:
        """The objects whose keys start with `prefix` (`recursive` False: not those below a
        further `/`), in key order."""
        found: list[ObjectInfo] = []
        options: dict[str, Any] = {"Bucket": self.name, "Prefix": prefix}
        if not recursive:
            options["Delimiter"] = "/"
        try:
            async for page in self._client.get_paginator("list_objects_v2").paginate(**options):
                for item in page.get("Contents") or []:
                    found.append(ObjectInfo(item["Key"], int(item.get("Size") or 0), item["LastModified"].timestamp(), {}))
        except Exception as exc:
            raise self._failed("listing", prefix, exc) from None
        return sorted(found, key=lambda info: info.key)

    async def put_bytes(self, key: str, data: bytes, metadata: Mapping[str, str] | None = None, content_type: str = "application/octet-stream") -> None:
        try:
            await self._client.put_object(
                Bucket=self.name, Key=key, Body=data, ContentMD5=_md5(data), ContentType=content_type, Metadata=dict(metadata or {})
            )
        except Exception as exc:
            raise self._failed("uploading", key, exc) from None

    async def put_file(self, key: str, path: Path, metadata: Mapping[str, str] | None = None, content_type: str = "application/octet-stream") -> int:
        """Upload the file at `path` to `key` whole (in parts when larger than `PART_SIZE`);
        the object appears only once every byte is stored. Returns the bytes sent."""
        size = path.stat().st_size
        if size <= PART_SIZE:
            data = await anyio.to_thread.run_sync(path.read_bytes)
            await self.put_bytes(key, data, metadata, content_type)
            return len(data)
        return await self._put_parts(key, path, size, dict(metadata or {}), content_type)

    async def _put_parts(self, key: str, path: Path, size: int, metadata: dict[str, str], content_type: str) -> int:
        try:
            started = await self._client.create_multipart_upload(Bucket=self.name, Key=key, Metadata=metadata, ContentType=content_type)
        except Exception as exc:
            raise self._failed("uploading", key, exc) from None
        upload = started["UploadId"]
        parts = []
        try:
            for number, offset in enumerate(range(0, size, PART_SIZE), start=1):
                data = await anyio.to_thread.run_sync(_read_part, path, offset, PART_SIZE)
                answer = await self._client.upload_part(
                    Bucket=self.name, Key=key, UploadId=upload, PartNumber=number, Body=data, ContentMD5=_md5(data)
                )
                parts.append({"PartNumber": number, "ETag": answer["ETag"]})
            await self._complete(key, upload, parts, size, metadata)
        except BaseException as exc:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                try:
                    await self._client.abort_multipart_upload(Bucket=self.name, Key=key, UploadId=upload)
                except Exception:  # noqa: S110 - best effort: the service drops unfinished uploads by its own rules
                    pass
            if isinstance(exc, Exception) and not isinstance(exc, ObjectStoreError):
                raise self._failed("uploading", key, exc) from None
            raise
        return size

    async def _complete(self, key: str, upload: str, parts: list[dict[str, Any]], size: int, metadata: dict[str, str]) -> None:
        """Complete a multipart upload. A completion whose answer was lost is retried by
        botocore; the retry then finds the upload gone (`NoSuchUpload`): the object already
        written, the same size and metadata, is the upload done, not a failure."""
        try:
            await self._client.complete_multipart_upload(Bucket=self.name, Key=key, UploadId=upload, MultipartUpload={"Parts": parts})
        except Exception as exc:
            if _code(exc) == "NoSuchUpload":
                stored = await self.head(key)
                if stored is not None and stored.size == size and all(stored.metadata.get(k) == v for k, v in metadata.items()):
                    return
            raise

    async def get_file(self, key: str, path: Path) -> bool:
        """Download `key` into a new private file at `path`; False when there is no such
        object (nothing is left at `path` then, nor after a failure)."""
        create_private(path)
        try:
            try:
                answer = await self._client.get_object(Bucket=self.name, Key=key)
            except Exception as exc:
                if _is_missing(exc):
                    path.unlink(missing_ok=True)
                    return False
                raise self._failed("downloading", key, exc) from None
            try:
                async with answer["Body"] as body:
                    with path.open("wb") as handle:
                        while chunk := await body.read(_CHUNK * 16):
                            handle.write(chunk)
            except Exception as exc:
                raise self._failed("downloading", key, exc) from None
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return True

    async def get_bytes(self, key: str, limit: int) -> bytes | None:
        """The object's bytes (at most `limit`: a larger one is refused), None when there is none."""
        try:
            answer = await self._client.get_object(Bucket=self.name, Key=key)
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise self._failed("downloading", key, exc) from None
        too_big = ObjectStoreError(f"downloading {self.url(key)} failed: it holds more than {limit} bytes")
        if int(answer.get("ContentLength") or 0) > limit:
            answer["Body"].close()
            raise too_big
        chunks: list[bytes] = []
        held = 0
        try:
            async with answer["Body"] as body:
                # Read in pieces and stop past `limit`: an answer without Content-Length (chunked)
                # is bounded too, not read whole first.
                while chunk := await body.read(_CHUNK):
                    held += len(chunk)
                    if held > limit:
                        raise too_big
                    chunks.append(bytes(chunk))
        except ObjectStoreError:
            raise
        except Exception as exc:
            raise self._failed("downloading", key, exc) from None
        return b"".join(chunks)

    async def delete(self, key: str) -> None:
        """Delete one object (one request a key: every S3-compatible service has this call;
        GCS has no multi-object delete). An object already gone is no failure."""
        try:
            await self._client.delete_object(Bucket=self.name, Key=key)
        except Exception as exc:
            if _is_missing(exc):
                return
            raise self._failed("deleting", key, exc) from None


def _region(entry: StorageConfig | None) -> str | None:
    """The storage's region, else `AWS_REGION` (botocore itself reads only `AWS_DEFAULT_REGION`
    and the profile's)."""
    if entry is not None and entry.region:
        return entry.region
    return os.environ.get("AWS_REGION") or None


@asynccontextmanager
async def open_bucket(settings: Settings, bucket: str) -> AsyncIterator[Bucket]:
    """A client of `bucket` with the settings of its `[storage.NAME]` entry (module docstring),
    closed when the block ends."""
    from aiobotocore.session import AioSession
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    _quiet_library_logs()
    entry = settings.storage_for(bucket)
    keys = entry.keys() if entry is not None else None
    attempts = entry.max_attempts if entry is not None else StorageConfig.model_fields["max_attempts"].default
    concurrency = entry.concurrency if entry is not None else StorageConfig.model_fields["concurrency"].default
    config = Config(
        retries={"total_max_attempts": attempts, "mode": "standard"},
        s3={"addressing_style": entry.addressing_style if entry is not None else "auto"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        max_pool_connections=max(10, concurrency * 2),
        **_TIMEOUTS,
    )
    options: dict[str, Any] = {"config": config, "region_name": _region(entry)}
    if entry is not None and entry.endpoint_url:
        options["endpoint_url"] = entry.endpoint_url
    if keys:
        options.update({name: secret.get_secret_value() for name, secret in keys.items()})
    try:
        session = AioSession(profile=entry.profile if entry is not None and entry.profile else None)
        context = session.create_client("s3", **options)
        client = await context.__aenter__()
    except BotoCoreError as exc:
        where = f"storage.{entry.name}" if entry is not None else f"s3://{bucket}"
        error = ObjectStoreError(f"{where}: {describe(exc, 1)}")
        error.exit_code = 2  # a setting that cannot work (an unknown profile, a bad region): fix it and run again
        raise error from None
    try:
        yield Bucket(client, bucket, attempts, concurrency)
    finally:
        with anyio.CancelScope(shield=True):
            await context.__aexit__(None, None, None)
