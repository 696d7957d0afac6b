"""Online placement simulation (``online``): pods arriving one at a time on an empty cluster, none
leaving, placed by a policy (Volcano's binpack, best-fit, random, CP-SAT batches; one class each, registered as
the ``sim`` family of ``optplan.solvers.core.registry``): the bench's FGD setup for whole-GPU pods.
The replay family reuses its numpy cluster state.

``shared``: the same for every pod (whole GPUs, shares of one GPU, cpu-only) on GPU devices, by
``optplan.solvers.core.gpushare``'s rule: the FGD paper's six peers and optplan's policies (the registry's
``sim-shared`` family); ``lookahead``: optplan's policies placing a batch of arrivals together by one CP-SAT
solve (``frag-batch``, ``frag-hole-batch``, ``frag-defer``), in the same family. ``table``: the paper's
allocation table reproduced with them (workloads × seeds × policies, mean and 95% interval beside the
published means), the bench's "shared" section.
"""
