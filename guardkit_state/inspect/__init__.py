"""Read-only views over the files: status, validation, and the git log/diff review."""
