"""Model files that ship inside PyPI packages, checked against the hash Charlie was built with."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from charlie.errors import VoiceUnavailable
from charlie.files import sha256_of


def package_dir(package: str) -> Path | None:
    """The folder of an installed package's data, or None when it is not installed."""
    try:
        return Path(str(resources.files(package)))
    except ModuleNotFoundError:
        return None


def verified(path: Path, sha256: str, label: str) -> Path:
    """`path`, once it exists and matches `sha256`; otherwise a clear error."""
    if not path.is_file():
        raise VoiceUnavailable(f"{label}: {path} is missing; reinstall its package.")
    if sha256_of(path) != sha256:
        raise VoiceUnavailable(
            f"{label}: {path} does not match the hash Charlie was built with; "
            "reinstall its package at the version Charlie names."
        )
    return path


def package_file(package: str, relative: str, sha256: str, label: str, missing: str) -> Path:
    """A verified file inside an installed package; `missing` says what to install."""
    root = package_dir(package)
    if root is None:
        raise VoiceUnavailable(missing)
    return verified(root / relative, sha256, label)
