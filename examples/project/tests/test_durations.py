"""Acceptance tests for TASK-DEMO-001; one test class per acceptance criterion."""

from __future__ import annotations

import unittest

from durations import format_duration, parse_duration


class SingleUnitTests(unittest.TestCase):
    """AC-001: a single-unit duration becomes whole seconds."""

    def test_seconds(self) -> None:
        self.assertEqual(parse_duration("45s"), 45)

    def test_minutes(self) -> None:
        self.assertEqual(parse_duration("10m"), 600)

    def test_hours(self) -> None:
        self.assertEqual(parse_duration("2h"), 7200)

    def test_days(self) -> None:
        self.assertEqual(parse_duration("1d"), 86400)


class CombinedUnitTests(unittest.TestCase):
    """AC-002: combined units add up; spaces between parts are allowed."""

    def test_hours_and_minutes(self) -> None:
        self.assertEqual(parse_duration("1h30m"), 5400)

    def test_all_units(self) -> None:
        self.assertEqual(parse_duration("1d2h3m4s"), 93784)

    def test_spaces_between_parts(self) -> None:
        self.assertEqual(parse_duration("1h 30m"), 5400)


class InvalidInputTests(unittest.TestCase):
    """AC-003: malformed input raises ValueError, and the message quotes the input."""

    def assert_rejected(self, text: str) -> None:
        with self.assertRaises(ValueError) as caught:
            parse_duration(text)
        self.assertIn(repr(text), str(caught.exception))

    def test_empty_string(self) -> None:
        self.assert_rejected("")

    def test_no_number(self) -> None:
        self.assert_rejected("abc")

    def test_unknown_unit(self) -> None:
        self.assert_rejected("10x")

    def test_missing_unit(self) -> None:
        self.assert_rejected("5")

    def test_negative_part(self) -> None:
        self.assert_rejected("1h-5m")


class FormatTests(unittest.TestCase):
    """AC-004: format_duration gives the shortest form and round-trips."""

    def test_shortest_form(self) -> None:
        self.assertEqual(format_duration(5400), "1h30m")

    def test_zero(self) -> None:
        self.assertEqual(format_duration(0), "0s")

    def test_round_trip(self) -> None:
        for seconds in (1, 59, 60, 61, 3599, 3600, 86399, 86400, 93784, 1_000_000):
            with self.subTest(seconds=seconds):
                self.assertEqual(parse_duration(format_duration(seconds)), seconds)
