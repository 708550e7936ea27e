"""Object storage as a backup's place (`s3://BUCKET/PREFIX/NAME.db`): S3 and the services that
speak its API (Cloudflare R2, MinIO, Google Cloud Storage's interoperability).

- `bucket`: one bucket through aiobotocore (credentials from `[storage.NAME]` or the standard
  AWS places, retries, failures told in words).
- `layout`: where a backup's object, manifest and shared blobs are kept (pure).
- `upload`: a finished local backup sent, complete or not at all; `fetch`: one brought back
  into a local folder for `check`, `export` and `restore`.
- `pruning`: the backups under a prefix, and what is collected after retention deleted some.
- `destination`: the commands' and the daemon's entry points (a backup made and uploaded, a
  backup fetched for the time of a command).

The URLs and the settings are `syncd.config.storage`. botocore is imported when a bucket is
first opened: a command that uses none does not pay for it.
"""

from syncd.storage.bucket import Bucket, ObjectInfo, ObjectStoreError, open_bucket
from syncd.storage.destination import Stored, backup_to_bucket, fetched_backup, location
from syncd.storage.fetch import Fetched, NoSuchBackup, fetch_backup
from syncd.storage.upload import Uploaded, upload_backup

__all__ = [
    "Bucket",
    "Fetched",
    "NoSuchBackup",
    "ObjectInfo",
    "ObjectStoreError",
    "Stored",
    "Uploaded",
    "backup_to_bucket",
    "fetch_backup",
    "fetched_backup",
    "location",
    "open_bucket",
    "upload_backup",
]
