#!/usr/bin/env bash
# The style gate: formatting and lints of the Rust code and of every driver's, receiver's and
# client's language, with the toolchain's own linter where it has one. Every check runs; the
# gate fails at the end with each failing check's output. `./test.sh` runs it first.
# Usage: tests/lint.sh [--without-clippy]
set -uo pipefail
cd "$(dirname "$0")/.."

failed=()
# The checks that took 5 s or more, with their time (said at the end: where the gate's time goes).
slow=()
took() {
    local seconds=$((SECONDS - $2))
    if [ "$seconds" -ge 5 ]; then slow+=("$1 ${seconds} s"); fi
}
# check NAME COMMAND...: the command must succeed.
check() {
    local name=$1 output start=$SECONDS
    shift
    if ! output=$("$@" 2>&1); then
        printf 'lint: %s\n%s\n' "$name" "$output" >&2
        failed+=("$name")
    fi
    took "$name" "$start"
}
# check_silent NAME COMMAND...: for the tools that name offenders and still succeed (gofmt -l).
check_silent() {
    local name=$1 output start=$SECONDS
    shift
    output=$("$@" 2>&1)
    if [ $? -ne 0 ] || [ -n "$output" ]; then
        printf 'lint: %s\n%s\n' "$name" "$output" >&2
        failed+=("$name")
    fi
    took "$name" "$start"
}
# The files git tracks, so that builds and caches are never linted.
tracked() { git ls-files -- "$@"; }

# Rust: the workspace, and the two crates built on demand outside it (each has its own lock file):
# rustfmt, then clippy as tests/clippy.sh runs it, while building them (test.sh runs that as its
# own part, the suite's build, and passes --without-clippy here).
check "cargo fmt" cargo fmt --all --check
for manifest in receivers/wasm-thread/host/Cargo.toml receivers/wasm-thread/guest/Cargo.toml; do
    check "cargo fmt ($manifest)" cargo fmt --manifest-path "$manifest" --check
done
if [ "${1:-}" != --without-clippy ]; then
    check "clippy (tests/clippy.sh)" tests/clippy.sh
fi

# Go: every module, for the platforms it is built for.
mapfile -t go_files < <(tracked '*.go')
check_silent "gofmt -l" gofmt -l "${go_files[@]}"
for module in $(tracked '*go.mod'); do
    dir=$(dirname "$module")
    check "go vet ($dir)" bash -c "cd '$dir' && go vet ./..."
done
check "go vet (receivers/go, wasip1)" bash -c "cd receivers/go && GOOS=wasip1 GOARCH=wasm go vet ./..."

# Python: pyflakes (unused names, undefined names, shadowed imports).
mapfile -t py_files < <(tracked '*.py')
check "pyflakes" python3 -m pyflakes "${py_files[@]}"

# JavaScript: node's own syntax check.
for file in $(tracked '*.js' '*.mjs'); do
    check "node --check $file" node --check "$file"
done

# Java: every warning javac knows, as an error, with the newest JDK here, against JDK 17's API
# (--release 17): the driver runs on 17 too (java-thread@17) and finds virtual threads at run time.
javac="" newest=0
for candidate in /usr/lib/jvm/*/bin/javac $(command -v javac); do
    major=$("$candidate" -version 2>&1 | sed -n 's/^javac \([0-9]*\).*/\1/p')
    if [ "${major:-0}" -gt "$newest" ]; then javac=$candidate newest=$major; fi
done
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
if [ "$newest" -ge 21 ]; then
    mapfile -t java_files < <(tracked '*.java')
    check "javac --release 17 -Xlint:all -Werror" "$javac" --release 17 -Xlint:all -Werror -d "$classes" "${java_files[@]}"
else
    printf 'lint: javac\nno JDK 21 or later found (newest: %s)\n' "${javac:-none}" >&2
    failed+=("javac")
fi

# C: the compiler's warnings, as errors, with the drivers' language standard.
for file in $(tracked '*.c'); do
    check "cc $file" cc -std=gnu11 -pthread -Wall -Wextra -Werror -fsyntax-only -Iclients/c "$file"
done

# Erlang: the BEAM driver and the record() client, every warning an error; the client's escripts'
# own check (`escript -s` prints warnings and still succeeds, so any output fails); the driver's
# launcher is POSIX sh (`sh -n`: it parses).
# The C++ driver includes the C driver's core header (shared source, built beside it).
for file in $(tracked '*.cpp'); do
    check "g++ $file" g++ -std=c++20 -pthread -Wall -Wextra -Werror -fsyntax-only -Idrivers/c "$file"
done

for file in $(tracked 'drivers/erlang/*.erl' 'clients/erlang/*.erl'); do
    check "erlc $file" erlc +warnings_as_errors -o "$classes" "$file"
done
for file in $(tracked 'drivers/erlang/*.sh'); do
    check "sh -n $file" sh -n "$file"
done
for file in $(tracked 'clients/erlang/*.escript'); do
    check_silent "escript -s $file" escript -s "$file"
done
# Elixir: the record() client's Mix project, formatted as `mix format` formats it.
check "mix format (clients/elixir)" bash -c "cd clients/elixir && mix format --check-formatted"

if [ ${#slow[@]} -gt 0 ]; then
    printf 'lint: %s in all; ' "$SECONDS s" >&2
    (IFS=,; printf 'of it: %s\n' "${slow[*]}" | sed 's/,/, /g' >&2)
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "lint: ${#failed[@]} check(s) failed: ${failed[*]}" >&2
    exit 1
fi
echo "lint: every check passed" >&2
