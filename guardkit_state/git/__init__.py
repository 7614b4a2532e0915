"""Git behind a few small modules: the runner, the repository's questions and writes, turn commits,
which checkout is which, output parsers, stale locks, worktrees."""
