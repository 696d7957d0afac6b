# The pinned versions of the real-cluster test tier (sourced by build.sh, up.sh and read by
# tests/realcluster.py). Changing one rebuilds that component on the next build.sh.
K8S_VERSION=v1.35.4                 # k8s.io/kubernetes; staging modules at v0.35.4 (kube/go.mod)
ETCD_VERSION=v3.6.5                 # go.etcd.io/etcd/server/v3, the version k8s.io/kubernetes v1.35.4 requires
VOLCANO_VERSION=v1.15.1             # volcano.sh/volcano, built on Kubernetes 1.35
# volcano.sh/apis v1.15.x is refused by the module proxy (403 "not available"); v1.14.0 is the newest it
# serves. build.sh builds Volcano v1.15.1 against a copy of v1.14.0 plus one constant (see build.sh).
VOLCANO_APIS_VERSION=v1.14.0
KWOK_VERSION=v0.8.0                 # sigs.k8s.io/kwok (fakes the kubelet of each node)
CONTROLLER_TOOLS_VERSION=v0.20.0    # sigs.k8s.io/controller-tools: the one Volcano's Makefile uses
