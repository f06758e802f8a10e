# shellcheck shell=bash
# Shared by the scripts/build-*.sh scripts, which source it: they build binaries from a Go
# module into a bin directory, and only when what those binaries are built from changed.

# shellcheck source=scripts/lib/cpu.sh
source "$(dirname "${BASH_SOURCE[0]}")/cpu.sh"

# The script that sourced this file, by absolute path: it is part of every stamp.
build_script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"

# lock_bin_dir DIR [NAME] creates DIR and takes its build lock (file descriptor 9, held until
# the script exits or closes it): one build at a time, and a second run waits for the first,
# then finds the binaries up to date. NAME tells apart locks of builds that share a DIR.
lock_bin_dir() {
  local dir="$1" name="${2:-build}"
  mkdir -p "${dir}"
  exec 9>"${dir}/.${name}.lock"
  if ! flock -n 9; then
    log "waiting for another build into ${dir}..."
    flock 9
  fi
}

# build_stamp MOD_DIR EXTRA [GO_LIST_FLAG...] PACKAGE... prints what the packages are built
# from: the version of every module they link, the building script and this file, EXTRA (such
# as the flags of the build) and the toolchain. A binary whose recorded stamp differs is
# rebuilt. Where a module directory lives is not part of it: every path under e2e/ in the
# scripts is cut to e2e/ first, so moving a module (its go.mod and go.sum unchanged) rebuilds
# nothing.
build_stamp() {
  local mod_dir="$1" extra="$2"
  shift 2
  echo "$(
    {
      go -C "${mod_dir}" list -deps \
        -f '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}' \
        "$@" | sort -u
      sed -E 's#e2e/[^[:space:]",)]*#e2e/#g' "${build_script}" "${BASH_SOURCE[0]}"
      echo "${extra}"
    } | sha256sum | cut -d' ' -f1
  ) $(go env GOVERSION)"
}

# The Go compiler flags of what only the tests and the demo run, never shipped nor measured:
# Karpenter, Helm, Prometheus and promtool, actionlint, and the version matrix's control
# planes. They are compiled as a debugger's build is, without optimisation or inlining: the same
# source and the same behaviour, about a quarter less compile time (on
# k8s.io/kubernetes/pkg/registry/..., 44 s to 33 s), which with empty Go caches on two cores is
# minutes of make test. nodeready itself, the control plane the benchmarks and every other test
# run, and what the real nodes run are built as released.
# shellcheck disable=SC2034 # used by the scripts that source this file
test_only_gcflags=(-gcflags "all=-N -l")

# stamp_matches FILE STAMP tells whether FILE records STAMP.
stamp_matches() { [[ "$(cat "$1" 2>/dev/null || true)" == "$2" ]]; }

# build_started and build_done MESSAGE: the build's last line, MESSAGE and how long the build took
# and how much CPU its commands used since build_started (log is the sourcing script's).
build_started() {
  build_start=${SECONDS}
  build_cpu_start=0
  cpu_seconds build_cpu_start
}
build_done() {
  local cpu=0
  cpu_seconds cpu
  log "$1 in $((SECONDS - build_start))s, CPU $((cpu - build_cpu_start))s"
}
