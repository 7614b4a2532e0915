"""What the scripted agents know about each task of the feature demo (``make demo-feature``).

The feature demo runs the task demo's own Player and Coach (``player.py``, ``coach.py``); only
their knowledge changes with the task: the module to write, its first draft, the fixes the Player
can make when the Coach rejects a criterion, and the tests that prove each criterion.
``feature_player.py`` and ``feature_coach.py`` install one task's table before the agent runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coach import Check
from player import Fix


@dataclass(frozen=True)
class TaskKnowledge:
    """One task's table, in the shape the task demo's agents read."""

    module: str
    test_file: str
    draft: str
    checks: dict[str, Check]
    implemented_if: dict[str, str]
    fixes: dict[str, Fix] = field(default_factory=dict)


#: TASK-FD-001's first draft leaves out the check of AC-002, so the task needs two turns.
SLUG_DRAFT = '''"""Slugs for titles: lower-cased words joined by dashes."""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+")


def slugify(title: str) -> str:
    """``"Hello, World!"`` -> ``"hello-world"``."""
    words = _WORD.findall(title.lower())
    return "-".join(words)
'''

SLUG_FIX = Fix(
    old='''    words = _WORD.findall(title.lower())
    return''',
    new='''    words = _WORD.findall(title.lower())
    if not words:
        raise ValueError(f"no letter or digit in the title {title!r}")
    return''',
    description="slugify now refuses a title with no letter or digit, quoting it",
)

WORDS_DRAFT = '''"""Word counts, case-insensitive, punctuation ignored."""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9']+")


def count_words(text: str) -> dict[str, int]:
    """``"The cat, the hat"`` -> ``{"the": 2, "cat": 1, "hat": 1}``."""
    return dict(Counter(_WORD.findall(text.lower())))
'''

SUMMARY_DRAFT = '''"""A one-line summary of a titled text, from slug.py and words.py."""

from __future__ import annotations

from slug import slugify
from words import count_words


def summarize(title: str, text: str) -> str:
    """``"cats-hats: 4 words, most often 'the'"``."""
    counts = count_words(text)
    top = max(counts, key=counts.__getitem__)  # the first of the most frequent words
    return f"{slugify(title)}: {sum(counts.values())} words, most often {top!r}"
'''

TASKS: dict[str, TaskKnowledge] = {
    "TASK-FD-001": TaskKnowledge(
        module="slug.py", test_file="tests/test_slug.py", draft=SLUG_DRAFT,
        checks={"AC-001": Check(("tests.test_slug.WordTests",), "slugify must join the lower-cased words with dashes"),
                "AC-002": Check(("tests.test_slug.InvalidTitleTests",),
                                "slugify must raise ValueError quoting a title with no letter or digit")},
        implemented_if={"AC-001": "def slugify", "AC-002": "raise ValueError"},
        fixes={"AC-002": SLUG_FIX}),
    "TASK-FD-002": TaskKnowledge(
        module="words.py", test_file="tests/test_words.py", draft=WORDS_DRAFT,
        checks={"AC-001": Check(("tests.test_words.CountTests",), "count_words must count words case-insensitively")},
        implemented_if={"AC-001": "def count_words"}),
    "TASK-FD-003": TaskKnowledge(
        module="summary.py", test_file="tests/test_summary.py", draft=SUMMARY_DRAFT,
        checks={"AC-001": Check(("tests.test_summary.SummaryTests",),
                                "summarize must give the slug, the word count and the most frequent word")},
        implemented_if={"AC-001": "def summarize"}),
}
