#!/usr/bin/env bash
# Builds Karpenter with its kwok cloud provider (sigs.k8s.io/karpenter/kwok) from the Go module
# proxy into .cache/karpenter/<version>/bin and copies its CRDs next to it, into
# .cache/karpenter/<version>/crds. TestKarpenter (e2e/suites/verify) and `make demo
# DEMO_FLAGS=-karpenter` run this binary against the local control plane.
#
# It is built from the module in e2e/build/karpenter, which requires only Karpenter, so every
# dependency is at the version Karpenter pins: neither nodeready, the e2e module nor the
# control plane can move it, and Karpenter never enters nodeready's own go.mod.
#
# The first run compiles Karpenter and takes a few minutes; later runs return at once unless a
# module the binary is built from, this script or the Go toolchain changed.
#
# Usage: scripts/build-karpenter.sh [-f]   (-f rebuilds even when up to date)
# Prints the version directory (holding bin/ and crds/) on stdout.
set -euo pipefail

force=false
case "${1:-}" in
  -f | --force) force=true ;;
  "") ;;
  *)
    echo "usage: $0 [-f]" >&2
    exit 2
    ;;
esac

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod_dir="${repo_root}/e2e/build/karpenter"
pkg="sigs.k8s.io/karpenter/kwok"

log() { echo "build-karpenter: $*" >&2; }
# shellcheck source=scripts/lib/build.sh
source "${repo_root}/scripts/lib/build.sh"

version="$(go -C "${mod_dir}" list -m -f '{{.Version}}' sigs.k8s.io/karpenter)"
out_dir="${repo_root}/.cache/karpenter/${version}"
bin_dir="${out_dir}/bin"
crd_dir="${out_dir}/crds"

lock_bin_dir "${bin_dir}"
stamp_file="${bin_dir}/.build-stamp"
stamp="$(build_stamp "${mod_dir}" "${test_only_gcflags[*]}" "${pkg}")"
if [[ "${force}" == false && -x "${bin_dir}/karpenter" && -d "${crd_dir}" ]] && stamp_matches "${stamp_file}" "${stamp}"; then
  log "up to date (Karpenter ${version})"
  echo "${out_dir}"
  exit 0
fi

log "Building Karpenter ${version} (kwok provider) into ${bin_dir}"
log "First run only: this compiles Karpenter from source and takes a few minutes..."

# Build and copy into a scratch directory, then move into place, so an interrupted build never
# leaves a half-written binary and tests running meanwhile keep the previous one.
work_dir="$(mktemp -d "${bin_dir}/.build.XXXXXX")"
trap 'rm -rf "${work_dir}"' EXIT

build_started
(
  cd "${mod_dir}"
  CGO_ENABLED=0 go build -trimpath "${test_only_gcflags[@]}" -ldflags "-s -w" -o "${work_dir}/karpenter" "${pkg}"
)
# The CRDs ship in the module: Karpenter's own (NodePool, NodeClaim, NodeOverlay) and the kwok
# provider's KWOKNodeClass.
src="$(go -C "${mod_dir}" list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)"
mkdir -p "${work_dir}/crds"
cp "${src}"/pkg/apis/crds/*.yaml "${src}"/kwok/apis/crds/*.yaml "${work_dir}/crds/"
chmod u+w "${work_dir}"/crds/*.yaml

rm -f "${stamp_file}"
mv -f "${work_dir}/karpenter" "${bin_dir}/karpenter"
rm -rf "${crd_dir}"
mv "${work_dir}/crds" "${crd_dir}"
echo "${stamp}" >"${stamp_file}"

build_done "built Karpenter ${version}"
echo "${out_dir}"
