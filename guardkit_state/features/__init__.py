"""The feature runner (above the loop): waves of task loops in forked processes, merges, resume;
what the run writes and emits. Feature plans themselves live in ``plans/``."""
