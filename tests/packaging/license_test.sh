#!/bin/bash
# Every artefact scripts/package makes says nodevol's licence, Apache-2.0,
# and carries its text:
#   - the deb: /usr/share/doc/nodevol-node/copyright in the machine-readable
#     format, every Files stanza Apache-2.0, the licence stanza pointing at
#     /usr/share/common-licenses/Apache-2.0;
#   - the rpm: License: Apache-2.0, and the tree's LICENSE byte for byte as
#     a %license file;
#   - the image: org.opencontainers.image.licenses=Apache-2.0 and LICENSE,
#     NOTICE byte for byte in /usr/share/doc/nodevol-provisioner/.
# And the tree's LICENSE is the Apache License 2.0 itself (Debian's copy).
#
#   license_test.sh SOURCE_DIR DIST_DIR VERSION
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
src=${1:?usage: license_test.sh SOURCE_DIR DIST_DIR VERSION} dist=${2:?} version=${3:?}
src=$(realpath "$src") dist=$(realpath "$dist")
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT

if [[ -f /usr/share/common-licenses/Apache-2.0 ]]; then
  cmp -s "$src/LICENSE" /usr/share/common-licenses/Apache-2.0 ||
    fail "$src/LICENSE is not the Apache License 2.0 text (/usr/share/common-licenses/Apache-2.0)"
fi
grep -q 'Apache License' "$src/LICENSE" && grep -q 'Version 2.0, January 2004' "$src/LICENSE" ||
  fail "$src/LICENSE is not the Apache License 2.0"
echo "ok: LICENSE is the Apache License 2.0"

shopt -s nullglob
debs=("$dist"/nodevol-node_"$version"_*.deb) rpms=("$dist"/nodevol-node-"$version"-1*.rpm)
images=("$dist"/nodevol-provisioner-*.oci.tar)
((${#debs[@]} && ${#rpms[@]} && ${#images[@]})) ||
  fail "the .deb, .rpm and .oci.tar of $version are not all in $dist: scripts/package --out $dist (scripts/test does)"

# --- deb
dpkg-deb --fsys-tarfile "${debs[0]}" | tar -xOf - ./usr/share/doc/nodevol-node/copyright >"$t/copyright" ||
  fail "the deb has no /usr/share/doc/nodevol-node/copyright"
head -1 "$t/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  fail "the deb's copyright is not in the machine-readable format"
files=$(grep -c '^Files:' "$t/copyright")
# Each Files stanza's License line (the next License: after it).
lic=$(awk '/^Files:/ { f = 1 } f && /^License:/ { print $2; f = 0 }' "$t/copyright" | sort -u)
((files >= 1)) && [[ $lic == Apache-2.0 ]] || fail "the deb's Files stanzas name licences '$lic', want only Apache-2.0"
grep -q '^License: Apache-2.0$' "$t/copyright" && grep -q '/usr/share/common-licenses/Apache-2.0' "$t/copyright" ||
  fail "the deb's copyright has no Apache-2.0 licence stanza pointing at /usr/share/common-licenses"
echo "ok: deb copyright: $files Files stanzas, all Apache-2.0"

# --- rpm
[[ $(rpm -qp --qf '%{LICENSE}' "${rpms[0]}" 2>/dev/null) == Apache-2.0 ]] ||
  fail "the rpm's License is '$(rpm -qp --qf '%{LICENSE}' "${rpms[0]}" 2>/dev/null)', want Apache-2.0"
# -L: the files marked %license.
[[ $(rpm -qpL "${rpms[0]}" 2>/dev/null) == /usr/share/licenses/nodevol-node/LICENSE ]] ||
  fail "the rpm's %license files are '$(rpm -qpL "${rpms[0]}" 2>/dev/null)', want /usr/share/licenses/nodevol-node/LICENSE"
(cd "$t" && rpm2cpio "${rpms[0]}" | cpio -id --quiet ./usr/share/licenses/nodevol-node/LICENSE)
cmp -s "$t/usr/share/licenses/nodevol-node/LICENSE" "$src/LICENSE" || fail "the rpm's LICENSE differs from the tree's"
echo "ok: rpm License: Apache-2.0, %license LICENSE"

# --- image: the config's label, and the files in its one layer.
mkdir "$t/oci"
tar -xf "${images[0]}" -C "$t/oci"
blob() { echo "$t/oci/blobs/sha256/${1#sha256:}"; }
manifest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$t/oci/index.json")
read -r config layers < <(python3 -c 'import json,sys
m = json.load(open(sys.argv[1]))
print(m["config"]["digest"], " ".join(l["digest"] for l in m["layers"]))' "$(blob "$manifest")")
[[ $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["config"]["Labels"].get("org.opencontainers.image.licenses", ""))' "$(blob "$config")") == Apache-2.0 ]] ||
  fail "the image's label org.opencontainers.image.licenses is not Apache-2.0"
mkdir "$t/rootfs"
for l in $layers; do tar -xzf "$(blob "$l")" -C "$t/rootfs"; done
for f in LICENSE NOTICE; do
  cmp -s "$t/rootfs/usr/share/doc/nodevol-provisioner/$f" "$src/$f" ||
    fail "the image's /usr/share/doc/nodevol-provisioner/$f is missing or differs from the tree's"
done
echo "ok: image label licenses=Apache-2.0, LICENSE and NOTICE in /usr/share/doc/nodevol-provisioner"
