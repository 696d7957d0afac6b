"""optplan: optimization-based planning for Volcano-scheduled AI clusters.

The package's rooms, top to bottom; each imports only the rooms below it (the first import-linter contract
in pyproject.toml, checked by ``lint-imports``):

- ``optplan.cli``: the ``optplan`` command: parse, call, print; bad input exits 2, bugs exit 1.
- ``optplan.serve`` (the plan server, HTTP/JSON), ``optplan.controller`` (the RepackRun controller) and
  ``optplan.experiments`` (the bench, the replay over time, the online simulation, their figures).
- ``optplan.api``: the stable Python API, what a controller written in Python imports.
- ``optplan.adapters`` (Kubernetes' file and API shapes; the only room that imports the ``kubernetes``
  client, a contract of its own) and ``optplan.solvers`` (the planners, in families over a shared core).
- ``optplan.models``: the pydantic domain: snapshot objects, RepackRun spec and status, plans, input limits.

Outside the layers: ``optplan.errors`` (one root exception, ``OptplanError``, raised from every room)
and ``optplan.runtime`` (process-wide tuning any room may use: the cyclic collector paused).
"""

__version__ = "0.1.0"
