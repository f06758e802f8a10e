#!/usr/bin/env bash
# timed.sh NAME COMMAND [ARG...] runs COMMAND, then prints on stderr how long it took and how
# much CPU it used, its children's included, and passes on its exit status. make e2e runs each
# step of its lanes through it, and .ci/run each make target.
set -uo pipefail

# shellcheck source=scripts/lib/cpu.sh
source "$(dirname "$0")/lib/cpu.sh"

name="$1"
shift
SECONDS=0
"$@"
rc=$?
cpu=0
cpu_seconds cpu
echo "${name}: ${SECONDS} s, CPU ${cpu} s$( ((rc == 0)) || echo ", exit ${rc}")" >&2
exit "${rc}"
