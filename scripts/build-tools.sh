#!/usr/bin/env bash
# Builds the test-only tools that the checks in `make vet` and the e2e tests run (Helm,
# promtool, actionlint, ...) from the Go module proxy into .cache/tools/<name>/bin.
#
# Each tool set has its own module, e2e/build/tools/<name>, whose go.mod lists the commands as
# `tool` directives and requires nothing else: every dependency is at the version the tool pins,
# and no tool ever enters nodeready's own go.mod or the e2e module's. A module may name Go build
# tags in e2e/build/tools/<name>/build-tags (one line, comma-separated), used for every build
# and list of its tools.
#
# The first run compiles the tools; later runs return at once unless a module they are built
# from, this script or the Go toolchain changed.
#
# Usage: scripts/build-tools.sh [-f] NAME...   (-f rebuilds even when up to date)
# Prints each bin directory on stdout, one per line, in the order given.
set -euo pipefail

force=false
if [[ "${1:-}" == -f || "${1:-}" == --force ]]; then
  force=true
  shift
fi
if (($# == 0)); then
  echo "usage: $0 [-f] NAME...   (NAME: a directory of e2e/build/tools)" >&2
  exit 2
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { echo "build-tools: $*" >&2; }
# shellcheck source=scripts/lib/build.sh
source "${repo_root}/scripts/lib/build.sh"

build() {
  local name="$1"
  local mod_dir="${repo_root}/e2e/build/tools/${name}"
  if [[ ! -f "${mod_dir}/go.mod" ]]; then
    log "no module ${mod_dir}/go.mod"
    exit 2
  fi
  local bin_dir="${repo_root}/.cache/tools/${name}/bin"
  lock_bin_dir "${bin_dir}"

  local pkgs tags=()
  mapfile -t pkgs < <(go -C "${mod_dir}" list -f '{{.ImportPath}}' tool)
  if [[ -f "${mod_dir}/build-tags" ]]; then
    tags=(-tags "$(tr -d ' \n' <"${mod_dir}/build-tags")")
  fi

  local stamp_file="${bin_dir}/.build-stamp" stamp
  stamp="$(build_stamp "${mod_dir}" "${tags[*]} ${test_only_gcflags[*]}" "${tags[@]}" "${pkgs[@]}")"

  local up_to_date=true p
  for p in "${pkgs[@]}"; do
    [[ -x "${bin_dir}/${p##*/}" ]] || up_to_date=false
  done
  if [[ "${force}" == false && "${up_to_date}" == true ]] && stamp_matches "${stamp_file}" "${stamp}"; then
    log "${name}: up to date"
    echo "${bin_dir}"
    exec 9>&-
    return
  fi

  log "${name}: building ${pkgs[*]##*/} into ${bin_dir}"
  # Build into a scratch directory and move into place, so an interrupted build never leaves
  # a half-written binary and tests running meanwhile keep the previous one.
  local work_dir
  build_started
  work_dir="$(mktemp -d "${bin_dir}/.build.XXXXXX")"
  (cd "${mod_dir}" && CGO_ENABLED=0 go build "${tags[@]}" -trimpath "${test_only_gcflags[@]}" -ldflags "-s -w" -o "${work_dir}/" "${pkgs[@]}")
  rm -f "${stamp_file}"
  for p in "${pkgs[@]}"; do
    mv -f "${work_dir}/${p##*/}" "${bin_dir}/${p##*/}"
  done
  rm -rf "${work_dir}"
  echo "${stamp}" >"${stamp_file}"
  build_done "${name}: built"
  echo "${bin_dir}"
  exec 9>&-
}

for name in "$@"; do
  build "${name}"
done
