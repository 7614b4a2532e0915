"""The optional extras (``graphiti``, ``mcp``): which are installed, and the one command that installs
one into *this* copy of guardkit-state.

``pip install 'guardkit-state[mcp]'`` is the right advice for nobody who installed from a clone: it
asks an index for a package that may not be there, with whatever ``pip`` is first on ``PATH``. The
command that works depends on how this copy was installed, which its own environment tells:

* ``pipx install``: the environment holds ``pipx_metadata.json`` → ``pipx inject guardkit-state REQ...``;
* ``uv tool install``: it holds ``uv-receipt.toml`` → ``uv tool install --force 'SOURCE[extras]'``;
* ``make install``: it holds :data:`MAKE_INSTALL_MARKER` (the clone it came from) →
  ``make -C CLONE install EXTRAS=...``;
* anything else (a virtual environment, the clone's ``.venv``): its own interpreter's pip,
  ``/path/to/python -m pip install REQ...`` (``uv pip install --python ...`` where it has no pip).

:func:`install_command` decides; every "install the extra" message is built by
:func:`missing_extra_error`, and ``doctor`` lists the extras with the same commands.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from guardkit_state.errors import MissingExtraError

DISTRIBUTION = "guardkit-state"
#: The extras a user installs (``test`` is the suite's own).
EXTRAS = ("graphiti", "mcp")
#: Written by ``make install`` into the environment it creates: the clone it was installed from.
MAKE_INSTALL_MARKER = "guardkit-state-make-install"
#: The embedded FalkorDB of the Graphiti index: not in the extra (it has no wheel for every Python),
#: installed beside it as ``make install EXTRAS=graphiti`` and ``make test`` do.
EMBEDDED_FALKORDB = ("falkordblite==0.11.0",)
EMBEDDED_FALKORDB_PIP_OPTIONS = ("--ignore-requires-python",)

_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([A-Za-z0-9._-]+)["']""")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Installation:
    """How this copy of guardkit-state was installed, as its environment tells it.

    ``kind`` is ``pipx``, ``uv-tool``, ``make-install`` or ``pip``; ``source`` the folder it was
    installed from (a clone), or None (from a package index); ``clone`` the folder ``make install``
    ran in.
    """

    kind: str
    prefix: Path
    python: str
    source: Path | None = None
    editable: bool = False
    clone: Path | None = None


def installation(prefix: Path | None = None, python: str | None = None) -> Installation:
    """How this copy was installed (``prefix``/``python``: another environment's, for tests)."""
    prefix = Path(sys.prefix) if prefix is None else prefix
    python = sys.executable if python is None else python
    source, editable = _source()
    if (prefix / "pipx_metadata.json").is_file():
        return Installation("pipx", prefix, python, source, editable)
    if (prefix / "uv-receipt.toml").is_file():
        return Installation("uv-tool", prefix, python, source, editable)
    marker = prefix / MAKE_INSTALL_MARKER
    if marker.is_file():
        clone = Path(marker.read_text(encoding="utf-8", errors="replace").strip())
        if (clone / "Makefile").is_file():
            return Installation("make-install", prefix, python, source, editable, clone)
    return Installation("pip", prefix, python, source, editable)


def _distribution() -> importlib.metadata.Distribution | None:
    """guardkit-state's installed metadata: the one with ``direct_url.json`` first (a clone's
    ``*.egg-info`` seen from its working directory has none)."""
    found = list(importlib.metadata.distributions(name=DISTRIBUTION))
    with_url = [d for d in found if d.read_text("direct_url.json")]
    chosen = with_url or found
    return chosen[0] if chosen else None


def _source() -> tuple[Path | None, bool]:
    """The local folder this copy was installed from (PEP 610 ``direct_url.json``), and whether editable."""
    dist = _distribution()
    text = dist.read_text("direct_url.json") if dist is not None else None
    if not text:
        return None, False
    try:
        data = json.loads(text)
    except ValueError:
        return None, False
    url = urlparse(str(data.get("url", "")))
    if url.scheme != "file":
        return None, False
    editable = bool(isinstance(data.get("dir_info"), dict) and data["dir_info"].get("editable"))
    return Path(unquote(url.path)), editable


def extra_requirements(extra: str) -> list[str]:
    """The requirement strings of ``extra`` as this copy's metadata lists them (``mcp<3,>=2.3``)."""
    dist = _distribution()
    found = []
    for line in (dist.requires or []) if dist is not None else []:
        requirement, _, marker = line.partition(";")
        if extra in _EXTRA_MARKER.findall(marker):
            found.append(requirement.strip())
    return found


def requirement_name(requirement: str) -> str:
    """The distribution name a requirement string names (``mcp<3,>=2.3`` → ``mcp``)."""
    match = _NAME.match(requirement.strip())
    return match.group(0) if match else requirement.strip()


def missing_requirements(requirements: Sequence[str]) -> list[str]:
    """Those of ``requirements`` whose distribution is not installed in this environment."""
    missing = []
    for requirement in requirements:
        try:
            importlib.metadata.version(requirement_name(requirement))
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
    return missing


def installed_extras() -> list[str]:
    """The extras of :data:`EXTRAS` whose every requirement is installed."""
    return [extra for extra in EXTRAS
            if (reqs := extra_requirements(extra)) and not missing_requirements(reqs)]


def install_command(extra: str | None = None, *, requirements: Sequence[str] = (),
                    pip_options: Sequence[str] = (), where: Installation | None = None) -> str:
    """The one shell command that installs ``extra`` (or the bare ``requirements``, for a part outside
    any extra such as the embedded FalkorDB) into this copy, as it was installed."""
    where = installation() if where is None else where
    reqs = list(requirements) or (extra_requirements(extra) if extra else [])
    if extra and not reqs:
        reqs = [f"{DISTRIBUTION}[{extra}]"]  # metadata without the extra: an old copy
    if where.kind == "pipx":
        pip_args = [f"--pip-args={' '.join(pip_options)}"] if pip_options else []
        return shlex.join(["pipx", "inject", DISTRIBUTION, *reqs, *pip_args])
    if where.kind == "uv-tool" and extra:
        extras = sorted({*installed_extras(), extra})
        spec = f"{where.source or DISTRIBUTION}[{','.join(extras)}]"
        return shlex.join(["uv", "tool", "install", "--force", *(["--editable"] if where.editable else []), spec])
    if where.kind == "make-install" and extra and where.clone is not None:
        return shlex.join(["make", "-C", str(where.clone), "install", f"EXTRAS={extra}"])
    if where.kind == "uv-tool" or importlib.util.find_spec("pip") is None:
        return shlex.join(["uv", "pip", "install", "--python", where.python, *pip_options, *reqs])
    return shlex.join([where.python, "-m", "pip", "install", *pip_options, *reqs])


def missing_extra_error(extra: str, what: str, *, missing: str | None = None) -> MissingExtraError:
    """The error of a command that needs ``extra``: what needs it, and the command installing it here.

    ``missing`` names the module that could not be imported, when one is known.
    """
    detail = f" ({missing} is not installed)" if missing else ""
    return MissingExtraError(f"{what} needs the {extra} extra{detail}",
                             fix=f"install it with: {install_command(extra)}")


__all__ = ["DISTRIBUTION", "EMBEDDED_FALKORDB", "EMBEDDED_FALKORDB_PIP_OPTIONS", "EXTRAS", "MAKE_INSTALL_MARKER",
           "Installation", "extra_requirements", "install_command", "installation", "installed_extras",
           "missing_extra_error", "missing_requirements", "requirement_name"]
