"""The Player/Coach loop: the run (``run``), its agents (``agents``), the refusals checked before it
starts (``start``), its turn commits (``commits``), the process around it (``session``), the typed
progress events it emits (``events``) and how it ends (``outcome``)."""
