"""One URL's bytes, with a timeout and a bounded number of attempts (standard library only).

A transient failure (no connection, timeout, a body cut short, HTTP 5xx or 429) is tried again
after a growing wait; anything else (HTTP 404, a file missing from a `file://` mirror, a malformed
URL) fails at once. A body shorter
than its Content-Length raises `http.client.IncompleteRead`, so a server that fails mid-file can
never hand over a truncated work.
"""

from __future__ import annotations

import errno
import http.client
import socket
import time
import urllib.error
import urllib.request

RETRY_WAIT = 1.0  # seconds before the second attempt; doubles after each failure
USER_AGENT = "review-lab-corpus-fetch"


class DownloadError(Exception):
    """The URL could not be read (after the allowed attempts).

    Attributes:
        unreachable: The host could not be reached at all (no network, name not resolved,
            connection refused, timed out): the other works of that source will fail alike.
    """

    def __init__(self, message: str, unreachable: bool = False):
        super().__init__(message)
        self.unreachable = unreachable


def download(url: str, *, timeout: float, attempts: int) -> bytes:
    """The body of `url`.

    Raises:
        DownloadError: Every attempt failed, or the failure is not worth retrying.
    """
    error, unreachable = "not tried", False
    for attempt in range(1, attempts + 1):
        try:
            return _read(url, timeout)
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code} {exc.reason}"
            if exc.code < 500 and exc.code != 429:
                raise DownloadError(error) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if _permanent(exc):
                raise DownloadError(_describe(exc)) from None
            error, unreachable = _describe(exc), _unreachable(exc)
        except ValueError as exc:  # not a URL urllib can open
            raise DownloadError(str(exc)) from None
        if attempt < attempts:
            time.sleep(RETRY_WAIT * 2 ** (attempt - 1))
    raise DownloadError(f"{error} (after {attempts} attempt{'s' if attempts > 1 else ''})", unreachable)


def _read(url: str, timeout: float) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http(s)/file by design
        return response.read()


def _permanent(exc: BaseException) -> bool:
    """A local file that is not there or not readable (a `file://` mirror): the local 404, which
    waiting will not fix."""
    cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return isinstance(cause, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError))


def _unreachable(exc: BaseException) -> bool:
    cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    return isinstance(cause, (socket.gaierror, ConnectionRefusedError, TimeoutError)) or (
        isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, http.client.IncompleteRead):
        return f"connection closed mid-file ({len(exc.partial)} bytes received)"
    cause = exc.reason if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException) else exc
    return f"{type(cause).__name__}: {cause}"
