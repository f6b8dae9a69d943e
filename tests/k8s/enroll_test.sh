#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): zero-touch enrollment
# (docs/enrollment.md) of pretend nodes (pretend_nodes.sh) that each hold
# only their own node identity, a client certificate system:node:<n>
# (group system:nodes) from the cluster's CA, as kubelet would, and
# deploy/base's RBAC. No serving certificate is made by the test.
#  - nodevold started before any provisioner: it waits, its unix socket
#    answers; once the provisioner (--node-ca-secret) runs, each node gets
#    its certificate through the CSR API, labels and annotates its Node, and
#    is dialled; claims are provisioned on each;
#  - refused, nothing signed: a node asking for another node's name, for an
#    extra DNS name or a foreign IP address (Denied, with the reason in the
#    condition and a Warning event); a non-node identity (Denied); a
#    malformed request (the apiserver refuses it); a request of another
#    signer (left alone: no verdict, no certificate);
#  - a node's certificate is not a client certificate: another node's
#    nodevold refuses it; the provisioner's is accepted;
#  - an annotation pointing at a foreign address is ignored with a warning;
#    the node is still dialled at its InternalIP;
#  - rotation: certificates of 60 s (the signer's maximum here), renewed at
#    two thirds by the nodes and the provisioner, while claims are made and
#    deleted, none failing; after the first certificates expired, a
#    restarted nodevold serves its renewed one and the provisioner dials it
#    with its renewed client certificate;
#  - the CA rotated under two replicas (issue 60 item 1): the Secret
#    replaced, a standby restarted after it, the leader killed mid-rotation;
#    claims keep binding on both nodes throughout, each node asks for a
#    bounded number of certificates, and the old CA leaves the bundle once
#    both nodes serve from the new one.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=enroll
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
trap pn_cleanup EXIT
NS=nodevol-system
pki=$K8S_WORK/pki
kbin=${NODEVOL_K8S_CACHE:-$HOME/.cache/nodevol/k8s}/${K8S_VERSION:-$K8S_VERSION_PINNED}/bin/kubectl
CSRS=/apis/certificates.k8s.io/v1/certificatesigningrequests

pn_init
deploy_base_apply "$(cd "$(dirname "$0")/../../deploy" && pwd)"

# en_identity NAME: NAME's client certificate (CN system:node:NAME,
# O system:nodes) from the cluster's CA, and a kubeconfig with it.
en_identity() {
  local n=$1 d=$PN_DIR/$1
  mkdir -p "$d"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/O=system:nodes/CN=system:node:$n" \
    -keyout "$d/client.key" -out "$d/client.csr" 2>/dev/null || fail "client key of $n"
  printf '%s\n' 'basicConstraints = CA:FALSE' 'keyUsage = critical,digitalSignature' 'extendedKeyUsage = clientAuth' \
    >"$d/client.ext"
  openssl x509 -req -in "$d/client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 1 \
    -extfile "$d/client.ext" -out "$d/client.crt" 2>/dev/null || fail "client certificate of $n"
  cat >"$d/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$pki/ca.crt"}}]
users: [{name: $n, user: {client-certificate: "$d/client.crt", client-key: "$d/client.key"}}]
contexts: [{name: local, context: {cluster: local, user: $n}}]
current-context: local
YAML
}
# as_node NAME kubectl-args...: kubectl as node NAME.
as_node() { local n=$1; shift; in_ns "$kbin" --kubeconfig "$PN_DIR/$n/kubeconfig" "$@"; }

# en_add NAME IP [unmarked]: a Node with no nodevol label, marked a storage
# node as a cluster admin does (unless "unmarked"), and a nodevold that
# enrolls.
en_add() {
  local n=$1 ip=$2 d=$PN_DIR/$1 labels=', node-restriction.kubernetes.io/nodevol-storage: "true"'
  [[ ${3:-} == unmarked ]] && labels=""
  PN_NAMES+=("$n")
  PN_IP[$n]=$ip
  mkdir -p "$d/state" "$d/pool" "$d/pods"
  in_ns ip addr add "$ip/32" dev lo || fail "address $ip"
  en_identity "$n"
  pn_node_object "$n" "$ip" "$labels"
  en_start "$n"
}
# en_start NAME: NAME's nodevold, enrolling with NAME's kubeconfig.
en_start() {
  local n=$1 d=$PN_DIR/$1
  : >"$d/nodevold.conf"
  nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOLD" --config="$d/nodevold.conf" --socket="$d/nodevold.sock" \
    --state-dir="$d/state" --pods-root="$d/pods" --node-name="$n" --pool="name=default,backend=dir,path=$d/pool" \
    --enroll=on --enroll-kubeconfig="$d/kubeconfig" --tls-listen="${PN_IP[$n]}:9809" --tls-refresh-seconds=2 \
    --enroll-recheck-seconds="${EN_RECHECK:-600}" \
    --metrics-address=off --log-target=stderr --log-level=debug >>"$d/nodevold.log" 2>&1 &
  PN_PID[$n]=$!
  CLEANUP_PIDS+=("$!")
  for _ in $(seq 100); do pn_ctl "$n" info >/dev/null 2>&1 && return 0; sleep 0.1; done
  pn_fail "nodevold of $n did not start"
}
# written NAME: how many serving certificates NAME's nodevold has written.
written() { grep -c "serving certificate for $1 written" "$PN_DIR/$1/nodevold.log" || true; }

step "two nodes, each with only its own identity; nodevold enrolling before any provisioner runs"
en_add en-1 10.200.0.11
en_add en-2 10.200.0.12
sleep 2
for n in en-1 en-2; do
  pn_ctl "$n" volume list >/dev/null || pn_fail "$n's unix socket does not answer while it waits"
  grep -q "enrollment: read the CA bundle" "$PN_DIR/$n/nodevold.log" || pn_fail "$n does not say what it waits for"
  [[ ! -e $PN_DIR/$n/state/tls/tls.crt ]] || pn_fail "$n has a certificate before any signer ran"
done

step "the provisioner (--node-ca-secret, 60 s certificates): both nodes enroll and are dialled"
PROV_LOG=$K8S_WORK/logs/prov.log
PROV_OFF=1
POD_NAMESPACE=$NS nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" \
  --kubeconfig="$K8S_WORK/admin.kubeconfig" --metrics-address=off --leader-elect=false \
  --node-ca-secret=nodevol-node-ca --node-cert-max-lifetime-seconds=60 --tls-dir="$K8S_WORK/prov-tls" \
  --tls-refresh-seconds=2 >>"$PROV_LOG" 2>&1 &
PROV_PID=$!
CLEANUP_PIDS+=("$PROV_PID")
t_enrolled=$SECONDS
for n in en-1 en-2; do
  for _ in $(seq 60); do
    [[ $(k get node "$n" -o jsonpath='{.metadata.annotations.nodevol\.io/endpoint}') == "${PN_IP[$n]}:9809" ]] && break
    sleep 0.5
  done
  [[ $(k get node "$n" -o jsonpath='{.metadata.annotations.nodevol\.io/endpoint}') == "${PN_IP[$n]}:9809" ]] ||
    pn_fail "$n did not announce ${PN_IP[$n]}:9809"
  [[ $(k get node "$n" -o jsonpath='{.metadata.labels.nodevol\.io/node}') == true ]] || pn_fail "$n did not label itself"
  [[ $(stat -c %a "$PN_DIR/$n/state/tls/tls.key") == 600 ]] || pn_fail "$n's key is not 0600"
  # The key never left the node: the certificate the signer made is for
  # the key on the node, and no object in the cluster holds that key: not
  # as text, nor in a Secret's or a CSR's base64 (decoded here). The key's
  # second PEM line is its own bytes (the first is the header every
  # PKCS#8 key shares, the CA's in its Secret included).
  pub=$(openssl pkey -in "$PN_DIR/$n/state/tls/tls.key" -pubout)
  [[ $(openssl x509 -in "$PN_DIR/$n/state/tls/tls.crt" -noout -pubkey) == "$pub" ]] ||
    pn_fail "$n's certificate is not for the key on the node"
  keyline=$(sed -n 2p "$PN_DIR/$n/state/tls/tls.key")
  objs=$(k get secrets,configmaps,csr -A -o yaml
         k get secrets -A -o jsonpath='{range .items[*].data.*}{@}{"\n"}{end}' | while read -r v; do base64 -d <<<"$v" 2>/dev/null; echo; done
         k get csr -o jsonpath='{range .items[*]}{.spec.request}{"\n"}{end}' | while read -r v; do base64 -d <<<"$v" 2>/dev/null; echo; done)
  [[ $objs == *"BEGIN CERTIFICATE REQUEST"* ]] || pn_fail "no CSR decoded: the key check below reads nothing"
  [[ $objs != *"$keyline"* ]] || pn_fail "$n's private key is in an object of the cluster"
done
prov_wait_nodes

step "claims provisioned on each node"
for n in en-1 en-2; do
  k apply -f - >/dev/null <<YAML || fail "class on-$n"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: on-$n}
provisioner: nodevol.io
parameters: {pool: default, volumeSource: flexVolume}
allowedTopologies: [{matchLabelExpressions: [{key: kubernetes.io/hostname, values: [$n]}]}]
YAML
  claim "first-$n" "on-$n" 16Mi
done
for n in en-1 en-2; do
  bound "first-$n" 60 || pn_fail "claim first-$n not Bound"
  pn_volumes "$n" | grep -qx "$(k get pvc "first-$n" -o jsonpath='{.spec.volumeName}')" || pn_fail "no volume of first-$n on $n"
done

step "a node no admin marked a storage node: it cannot mark itself, is refused its certificate, and is never placed on, even self-labelled"
en_add en-3 10.200.0.13 unmarked
out=$(as_node en-3 label node en-3 node-restriction.kubernetes.io/nodevol-storage=true 2>&1) &&
  pn_fail "node en-3 set the storage-node label on itself: $out"
grep -q "Forbidden\|forbidden" <<<"$out" || pn_fail "node en-3 labelling itself: not forbidden: $out"
echo "    en-3 labelling itself: $(tail -1 <<<"$out")"
got=""
for _ in $(seq 80); do
  got=$(k get csr -o jsonpath='{range .items[?(@.spec.username=="system:node:en-3")]}{.status.conditions[0].type} {.status.conditions[0].reason}{"\n"}{end}' | head -1)
  [[ -n ${got// } ]] && break
  sleep 0.25
done
[[ $got == "Denied NotAStorageNode" ]] || pn_fail "en-3's request: '$got', want Denied NotAStorageNode"
msg=$(k get csr -o jsonpath='{range .items[?(@.spec.username=="system:node:en-3")]}{.status.conditions[0].message}{end}')
[[ $msg == *"kubectl label node en-3 node-restriction.kubernetes.io/nodevol-storage=true"* ]] ||
  pn_fail "the denial does not say how to mark en-3: $msg"
[[ ! -e $PN_DIR/en-3/state/tls/tls.crt ]] || pn_fail "en-3 has a certificate"
# What a node may set on itself, it sets: the nodevol label and the
# endpoint. Neither puts it into placement.
as_node en-3 label node en-3 nodevol.io/node=true --overwrite >/dev/null || pn_fail "en-3 could not set its nodevol label"
as_node en-3 annotate node en-3 nodevol.io/endpoint="${PN_IP[en-3]}:9809" --overwrite >/dev/null ||
  pn_fail "en-3 could not set its endpoint"
k apply -f - >/dev/null <<YAML || fail "class on-en-3"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: on-en-3}
provisioner: nodevol.io
parameters: {pool: default, volumeSource: flexVolume}
allowedTopologies: [{matchLabelExpressions: [{key: kubernetes.io/hostname, values: [en-3]}]}]
YAML
claim first-en-3 on-en-3 16Mi
sleep 5
[[ $(k get pvc first-en-3 -o jsonpath='{.status.phase}') == Pending ]] || pn_fail "a claim was provisioned on en-3"
[[ -z $(k get node en-3 -o jsonpath='{.metadata.annotations.capacity\.nodevol\.io/default}') ]] ||
  pn_fail "the provisioner reports en-3's capacity: it placed en-3 in its registry"
echo "    en-3: $got (\"${msg:0:120}…\"), its claim Pending, no capacity reported"
grep -q "node en-3 runs nodevold but is not marked a storage node" "$PROV_LOG" ||
  pn_fail "the provisioner does not say en-3 is unmarked"
why=$(k get events --field-selector involvedObject.name=first-en-3,reason=ProvisioningFailed -o jsonpath='{.items[0].message}')
[[ $why == *"no allowed node runs nodevold"* ]] || pn_fail "first-en-3 not refused for want of a storage node: '$why'"
k delete pvc first-en-3 --wait=false >/dev/null
k delete storageclass on-en-3 >/dev/null
k delete events --field-selector involvedObject.name=first-en-3 >/dev/null
kill "${PN_PID[en-3]}"
wait "${PN_PID[en-3]}" 2>/dev/null || true
k delete node en-3 >/dev/null
for c in $(k get csr -o jsonpath='{range .items[?(@.spec.username=="system:node:en-3")]}{.metadata.name}{" "}{end}'); do
  k delete csr "$c" >/dev/null
done
unset 'PN_IP[en-3]'
PN_NAMES=(en-1 en-2)

# csr NAME USER SIGNER SUBJECT SAN: a CertificateSigningRequest made as USER
# (a node name, or "admin"), with a new key.
csr() {
  local name=$1 user=$2 signer=$3 subject=$4 san=$5 req
  req=$(openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout /dev/null -subj "$subject" \
    -addext "subjectAltName=$san" 2>/dev/null | base64 -w0)
  local yaml="apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: $name}
spec: {request: $req, signerName: $signer, usages: [digital signature, server auth]}"
  if [[ $user == admin ]]; then k create -f - <<<"$yaml" >/dev/null; else as_node "$user" create -f - <<<"$yaml" >/dev/null; fi
}
# denied NAME REASON: Denied with REASON, a Warning event, no certificate.
denied() {
  local got
  for _ in $(seq 40); do
    got=$(k get csr "$1" -o jsonpath='{.status.conditions[0].type} {.status.conditions[0].reason}')
    [[ -n ${got// } ]] && break; sleep 0.25
  done
  [[ $got == "Denied $2" ]] || pn_fail "request $1: '$got', want Denied $2"
  [[ -z $(k get csr "$1" -o jsonpath='{.status.certificate}') ]] || pn_fail "request $1 was signed"
  wait_event "$1" CertificateDenied "$2" >/dev/null
}

step "refused: another node's name, an extra name, a foreign address, a non-node; nothing signed"
csr other-name en-1 nodevol.io/node-serving /CN=en-2 DNS:en-2 || fail "create other-name"
denied other-name WrongSubject
csr extra-dns en-1 nodevol.io/node-serving /CN=en-1 DNS:en-1,DNS:evil.example.com || fail "create extra-dns"
denied extra-dns ExtraNames
csr foreign-ip en-1 nodevol.io/node-serving /CN=en-1 "DNS:en-1,IP:${PN_IP[en-2]}" || fail "create foreign-ip"
denied foreign-ip ExtraNames
csr not-a-node admin nodevol.io/node-serving /CN=en-1 DNS:en-1 || fail "create not-a-node"
denied not-a-node NotANode

step "refused by the apiserver: a malformed request; left alone: another signer's"
out=$(as_node en-1 create -f - 2>&1 <<YAML) && pn_fail "a malformed request was accepted"
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: malformed}
spec: {request: $(echo junk | base64 -w0), signerName: nodevol.io/node-serving, usages: [server auth]}
YAML
[[ $out == *"spec.request"* ]] || pn_fail "malformed request: $out"
csr foreign-signer en-1 example.com/other /CN=en-1 DNS:en-1 || fail "create foreign-signer"
# Not a fixed sleep: a request of ours made after it, decided, shows the
# signer has come past the foreign one (one queue, in order).
csr after-foreign admin nodevol.io/node-serving /CN=en-1 DNS:en-1 || fail "create after-foreign"
denied after-foreign NotANode
[[ -z $(k get csr foreign-signer -o jsonpath='{.status.conditions}{.status.certificate}') ]] ||
  pn_fail "another signer's request was acted on: $(k get csr foreign-signer -o jsonpath='{.status}')"

step "a node's certificate is not a client certificate; the provisioner's is"
# The same trust for en-2's serving certificate both times (the bundle
# en-1 was given): only the client certificate differs, so the refusal
# is of en-1's certificate and not of how the server was checked.
en1=$PN_DIR/en-1/state/tls
if out=$(in_ns "$NODEVOLCTL" --address "${PN_IP[en-2]}:9809" --tls-server-name en-2 --tls-ca "$en1/ca.crt" \
  --tls-cert "$en1/tls.crt" --tls-key "$en1/tls.key" --timeout 5 info 2>&1); then
  pn_fail "en-2's nodevold accepted en-1's serving certificate as a client"
fi
step "  en-1's certificate as a client: $(tail -1 <<<"$out")"
in_ns "$NODEVOLCTL" --address "${PN_IP[en-2]}:9809" --tls-server-name en-2 --tls-ca "$en1/ca.crt" \
  --tls-cert "$K8S_WORK/prov-tls/tls.crt" --tls-key "$K8S_WORK/prov-tls/tls.key" --timeout 5 info >/dev/null ||
  pn_fail "en-2's nodevold refused the provisioner's client certificate"

step "a foreign address in a node's annotation: ignored, said once; the node still dialled"
as_node en-1 annotate node en-1 --overwrite nodevol.io/endpoint=192.0.2.1:9809 >/dev/null || fail "annotate as en-1"
for _ in $(seq 20); do grep -q 'node en-1: annotation nodevol.io/endpoint="192.0.2.1:9809"' "$PROV_LOG" && break; sleep 0.5; done
grep -q 'node en-1: annotation nodevol.io/endpoint="192.0.2.1:9809" names an address that is not' "$PROV_LOG" ||
  pn_fail "no warning about the foreign endpoint"
claim foreign-ann on-en-1 16Mi
bound foreign-ann 60 || pn_fail "claim foreign-ann not Bound"

step "rotation: 60 s certificates renewed at two thirds while claims come and go"
i=0
while ((SECONDS - t_enrolled < 75)); do
  n=en-$((i % 2 + 1))
  claim "rot-$i" "on-$n" 8Mi
  bound "rot-$i" 30 || pn_fail "claim rot-$i on $n not Bound during rotation"
  k delete pvc "rot-$i" --wait=false >/dev/null
  i=$((i + 1))
  sleep 2
done
# Renewed at two thirds of 60 s: the first at 0 and one at about 40 s,
# maybe a third near 80; a node renewing at a tenth would write a dozen.
for n in en-1 en-2; do
  (($(written "$n") >= 2)) || pn_fail "$n wrote $(written "$n") certificates in 75 s, want a renewal"
  (($(written "$n") <= 3)) || pn_fail "$n wrote $(written "$n") certificates in 75 s: it renews long before two thirds"
done
renewed=$(grep -c "renewed the provisioner's client certificate" "$PROV_LOG" || true)
((renewed >= 1)) || pn_fail "the provisioner did not renew its client certificate"
[[ -z $(k get events --field-selector reason=ProvisioningFailed -o name) ]] ||
  pn_fail "provisioning failed during rotation: $(k get events --field-selector reason=ProvisioningFailed)"
step "$i claims made and deleted; nodes wrote $(written en-1) and $(written en-2) certificates, the provisioner renewed $renewed"

step "after the first certificates expired: en-1 restarted serves its renewed one, dialled with the renewed client's"
pn_nodevold_stop en-1
off=$(($(stat -c %s "$PROV_LOG") + 1))
en_start en-1
for _ in $(seq 60); do grep -q "node en-1 (.*) reachable" <(tail -c "+$off" "$PROV_LOG") && break; sleep 0.5; done
grep -q "node en-1 (.*) reachable" <(tail -c "+$off" "$PROV_LOG") || pn_fail "the provisioner did not reach en-1 again"
claim after-restart on-en-1 8Mi
bound after-restart 60 || pn_fail "claim after-restart not Bound"
for _ in $(seq 20); do
  [[ $(k get node en-1 -o jsonpath='{.metadata.annotations.nodevol\.io/endpoint}') == "${PN_IP[en-1]}:9809" ]] && break
  sleep 0.5
done
[[ $(k get node en-1 -o jsonpath='{.metadata.annotations.nodevol\.io/endpoint}') == "${PN_IP[en-1]}:9809" ]] ||
  pn_fail "en-1 did not announce its own endpoint again at start"

step "the CA rotated under two replicas, a standby restarted and the leader killed: no node drops out"
kill "$PROV_PID" 2>/dev/null || true
wait "$PROV_PID" 2>/dev/null || true
# Nodes that check the bundle every 2 s, so the rotation's waits are short.
for n in en-1 en-2; do
  pn_nodevold_stop "$n"
  EN_RECHECK=2 en_start "$n"
done
# rep NAME: a replica with leader election, following the CA every second.
declare -A REP_PID
rep() {
  POD_NAMESPACE=$NS nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" \
    --kubeconfig="$K8S_WORK/admin.kubeconfig" --metrics-address=off --extender-address=off --identity="$1" \
    --lease-namespace="$NS" \
    --lease-duration-seconds=4 --renew-deadline-seconds=3 --retry-period-seconds=1 \
    --node-ca-secret=nodevol-node-ca --node-ca-poll-seconds=1 --ca-rotation-spread-seconds=15 \
    --ca-rotation-settle-seconds=4 --node-cert-max-lifetime-seconds=3600 --tls-dir="$K8S_WORK/tls-$1" \
    --tls-refresh-seconds=2 >>"$K8S_WORK/logs/$1.log" 2>&1 &
  REP_PID[$1]=$!
  CLEANUP_PIDS+=("$!")
}
leader() { k -n "$NS" get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
fp() { openssl x509 -outform DER 2>/dev/null | sha256sum | cut -d' ' -f1; }
bundle_fps() {
  local line cert=""
  while IFS= read -r line; do
    cert+="$line"$'\n'
    if [[ $line == "-----END CERTIFICATE-----" ]]; then
      fp <<<"$cert"
      cert=""
    fi
  done < <(k -n "$NS" get configmap nodevol-ca -o jsonpath='{.data.ca\.crt}'; echo)
}
serving_ca() { k get node "$1" -o jsonpath='{.metadata.annotations.nodevol\.io/serving-ca}'; }
rep prov-a
for _ in $(seq 60); do [[ $(leader) == prov-a ]] && break; sleep 0.5; done
[[ $(leader) == prov-a ]] || pn_fail "prov-a does not lead (lease holder: $(leader))"
rep prov-b
old=$(k -n "$NS" get secret nodevol-node-ca -o jsonpath='{.data.tls\.crt}' | base64 -d | fp)
for n in en-1 en-2; do
  for _ in $(seq 60); do [[ $(serving_ca "$n") == "$old" ]] && break; sleep 0.5; done
  [[ $(serving_ca "$n") == "$old" ]] || pn_fail "$n does not say it serves from the CA ${old:0:16} ($(serving_ca "$n"))"
done
claim rot-ca-warm on-en-1 8Mi
bound rot-ca-warm 60 || pn_fail "claim rot-ca-warm not Bound under the two replicas"
# A pod's volume on en-1 that must stay usable through the rotation, and be
# deleted after it (the provisioner dials en-1 with the new CA's certificate).
warm_pv=$(k get pvc rot-ca-warm -o jsonpath='{.spec.volumeName}')
warm_t=$PN_DIR/en-1/pods/pod-rot/volumes/nodevol.io~volume/$warm_pv
mkdir -p "$warm_t"
pn_ctl en-1 publish --volume "$warm_pv" --target "$warm_t" >/dev/null || pn_fail "publish $warm_pv on en-1"
echo "before the rotation" >"$warm_t/data" || pn_fail "write to $warm_pv before the rotation"
csrs_before=$(k get csr -o name | wc -l)

# A new CA, as an operator (or cert-manager) would put it in the Secret.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=rotated nodevol CA" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
  -keyout "$K8S_WORK/ca2.key" -out "$K8S_WORK/ca2.crt" 2>/dev/null || fail "a new CA"
new=$(fp <"$K8S_WORK/ca2.crt")
k -n "$NS" create secret tls nodevol-node-ca --cert="$K8S_WORK/ca2.crt" --key="$K8S_WORK/ca2.key" --dry-run=client -o yaml |
  k -n "$NS" apply -f - >/dev/null || fail "replace the CA Secret"
t_rot=$SECONDS
# The standby restarts after the Secret changed (what split the replicas
# before: it published the new CA while the leader signed with the old).
kill "${REP_PID[prov-b]}"; wait "${REP_PID[prov-b]}" 2>/dev/null || true
rep prov-b
i=0 killed=""
while :; do
  fps=$(bundle_fps | tr '\n' ' ')
  [[ $fps == "$new " && $(serving_ca en-1) == "$new" && $(serving_ca en-2) == "$new" ]] && break
  ((SECONDS - t_rot < 240)) || pn_fail "the rotation did not end in 240 s: bundle [$fps], en-1 $(serving_ca en-1), en-2 $(serving_ca en-2)"
  if [[ -z $killed && $fps == "$new $old " ]]; then
    # Mid-rotation: the leader dies; the standby goes on from the ConfigMap.
    kill -9 "${REP_PID[prov-a]}"
    killed=$SECONDS
    echo "    bundle [new, old] after $((SECONDS - t_rot)) s; prov-a killed"
  fi
  n=en-$((i % 2 + 1))
  claim "rot-ca-$i" "on-$n" 8Mi
  bound "rot-ca-$i" 60 || pn_fail "claim rot-ca-$i on $n not Bound during the CA rotation (leader $(leader))"
  k delete pvc "rot-ca-$i" --wait=false >/dev/null
  i=$((i + 1))
done
[[ -n $killed ]] || pn_fail "the bundle never held the new CA and the old one together"
[[ $(leader) == prov-b ]] || pn_fail "prov-b does not lead after prov-a was killed ($(leader))"
csrs=$(($(k get csr -o name | wc -l) - csrs_before))
# One renewal from the 60 s certificates of before, and one from the new CA, per node.
((csrs <= 4)) || pn_fail "$csrs certificate requests during the rotation, want at most 4: $(k get csr)"
# prov-a followed the Secret (it signed with the new CA) but kept its client
# certificate on the old one until it died: the spread (15 s) had not passed.
grep -q "signing with ${new:0:16} from now on" "$K8S_WORK/logs/prov-a.log" || pn_fail "prov-a never followed the Secret"
! grep -q "client certificate comes from CA ${new:0:16}" "$K8S_WORK/logs/prov-a.log" ||
  pn_fail "prov-a moved its client certificate to the new CA before the nodes could trust it"
grep -q "retired CA ${old:0:16}" "$K8S_WORK/logs/prov-b.log" || pn_fail "prov-b does not say the old CA retired"
for n in en-1 en-2; do
  claim "after-rot-$n" "on-$n" 8Mi
  bound "after-rot-$n" 60 || pn_fail "claim after-rot-$n not Bound with only the new CA trusted"
done
[[ $(cat "$warm_t/data" 2>&1) == "before the rotation" ]] || pn_fail "$warm_pv lost its data in the rotation"
findmnt -n "$warm_t" >/dev/null || pn_fail "$warm_pv is no longer mounted at $warm_t"
echo "after the rotation" >>"$warm_t/data" || pn_fail "write to $warm_pv after the rotation"
pn_ctl en-1 unpublish --target "$warm_t" >/dev/null || pn_fail "unpublish $warm_pv"
k delete pvc rot-ca-warm --wait=false >/dev/null
for _ in $(seq 120); do grep -qx "$warm_pv" <(pn_volumes en-1) || break; sleep 0.5; done
! grep -qx "$warm_pv" <(pn_volumes en-1) || pn_fail "$warm_pv was not deleted from en-1 with only the new CA trusted"
step "rotated in $((SECONDS - t_rot)) s: $i claims bound meanwhile, $csrs certificate requests, the old CA retired, a published volume kept"
step "PASS"
