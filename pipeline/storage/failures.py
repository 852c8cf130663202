"""Whether an error is the storage's (an OSError, or an error of an fsspec backend's client library) and what it
means in words, with what to do for the common cases (credentials, a missing bucket, permissions)."""

from __future__ import annotations

_STORAGE_PACKAGES = ("botocore", "aiobotocore", "boto3", "s3fs", "gcsfs", "google", "adlfs", "azure",
                     "huggingface_hub", "fsspec", "aiohttp", "requests", "urllib3")


def is_storage_failure(e: BaseException) -> bool:
    """Whether ``e`` is a failure of the storage (an OSError, or an error of an fsspec backend's client
    library such as botocore's ``NoCredentialsError``) rather than of mcprm's own code."""
    if isinstance(e, OSError):
        return True
    return any((type(c).__module__ or "").split(".")[0] in _STORAGE_PACKAGES for c in _chain(e))


def _chain(e: BaseException):
    seen = 0
    while e is not None and seen < 8:
        yield e
        e = e.__cause__ or e.__context__
        seen += 1


def describe_storage_failure(e: BaseException) -> str:
    """What went wrong with the storage, in words, with what to do for the common cases."""
    names = [type(c).__name__ for c in _chain(e)]
    text = " ".join(str(c) for c in _chain(e))
    low = text.lower()
    if any(n in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError", "ProfileNotFound")
           for n in names) \
            or "unable to locate credentials" in low:
        return ("no credentials for this storage (" + (str(e) or names[0]) + "); set them up first, e.g. for S3 "
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE, for GCS GOOGLE_APPLICATION_CREDENTIALS")
    if "NoSuchBucket" in text or "bucket does not exist" in low or "specified bucket does not exist" in low:
        return f"the bucket does not exist ({e})"
    if isinstance(e, PermissionError):
        return "permission denied"
    if "AccessDenied" in text or "Forbidden" in text or "403" in text:
        return f"permission denied ({e})"
    what = (e.strerror if isinstance(e, OSError) else None) or str(e)
    return f"{type(e).__name__}: {what}" if what else type(e).__name__
