"""Online placement simulation (``online``): pods arriving one at a time on an empty cluster, none
leaving, placed by a policy (Volcano's binpack, best-fit, random, CP-SAT batches; one class each, registered as
the ``sim`` family of ``optplan.solvers.core.registry``): the bench's FGD setup.
The replay family reuses its numpy cluster state.
"""
