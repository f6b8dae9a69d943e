#!/bin/bash
# Runs bench/nfs_bench inside a vm-run guest against the guest's nfsd on
# loopback (not a ctest test; docs/benchmarks.md):
#   tests/vm/vm-run --env NODEVOLD=$PWD/build/mountd/nodevold \
#     -- tests/vm/nfs_bench_run.sh build/bench/nfs_bench [nfs_bench options]
# The Markdown report goes to stdout and to $VM_OUT/nfs_bench.md.
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"
bench=${1:?usage: nfs_bench_run.sh PATH/TO/nfs_bench [options]}
shift
nfs_server_start 256m
mkdir -p /var/tmp/nfs-bench && mount -t tmpfs tmpfs /var/tmp/nfs-bench
"$bench" --nodevold="${NODEVOLD:?}" --work-dir=/var/tmp/nfs-bench "$@" | tee "${VM_OUT:-/tmp}/nfs_bench.md"
