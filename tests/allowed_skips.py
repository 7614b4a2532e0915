"""Why a test may skip: the one list the skip account reads (documented in docs/contributing.md).

Every skip's reason is matched against these entries, first match wins. ``make test`` ends with a
line counting the skips under each entry's label; under ``CI=true`` (``.ci/run``) a skip is
allowed only by an entry with ``allowed_in_ci`` — the CI machine has ``../shared/corpus``, root
(so Chromium is installed) and the extras ``make test`` installs, so any other skip there means a
test silently stopped running. The entries name conditions outside the product, never a product
failure: a test whose command fails must fail, not skip. Match by reason, not test id, so a new
test that skips for a listed reason needs no entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SkipReason:
    """One known reason to skip: its label in the account, how its message reads, whether CI allows it."""

    label: str
    pattern: str  # a regular expression searched in the skip message
    allowed_in_ci: bool
    why: str

    def matches(self, message: str) -> bool:
        return re.search(self.pattern, message) is not None


SKIP_REASONS: tuple[SkipReason, ...] = (
    # Allowed in CI: the machine's kernel, file system or network decide, not the product or make test.
    SkipReason("no tmpfs mount", r"cannot mount a tmpfs", True,
               "root in a container may lack CAP_SYS_ADMIN; RLIMIT_FSIZE still covers the full-disk path"),
    SkipReason("no POSIX ACLs", r"no default POSIX ACLs here", True,
               "the file system under the temp folder may not support default ACLs"),
    SkipReason("offline wheel build", r"cannot fetch the build backend", True,
               "building the wheel in an isolated environment downloads setuptools"),
    # Counted with a short label, but a failure in CI: CI has what they need.
    SkipReason("no ../shared/corpus", r"GuardKit corpus not found|no tasks/ directory in the corpus", False,
               "CI has the corpus beside the clone"),
    SkipReason("no Chromium", r"Chromium|playwright", False, "make test installs it where it runs as root, as CI does"),
    SkipReason("extra not installed", r"extra is not installed|falkordblite is not installed|could not import", False,
               "make test installs the test and graphiti extras and falkordblite"),
    SkipReason("not root", r"needs root", False, "CI runs as root"),
    SkipReason("no /proc", r"needs (Linux )?/proc", False, "CI runs on Linux"),
)


def classify(message: str) -> SkipReason | None:
    """The first entry whose pattern the skip message matches, or None."""
    return next((reason for reason in SKIP_REASONS if reason.matches(message)), None)
