#!/usr/bin/env bash
# Under the real control plane and kubelet (run by cluster-up): the Helm
# chart deploy/helm/nodevol installed, upgraded and uninstalled with helm
# (tests/k8s/build-helm), the provisioner's image from this build
# (packaging/image/build-oci) imported into the node's containerd.
# Checked:
#  - install (--create-namespace, --wait, the default values: the node
#    enrolls, signed by the chart's provisioner): the release deployed, both replicas Ready, one leader; a claim of the
#    chart's nodevol-dir class Bound and written by a pod; the metrics
#    Service's endpoints are the two pods and serve /metrics;
#  - upgrade (--reuse-values, logLevel=debug, a class of the user's own
#    made the default): the pods rolled (their args say debug), revision 2,
#    the first claim still Bound with its data, a claim without a class
#    Bound through the new default class;
#  - uninstall (--wait): none of the chart's objects left (Deployment,
#    ServiceAccount, RBAC, Secret, CSIDriver, classes, Services), nor the
#    CSIStorageCapacity objects the Deployment owned; the PVs and the data
#    on the node stay (a PV still owns them), and so does the node CA.
# Needs NODEVOL_PROVISIONER (path) besides what lib.sh needs.
K8S_TEST=helm
source "$(dirname "$0")/lib.sh"
: "${NODEVOL_PROVISIONER:?}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
chart=$repo/deploy/helm/nodevol
helm_bin=$("$(dirname "$0")/build-helm" --check) || { echo "helm not built: run tests/k8s/build-helm"; exit 77; }
NS=nodevol-system
tag=test
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
kn() { k -n "$NS" "$@"; }
export HELM_CACHE_HOME=$K8S_WORK/helm/cache HELM_CONFIG_HOME=$K8S_WORK/helm/config HELM_DATA_HOME=$K8S_WORK/helm/data
helm() { nsenter --net="/run/netns/$K8S_NETNS" "$helm_bin" --kubeconfig "$K8S_WORK/admin.kubeconfig" "$@"; }
pfail() {
  echo "FAIL: $*" >&2
  kn get all -o wide >&2 || true
  kn describe pods >&2 || true
  for p in $(kn get pods -o name 2>/dev/null); do echo "---- $p" >&2; kn logs "$p" --tail=20 >&2 || true; done
  fail "$@"
}

step "image: build-oci, imported into the node's containerd"
provisioner_image "$tag"

step "nodevold: dir pool \"default\", enrolling as the node on $node_ip:9809"
nodevold_start --enroll=on --enroll-kubeconfig="$K8S_WORK/kubelet.kubeconfig" --tls-listen="$node_ip:9809"

# Test-only values: the image built here (never pulled) and, since this
# harness runs no kube-proxy, the apiserver's own address for the pods
# (deploy_pods_test.sh says more); a real cluster needs neither.
cat >"$K8S_WORK/helm-test-values.yaml" <<YAML
image: {tag: $tag, pullPolicy: Never}
extraEnv:
- {name: KUBERNETES_SERVICE_HOST, value: "$node_ip"}
- {name: KUBERNETES_SERVICE_PORT, value: "6443"}
YAML

step "helm install"
helm install nodevol "$chart" --namespace "$NS" --create-namespace --wait --timeout 4m \
  -f "$K8S_WORK/helm-test-values.yaml" \
  >"$K8S_WORK/logs/helm-install.log" 2>&1 || { cat "$K8S_WORK/logs/helm-install.log" >&2; pfail "helm install"; }
grep -q 'Leader:' "$K8S_WORK/logs/helm-install.log" || fail "helm install printed no NOTES: $(cat "$K8S_WORK/logs/helm-install.log")"
[[ $(helm status nodevol -n "$NS" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"]["status"])') == deployed ]] ||
  pfail "release not deployed"
[[ $(kn get deploy nodevol-provisioner -o jsonpath='{.status.readyReplicas}') == 2 ]] || pfail "not 2 replicas Ready after --wait"
h=
for _ in $(seq 60); do h=$(kn get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true); [[ -n $h ]] && break; sleep 0.5; done
[[ -n $h ]] || pfail "no replica took the Lease"
eps=
for _ in $(seq 40); do
  eps=$(kn get endpointslices -l kubernetes.io/service-name=nodevol-provisioner-metrics \
    -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}{"\n"}{end}' | grep -c . || true)
  ((eps == 2)) && break; sleep 0.5
done
((eps == 2)) || pfail "the metrics Service has $eps endpoints, want the 2 pods"
ip=$(kn get endpointslices -l kubernetes.io/service-name=nodevol-provisioner-metrics -o jsonpath='{.items[0].endpoints[0].addresses[0]}')
nsenter --net="/run/netns/$K8S_NETNS" curl -sf -m 5 "http://$ip:9810/metrics" | grep -q '^nodevol_provisioner_leader ' ||
  pfail "no nodevol_provisioner_leader from the metrics endpoint $ip"

step "a claim of the chart's nodevol-dir class, written by a pod"
claim data nodevol-dir 64Mi
bound data 120 || pfail "claim data not Bound"
claim_pod writer data 'echo from-helm > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/writer --timeout=120s >/dev/null || pfail "pod writer not Ready"
pv=$(k get pvc data -o jsonpath='{.spec.volumeName}')
path=$(ctl -o json volume get "$pv" | sed -n 's/.*"path": *"\([^"]*\)".*/\1/p' | head -1)
[[ $(cat "$path/f" 2>/dev/null) == from-helm ]] || fail "the pod's file is not in volume $pv ($path)"
k delete pod writer --wait=true --timeout=60s >/dev/null

step "helm upgrade: logLevel debug, a default class of the user's own"
cat >"$K8S_WORK/helm-upgrade-values.yaml" <<'YAML'
logLevel: debug
storageClasses:
- name: nodevol-dir
  parameters: {backend: dir, pool: default, mode: "0770"}
  volumeBindingMode: Immediate
- name: team-default
  default: true
  parameters: {backend: dir, pool: default, mode: "0700"}
  reclaimPolicy: Retain
YAML
old_pods=$(kn get pods -l app.kubernetes.io/name=nodevol-provisioner -o name | sort)
helm upgrade nodevol "$chart" --namespace "$NS" --reuse-values -f "$K8S_WORK/helm-upgrade-values.yaml" \
  --wait --timeout 4m >"$K8S_WORK/logs/helm-upgrade.log" 2>&1 || { cat "$K8S_WORK/logs/helm-upgrade.log" >&2; pfail "helm upgrade"; }
[[ $(helm status nodevol -n "$NS" -o json | python3 -c 'import json,sys; d = json.load(sys.stdin); print(d["version"], d["info"]["status"])') == "2 deployed" ]] ||
  pfail "release not at revision 2, deployed"
kn rollout status deploy/nodevol-provisioner --timeout=120s >/dev/null || pfail "rollout after the upgrade"
for _ in $(seq 120); do
  new_pods=$(kn get pods -l app.kubernetes.io/name=nodevol-provisioner -o name | sort)
  [[ -z $(comm -12 <(echo "$old_pods") <(echo "$new_pods")) ]] && break; sleep 0.5
done
[[ -z $(comm -12 <(echo "$old_pods") <(echo "$new_pods")) ]] || pfail "pods from before the upgrade still there"
[[ $(kn get deploy nodevol-provisioner -o jsonpath='{.spec.template.spec.containers[0].args}') == *--log-level=debug* ]] ||
  pfail "the upgraded Deployment does not run --log-level=debug"
[[ $(k get storageclass team-default -o jsonpath='{.metadata.annotations.storageclass\.kubernetes\.io/is-default-class}') == true ]] ||
  fail "class team-default is not the default class"
# --reuse-values with a new storageClasses list replaces the list.
! k get storageclass nodevol-dir-wait >/dev/null 2>&1 || fail "class nodevol-dir-wait outlived the upgrade that dropped it"
[[ $(k get pvc data -o jsonpath='{.status.phase}') == Bound && $(cat "$path/f") == from-helm ]] || fail "claim data or its file lost in the upgrade"
k apply -f - >/dev/null <<'YAML' || fail "apply claim plain"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: plain}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 32Mi}}}
YAML
bound plain 120 || pfail "claim plain (no class) not Bound"
[[ $(k get pvc plain -o jsonpath='{.spec.storageClassName}') == team-default ]] || fail "claim plain did not get the default class"
[[ $(k get pv "$(k get pvc plain -o jsonpath='{.spec.volumeName}')" -o jsonpath='{.spec.persistentVolumeReclaimPolicy}') == Retain ]] ||
  fail "claim plain's PV does not have team-default's Retain"

step "helm uninstall: the chart's objects go, the volumes stay"
# Some to begin with, or "none after" below proves nothing.
caps_before=0
for _ in $(seq 120); do
  caps_before=$(kn get csistoragecapacities -o name | wc -l)
  ((caps_before > 0)) && break; sleep 0.5
done
((caps_before > 0)) || pfail "no CSIStorageCapacity object before the uninstall: the provisioner published none"
helm uninstall nodevol --namespace "$NS" --wait --timeout 3m >"$K8S_WORK/logs/helm-uninstall.log" 2>&1 ||
  { cat "$K8S_WORK/logs/helm-uninstall.log" >&2; pfail "helm uninstall"; }
left=
for _ in $(seq 60); do
  left=$( { kn get deploy,rs,pods,sa,role,rolebinding,secret,svc,csistoragecapacities -l app.kubernetes.io/part-of=nodevol -o name
            kn get deploy/nodevol-provisioner sa/nodevol-provisioner secret/nodevol-provisioner-tls svc/nodevol-provisioner-metrics -o name
            kn get csistoragecapacities -o name
            k get clusterrole/nodevol-provisioner clusterrolebinding/nodevol-provisioner csidriver/nodevol.io \
              storageclass/nodevol-dir storageclass/team-default -o name; } 2>/dev/null || true)
  [[ -z $left ]] && break; sleep 0.5
done
[[ -z $left ]] || fail "left after helm uninstall: $(echo $left)"
# The node CA is the provisioner's, not the chart's: it stays, so the
# nodes' certificates stay good for a reinstall (docs/enrollment.md).
kn get secret nodevol-node-ca >/dev/null 2>&1 || fail "the node CA went with the chart"
step "CSIStorageCapacity objects: $caps_before before the uninstall, none after"
for c in data plain; do
  v=$(k get pvc "$c" -o jsonpath='{.spec.volumeName}')
  [[ -n $v ]] && k get pv "$v" >/dev/null || fail "PV of claim $c gone with the chart"
  ctl volume get "$v" >/dev/null || fail "volume $v gone from the node with the chart"
done
[[ $(cat "$path/f") == from-helm ]] || fail "the data of claim data is gone"
step "PASS"
