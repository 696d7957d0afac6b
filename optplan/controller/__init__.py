"""The Repack controller (``optplan controller``): RepackRuns planned and executed in a cluster."""
