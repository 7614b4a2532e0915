"""Git behind a few small modules: the runner and turn commits, output parsers, stale locks, worktrees."""
