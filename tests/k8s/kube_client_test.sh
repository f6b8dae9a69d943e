#!/usr/bin/env bash
# nodevol's Kubernetes client (kube/) against the real
# kube-apiserver of tests/k8s/cluster-up: runs the gtest binary
# kube_client_it (KUBE_CLIENT_IT, set by ctest) inside the cluster's network
# namespace with the admin kubeconfig (client certificates) and etcd's
# address (the test compacts etcd to provoke 410 Expired).
# Exit 77 when the binary is missing.
set -euo pipefail
: "${K8S_WORK:?run under tests/k8s/cluster-up}" "${K8S_NETNS:?run under tests/k8s/cluster-up}"
it=${KUBE_CLIENT_IT:-}
if [[ -z $it || ! -x $it ]]; then
  echo "kube_client_test: SKIP: kube_client_it not built (KUBE_CLIENT_IT=$it)" >&2
  exit 77
fi
exec nsenter --net="/run/netns/$K8S_NETNS" \
  env KUBE_IT_KUBECONFIG="$K8S_WORK/admin.kubeconfig" KUBE_IT_ETCD=http://127.0.0.1:2379 "$it" "$@"
