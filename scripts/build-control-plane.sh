#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the
# Kubernetes sources on the Go module proxy into .cache/k8s/<version>/bin. The e2e tests, the
# demo and the benchmarks run these binaries.
#
# They are built from a module that requires only Kubernetes, e2e/build/k8s by default, so every
# dependency is at the version Kubernetes itself pins: nothing nodeready or the e2e tests
# require can raise it. Other such modules (e2e/build/k8s-1.32, the oldest minor the README
# supports, and e2e/build/k8s-1.37, the newest) build other releases the same way, each into
# its own directory. A module builds the components its go.mod names as tools; e2e/build/k8s-1.37
# names only kube-apiserver, and the others are linked from e2e/build/k8s's build.
#
# The first run compiles Kubernetes and takes several minutes; later runs return at once
# unless a module these binaries are built from, this script or the Go toolchain changed.
#
# Usage: scripts/build-control-plane.sh [-f] [MODULE]
#   -f      rebuilds even when up to date
#   MODULE  the module directory to build from, relative to the repository root (e2e/build/k8s)
# Prints the bin directory on stdout. NODEREADY_K8S_BIN overrides where the binaries go.
set -euo pipefail

usage() {
  echo "usage: $0 [-f] [MODULE]   (MODULE: e2e/build/k8s, the default, e2e/build/k8s-1.32 or e2e/build/k8s-1.37)" >&2
  exit 2
}

force=false
module=e2e/build/k8s
while (($# > 0)); do
  case "$1" in
    -f | --force) force=true ;;
    -*) usage ;;
    *) module="$1" ;;
  esac
  shift
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
k8s_dir="${repo_root}/${module}"
if [[ ! -f "${k8s_dir}/go.mod" ]]; then
  echo "$0: ${module}: no go.mod there; MODULE is a directory like e2e/build/k8s" >&2
  usage
fi

log() { echo "build-control-plane: $*" >&2; }
# shellcheck source=scripts/lib/build.sh
source "${repo_root}/scripts/lib/build.sh"

module_version() { go -C "${k8s_dir}" list -m -f '{{.Version}}' "$1"; }

k8s_version="$(module_version k8s.io/kubernetes)"
etcd_version="$(module_version go.etcd.io/etcd/server/v3)"
bin_dir="${NODEREADY_K8S_BIN:-${repo_root}/.cache/k8s/${k8s_version}/bin}"

# name=package; etcd is renamed because go build would call it "server".
all_components=(
  "etcd=go.etcd.io/etcd/server/v3"
  "kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager"
  "kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler"
  "kubectl=k8s.io/kubernetes/cmd/kubectl"
)

# The module's tool directives name what it builds. A component it does not build comes from
# e2e/build/k8s, the current release: e2e/build/k8s-1.37 builds only the newest API server, and
# the current release's etcd, controller manager, scheduler and kubectl run with it, one minor
# older, the skew of a control plane being upgraded that Kubernetes supports. Those are linked
# into this bin directory, so every release's directory holds all five.
mapfile -t tools < <(go -C "${k8s_dir}" list -f '{{.ImportPath}}' tool)
components=()
borrowed=()
for c in "${all_components[@]}"; do
  if printf '%s\n' "${tools[@]}" | grep -qxF "${c#*=}"; then
    components+=("${c}")
  else
    borrowed+=("${c%%=*}")
  fi
done
if ((${#components[@]} == 0)); then
  echo "$0: ${module}: its go.mod names none of ${all_components[*]%%=*} as a tool" >&2
  exit 2
fi
if ((${#borrowed[@]} > 0)); then
  if [[ "${module}" == e2e/build/k8s ]]; then
    echo "$0: ${module} must build all of ${all_components[*]%%=*}; it lacks ${borrowed[*]}" >&2
    exit 2
  fi
  current_bin="$(NODEREADY_K8S_BIN='' "$0" e2e/build/k8s)"
fi

lock_bin_dir "${bin_dir}"
for name in "${borrowed[@]}"; do
  ln -sfn "${current_bin}/${name}" "${bin_dir}/${name}"
done

# Any change to what the binaries are built from rebuilds them all.
all_pkgs=()
for c in "${components[@]}"; do all_pkgs+=("${c#*=}"); done
stamp_file="${bin_dir}/.build-stamp"
# The version matrix's releases (every module but e2e/build/k8s) serve only its functional tests,
# which ask what their API server accepts, serves and refuses, never how fast: they are built with
# test_only_gcflags. e2e/build/k8s, which the demo, the benchmarks, the real nodes and every
# other test run, is built as Kubernetes releases it.
gcflags=()
if [[ "${module}" != e2e/build/k8s ]]; then
  gcflags=("${test_only_gcflags[@]}")
fi
stamp="$(build_stamp "${k8s_dir}" "${gcflags[*]}" "${all_pkgs[@]}")"

missing=()
for c in "${components[@]}"; do
  name="${c%%=*}"
  if [[ "${force}" == true || ! -x "${bin_dir}/${name}" ]] || ! stamp_matches "${stamp_file}" "${stamp}"; then
    missing+=("${c}")
  fi
done

if ((${#missing[@]} == 0)); then
  log "up to date (${k8s_version}, etcd ${etcd_version})"
  echo "${bin_dir}"
  exit 0
fi

names=()
pkgs=()
for c in "${missing[@]}"; do
  names+=("${c%%=*}")
  pkgs+=("${c#*=}")
done
log "Building ${names[*]} (Kubernetes ${k8s_version}, etcd ${etcd_version}) into ${bin_dir}"
log "First run only: this compiles Kubernetes from source and takes several minutes..."

# The same flags as Kubernetes' hack/lib/version.sh, so `kubectl version` and /version report
# the real release. A -X for a package a binary does not link is ignored.
major="${k8s_version#v}"
major="${major%%.*}"
minor="${k8s_version#v*.}"
minor="${minor%%.*}"
build_date="$(date -u ${SOURCE_DATE_EPOCH:+--date=@${SOURCE_DATE_EPOCH}} +%Y-%m-%dT%H:%M:%SZ)"
ldflags=(-s -w)
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=(
    -X "${pkg}.gitVersion=${k8s_version}"
    -X "${pkg}.gitMajor=${major}"
    -X "${pkg}.gitMinor=${minor}"
    -X "${pkg}.gitTreeState=clean"
    -X "${pkg}.buildDate=${build_date}"
  )
done

# Build into a scratch directory and move the binaries into place only once all of them are
# built, so an interrupted or failed build never leaves a half-written binary, and tests
# running meanwhile keep using the previous ones.
work_dir="$(mktemp -d "${bin_dir}/.build.XXXXXX")"
trap 'rm -rf "${work_dir}"' EXIT

build_started
# One go build for all packages: it shares the compile of common packages and runs
# GOMAXPROCS actions at a time, which on a small machine beats separate parallel builds.
# -v names each package as it is compiled; a line every tenth of them says how far the build
# is (the demo shows it). Packages already in the Go build cache are not named, so a build
# that finds some there ends before the count does.
total="$(cd "${k8s_dir}" && go list -deps "${pkgs[@]}" | wc -l)"
(
  cd "${k8s_dir}"
  CGO_ENABLED=0 go build -v -trimpath "${gcflags[@]}" -ldflags "${ldflags[*]}" -o "${work_dir}/" "${pkgs[@]}" 2>&1
) | {
  n=0
  step=$(((total + 9) / 10))
  while IFS= read -r line; do
    if [[ "${line}" =~ ^[A-Za-z0-9._~/-]+$ ]]; then
      n=$((n + 1))
      if ((n % step == 0)); then
        log "compiled ${n} of ${total} packages ($((SECONDS - build_start))s)"
      fi
    else
      echo "${line}" >&2 # the compiler's errors
    fi
  done
}
rm -f "${stamp_file}"
for c in "${missing[@]}"; do
  name="${c%%=*}"
  pkg="${c#*=}"
  built="${pkg##*/}"
  [[ "${built}" =~ ^v[0-9]+$ ]] && built="$(basename "$(dirname "${pkg}")")"
  mv -f "${work_dir}/${built}" "${bin_dir}/${name}"
done
echo "${stamp}" >"${stamp_file}"

build_done "built ${names[*]}"
echo "${bin_dir}"
