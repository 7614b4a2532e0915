"""Running a process: the one runner agents, git, smoke gates and the index's processes go through."""
