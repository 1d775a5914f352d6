#!/usr/bin/env bash
# Differential fuzzing: runs one of the fuzzers (random programs, PJRT
# against the reference backend, see each test's module doc) with N
# proptest cases in release mode:
#   forward  tests/differential.rs  forward values of random programs
#   grad     tests/fuzz_grad.rs     gradients, and finite differences
#   replay   tests/fuzz_replay.rs   training steps lazily and captured
#   sharding tests/fuzz_sharding.rs sharded programs on a 4-device mesh
#
# Usage:
#   scripts/fuzz.sh              # 10,000 forward cases in one process
#   scripts/fuzz.sh 500          # 500 cases
#   scripts/fuzz.sh 10000 2      # 10,000 cases split over 2 processes
#   scripts/fuzz.sh 10000 2 grad # the gradient fuzzer
#
# With one process this is `PROPTEST_CASES=$N cargo test --release --test
# <test>`. With JOBS > 1 the test binary is built once and JOBS
# copies of the proptest run side by side, each with its share of the N
# cases, run as chunks of FUZZ_CHUNK (default 250) cases per process, each
# with its own random seed (proptest seeds every run afresh). Their output,
# with a progress line per chunk, goes to target/fuzz-logs/shard-J.log (or
# $CARGO_TARGET_DIR/fuzz-logs): `grep passed target/fuzz-logs/*` shows how
# far a long run has got.
#
# PJRT must load, or the test fails rather than skips (the script sets
# LAZYXLA_REQUIRE_PJRT=1): when the plugin is not in a Python site-packages,
# point LAZYXLA_PJRT_PATH at its directory, e.g.
#   LAZYXLA_PJRT_PATH=/root/.cache/lazyxla/xla-cpu-pjrt scripts/fuzz.sh
# CARGO_TARGET_DIR and other cargo variables are passed through. A case
# takes about 0.3 s of CPU (mostly XLA compiling the program), so 10,000
# take about an hour on one core. A mismatch is shrunk and printed with its
# program, and proptest records its seed under proptest-regressions/.
set -euo pipefail

usage() {
    echo "usage: $0 [CASES [JOBS [forward|grad|replay|sharding]]]  (defaults 10000, 1, forward)" >&2
    exit 2
}
cases="${1:-10000}"
jobs="${2:-1}"
case "${3:-forward}" in
forward) test=differential name=pjrt_matches_the_reference ;;
grad) test=fuzz_grad name=gradients_agree_between_backends_and_with_finite_differences ;;
replay) test=fuzz_replay name=captured_steps_replay_as_the_lazy_steps_run ;;
sharding) test=fuzz_sharding name=sharded_programs_match_the_reference ;;
*) usage ;;
esac
for n in "$cases" "$jobs"; do
    case "$n" in
    '' | *[!0-9]* | 0) usage ;;
    esac
done

cd "$(dirname "$0")/.."
export LAZYXLA_REQUIRE_PJRT="${LAZYXLA_REQUIRE_PJRT:-1}"
echo "fuzz: ${test}, ${cases} cases in ${jobs} process(es) (release)"
start=$(date +%s)
status=0
if [ "$jobs" -eq 1 ]; then
    PROPTEST_CASES="$cases" cargo test --release --test "$test" || status=$?
else
    # Build once; the fixed regressions run here, the shards run the proptest.
    cargo test --release --test "$test" -- --skip "$name"
    exe=$(cargo test --release --test "$test" --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*"' | tail -n 1 | cut -d'"' -f4)
    logs="${CARGO_TARGET_DIR:-target}/fuzz-logs"
    mkdir -p "$logs"
    # Each shard runs its share in chunks of at most $chunk cases (one
    # process each), so its log says how many cases have passed so far.
    chunk="${FUZZ_CHUNK:-250}"
    shard() {
        local j="$1" share="$2" done=0 n
        while [ "$done" -lt "$share" ]; do
            n=$((share - done < chunk ? share - done : chunk))
            if ! PROPTEST_CASES="$n" "$exe" --exact "$name" \
                >>"$logs/shard-$j.log" 2>&1; then
                echo "fuzz: shard $j: mismatch after $done cases" >>"$logs/shard-$j.log"
                return 1
            fi
            done=$((done + n))
            echo "fuzz: shard $j: $done/$share cases passed ($(date +%T))" >>"$logs/shard-$j.log"
        done
    }
    pids=()
    for ((j = 0; j < jobs; j++)); do
        share=$((cases / jobs + (j < cases % jobs ? 1 : 0)))
        : >"$logs/shard-$j.log"
        shard "$j" "$share" &
        pids+=("$!")
        echo "fuzz: shard $j: $share cases, log $logs/shard-$j.log"
    done
    for ((j = 0; j < jobs; j++)); do
        if wait "${pids[$j]}"; then
            echo "fuzz: shard $j passed"
        else
            status=1
            echo "fuzz: shard $j FAILED:"
            cat "$logs/shard-$j.log"
        fi
    done
fi
elapsed=$(($(date +%s) - start))
if [ "$status" -eq 0 ]; then
    echo "fuzz: PASSED: ${cases} cases, 0 mismatches (${elapsed}s)"
else
    echo "fuzz: FAILED after ${elapsed}s; the shrunk program is printed above"
fi
exit "$status"
