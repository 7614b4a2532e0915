"""Reliability campaign: crash injection, concurrent writers, faults, fuzzing, hostile input."""
