"""Bytes on disk: atomic verified writes, locks, JSON, schemas, the per-turn files, every .guardkit path."""
