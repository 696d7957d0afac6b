"""The minimum-bins library and the fragmentation metric: how many whole nodes a set of pods needs at the
least, proven, and how far the cluster is from it. It knows no Repack, no placement: items and bins only,
read by Repack (its freed-node bound and status), the goal planners, Execute's checks, the CLI and the bench.

Modules, top to bottom; each imports only the lines below it (pyproject's "Binpack imports one way"
contract):

- ``frag`` (the fragmentation metric of a snapshot: the theoretical minimum of nodes against the nodes in
  use), ``hyperfrag`` (the same per HyperNode tier) and ``devfrag`` (at device level, for nodes whose GPUs
  are known one by one: the two-level minimum, shares into GPUs and GPUs into nodes, and FGD's measure);
- ``binpacking`` (``min_bins``: the exact minimum number of bins, with its proof or its bounds);
- ``binlp`` (the Gilmore–Gomory LP bound and LP-guided packing);
- ``binfill`` (a search for a packing at the bound) and ``binflow`` (the arc-flow MIP and its arc fixing);
- ``binbranch`` (the branch and bound over the patterns the arc-flow LP's reduced costs leave).
"""
