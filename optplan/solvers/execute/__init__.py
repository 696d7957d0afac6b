"""Execute's checks, in a room of their own: what the controller and the Python API ask before and after
evicting (``steps``: nominate the replacement's node, verify the run against the cluster as it is now,
find where a replacement landed, the run's verdict). Read by ``optplan.api`` and ``optplan.controller``;
it reads Repack's rules and the fragmentation metric.
"""
