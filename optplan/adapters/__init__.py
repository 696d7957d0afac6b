"""Adapters: the only code that knows Kubernetes' file and API shapes, and (``kube``) the only module that
imports the ``kubernetes`` client (pyproject's "Only adapters know the kubernetes client" contract).

- ``kubefile``: snapshots built from ``kubectl get -o yaml|json`` objects, every field checked, and
  ``documents``: the files, stdin or directories read into those objects within the input limits;
  ``kube``: live clusters (list, watch, patch, evict, leases) through the client, within the API limits of
  ``kubelimits`` (which imports no client: the commands' defaults); ``vgpu``: GPUs as devices and pods'
  shares of them, read from (and written in) Volcano's device-share resources and annotations;
- ``output``: objects written as kubectl prints them (YAML, JSON, tables), byte-for-byte deterministic;
  ``execute_io``: the Execute parts of a RepackRun read with errors naming the field;
- ``generate``: seeded synthetic snapshots; ``openb``: the Alibaba openb GPU trace as a snapshot;
  ``inject``: pending gangs and a HyperNode fabric added to a snapshot (the bench's goals section);
- ``schedconf``: a vc-scheduler configuration (``--scheduler-conf``: Volcano's YAML, or the volcano-scheduler
  ConfigMap, also as text or as the ConfigMap a snapshot or a live cluster holds) read as Volcano reads it,
  with a warning for each thing optplan cannot model;
- ``catalogue``: node-group catalogues (``NodeGroup`` objects) for ``optplan provision``;
- ``render``: a snapshot and a plan as a PNG. The commands' arguments are the CLI's (``optplan.cli``).
"""
