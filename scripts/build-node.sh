#!/usr/bin/env bash
# Builds what the e2e tests' real node (e2e/framework/realnode) runs, beside the control plane:
#   - kubelet and kube-proxy from e2e/build/k8s (the control plane's module, so the same pinned
#     Kubernetes) into .cache/k8s/<version>/bin;
#   - containerd, containerd-shim-runc-v2 and ctr from e2e/build/containerd into
#     .cache/containerd/<version>/bin;
#   - CoreDNS from e2e/build/coredns into .cache/coredns/<version>/bin;
#   - flanneld from e2e/build/flannel into .cache/flannel/<version>/bin, with cgo (its udp
#     backend needs it), for a multi-node real cluster;
#   - with --kube-router only: kube-router from e2e/build/kube-router into
#     .cache/kube-router/<version>/bin, the NetworkPolicy engine run beside flannel with only its
#     firewall on (--run-firewall=true --run-router=false --run-service-proxy=false), and the
#     Debian package ipset it runs; only what tests the networkpolicy check builds it;
# and installs what comes from Debian packages when it is missing: runc, the CNI plugins,
# iptables, conntrack and, for cgo, gcc and libc6-dev (apt-get update once, then apt-get
# install -y; needs root).
#
# Each module dir requires only the program it builds, so every dependency is at the version
# that program pins and nothing else can move it.
#
# Later runs return at once unless a module these binaries are built from, this script or the
# Go toolchain changed. Cold, the builds take several minutes on two cores.
#
# Usage: scripts/build-node.sh [-f] [--coredns | --kube-router]   (-f rebuilds even when up to date)
# Prints four lines on stdout: the Kubernetes, containerd, CoreDNS and flannel bin directories.
# With --coredns it builds CoreDNS alone, needs no root, and prints its bin directory: the
# scale benchmark runs it as the cluster DNS. With --kube-router it builds kube-router alone,
# installs ipset when it is missing (as root) and prints kube-router's bin directory.
set -euo pipefail

force=false
only_coredns=false
only_kube_router=false
for arg in "$@"; do
  case "${arg}" in
    -f | --force) force=true ;;
    --coredns) only_coredns=true ;;
    --kube-router) only_kube_router=true ;;
    *)
      echo "usage: $0 [-f] [--coredns | --kube-router]" >&2
      exit 2
      ;;
  esac
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "build-node: $*" >&2; }
# shellcheck source=scripts/lib/build.sh
source "${repo_root}/scripts/lib/build.sh"

install_packages() {
  local missing=()
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v gcc >/dev/null || missing+=(gcc)
  [[ -e /usr/include/stdlib.h ]] || missing+=(libc6-dev)
  ((${#missing[@]} == 0)) && return 0
  if [[ "$(id -u)" != 0 ]]; then
    log "missing Debian packages ${missing[*]}; install them as root"
    exit 1
  fi
  log "installing ${missing[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

# build [--cgo] MOD_DIR BIN_DIR STAMP_NAME LDFLAGS NAME=PACKAGE... builds the packages of a
# module into BIN_DIR when the stamp (every module they link, this script, the toolchain and,
# with --cgo, the C compiler) changed. Without --cgo they are built with CGO_ENABLED=0.
build() {
  local cgo=0
  if [[ "$1" == --cgo ]]; then
    cgo=1
    shift
  fi
  local mod_dir="$1" bin_dir="$2" stamp_name="$3" ldflags="$4"
  shift 4
  local pkgs=() names=()
  for c in "$@"; do
    names+=("${c%%=*}")
    pkgs+=("${c#*=}")
  done
  lock_bin_dir "${bin_dir}" "${stamp_name}"
  local stamp_file="${bin_dir}/.${stamp_name}-stamp" stamp
  local extra="${ldflags}"
  ((cgo == 0)) || extra+=" CGO_ENABLED=1 $(go env CC) $("$(go env CC)" --version | head -n1)"
  stamp="$(build_stamp "${mod_dir}" "${extra}" "${pkgs[@]}")"
  local up_to_date=true
  for n in "${names[@]}"; do [[ -x "${bin_dir}/${n}" ]] || up_to_date=false; done
  stamp_matches "${stamp_file}" "${stamp}" || up_to_date=false
  if [[ "${force}" == false && "${up_to_date}" == true ]]; then
    log "up to date: ${names[*]}"
    exec 9>&-
    return 0
  fi
  log "building ${names[*]} into ${bin_dir}"
  local work_dir
  build_started
  work_dir="$(mktemp -d "${bin_dir}/.build.XXXXXX")"
  (cd "${mod_dir}" && CGO_ENABLED="${cgo}" go build -trimpath -ldflags "${ldflags}" -o "${work_dir}/" "${pkgs[@]}")
  rm -f "${stamp_file}"
  for c in "$@"; do
    local name="${c%%=*}" built="${c#*=}"
    built="${built##*/}"
    mv -f "${work_dir}/${built}" "${bin_dir}/${name}"
  done
  rm -rf "${work_dir}"
  echo "${stamp}" >"${stamp_file}"
  build_done "built ${names[*]}"
  exec 9>&-
}

if [[ "${only_kube_router}" == true ]]; then
  if ! command -v ipset >/dev/null; then
    if [[ "$(id -u)" != 0 ]]; then
      log "missing Debian package ipset; install it as root"
      exit 1
    fi
    log "installing ipset"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ipset >&2
  fi
  kube_router_dir="${repo_root}/e2e/build/kube-router"
  kube_router_version="$(go -C "${kube_router_dir}" list -m -f '{{.Version}}' github.com/cloudnativelabs/kube-router/v2)"
  kube_router_bin="${repo_root}/.cache/kube-router/${kube_router_version}/bin"
  build "${kube_router_dir}" "${kube_router_bin}" build \
    "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${kube_router_version}" \
    "kube-router=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
  echo "${kube_router_bin}"
  exit 0
fi

coredns_dir="${repo_root}/e2e/build/coredns"
coredns_version="$(go -C "${coredns_dir}" list -m -f '{{.Version}}' github.com/coredns/coredns)"
coredns_bin="${repo_root}/.cache/coredns/${coredns_version}/bin"
build "${coredns_dir}" "${coredns_bin}" build "-s -w" "coredns=github.com/coredns/coredns"
if [[ "${only_coredns}" == true ]]; then
  echo "${coredns_bin}"
  exit 0
fi

install_packages

# Kubernetes: the same version flags as scripts/build-control-plane.sh.
k8s_dir="${repo_root}/e2e/build/k8s"
k8s_version="$(go -C "${k8s_dir}" list -m -f '{{.Version}}' k8s.io/kubernetes)"
major="${k8s_version#v}" && major="${major%%.*}"
minor="${k8s_version#v*.}" && minor="${minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor} -X ${pkg}.gitTreeState=clean"
done
k8s_bin="${NODEREADY_K8S_BIN:-${repo_root}/.cache/k8s/${k8s_version}/bin}"
build "${k8s_dir}" "${k8s_bin}" node-build "${k8s_ldflags}" \
  "kubelet=k8s.io/kubernetes/cmd/kubelet" \
  "kube-proxy=k8s.io/kubernetes/cmd/kube-proxy"

ctrd_dir="${repo_root}/e2e/build/containerd"
ctrd_version="$(go -C "${ctrd_dir}" list -m -f '{{.Version}}' github.com/containerd/containerd/v2)"
ctrd_bin="${repo_root}/.cache/containerd/${ctrd_version}/bin"
build "${ctrd_dir}" "${ctrd_bin}" build \
  "-s -w -X github.com/containerd/containerd/v2/version.Version=${ctrd_version}" \
  "containerd=github.com/containerd/containerd/v2/cmd/containerd" \
  "containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2" \
  "ctr=github.com/containerd/containerd/v2/cmd/ctr"


# flanneld: cgo for the udp backend, as flannel's own Makefile builds it on amd64 (not static).
flannel_dir="${repo_root}/e2e/build/flannel"
flannel_version="$(go -C "${flannel_dir}" list -m -f '{{.Version}}' github.com/flannel-io/flannel)"
flannel_bin="${repo_root}/.cache/flannel/${flannel_version}/bin"
build --cgo "${flannel_dir}" "${flannel_bin}" build \
  "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=${flannel_version}" \
  "flanneld=github.com/flannel-io/flannel"

echo "${k8s_bin}"
echo "${ctrd_bin}"
echo "${coredns_bin}"
echo "${flannel_bin}"
