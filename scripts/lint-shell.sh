#!/usr/bin/env bash
# Lints the project's shell: scripts/, examples/, .ci/run, and .github/workflows with
# actionlint (built from e2e/build/tools/actionlint by build-tools.sh), which checks every `run:`
# step with shellcheck too. Where shellcheck is missing it is installed from Debian when this
# runs as root with apt-get (as CI does, a few seconds); elsewhere the workflows are linted
# without it, the scripts are not, and the script says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin_dir="$(scripts/build-tools.sh actionlint)"

if ! command -v shellcheck >/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
  echo "lint-shell: installing shellcheck from Debian" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >&2
fi
shellcheck_flag=()
if command -v shellcheck >/dev/null; then
  shellcheck -x scripts/*.sh scripts/lib/*.sh examples/*.sh .ci/run
else
  echo "lint-shell: no shellcheck here, so scripts/, examples/, .ci/run and the workflows' run: steps are not checked by it" >&2
  shellcheck_flag=(-shellcheck=)
fi

"${bin_dir}/actionlint" "${shellcheck_flag[@]}" -pyflakes= .github/workflows/*.yml
