#!/usr/bin/env bash
# Offline check of deploy/ (ctest label deploy): `kubectl kustomize` renders
# deploy/base and deploy/examples, and the rendered objects keep what the
# deployment depends on:
#  - base: namespace nodevol-system; the ClusterRole and Role bound to the
#    ServiceAccount the Deployment runs as, no wildcard and nothing beyond
#    claims, PVs, classes, nodes, events, leases, the node CA's Secret and
#    ConfigMap and the CSRs of signer nodevol.io/node-serving; Deployment of 2
#    replicas, the image tagged with the project version, enrollment on
#    (--node-ca-secret, --tls-dir on an in-memory emptyDir, no hand-made
#    TLS files), the nodes' Role reading the CA ConfigMap, non-root, read-only root fs, no privilege escalation,
#    ALL capabilities dropped, seccomp RuntimeDefault, resources, anti-
#    affinity on the pods' own labels, probes on /healthz and /readyz at the
#    --metrics-address port; with NODEVOL_PROVISIONER, every flag
#    in its args is one the binary accepts (--help) and parses;
#  - examples: every object a StorageClass of nodevol.io with a
#    pool; lvm, nfs and dir each in Immediate and WaitForFirstConsumer;
#  - base and extender: a NetworkPolicy that lets in the metrics port alone,
#    and in the extender's overlay one for the extender's port;
#  - extender: base plus the Service nodevol-extender selecting the pods
#    that carry nodevol.io/extender=serving on the port the Deployment's
#    --extender-address serves, mutual TLS from the Secret
#    nodevol-extender-tls, and pods patch (the replica's own label) in the
#    Role; ../scheduler/kube-scheduler-config.yaml names that Service.
# kubectl: ~/.cache/nodevol/k8s/<pinned version>/bin (tests/k8s/build-k8s),
# or KUBECTL_BIN. Exit 77 (skipped) when kubectl or python3-yaml is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/tests/k8s/versions.env"
kubectl=${KUBECTL_BIN:-${NODEVOL_K8S_CACHE:-$HOME/.cache/nodevol/k8s}/${K8S_VERSION:-$K8S_VERSION_PINNED}/bin/kubectl}
skip() { echo "SKIP: $*" >&2; exit 77; }
[[ -x $kubectl ]] || skip "$kubectl missing: run tests/k8s/build-k8s"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml missing: apt-get install python3-yaml"

# The project version (CMakeLists.txt project()) is the image tag.
version=${NODEVOL_VERSION:-$(sed -n 's/^project(nodevol VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")}
deploy=${DEPLOY_DIR:-$root/deploy}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$kubectl" kustomize "$deploy/base" >"$work/base.yaml" || { echo "FAIL: kubectl kustomize deploy/base" >&2; exit 1; }
"$kubectl" kustomize "$deploy/examples" >"$work/examples.yaml" || { echo "FAIL: kubectl kustomize deploy/examples" >&2; exit 1; }
"$kubectl" kustomize "$deploy/extender" >"$work/extender.yaml" || { echo "FAIL: kubectl kustomize deploy/extender" >&2; exit 1; }
help=
if [[ -n ${NODEVOL_PROVISIONER:-} ]]; then
  help=$("$NODEVOL_PROVISIONER" --help) || { echo "FAIL: $NODEVOL_PROVISIONER --help" >&2; exit 1; }
fi
printf '%s' "$help" >"$work/help.txt"

/usr/bin/python3 - "$work/base.yaml" "$work/examples.yaml" "$work/help.txt" "$version" "$work/extender.yaml" <<'PY'
import re, sys, yaml

base_file, examples_file, help_file, version, extender_file = sys.argv[1:6]
failures = []

def check(cond, what):
    if not cond:
        failures.append(what)
    return cond

def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for d in docs:
        if not isinstance(d, dict) or "kind" not in d or "apiVersion" not in d:
            sys.exit(f"FAIL: {path}: an object without kind/apiVersion: {d!r}"[:300])
    return docs

base = load(base_file)
examples = load(examples_file)
NS = "nodevol-system"

def one(kind, name=None):
    found = [d for d in base if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    check(len(found) == 1, f"base: expected one {kind} {name or ''}, found {len(found)}")
    return found[0] if found else {}

# --- namespace and identity
check(one("Namespace", NS) != {}, f"base: no Namespace {NS}")
for d in base:
    if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding", "CSIDriver"):
        check(d["metadata"].get("namespace") == NS, f"base: {d['kind']} {d['metadata']['name']} not in {NS}")
sa = one("ServiceAccount")
sa_name = sa.get("metadata", {}).get("name")

# --- RBAC: bound to the ServiceAccount, narrow
allowed = {
    ("", "persistentvolumeclaims"), ("", "persistentvolumeclaims/status"), ("", "persistentvolumes"),
    ("storage.k8s.io", "storageclasses"),
    ("", "nodes"), ("", "events"), ("coordination.k8s.io", "leases"), ("", "pods"), ("apps", "replicasets"),
    ("storage.k8s.io", "csistoragecapacities"),
    ("snapshot.storage.k8s.io", "volumesnapshotcontents"), ("snapshot.storage.k8s.io", "volumesnapshotcontents/status"),
    ("snapshot.storage.k8s.io", "volumesnapshotclasses"), ("snapshot.storage.k8s.io", "volumesnapshots"),
    ("", "secrets"), ("", "configmaps"), ("certificates.k8s.io", "certificatesigningrequests"),
    ("certificates.k8s.io", "certificatesigningrequests/approval"),
    ("certificates.k8s.io", "certificatesigningrequests/status"), ("certificates.k8s.io", "signers"),
}
verbs_of = {}
sa_subject = {"kind": "ServiceAccount", "name": sa_name, "namespace": NS}
for kind, bkind in (("ClusterRole", "ClusterRoleBinding"), ("Role", "RoleBinding")):
    bound = [b for b in base if b["kind"] == bkind and sa_subject in b.get("subjects", [])]
    check(len(bound) >= 1, f"base: no {bkind} binds ServiceAccount {NS}/{sa_name}")
    for binding in bound:
        check(binding.get("roleRef", {}).get("kind") == kind, f"base: {bkind} {binding['metadata']['name']} refers to no {kind}")
        check(binding.get("subjects") == [sa_subject], f"base: {bkind} {binding['metadata']['name']} binds more than the ServiceAccount")
        role = one(kind, binding["roleRef"]["name"])
        for rule in role.get("rules", []):
            for g in rule.get("apiGroups", []):
                for r in rule.get("resources", []):
                    check((g, r) in allowed, f"base: {kind} grants {g or 'core'}/{r}, which the provisioner does not use")
                    for v in rule.get("verbs", []):
                        check(v != "*" and r != "*" and g != "*", f"base: {kind} has a wildcard")
                        verbs_of.setdefault((kind, r), set()).add(v)
# Every role is bound: to the ServiceAccount, or (the nodes' reader) below.
for d in base:
    if d["kind"] in ("Role", "ClusterRole"):
        check(any(b["kind"] == d["kind"] + "Binding" and b["roleRef"]["name"] == d["metadata"]["name"] for b in base),
              f"base: {d['kind']} {d['metadata']['name']} is bound to nobody")
# What the code needs (clusterrole.yaml names the code paths): the role
# must still grant it.
need = {
    ("ClusterRole", "persistentvolumeclaims"): {"get", "list", "watch", "patch"},
    ("ClusterRole", "persistentvolumeclaims/status"): {"patch"},
    ("ClusterRole", "persistentvolumes"): {"get", "list", "watch", "create", "delete", "patch"},
    ("ClusterRole", "storageclasses"): {"list", "watch"},
    ("ClusterRole", "nodes"): {"get", "list", "watch", "patch"},
    ("Role", "secrets"): {"create", "get"},
    ("Role", "configmaps"): {"create", "get", "patch"},
    ("ClusterRole", "certificatesigningrequests"): {"list", "watch"},
    ("ClusterRole", "certificatesigningrequests/approval"): {"update"},
    ("ClusterRole", "certificatesigningrequests/status"): {"update"},
    ("ClusterRole", "signers"): {"approve", "sign"},
    ("ClusterRole", "events"): {"create", "patch"},
    ("Role", "leases"): {"get", "create", "update"},
    ("ClusterRole", "pods"): {"list"},
    ("Role", "pods"): {"get"},
    ("Role", "replicasets"): {"get"},
    ("Role", "csistoragecapacities"): {"list", "create", "patch", "delete"},
    ("ClusterRole", "volumesnapshotcontents"): {"get", "list", "watch", "patch"},
    ("ClusterRole", "volumesnapshotcontents/status"): {"patch"},
    ("ClusterRole", "volumesnapshotclasses"): {"get"},
    ("ClusterRole", "volumesnapshots"): {"get"},
}
for key, verbs in need.items():
    have = verbs_of.get(key, set())
    check(verbs <= have, f"base: {key[0]} lacks {sorted(verbs - have)} on {key[1]}")
    check(have <= verbs, f"base: {key[0]} grants {sorted(have - verbs)} on {key[1]}, which the code does not use")

# --- CSIDriver: named like the classes' provisioner, capacity checked, no
# attach (immutable once created), pod info for nodevold's namespace check,
# fsGroup handed to nodevold, inline volumes (volumeLifecycleModes is
# immutable too: docs/csi.md, "Upgrading").
drv = one("CSIDriver", "nodevol.io")
dspec = drv.get("spec", {})
check(dspec.get("storageCapacity") is True, "CSIDriver nodevol.io: storageCapacity is not true")
check(dspec.get("attachRequired") is False, "CSIDriver nodevol.io: attachRequired is not false")
check(dspec.get("podInfoOnMount") is True, "CSIDriver nodevol.io: podInfoOnMount is not true")
check(dspec.get("fsGroupPolicy") == "File", "CSIDriver nodevol.io: fsGroupPolicy is not File")
check(dspec.get("volumeLifecycleModes") == ["Persistent", "Ephemeral"],
      "CSIDriver nodevol.io: volumeLifecycleModes is not [Persistent, Ephemeral]")

# --- Deployment
dep = one("Deployment")
spec = dep.get("spec", {})
pod = spec.get("template", {}).get("spec", {})
labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
check(spec.get("replicas") == 2, f"Deployment: replicas {spec.get('replicas')}, want 2")
sel = spec.get("selector", {}).get("matchLabels", {})
check(sel and all(labels.get(k) == v for k, v in sel.items()), "Deployment: selector does not match the pod labels")
check(pod.get("serviceAccountName") == sa_name, f"Deployment: serviceAccountName {pod.get('serviceAccountName')}")
check(pod.get("automountServiceAccountToken", sa.get("automountServiceAccountToken", True)) is True,
      "Deployment: the ServiceAccount token is not mounted (in-cluster config needs it)")
ctrs = pod.get("containers", [])
check(len(ctrs) == 1, f"Deployment: {len(ctrs)} containers, want 1")
c = ctrs[0] if ctrs else {}
image = c.get("image", "")
check(re.fullmatch(r"registry\.local/nodevol/provisioner:" + re.escape(version), image) is not None,
      f"Deployment: image {image!r}, want registry.local/nodevol/provisioner:{version}")

# Enrollment: the node CA's Secret and ConfigMap named, and the issued
# client certificate written to an in-memory emptyDir mounted where
# --tls-dir points (the root filesystem is read-only); no certificate from
# a hand-made Secret.
vols = {v["name"]: v for v in pod.get("volumes", [])}
args = c.get("args", [])
argv = dict(a.split("=", 1) for a in args if "=" in a)
check(argv.get("--node-ca-secret") == "nodevol-node-ca", "Deployment: no --node-ca-secret=nodevol-node-ca")
check(argv.get("--node-ca-configmap") == "nodevol-ca", "Deployment: no --node-ca-configmap=nodevol-ca")
check(not any(f in argv for f in ("--tls-ca", "--tls-cert", "--tls-key")),
      "Deployment: --tls-ca/--tls-cert/--tls-key given (they would win over the issued certificate)")
tls_dir = argv.get("--tls-dir", "")
mounts = [m for m in c.get("volumeMounts", []) if tls_dir.startswith(m["mountPath"].rstrip("/") + "/")]
check(len(mounts) == 1, f"Deployment: --tls-dir {tls_dir!r} is not below a mounted volume")
if mounts:
    v = vols.get(mounts[0]["name"], {})
    check(v.get("emptyDir", {}).get("medium") == "Memory", "Deployment: the --tls-dir volume is not an in-memory emptyDir")
    check(not mounts[0].get("readOnly"), "Deployment: the --tls-dir volume is mounted readOnly")
# The nodes' Role: get of the CA ConfigMap, bound to group system:nodes.
roles = {d["metadata"]["name"]: d for d in base if d.get("kind") == "Role"}
reader = roles.get("nodevol-node-ca-reader", {})
check(reader.get("rules") == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["nodevol-ca"],
                                "verbs": ["get"]}], "Role nodevol-node-ca-reader: want get of ConfigMap nodevol-ca only")
bindings = [d for d in base if d.get("kind") == "RoleBinding" and d["roleRef"]["name"] == "nodevol-node-ca-reader"]
check(len(bindings) == 1 and bindings[0].get("subjects") == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                                               "name": "system:nodes"}],
      "RoleBinding of nodevol-node-ca-reader: want group system:nodes only")
check(not any(a.startswith("--kubeconfig") for a in c.get("args", [])), "Deployment: --kubeconfig (want in-cluster)")
check(not any(e.get("name") == "KUBECONFIG" for e in c.get("env", [])), "Deployment: KUBECONFIG set (want in-cluster)")

# Every flag must be one nodevol-provisioner accepts.
with open(help_file) as f:
    help_text = f.read()
if help_text:
    accepted = set(re.findall(r"--[a-z][a-z0-9-]*", help_text))
    for a in c.get("args", []):
        flag = a.split("=", 1)[0]
        check(flag in accepted, f"Deployment: nodevol-provisioner --help has no {flag}")
    # For the shell to try on the binary.
    with open(help_file + ".args", "w") as f:
        for a in c.get("args", []):
            f.write(a + "\n")

# Security context: container settings, or the pod's where Kubernetes
# inherits them (runAsNonRoot, seccompProfile).
psc = pod.get("securityContext", {})
csc = c.get("securityContext", {})
def eff(key):
    return csc.get(key, psc.get(key))
check(eff("runAsNonRoot") is True, "securityContext: runAsNonRoot not true")
uid = eff("runAsUser")
check(isinstance(uid, int) and uid > 0, f"securityContext: runAsUser {uid!r}, want a non-zero uid (image-independent)")
check(csc.get("readOnlyRootFilesystem") is True, "securityContext: readOnlyRootFilesystem not true")
check(csc.get("allowPrivilegeEscalation") is False, "securityContext: allowPrivilegeEscalation not false")
check(csc.get("privileged", False) is False, "securityContext: privileged")
check(csc.get("capabilities", {}).get("drop") == ["ALL"], "securityContext: capabilities do not drop ALL")
check(not csc.get("capabilities", {}).get("add"), "securityContext: capabilities added")
check((eff("seccompProfile") or {}).get("type") == "RuntimeDefault", "securityContext: seccomp not RuntimeDefault")
check(not pod.get("hostNetwork") and not pod.get("hostPID"), "Deployment: host namespaces")
res = c.get("resources", {})
check(res.get("requests", {}).get("cpu") and res.get("requests", {}).get("memory"), "resources: no cpu/memory requests")
check(res.get("limits", {}).get("memory"), "resources: no memory limit")

# Replicas spread over nodes by their own labels.
anti = pod.get("affinity", {}).get("podAntiAffinity", {})
terms = [t.get("podAffinityTerm", t) for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
terms += anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
check(any(t.get("topologyKey") == "kubernetes.io/hostname"
          and t.get("labelSelector", {}).get("matchLabels")
          and all(labels.get(k) == v for k, v in t["labelSelector"]["matchLabels"].items()) for t in terms),
      "Deployment: no pod anti-affinity on kubernetes.io/hostname selecting its own pods")

# Probes on the paths and the port nodevol-provisioner serves them
# (--metrics-address, default 0.0.0.0:9810; provisioner/metrics/status_server.h).
serve = "0.0.0.0:9810"
for a in c.get("args", []):
    if a.startswith("--metrics-address="):
        serve = a.split("=", 1)[1]
check(serve != "off", "Deployment: --metrics-address=off, but the probes need /healthz and /readyz")
ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
for p, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    get = c.get(p, {}).get("httpGet")
    if not check(get is not None, f"Deployment: no {p} httpGet"):
        continue
    check(get.get("path") == path, f"Deployment: {p} path {get.get('path')!r}, want {path}")
    port = ports.get(get.get("port"), get.get("port"))
    check(str(port) == serve.rsplit(":", 1)[-1], f"Deployment: {p} on port {port!r}, the program serves {serve}")
    check(serve.rsplit(":", 1)[0] not in ("127.0.0.1", "[::1]", "localhost"),
          f"Deployment: --metrics-address {serve} is loopback; kubelet's probes cannot reach it")

# --- extender: base, the Service, TLS files, the label's RBAC
ext = load(extender_file)
kinds = lambda docs: sorted((d["kind"], d["metadata"]["name"]) for d in docs)
check(kinds(ext) == sorted(kinds(base) + [("Service", "nodevol-extender"), ("NetworkPolicy", "nodevol-extender")]),
      f"extender: objects {kinds(ext)} are not base's plus Service and NetworkPolicy nodevol-extender")
edep = [d for d in ext if d["kind"] == "Deployment"][0]
epod = edep["spec"]["template"]["spec"]
elabels = edep["spec"]["template"]["metadata"].get("labels", {})
# Who may reach the pods: base lets in the metrics port only (kubelet's
# probes come from the node, always let through); the extender's overlay
# adds its port.
def policy_ports(docs, name, labels):
    pol = [d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == name]
    if not check(len(pol) == 1, f"no NetworkPolicy {name}"):
        return set()
    spec = pol[0]["spec"]
    sel = spec.get("podSelector", {}).get("matchLabels", {})
    check(sel and all(labels.get(k) == v for k, v in sel.items()), f"NetworkPolicy {name} selects {sel}, not the pods {labels}")
    check(spec.get("policyTypes") == ["Ingress"], f"NetworkPolicy {name}: policyTypes {spec.get('policyTypes')}")
    return {p.get("port") for rule in spec.get("ingress", []) for p in rule.get("ports", [])}
check(policy_ports(ext, "nodevol-provisioner", elabels) == {"metrics"}, "NetworkPolicy nodevol-provisioner: not the metrics port alone")
check(policy_ports(ext, "nodevol-extender", elabels) == {"extender"}, "NetworkPolicy nodevol-extender: not the extender port alone")
ec = epod["containers"][0]
eargs = ec.get("args", [])
addr = [a.split("=", 1)[1] for a in eargs if a.startswith("--extender-address=")]
check(len(addr) == 1 and addr[0] != "off", f"extender: --extender-address {addr}")
eports = {p.get("name"): p.get("containerPort") for p in ec.get("ports", [])}
if addr:
    check(str(eports.get("extender")) == addr[0].rsplit(":", 1)[-1],
          f"extender: containerPort 'extender' {eports.get('extender')} is not the port of {addr[0]}")
svc = [d for d in ext if d["kind"] == "Service"][0]
ssel = svc["spec"].get("selector", {})
check(ssel.get("nodevol.io/extender") == "serving", f"extender: Service selector {ssel} lacks nodevol.io/extender=serving")
check(all(elabels.get(k) == v for k, v in ssel.items() if k != "nodevol.io/extender"),
      f"extender: Service selector {ssel} does not select the Deployment's pods {elabels}")
check(any(p.get("targetPort") in ("extender", eports.get("extender")) for p in svc["spec"].get("ports", [])),
      "extender: the Service does not target the extender port")
evols = {v["name"]: v for v in epod.get("volumes", [])}
xv = [n for n, v in evols.items() if v.get("secret", {}).get("secretName") == "nodevol-extender-tls"]
xm = [m for m in ec.get("volumeMounts", []) if xv and m["name"] == xv[0]]
if check(len(xv) == 1 and len(xm) == 1 and xm[0].get("readOnly") is True,
         "extender: Secret nodevol-extender-tls not mounted read-only"):
    check(evols[xv[0]]["secret"].get("defaultMode", 0o644) & 0o007 == 0, "extender: its files are world-readable")
    for flag, key in (("--extender-tls-cert", "tls.crt"), ("--extender-tls-key", "tls.key"),
                      ("--extender-tls-client-ca", "ca.crt")):
        want = xm[0]["mountPath"].rstrip("/") + "/" + key
        check(f"{flag}={want}" in eargs, f"extender: args lack {flag}={want}")
erole = [d for d in ext if d["kind"] == "Role" and d["metadata"]["name"] == "nodevol-provisioner-leader"][0]
pod_verbs = {v for r in erole.get("rules", []) if "pods" in r.get("resources", []) for v in r.get("verbs", [])}
check(pod_verbs == {"get", "patch"}, f"extender: the Role's verbs on pods are {sorted(pod_verbs)}, want get and patch")
if help_text:
    for a in eargs:
        check(a.split("=", 1)[0] in accepted, f"extender: nodevol-provisioner --help has no {a.split('=', 1)[0]}")
    with open(help_file + ".extender-args", "w") as f:
        for a in eargs:
            f.write(a + "\n")

# --- examples: StorageClasses
modes = {}
for d in examples:
    name = d["metadata"]["name"]
    if not check(d["kind"] == "StorageClass" and d["apiVersion"] == "storage.k8s.io/v1",
                 f"examples: {d['kind']} {name} is not a storage.k8s.io/v1 StorageClass"):
        continue
    check(d.get("provisioner") == "nodevol.io", f"examples: class {name} provisioner {d.get('provisioner')!r}")
    params = d.get("parameters", {})
    check(params.get("pool"), f"examples: class {name} has no pool parameter")
    check(all(isinstance(v, str) for v in params.values()), f"examples: class {name} has non-string parameters")
    check(params.get("backend") in ("lvm", "nfs", "dir"), f"examples: class {name} backend {params.get('backend')!r}")
    modes.setdefault(params.get("backend"), set()).add(d.get("volumeBindingMode", "Immediate"))
for backend in ("lvm", "nfs", "dir"):
    check(modes.get(backend) == {"Immediate", "WaitForFirstConsumer"},
          f"examples: {backend} classes have binding modes {sorted(modes.get(backend, []))}")

if failures:
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    sys.exit(1)
print(f"ok: base ({len(base)} objects), extender ({len(ext)}) and examples ({len(examples)} StorageClasses)")
PY

# The values must parse too (a bool flag given without its value swallows
# the next argument): the binary parses every argument before --help.
if [[ -n $help ]]; then
  mapfile -t args <"$work/help.txt.args"
  if ! out=$("$NODEVOL_PROVISIONER" "${args[@]}" --help 2>&1 >/dev/null); then
    echo "FAIL: nodevol-provisioner refuses the Deployment's args: $out" >&2
    exit 1
  fi
  echo "ok: nodevol-provisioner parses the Deployment's ${#args[@]} args"
  mapfile -t args <"$work/help.txt.extender-args"
  if ! out=$("$NODEVOL_PROVISIONER" "${args[@]}" --help 2>&1 >/dev/null); then
    echo "FAIL: nodevol-provisioner refuses deploy/extender's args: $out" >&2
    exit 1
  fi
  echo "ok: nodevol-provisioner parses deploy/extender's ${#args[@]} args"
fi
