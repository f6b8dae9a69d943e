#!/usr/bin/env bash
# Offline check of the Helm chart deploy/helm/nodevol (ctest label deploy):
#  - `helm lint --strict` with the defaults and with every optional part on;
#  - no drift from kustomize: `helm template` with the defaults renders
#    every object of `kubectl kustomize deploy/base` (but its Namespace,
#    which `helm install --create-namespace` makes) with the same content,
#    Helm's own labels aside; with extender.enabled, every object of
#    deploy/extender; its StorageClasses are deploy/examples/
#    storageclass-dir.yaml's; only the metrics Service is the chart's own;
#  - the chart's appVersion is the project version (the image tag);
#  - values: enrollment on by default (as deploy/base); with it off,
#    tls.create makes the Secret from the PEMs (and refuses to render
#    without them), a default class gets the annotation, other
#    classes' fields land as given, extraArgs, a ServiceMonitor;
#  - every flag in the rendered args is one this build's
#    nodevol-provisioner accepts (--help).
# helm from tests/k8s/build-helm, kubectl from tests/k8s/build-k8s.
# Exit 77 (skipped) when either or python3-yaml is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$root/tests/k8s/versions.env"
cache=${NODEVOL_K8S_CACHE:-$HOME/.cache/nodevol/k8s}
kubectl=${KUBECTL_BIN:-$cache/${K8S_VERSION:-$K8S_VERSION_PINNED}/bin/kubectl}
helm=${HELM_BIN:-$cache/helm-$HELM_VERSION_PINNED/helm}
skip() { echo "SKIP: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -x $kubectl ]] || skip "$kubectl missing: run tests/k8s/build-k8s"
[[ -x $helm ]] || skip "$helm missing: run tests/k8s/build-helm"
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml missing: apt-get install python3-yaml"
chart=${CHART_DIR:-$root/deploy/helm/nodevol}
deploy=$root/deploy
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
export HELM_CACHE_HOME=$w/helm-cache HELM_CONFIG_HOME=$w/helm-config HELM_DATA_HOME=$w/helm-data

printf '%s\n' '-----BEGIN CERTIFICATE-----' 'Q0E=' '-----END CERTIFICATE-----' >"$w/ca.pem"
cp "$w/ca.pem" "$w/cert.pem"
printf '%s\n' '-----BEGIN PRIVATE KEY-----' 'S0VZ' '-----END PRIVATE KEY-----' >"$w/key.pem"
all_on=(--set extender.enabled=true --set enrollment.enabled=false --set tls.create=true --set-file tls.ca="$w/ca.pem"
        --set-file tls.cert="$w/cert.pem" --set-file tls.key="$w/key.pem"
        --set metrics.serviceMonitor.enabled=true --set 'extraArgs={--orphan-sweep-seconds=600}')
"$helm" lint --strict "$chart" >"$w/lint.txt" 2>&1 || { cat "$w/lint.txt" >&2; fail "helm lint --strict (defaults)"; }
"$helm" lint --strict "$chart" "${all_on[@]}" >"$w/lint.txt" 2>&1 || { cat "$w/lint.txt" >&2; fail "helm lint --strict (all on)"; }
echo "ok: helm lint --strict, defaults and all on"

render() { # OUT ARGS...
  local out=$1; shift
  "$helm" template nodevol "$chart" --namespace nodevol-system "$@" >"$out" || fail "helm template $*"
}
render "$w/chart.yaml"
render "$w/chart-ext.yaml" --set extender.enabled=true
render "$w/chart-all.yaml" "${all_on[@]}"
cat >"$w/classes.yaml" <<'YAML'
storageClasses:
- name: fast
  default: true
  parameters: {backend: lvm, pool: lvm, fsType: xfs}
  reclaimPolicy: Retain
  volumeBindingMode: WaitForFirstConsumer
  allowVolumeExpansion: false
  mountOptions: [noatime]
YAML
render "$w/chart-classes.yaml" -f "$w/classes.yaml"
if "$helm" template nodevol "$chart" --set enrollment.enabled=false --set tls.create=true >"$w/out" 2>"$w/err"; then
  fail "tls.create without the PEMs rendered"
fi
grep -q 'tls.create needs tls.ca, tls.cert and tls.key' "$w/err" || fail "tls.create without PEMs: $(cat "$w/err")"
"$kubectl" kustomize "$deploy/base" >"$w/base.yaml" || fail "kubectl kustomize deploy/base"
"$kubectl" kustomize "$deploy/extender" >"$w/extender.yaml" || fail "kubectl kustomize deploy/extender"
"$kubectl" kustomize "$deploy/examples" >"$w/examples.yaml" || fail "kubectl kustomize deploy/examples"
help=
[[ -n ${NODEVOL_PROVISIONER:-} ]] && { help=$("$NODEVOL_PROVISIONER" --help) || fail "$NODEVOL_PROVISIONER --help"; }
printf '%s' "$help" >"$w/help.txt"
version=$(sed -n 's/^project(nodevol VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")

/usr/bin/python3 - "$w" "$deploy" "$chart" "$version" <<'PY'
import copy, json, re, sys, yaml
w, deploy, chart, version = sys.argv[1:5]
bad = []
def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]
def key(o):
    return (o["kind"], o["metadata"]["name"])
HELM_LABELS = {"app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version", "helm.sh/chart"}
def strip(o):
    o = copy.deepcopy(o)
    for meta in [o["metadata"], o.get("spec", {}).get("template", {}).get("metadata")]:
        if not meta:
            continue
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in HELM_LABELS}
        meta.pop("labels", None)
        if labels:
            meta["labels"] = labels
        if not meta.get("annotations"):
            meta.pop("annotations", None)
    return o
def by_key(docs):
    return {key(o): strip(o) for o in docs}
def diff(a, b, path=""):
    if type(a) != type(b):
        return [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a: out.append(f"{path}.{k}: only in the chart: {b[k]!r}")
            elif k not in b: out.append(f"{path}.{k}: missing in the chart ({a[k]!r})")
            else: out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items in kustomize, {len(b)} in the chart: {a!r} / {b!r}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [f"{path}: kustomize {a!r}, chart {b!r}"]

def compare(kust_file, chart_file, what):
    kust = by_key(load(kust_file))
    ch = by_key(load(chart_file))
    kust.pop(("Namespace", "nodevol-system"), None)
    for k, o in kust.items():
        if k not in ch:
            bad.append(f"{what}: {k[0]} {k[1]} is not in the chart")
            continue
        for d in diff(o, ch[k]):
            bad.append(f"{what}: {k[0]} {k[1]}{d}")
    extra = sorted(k for k in ch if k not in kust and k[0] != "StorageClass")
    if extra != [("Service", "nodevol-provisioner-metrics")]:
        bad.append(f"{what}: the chart's own objects are {extra}, want only the metrics Service")
    return ch

ch = compare(f"{w}/base.yaml", f"{w}/chart.yaml", "deploy/base")
compare(f"{w}/extender.yaml", f"{w}/chart-ext.yaml", "deploy/extender")

# StorageClasses: deploy/examples' dir classes.
dir_names = {o["metadata"]["name"] for o in load(f"{deploy}/examples/storageclass-dir.yaml")}
want = {key(o): strip(o) for o in load(f"{w}/examples.yaml") if o["metadata"]["name"] in dir_names}
got = {k: o for k, o in ch.items() if k[0] == "StorageClass"}
if set(want) != set(got):
    bad.append(f"classes: chart {sorted(got)}, deploy/examples/storageclass-dir.yaml {sorted(want)}")
for k in want:
    if k in got:
        for d in diff(want[k], got[k]):
            bad.append(f"classes: {k[1]}{d}")

# Versions: the image tag is the project version.
meta = yaml.safe_load(open(f"{chart}/Chart.yaml"))
if meta["appVersion"] != version:
    bad.append(f"Chart.yaml appVersion {meta['appVersion']}, project version {version}")
dep = ch[("Deployment", "nodevol-provisioner")]
image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
if image != f"registry.local/nodevol/provisioner:{version}":
    bad.append(f"image {image}")

# Everything on: the Secret, the ServiceMonitor, extraArgs, the checksum.
allon = {key(o): o for o in load(f"{w}/chart-all.yaml")}
sec = allon.get(("Secret", "nodevol-provisioner-tls"))
import base64
if not sec or base64.b64decode(sec["data"]["tls.key"]).decode() != open(f"{w}/key.pem").read():
    bad.append(f"tls.create: Secret {sec and sec.get('data')}")
if ("ServiceMonitor", "nodevol-provisioner") not in allon:
    bad.append("metrics.serviceMonitor.enabled made no ServiceMonitor")
c = allon[("Deployment", "nodevol-provisioner")]["spec"]["template"]
if "--orphan-sweep-seconds=600" not in c["spec"]["containers"][0]["args"]:
    bad.append("extraArgs not in the args")
if "checksum/tls" not in (c["metadata"].get("annotations") or {}):
    bad.append("no checksum/tls annotation with tls.create")

# A class of the user's own.
cl = {key(o): o for o in load(f"{w}/chart-classes.yaml")}
fast = cl.get(("StorageClass", "fast"))
exp = {"provisioner": "nodevol.io", "parameters": {"backend": "lvm", "pool": "lvm", "fsType": "xfs"},
       "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer",
       "allowVolumeExpansion": False, "mountOptions": ["noatime"]}
if not fast:
    bad.append("storageClasses: class fast not rendered")
else:
    for k, v in exp.items():
        if fast.get(k) != v:
            bad.append(f"class fast: {k} = {fast.get(k)!r}, want {v!r}")
    if fast["metadata"].get("annotations", {}).get("storageclass.kubernetes.io/is-default-class") != "true":
        bad.append("class fast: default: true did not make it the default class")
if ("StorageClass", "nodevol-dir") in cl:
    bad.append("storageClasses given: the default list should be replaced")

# Flags this build accepts.
help_text = open(f"{w}/help.txt").read()
if help_text:
    accepted = set(re.findall(r"--[a-z][a-z0-9-]*", help_text))
    for f in [f"{w}/chart.yaml", f"{w}/chart-all.yaml"]:
        for o in load(f):
            if o["kind"] != "Deployment":
                continue
            for a in o["spec"]["template"]["spec"]["containers"][0]["args"]:
                flag = a.split("=", 1)[0]
                if flag not in accepted:
                    bad.append(f"arg {a}: nodevol-provisioner --help has no {flag}")
if bad:
    print("\n".join("FAIL: " + b for b in bad), file=sys.stderr)
    sys.exit(1)
print("ok: the chart renders deploy/base and deploy/extender (Helm's labels aside), deploy/examples' dir classes, "
      "the metrics Service; values and flags checked")
PY
