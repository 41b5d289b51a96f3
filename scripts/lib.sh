# shellcheck shell=bash
# Shared helpers for scripts/*: sourced, not run.
#   section NAME CMD...   prints a header, runs CMD, records its time; on failure prints
#                         which section failed and the timings so far, then exits
#   timing_summary [TITLE] prints every section's time and the total

_sections=()
_section_seconds=()
_script_start=$SECONDS

_fmt_seconds() {
  local s=$1
  if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi
}

timing_summary() {
  local i title=${1:-timings}
  echo
  echo "== $title"
  for i in "${!_sections[@]}"; do
    printf '  %8s  %s\n' "$(_fmt_seconds "${_section_seconds[$i]}")" "${_sections[$i]}"
  done
  printf '  %8s  total\n' "$(_fmt_seconds $((SECONDS - _script_start)))"
}

section() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  echo
  echo "== $name"
  # A subshell outside any `||`/`if` context, so `set -e` still applies inside CMD
  # (a function run as `cmd || ...` would carry on past its failing commands).
  set +e
  (
    set -e
    "$@"
  )
  rc=$?
  set -e
  _sections+=("$name")
  _section_seconds+=($((SECONDS - start)))
  if ((rc != 0)); then
    echo
    echo "== FAILED: $name (exit $rc, after $(_fmt_seconds $((SECONDS - start))))"
    timing_summary "timings so far"
    exit "$rc"
  fi
  echo "-- $name: ok ($(_fmt_seconds $((SECONDS - start))))"
}

# Where cargo puts release binaries (honours CARGO_TARGET_DIR, relative to the repo root).
release_dir() {
  local root=$1
  local target=${CARGO_TARGET_DIR:-target}
  [[ "$target" == /* ]] || target="$root/$target"
  echo "$target/release"
}
