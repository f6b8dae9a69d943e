#!/usr/bin/env bash
# Under the real control plane and kubelet (run by cluster-up): deploy/base's
# RBAC is enough for nodevol-provisioner, proven on the real apiserver.
#  - deploy/base is applied with the Deployment at 0 replicas (no image
#    yet) and passes the apiserver's validation as is (server dry run);
#  - zero-touch enrollment (docs/enrollment.md) on the real kubelet's node:
#    nodevold, started first with kubelet's kubeconfig (system:node:<n>),
#    waits for the provisioner while its unix socket answers; the
#    provisioner makes the CA Secret and ConfigMap, signs the node's CSR,
#    issues its own client certificate; the node writes its certificate,
#    labels and annotates its Node, and is dialled: no certificate is made
#    by the test;
#  - a kubeconfig carrying only the ServiceAccount's token (kubectl create
#    token); nodevol-provisioner runs out of cluster with it and with the
#    Deployment's own args (TLS paths filled in, debug log);
#  - with only those permissions: Immediate provisioning (PV created,
#    ProvisioningSucceeded), WaitForFirstConsumer with no room (selected-node
#    removed: claim patch), a repeated event (event patch: count >= 2),
#    capacity annotations on the Node (node patch), resize (PV patch),
#    reclaim Delete (PV delete, finalizer patch), the orphan sweep, the
#    leader Lease (released on SIGTERM); and the log has no "Forbidden";
#  - the Deployment's liveness and readiness probes answer 200;
#  - deploy/examples applied: claims of nodevol-dir and nodevol-dir-wait
#    bound; nodevol-lvm's and nodevol-nfs's parameters accepted (the failure
#    is the missing pool, not a parameter).
# DEPLOY_DIR (default: the repository's deploy/) points at another copy,
# e.g. one with a verb removed, to see this test fail.
K8S_TEST=deploy_rbac
source "$(dirname "$0")/lib.sh"
: "${NODEVOL_PROVISIONER:?}"
deploy=${DEPLOY_DIR:-$(cd "$(dirname "$0")/../../deploy" && pwd)}
kbin=${NODEVOL_K8S_CACHE:-$HOME/.cache/nodevol/k8s}/${K8S_VERSION:-$K8S_VERSION_PINNED}/bin/kubectl
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')

step "deploy/base: applied with the Deployment at 0 replicas, accepted as is (server dry run)"
deploy_base_apply "$deploy"
[[ $(k -n $NS get deploy nodevol-provisioner -o jsonpath='{.spec.replicas}') == 0 ]] || fail "Deployment not at 0 replicas"
# The unmodified base, replicas 2, through the apiserver's validation (strict
# field validation) and admission, without running pods: no image yet.
k apply -k "$deploy/base" --dry-run=server >/dev/null || fail "the apiserver refuses deploy/base as is"

step "kubeconfig with the ServiceAccount's token only"
sakc=$K8S_WORK/sa.kubeconfig
sa_kubeconfig "$sakc"
ksa() { nsenter --net="/run/netns/$K8S_NETNS" "$kbin" --kubeconfig "$sakc" "$@"; }
who=$(ksa auth whoami -o jsonpath='{.status.userInfo.username}') || fail "the token is refused"
[[ $who == "system:serviceaccount:$NS:$SA" ]] || fail "kubeconfig authenticates as '$who'"
[[ $(ksa auth can-i list secrets --all-namespaces) == no ]] || fail "the ServiceAccount may list secrets"
[[ $(ksa -n $NS auth can-i get secrets/another) == no ]] || fail "the ServiceAccount may read any Secret of $NS"
[[ $(ksa auth can-i create persistentvolumes) == yes ]] || fail "the ServiceAccount may not create PVs"

step "nodevold: dir pool \"default\", enrolling as the node (kubelet's kubeconfig) before any provisioner runs"
nodevold_start --enroll=on --enroll-kubeconfig="$K8S_WORK/kubelet.kubeconfig" --tls-listen="$node_ip:9809"
for _ in $(seq 40); do grep -q "enrollment: read the CA bundle" "$K8S_WORK/logs/nodevold.log" && break; sleep 0.5; done
grep -q "enrollment: read the CA bundle" "$K8S_WORK/logs/nodevold.log" || fail "nodevold does not say it waits for the CA"
ctl volume list >/dev/null || fail "the unix socket does not answer while the node waits"
[[ ! -e $K8S_WORK/nodevold/state/tls/tls.crt ]] || fail "a certificate before any signer ran"

# As after a CA replaced by hand: a ConfigMap of another CA, which the
# provisioner must update (configmap update) before the node can trust it.
k -n $NS create configmap nodevol-ca --from-literal=ca.crt=stale >/dev/null || fail "create the stale ConfigMap"

step "nodevol-provisioner: the Deployment's args, the ServiceAccount's kubeconfig"
args=(--kubeconfig="$sakc" --orphan-sweep-seconds=3 --orphan-grace-seconds=0)
elects=1  # --leader-elect defaults to true
while IFS= read -r a; do
  flag=${a%%=*}
  case $flag in
    --tls-dir) a=$flag=$K8S_WORK/provisioner-tls ;;  # the pod's emptyDir
    --log-level) a=$flag=debug ;;  # event patch failures are logged at debug
    --leader-elect) [[ ${a#*=} =~ ^(false|0|no|off)$ ]] && elects=0 ;;
  esac
  args+=("$a")
done < <(k -n $NS get deploy nodevol-provisioner -o jsonpath='{range .spec.template.spec.containers[0].args[*]}{@}{"\n"}{end}')
step "nodevol-provisioner ${args[*]:1}"
plog=$K8S_WORK/logs/provisioner.log
nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" "${args[@]}" >"$plog" 2>&1 &
PROV_PID=$!
CLEANUP_PIDS+=("$PROV_PID")
prov_fail() { echo "---- provisioner log (tail)" >&2; tail -30 "$plog" >&2; fail "$@"; }
forbidden() { grep -i forbidden "$plog" | head -5; }

step "enrollment: CA made, node's request signed, certificate written, Node announced"
k -n $NS get secret nodevol-node-ca -o jsonpath='{.type}' 2>/dev/null | grep -qx kubernetes.io/tls \
  || { sleep 3; k -n $NS get secret nodevol-node-ca -o jsonpath='{.type}' | grep -qx kubernetes.io/tls; } \
  || prov_fail "no Secret $NS/nodevol-node-ca of type kubernetes.io/tls"
endpoint=
for _ in $(seq 90); do
  endpoint=$(k get node "$K8S_NODE" -o jsonpath='{.metadata.annotations.nodevol\.io/endpoint}')
  [[ -n $endpoint ]] && break; sleep 0.5
done
[[ $endpoint == "$node_ip:9809" ]] || prov_fail "Node annotation nodevol.io/endpoint '$endpoint', want $node_ip:9809"
[[ $(k get node "$K8S_NODE" -o jsonpath='{.metadata.labels.nodevol\.io/node}') == true ]] \
  || prov_fail "the node did not label itself nodevol.io/node=true"
csr=$(k get csr -o jsonpath="{range .items[?(@.spec.signerName==\"nodevol.io/node-serving\")]}{.metadata.name} {.spec.username} {.status.conditions[0].type}{\"\\n\"}{end}")
grep -qx "[^ ]* system:node:$K8S_NODE Approved" <<<"$csr" || prov_fail "the node's request: '$csr'"
grep -q "serving certificate for $K8S_NODE written" "$K8S_WORK/logs/nodevold.log" || fail "nodevold wrote no certificate"
[[ $(k -n $NS get configmap nodevol-ca -o jsonpath='{.data.ca\.crt}') == *"BEGIN CERTIFICATE"* ]] ||
  prov_fail "the stale CA bundle was not replaced"
[[ $(stat -c %a "$K8S_WORK/nodevold/state/tls/tls.key") == 600 ]] || fail "the node's key is not 0600"
[[ $(stat -c %a "$K8S_WORK/provisioner-tls/tls.key") == 600 ]] || fail "the provisioner's key is not 0600"

storage_class nv-now expand=true backend=dir pool=default
storage_class nv-wait binding=WaitForFirstConsumer pool=default

step "Immediate: PV created, ProvisioningSucceeded recorded"
claim now nv-now 64Mi
bound now || prov_fail "claim now not Bound"
pv=$(k get pvc now -o jsonpath='{.spec.volumeName}')
[[ $pv == "pvc-$(k get pvc now -o jsonpath='{.metadata.uid}')" ]] || prov_fail "claim now bound to '$pv'"
ctl volume get "$pv" >/dev/null || fail "nodevold has no volume $pv"
wait_event now ProvisioningSucceeded >/dev/null

step "Node capacity annotation (node patch)"
ann=
for _ in $(seq 40); do
  ann=$(k get node "$K8S_NODE" -o jsonpath='{.metadata.annotations.capacity\.nodevol\.io/default}')
  [[ -n $ann ]] && break; sleep 0.5
done
[[ $ann =~ ^[0-9]+$ ]] && ((ann > 0)) || prov_fail "Node capacity annotation '$ann'"

step "resize: the claim grows, the PV follows (PV patch)"
k patch pvc now --type=merge -p '{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}' >/dev/null \
  || fail "growing claim now"
k wait --for=jsonpath='{.spec.capacity.storage}'=128Mi "pv/$pv" --timeout=60s >/dev/null \
  || prov_fail "PV $pv capacity $(k get pv "$pv" -o jsonpath='{.spec.capacity.storage}'), want 128Mi"
wait_event now VolumeResizeSuccessful >/dev/null

step "reclaim Delete: PV deleted, finalizer dropped, volume gone"
k delete pvc now --wait=true --timeout=60s >/dev/null
for _ in $(seq 120); do k get pv "$pv" >/dev/null 2>&1 || break; sleep 0.5; done
! k get pv "$pv" >/dev/null 2>&1 || prov_fail "PV $pv still there: $(k get pv "$pv" -o jsonpath='{.status.phase} {.metadata.finalizers}')"
! ctl volume get "$pv" >/dev/null 2>&1 || fail "volume $pv still on the node"

step "capacity objects (csistoragecapacities list, create) in $NS"
for _ in $(seq 40); do
  [[ -n $(k -n $NS get csistoragecapacities -o jsonpath='{.items[?(@.storageClassName=="nv-wait")].metadata.name}') ]] && break
  sleep 0.5
done
[[ -n $(k -n $NS get csistoragecapacities -o jsonpath='{.items[?(@.storageClassName=="nv-wait")].metadata.name}') ]] \
  || prov_fail "no CSIStorageCapacity for class nv-wait in $NS"

step "WaitForFirstConsumer, no room: the scheduler keeps the pod Pending (the CSIDriver); selected-node removed (claim patch)"
claim huge-wait nv-wait 1000Ti
claim_pod use-huge huge-wait 'sleep 3600' | k apply -f - >/dev/null
k get csidriver nodevol.io >/dev/null || fail "deploy/base made no CSIDriver nodevol.io"
wait_event use-huge FailedScheduling "did not have enough free storage" >/dev/null
k delete pod use-huge --grace-period=1 --wait=true --timeout=60s >/dev/null
# As a scheduler with stale figures would: a selected node without room.
k annotate pvc huge-wait "volume.kubernetes.io/selected-node=$K8S_NODE" >/dev/null
wait_event huge-wait ProvisioningFailed "pick another node" >/dev/null
k delete pvc huge-wait --wait=false >/dev/null

step "orphan sweep: our volume without claim or PV goes (PV and claim get)"
orphan=pvc-00000000-0000-0000-0000-00000000dead
ctl volume create $orphan --pool default --size 1Mi --param nodevol.io/provisioner=nodevol.io \
  --param nodevol.io/reclaim-policy=Delete --param nodevol.io/pvc-namespace=default \
  --param nodevol.io/pvc-name=gone >/dev/null || fail "volume create $orphan"
for _ in $(seq 40); do ctl volume get $orphan >/dev/null 2>&1 || break; sleep 0.5; done
! ctl volume get $orphan >/dev/null 2>&1 || prov_fail "orphan not swept"

if ((elects)); then
  step "leader election: the Lease in $NS (Role nodevol-provisioner-leader)"
  holder=
  for _ in $(seq 40); do
    holder=$(k -n $NS get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) || true
    [[ -n $holder ]] && break; sleep 0.5
  done
  [[ -n $holder ]] || prov_fail "no Lease $NS/nodevol.io-provisioner with a holder"
else
  step "leader election: not in this build (no --leader-elect); the Lease Role is not exercised"
fi

step "probes: the Deployment's liveness and readiness endpoints answer 200"
c0='{.spec.template.spec.containers[0]'
for p in livenessProbe readinessProbe; do
  path=$(k -n $NS get deploy nodevol-provisioner -o jsonpath="$c0.$p.httpGet.path}")
  port=$(k -n $NS get deploy nodevol-provisioner -o jsonpath="$c0.$p.httpGet.port}")
  [[ $port =~ ^[0-9]+$ ]] ||
    port=$(k -n $NS get deploy nodevol-provisioner -o jsonpath="$c0.ports[?(@.name==\"$port\")].containerPort}")
  [[ -n $path && -n $port ]] || fail "the Deployment has no $p httpGet"
  body=$(nsenter --net="/run/netns/$K8S_NETNS" curl -sS -f -m 5 "http://$node_ip:$port$path" 2>&1) \
    || prov_fail "$p http://$node_ip:$port$path: $body"
done

step "deploy/examples: dir classes provision; lvm and nfs parameters accepted"
k apply -k "$deploy/examples" >/dev/null || fail "apply deploy/examples"
claim ex-dir nodevol-dir 16Mi
bound ex-dir || prov_fail "claim of nodevol-dir not Bound"
ex_pv=$(k get pvc ex-dir -o jsonpath='{.spec.volumeName}')
[[ $(k get pv "$ex_pv" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}') == "$K8S_NODE" ]] \
  || fail "PV $ex_pv not pinned to $K8S_NODE"
claim ex-dir-wait nodevol-dir-wait 16Mi
claim_pod use-ex ex-dir-wait 'echo ok > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/use-ex --timeout=180s >/dev/null || prov_fail "pod use-ex not Ready"
bound ex-dir-wait 10 || prov_fail "claim of nodevol-dir-wait not Bound"
for c in lvm nfs; do
  claim ex-$c nodevol-$c 16Mi
  msg=$(wait_event ex-$c ProvisioningFailed)
  [[ $msg == *"node runs nodevold with pool"* && $msg != *"StorageClass parameter"* ]] \
    || prov_fail "class nodevol-$c: '$msg', want the missing pool, not a parameter error"
done

step "a repeated event is counted, not duplicated (event patch)"
# The missing pool's message does not change between passes (unlike free
# space figures), and capacity updates bring the claim back often.
count=0
for _ in $(seq 120); do
  count=$(k get events --field-selector involvedObject.name=ex-lvm,reason=ProvisioningFailed \
    -o jsonpath='{range .items[*]}{.count}{"\n"}{end}' | sort -n | tail -1)
  ((${count:-0} >= 2)) && break; sleep 0.5
done
((${count:-0} >= 2)) || prov_fail "the repeated ProvisioningFailed of claim ex-lvm has count '${count}', want >= 2"

kill -0 $PROV_PID 2>/dev/null || prov_fail "the provisioner exited"
step "SIGTERM: clean exit (and the Lease released when electing)"
kill $PROV_PID
status=0
wait $PROV_PID || status=$?
((status == 0)) || prov_fail "the provisioner exited $status on SIGTERM"
if ((elects)); then
  holder=$(k -n $NS get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}')
  [[ -z $holder ]] || prov_fail "the Lease is still held by '$holder' after a clean stop"
fi

step "no Forbidden in the provisioner's log"
[[ -z $(forbidden) ]] || prov_fail "the provisioner was refused: $(forbidden)"
step "PASS"
