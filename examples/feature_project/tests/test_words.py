"""Acceptance tests for TASK-FD-002."""

from __future__ import annotations

import unittest

try:
    from words import count_words
except ModuleNotFoundError:  # words.py is TASK-FD-002's to write: not in this checkout yet
    raise unittest.SkipTest("words.py is not written yet (TASK-FD-002)") from None


class CountTests(unittest.TestCase):
    """AC-001: each word counted, case-insensitively, punctuation ignored."""

    def test_counts(self) -> None:
        self.assertEqual(count_words("The cat, the hat"), {"the": 2, "cat": 1, "hat": 1})

    def test_empty(self) -> None:
        self.assertEqual(count_words(""), {})
