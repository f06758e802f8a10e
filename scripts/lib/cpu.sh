# shellcheck shell=bash
# Sourced by the build scripts and scripts/timed.sh: a fresh `make test` is bound by the CPU
# (two cores, compiling and testing at once), so each build and each e2e step says how much CPU
# it took as well as how long, and a run's log shows where the machine's time went.

# cpu_seconds VAR sets VAR to the CPU time (user and system, whole seconds) of every process this
# shell has started and waited for so far, their own children included: bash's times, called in
# this shell, as a $(...) subshell would count only its own.
cpu_seconds() {
  local file
  file="$(mktemp)"
  times >"${file}"
  # The second line is the children's: user and system, such as 12m3.456s 1m2.345s.
  printf -v "$1" '%s' "$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, t, "m"); s += t[1] * 60 + t[2] } printf "%d", s }' "${file}")"
  rm -f "${file}"
}
