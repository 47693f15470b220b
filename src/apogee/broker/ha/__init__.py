"""Master/slave replication's network side: the master's HA port (``master``) and the
slave's HA client (``slave``).  The wire layout and every decision of the link live in
``apogee.store.ha.protocol`` (pure); the store writes the replicated bytes."""
