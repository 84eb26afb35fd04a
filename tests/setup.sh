#!/usr/bin/env bash
# Installs what the test suite needs and this machine lacks, quietly and only when missing, so
# that `./test.sh` is all a fresh machine needs. Each step checks first; a second run does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Runs a command quietly; on failure shows what it printed.
quietly() { "$@" >"$log" 2>&1 || { cat "$log" >&2; say "failed: $*"; exit 1; }; }

# Debian packages: compilers and tools the drivers, clients and tests call.
need_apt=()
command -v cc >/dev/null || need_apt+=(gcc libc6-dev)
command -v make >/dev/null || need_apt+=(make)                 # the C record() client's programs
command -v pkg-config >/dev/null || need_apt+=(pkg-config)     # finds the C client as `make install` installs it
command -v g++ >/dev/null || need_apt+=(g++)                   # the C++ driver (cpp-asio, cpp-asio-pool)
[ -e /usr/include/asio.hpp ] || need_apt+=(libasio-dev)        # its standalone Asio headers
command -v python3 >/dev/null || need_apt+=(python3 python3-pip)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)  # a venv to pip install the Python client into
command -v chromium >/dev/null || need_apt+=(chromium)         # report.html in a real browser
ls /usr/share/fonts/truetype/*/*Sans*.ttf >/dev/null 2>&1 || need_apt+=(fonts-dejavu-core)  # text of the PNG figures
command -v prlimit >/dev/null || need_apt+=(util-linux)        # a thread limit for the partial-start test
# PostgreSQL for the shared history's tests, which make a throw-away cluster of their own.
command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need_apt+=(postgresql)
# A one-node Slurm cluster for examples/slurm's test, which starts its own daemons.
[ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && command -v sbatch >/dev/null || need_apt+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need_apt+=(munge)
# The drivers' toolchains come with this machine kind (Go 1.26, Node 20, Temurin JDK 25);
# Debian's packages stand in when one is missing (Debian has no JDK 21+: java-* would be skipped).
command -v go >/dev/null || need_apt+=(golang-go)
command -v node >/dev/null || need_apt+=(nodejs)
command -v npm >/dev/null || need_apt+=(npm)                   # Bun and Deno come from npm, below
# The BEAM from Debian (no Hex: the Erlang and Elixir code uses the standard libraries only).
command -v erl >/dev/null || need_apt+=(erlang-nox)
command -v mix >/dev/null || need_apt+=(elixir)                # the Elixir record() client
# JDK 17 beside the newest: the java-thread@17 rows of `run recipes` and their test.
compgen -G '/usr/lib/jvm/*17*/bin/javac' >/dev/null || need_apt+=(openjdk-17-jdk-headless)
# Maven builds the Kotlin driver (kotlin, kotlin-1); the compiler and kotlinx-coroutines come from
# Maven Central into ~/.m2 (below).
command -v mvn >/dev/null || need_apt+=(maven)
# Those installed without Debian's recommends. rebar3 builds the Erlang record() client as a
# dependency (tests/installs.rs); its recommends would bring the whole `erlang` (wx, WebKit,
# GStreamer: 650 MiB instead of 270).
need_apt_bare=()
command -v rebar3 >/dev/null || need_apt_bare+=(rebar3)
if [ ${#need_apt[@]} -gt 0 ] || [ ${#need_apt_bare[@]} -gt 0 ]; then
    how=()
    if [ ${#need_apt[@]} -gt 0 ]; then how+=("apt-get install ${need_apt[*]}"); fi
    if [ ${#need_apt_bare[@]} -gt 0 ]; then how+=("apt-get install --no-install-recommends ${need_apt_bare[*]}"); fi
    if [ "$(id -u)" != 0 ]; then
        say "missing Debian packages: ${need_apt[*]} ${need_apt_bare[*]} (install them as root: $(IFS=';'; echo "${how[*]}" | sed 's/;/; /g'))"
        exit 1
    fi
    say "installing ${need_apt[*]} ${need_apt_bare[*]}"
    export DEBIAN_FRONTEND=noninteractive
    quietly apt-get update -qq
    if [ ${#need_apt[@]} -gt 0 ]; then quietly apt-get install -y -qq "${need_apt[@]}"; fi
    if [ ${#need_apt_bare[@]} -gt 0 ]; then quietly apt-get install -y -qq --no-install-recommends "${need_apt_bare[@]}"; fi
fi

# Bun and Deno (the bun and deno drivers' toolchains) from their npm packages, which carry the
# binary in an optional package per platform. Global, as a user installs them: npm's global bin
# is in PATH, where taskmeter looks for toolchains (a project-local prefix would need PATH set
# for every run). Bun's binary is linked in by its postinstall script, which npm may not run
# unasked: then it is run here. Optional: without them their runtimes are skipped, so a failure
# here is said, not fatal.
need_npm=()
for tool in bun deno; do "$tool" --version >/dev/null 2>&1 || need_npm+=("$tool"); done
if [ ${#need_npm[@]} -gt 0 ]; then
    say "installing ${need_npm[*]} from npm"
    npm install -g --no-fund --no-audit --loglevel=error "${need_npm[@]}" >"$log" 2>&1 || cat "$log" >&2
    bun_package="$(npm root -g)/bun"
    if ! bun --version >/dev/null 2>&1 && [ -f "$bun_package/install.js" ]; then
        (cd "$bun_package" && node install.js) >"$log" 2>&1 || cat "$log" >&2
    fi
    for tool in "${need_npm[@]}"; do
        "$tool" --version >/dev/null 2>&1 || say "$tool from npm does not run here: its runtimes will be skipped"
    done
fi

command -v cargo >/dev/null || { say "the tests need a Rust toolchain (https://rustup.rs)"; exit 1; }
# The style gate's Rust tools (tests/lint.sh).
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
        say "adding the Rust component $component"
        quietly rustup component add "$component"
    fi
done
# The wasm-thread receiver's guest; its wasmtime host is built by taskmeter on first use.
if ! rustc --print sysroot | xargs -I{} test -d {}/lib/rustlib/wasm32-wasip1-threads/lib; then
    say "adding the Rust target wasm32-wasip1-threads"
    quietly rustup target add wasm32-wasip1-threads
fi

# Python packages of the schema, browser and dashboard-export tests (the Prometheus client's
# parsers, PyYAML), the style gate's pyflakes, and the Python driver's optional ones
# (drivers/python/requirements.txt: uvloop for python-asyncio's uvloop recipe, trio for
# python-trio, gevent for python-gevent; check-driver runs each).
if ! python3 -c 'import pytest, jsonschema, PIL, pyflakes, uvloop, trio, gevent, prometheus_client, yaml' 2>/dev/null; then
    say "installing the Python test packages (requirements-dev.txt)"
    quietly python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -r requirements-dev.txt
fi

# The Kotlin driver's Maven plugins and libraries, for its offline build (mvn -o): one online
# build of drivers/kotlin in a scratch folder fetches exactly what that build needs (its
# driver.toml's needs looks for the compiler's plugin and kotlinx-coroutines, as here).
m2=~/.m2/repository/org/jetbrains
if [ ! -f "$m2/kotlin/kotlin-maven-plugin/2.4.21/kotlin-maven-plugin-2.4.21.jar" ] ||
    [ ! -f "$m2/kotlinx/kotlinx-coroutines-core-jvm/1.11.0/kotlinx-coroutines-core-jvm-1.11.0.jar" ]; then
    say "fetching the Kotlin compiler and kotlinx-coroutines into ~/.m2 (Maven Central)"
    scratch=$(mktemp -d)
    cp drivers/kotlin/pom.xml drivers/kotlin/TaskmeterKotlin.kt drivers/java/TaskmeterDriver.java "$scratch"
    quietly mvn -q -B -f "$scratch/pom.xml" process-classes
    rm -rf "$scratch"
fi
