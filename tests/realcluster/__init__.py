"""The real-cluster tier (issue 25): tests against kube-apiserver, kube-controller-manager, KWOK and Volcano."""
