#!/usr/bin/env bash
# The shell steps of devfix's GitHub Action (action.yml): `install`, `check`, `finish`.
#
# Inputs come as environment variables (action.yml sets them from the action's inputs):
#   DEVFIX_PATHS          files or folders to check, separated by spaces (default: .)
#   DEVFIX_SELECT         rules for --select (codes, prefixes or names, comma-separated)
#   DEVFIX_UNSAFE_FIXES   true: count unsafe fixes as fixable (--unsafe-fixes)
#   DEVFIX_CHANGED_SINCE  a git ref: only files changed since it (a pull request's base)
#   DEVFIX_FORMAT         sarif (a file for code scanning) or github (annotations)
#   DEVFIX_SARIF_FILE     where the SARIF log goes (default: devfix.sarif)
#   DEVFIX_EXIT_CODE      for `finish`: the exit code `check` wrote to its outputs
#   DEVFIX_FAIL_ON_FINDINGS  for `finish`: true fails the job when findings remain
# `check` writes `exit-code` and `sarif-file` to $GITHUB_OUTPUT and always succeeds, so the
# SARIF upload runs; `finish` then fails the job as `devfix check` would.
set -euo pipefail

say() { printf 'devfix-action: %s\n' "$*" >&2; }

output() {
    if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
        printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
    fi
}

is_true() {
    case "$1" in
    true | True | TRUE) return 0 ;;
    *) return 1 ;;
    esac
}

install() {
    python -m pip install --disable-pip-version-check "${GITHUB_ACTION_PATH:-.}"
}

# A shallow checkout (actions/checkout's default) lacks the pull request's base commit.
ensure_ref() {
    local ref="$1"
    if git rev-parse --verify --quiet "${ref}^{commit}" >/dev/null; then
        return 0
    fi
    say "fetching ${ref} (not in this checkout)"
    git fetch --no-tags --quiet --depth=1 origin "$ref" ||
        say "could not fetch ${ref}; use actions/checkout with fetch-depth: 0"
}

check() {
    local format="${DEVFIX_FORMAT:-sarif}"
    local sarif="${DEVFIX_SARIF_FILE:-devfix.sarif}"
    local -a args=(check --format "$format")
    if [[ "$format" != "sarif" && "$format" != "github" ]]; then
        say "format must be sarif or github, not ${format}"
        output exit-code 2
        return 0
    fi
    if [[ -n "${DEVFIX_SELECT:-}" ]]; then
        args+=(--select "$DEVFIX_SELECT")
    fi
    if is_true "${DEVFIX_UNSAFE_FIXES:-false}"; then
        args+=(--unsafe-fixes)
    fi
    if [[ -n "${DEVFIX_CHANGED_SINCE:-}" ]]; then
        ensure_ref "$DEVFIX_CHANGED_SINCE"
        args+=(--changed-since "$DEVFIX_CHANGED_SINCE")
    fi
    local -a paths
    read -r -a paths <<<"${DEVFIX_PATHS:-.}"
    args+=("${paths[@]}")
    say "devfix ${args[*]}"
    local code=0
    if [[ "$format" == "sarif" ]]; then
        mkdir -p "$(dirname "$sarif")"
        devfix "${args[@]}" >"$sarif" || code=$?
        if [[ ! -s "$sarif" ]]; then
            # nothing was checked (no file changed): a log without results, for the upload
            python -c 'from devfix.formats import sarif_log; print(sarif_log([]))' >"$sarif"
        fi
        output sarif-file "$sarif"
    else
        devfix "${args[@]}" || code=$?
    fi
    output exit-code "$code"
    say "devfix check exited with ${code}"
}

finish() {
    local code="${DEVFIX_EXIT_CODE:-2}"
    if [[ "$code" == "0" ]]; then
        return 0
    fi
    if [[ "$code" == "1" ]] && ! is_true "${DEVFIX_FAIL_ON_FINDINGS:-true}"; then
        say "findings remain (not failing: fail-on-findings is false)"
        return 0
    fi
    if [[ "$code" == "1" ]]; then
        say "findings remain"
    else
        say "devfix check failed (exit code ${code})"
    fi
    return "$code"
}

case "${1:-}" in
install) install ;;
check) check ;;
finish) finish ;;
*)
    say "usage: $0 install|check|finish"
    exit 2
    ;;
esac
