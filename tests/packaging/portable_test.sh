#!/usr/bin/env bash
# The packages install on every target distribution (issue 24): each ELF
# file in the deb and the rpm needs only sonames, and of them only symbol
# versions, that every distribution of portable/distro-libs.txt defines;
# the deb's Depends are met in each Debian-family suite there (by version,
# or by a package's Provides, as libssl3t64's), its Recommends name
# packages that exist; the rpm's Requires and Recommends are all things
# RHEL 9 provides. Fails naming the file, the need and the distribution.
#
#   portable_test.sh TABLE DIST VERSION
set -euo pipefail
table=$(readlink -f "$1") dist=$(cd "$2" && pwd) version=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

deb=$(ls "$dist"/nodevol-node_"${version}"_*.deb 2>/dev/null | head -1) || true
rpm=$(ls "$dist"/nodevol-node-"${version%-*}"-*.rpm 2>/dev/null | head -1) || true
[[ -n $deb && -n $rpm ]] || { echo "FAIL: no deb or rpm of $version in $dist (scripts/package --out $dist deb rpm)" >&2; exit 1; }
mapfile -t suites < <(awk '$1 == "soname" { print $2 }' "$table" | sort -u)
((${#suites[@]} >= 5)) || { echo "FAIL: $table lists ${#suites[@]} distributions" >&2; exit 1; }

# have[SUITE/SONAME]: " NODE NODE ... " that SONAME defines there.
declare -A have
while read -r kind s so nodes; do
  [[ $kind == soname ]] && have[$s/$so]=" $nodes "
done <"$table"

# ---- 1. the ELF files of both packages
mkdir -p "$work/deb" "$work/rpm"
dpkg-deb -x "$deb" "$work/deb"
(cd "$work/rpm" && rpm2cpio "$rpm" | cpio -idm --quiet)
checked=0
for tree in deb rpm; do
  while IFS= read -r -d '' f; do
    head -c4 "$f" | grep -q $'\x7fELF' || continue
    checked=$((checked + 1))
    rel=$tree:${f#"$work/$tree"}
    mapfile -t needed < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    # "soname node" for every versioned symbol the file needs.
    mapfile -t needs < <(readelf -V --wide "$f" | awk '/^Version needs section/ { n = 1; next } /^Version (definition|symbols)/ { n = 0 }
      n && /File:/ { for (i = 1; i <= NF; i++) if ($i == "File:") file = $(i + 1) }
      n && /Name:/ { for (i = 1; i <= NF; i++) if ($i == "Name:") print file, $(i + 1) }')
    for so in "${needed[@]}"; do
      lack=()
      for s in "${suites[@]}"; do [[ -n ${have[$s/$so]:-} ]] || lack+=("$s"); done
      ((${#lack[@]} == 0)) || fail "$rel needs $so, outside the declared set: ${lack[*]} have no $so in $(basename "$table")"
    done
    for pair in "${needs[@]}"; do
      read -r so node <<<"$pair"
      lack=()
      for s in "${suites[@]}"; do
        [[ -z ${have[$s/$so]:-} || ${have[$s/$so]} == *" $node "* ]] ||
          lack+=("$s (newest: $(tr ' ' '\n' <<<"${have[$s/$so]}" | grep '[0-9]' | sort -V | tail -1))")
      done
      ((${#lack[@]} == 0)) || fail "$rel needs $so $node, which these do not define: ${lack[*]}"
    done
  done < <(find "$work/$tree" -type f -print0)
done
((checked >= 6)) || fail "only $checked ELF files in the deb and the rpm (nodevold, nodevolctl, nodevol-flex in each)"

# ---- 2. the deb's metadata, in every Debian-family suite
# satisfied SUITE "name (op version)": a package of that name, or one that
# Provides it, at a version that meets the relation.
relation() { sed 's/>=/ge/; s/<=/le/; s/>>/gt/; s/<</lt/; s/^=$/eq/' <<<"$1"; }
satisfied() {
  local s=$1 dep=$2 name op want rel real prov p pv
  name=$(sed 's/[ (].*//; s/:any$//' <<<"$dep")
  op=$(sed -n 's/.*(\([<>=]*\) *\([^)]*\)).*/\1/p' <<<"$dep")
  want=$(sed -n 's/.*(\([<>=]*\) *\([^)]*\)).*/\2/p' <<<"$dep")
  rel=$(relation "$op")
  while read -r _ _ _ real prov; do
    if [[ ${real%%=*} == "$name" ]]; then
      [[ -z $op ]] || dpkg --compare-versions "${real#*=}" "$rel" "$want" || continue
      return 0
    fi
    for p in ${prov//,/ }; do
      [[ ${p%%(*} == "$name" ]] || continue
      [[ -z $op ]] && return 0
      [[ $p == *"(="* ]] || continue # an unversioned Provides meets no versioned dependency
      pv=${p#*(=} pv=${pv%)}
      dpkg --compare-versions "$pv" "$rel" "$want" && return 0
    done
  done < <(awk -v s="$s" '$1 == "package" && $2 == s && $4 != "-"' "$table")
  return 1
}
debian_suites=()
for s in "${suites[@]}"; do [[ $s == debian-* || $s == ubuntu-* ]] && debian_suites+=("$s"); done
((${#debian_suites[@]} >= 4)) || fail "$table has ${#debian_suites[@]} Debian-family suites, expected 4"
depends=$(dpkg-deb -f "$deb" Depends) recommends=$(dpkg-deb -f "$deb" Recommends)
[[ -n $depends ]] || fail "the deb has no Depends"
for s in "${debian_suites[@]}"; do
  IFS=',' read -ra clauses <<<"$depends"
  for clause in "${clauses[@]}"; do
    ok=0
    IFS='|' read -ra alts <<<"$clause"
    for a in "${alts[@]}"; do
      a=$(sed 's/^ *//; s/ *$//' <<<"$a")
      satisfied "$s" "$a" && { ok=1; break; }
    done
    ((ok)) || fail "the deb Depends on '$(sed 's/^ *//' <<<"$clause")', which $s does not have (portable/distro-libs: run it again if the package is new to the table)"
  done
  IFS=',' read -ra clauses <<<"$recommends"
  for clause in "${clauses[@]}"; do
    a=$(sed 's/^ *//; s/ *(.*//; s/|.*//' <<<"$clause")
    [[ -z $a ]] || satisfied "$s" "$a" || fail "the deb Recommends '$a', which $s does not have"
  done
done

# ---- 3. the rpm's metadata, against RHEL 9
while read -r req; do
  [[ -n $req ]] || continue
  case $req in
    rpmlib\(* | rtld\(GNU_HASH\) | config\(nodevol-node\)*) continue ;; # rpm's own features, the package's own
    *.so*\(*\)\(64bit\))
      so=${req%%(*} node=${req#*(}; node=${node%%)*}
      [[ -n ${have[rhel-9/$so]:-} ]] || { fail "the rpm requires $req: RHEL 9 has no $so in $table"; continue; }
      [[ -z $node || ${have[rhel-9/$so]} == *" $node "* ]] || fail "the rpm requires $req: RHEL 9's $so does not define $node" ;;
    *)
      name=${req%% *}
      awk -v n="$name" '$1 == "package" && $2 == "rhel-9" && $3 == n { f = 1 } END { exit !f }' "$table" ||
        fail "the rpm requires or recommends '$req', which is not a RHEL 9 package in $table" ;;
  esac
done < <(rpm -qp --requires "$rpm" 2>/dev/null; rpm -qp --recommends "$rpm" 2>/dev/null)

((fails == 0)) || { echo "portable_test: $fails failures (deb $(basename "$deb"), rpm $(basename "$rpm"))" >&2; exit 1; }
echo "portable_test: $checked ELF files need only what ${#suites[@]} distributions define (${suites[*]}); the deb's Depends met in ${#debian_suites[@]} suites, the rpm's Requires in RHEL 9"
