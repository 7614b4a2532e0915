"""Real Python environments for tests: this checkout's packages with some left out (an extra not installed)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


def environment_without(tmp_path: Path, *left_out: str) -> Path:
    """A virtual environment holding the test environment's packages but ``left_out`` (top-level names
    and their ``*.dist-info``); returns its folder."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    for entry in SITE_PACKAGES.iterdir():
        name = entry.name.split("-")[0].lower() if entry.name.endswith(".dist-info") else entry.name
        if name not in left_out:
            (site / entry.name).symlink_to(entry)
    return venv
