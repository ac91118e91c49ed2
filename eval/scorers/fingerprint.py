"""Content hashes of the files a score is made from: `generate.common.fingerprint`, re-exported
here for the scorers and flows that import them from eval."""

from __future__ import annotations

from generate.common.fingerprint import SKIPPED, content_hash, directory_hash, package_version

__all__ = ["SKIPPED", "content_hash", "directory_hash", "package_version"]
