#!/usr/bin/env bash
# Start a real cluster (etcd, kube-apiserver, kube-controller-manager, kwok, Volcano) on free 127.0.0.1
# ports and keep it until Ctrl-C: tests/realcluster/cluster.py. Builds the binaries first (cached).
#   hack/cluster/up.sh [--dir DIR] [--nodes N]
set -euo pipefail
cd "$(dirname "$0")/../.."
hack/cluster/build.sh
PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python
exec "$PY" -m tests.realcluster.cluster "$@"
