"""Experiments: the harnesses that measure the planners, above the solver families and the adapters.

Modules, top to bottom; each imports only the lines below it (pyproject's "Experiments import one way"
contract):

- ``bench``: ``optplan bench``, the benchmark suite and its report;
- ``goals_bench`` (the bench's section on making room for pending gangs) and ``replay`` (Repack over time:
  a trace replayed with a Repack policy, and sweeps of such replays);
- ``sim``: online placement, pods arriving one by one (the FGD paper's setup).

Every figure is written by ``optplan.adapters.output.png``, the one PNG writer.
"""
