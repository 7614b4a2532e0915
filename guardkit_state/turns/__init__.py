"""The turn lifecycle: intake of reports, pure turn-state assembly, the ledger, history, stall, resume, context."""
