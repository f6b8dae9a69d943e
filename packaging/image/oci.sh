# OCI image-layout archives from a root filesystem directory, with tar and
# sha256sum only: no Docker engine, no registry (sourced; bash).
#
#   oci_archive ROOTFS NAME CONFIG_JSON OUT_TAR
#
# ROOTFS becomes the image's single layer; CONFIG_JSON is the image
# config's "config" object (Entrypoint, User, Env, Labels...), NAME the full
# reference (registry/repo:tag), written to the index as
# io.containerd.image.name (what `ctr images import` names the image) and
# its tag as org.opencontainers.image.ref.name. OUT_TAR is written whole or
# not at all. Same inputs, same bytes: entries sorted, owner 0:0, every
# mtime OCI_EPOCH (default 0), gzip without name or time.
# Optional: OCI_EPOCH (seconds; also the config's "created"), OCI_GZIP=1
# (compressed layer), OCI_ARCH (default amd64), OCI_CREATED_BY (history).
# Used by packaging/image/build-oci and tests/k8s/make-images.

_oci_sha() { sha256sum "$1" | cut -d' ' -f1; }
_oci_size() { stat -c %s "$1"; }
_oci_tar() { # DIR OUT ENTRIES...: reproducible tar of ENTRIES below DIR
  local dir=$1 out=$2; shift 2
  tar -C "$dir" --format=gnu --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@${OCI_EPOCH:-0}" -cf "$out" "$@"
}

oci_archive() {
  local rootfs=$1 name=$2 config=$3 out=$4
  local epoch=${OCI_EPOCH:-0} arch=${OCI_ARCH:-amd64} work
  work=$(mktemp -d)
  local lay=$work/layout
  mkdir -p "$lay/blobs/sha256"
  _oci_tar "$rootfs" "$work/layer.tar" . || { rm -rf "$work"; return 1; }
  local diff_id layer_type=application/vnd.oci.image.layer.v1.tar
  diff_id=$(_oci_sha "$work/layer.tar")
  if [[ ${OCI_GZIP:-0} == 1 ]]; then
    gzip -n -9 "$work/layer.tar" || { rm -rf "$work"; return 1; }
    mv "$work/layer.tar.gz" "$work/layer.tar"
    layer_type+=+gzip
  fi
  local ld ls cd cs md ms
  ld=$(_oci_sha "$work/layer.tar"); ls=$(_oci_size "$work/layer.tar")
  mv "$work/layer.tar" "$lay/blobs/sha256/$ld"

  local created history=
  if [[ -n ${OCI_EPOCH:-} ]]; then
    created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
    history=$(printf ',"created":"%s","history":[{"created":"%s","created_by":"%s"}]' \
      "$created" "$created" "${OCI_CREATED_BY:-oci_archive}")
  fi
  printf '{"architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}%s}' \
    "$arch" "$config" "$diff_id" "$history" >"$work/config.json"
  cd=$(_oci_sha "$work/config.json"); cs=$(_oci_size "$work/config.json")
  mv "$work/config.json" "$lay/blobs/sha256/$cd"

  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"%s","digest":"sha256:%s","size":%s}]}' \
    "$cd" "$cs" "$layer_type" "$ld" "$ls" >"$work/manifest.json"
  md=$(_oci_sha "$work/manifest.json"); ms=$(_oci_size "$work/manifest.json")
  mv "$work/manifest.json" "$lay/blobs/sha256/$md"

  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "$ms" "$arch" "$name" "${name##*:}" >"$lay/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$lay/oci-layout"
  _oci_tar "$lay" "$out.new" oci-layout index.json blobs || { rm -rf "$work" "$out.new"; return 1; }
  mv "$out.new" "$out"
  rm -rf "$work"
  OCI_MANIFEST_DIGEST=sha256:$md
}
