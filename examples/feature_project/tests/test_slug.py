"""Acceptance tests for TASK-FD-001; one test class per acceptance criterion."""

from __future__ import annotations

import unittest

try:
    from slug import slugify
except ModuleNotFoundError:  # slug.py is TASK-FD-001's to write: not in this checkout yet
    raise unittest.SkipTest("slug.py is not written yet (TASK-FD-001)") from None


class WordTests(unittest.TestCase):
    """AC-001: lower-cased words joined by single dashes, punctuation dropped."""

    def test_two_words(self) -> None:
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_punctuation_and_spaces(self) -> None:
        self.assertEqual(slugify("  Hello,  World! "), "hello-world")

    def test_digits(self) -> None:
        self.assertEqual(slugify("Release 2 notes"), "release-2-notes")


class InvalidTitleTests(unittest.TestCase):
    """AC-002: a title with no letter or digit is refused, quoted."""

    def test_empty(self) -> None:
        with self.assertRaisesRegex(ValueError, "''"):
            slugify("")

    def test_only_punctuation(self) -> None:
        with self.assertRaisesRegex(ValueError, "'\\?!'"):
            slugify("?!")
