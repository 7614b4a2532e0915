"""Feature plans: read and checked (``plan``, ``schema``, ``validation``), waves (``waves``), and
progress written surgically under one lock (``plan_splice``, ``plan_writer``)."""
