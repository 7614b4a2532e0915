"""Feature plans (``.guardkit/features/FEAT-*.yaml``): reading, waves, checks, what a run writes."""
