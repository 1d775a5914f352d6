#!/usr/bin/env bash
# Soak run: the whole test suite (`cargo test`, the README's test command)
# again and again, COPIES suites at once so that each runs on a loaded
# machine, until each copy has run ROUNDS times. A flaky test shows up
# as a failed run; every run's output is kept.
#
# Usage:
#   scripts/soak.sh          # 2 copies x 10 rounds: 20 runs under load
#   scripts/soak.sh 5 3      # 3 copies x 5 rounds
#   SOAK_RESUME=1 scripts/soak.sh   # go on with a soak that was stopped
#
# A soak of 20 runs takes longer than most sittings, so it can be
# resumed: with SOAK_RESUME=1 each copy starts after the runs the summary
# already lists, provided the summary is of the same commit (its first
# line names it) and none of them failed.
#
# The tests are built once first; the copies then share the build (cargo
# holds its lock while it builds, not while tests run). Each run's output
# goes to target/soak-logs/copy-C-run-R.log (or $CARGO_TARGET_DIR/...),
# and one line per run to target/soak-logs/summary.log, so `cat` of that
# shows how far a long run has got. One run took 9.4 minutes alone on
# the 2-core machine, so a round of 2 copies takes more than 15 (not yet
# measured). PJRT must load (LAZYXLA_REQUIRE_PJRT=1,
# as in CI): set LAZYXLA_PJRT_PATH as the README says.
set -euo pipefail

usage() {
    echo "usage: $0 [ROUNDS [COPIES]]  (defaults 10, 2)" >&2
    exit 2
}
rounds="${1:-10}"
copies="${2:-2}"
for n in "$rounds" "$copies"; do
    case "$n" in
    '' | *[!0-9]* | 0) usage ;;
    esac
done

cd "$(dirname "$0")/.."
export LAZYXLA_REQUIRE_PJRT="${LAZYXLA_REQUIRE_PJRT:-1}"
logs="${CARGO_TARGET_DIR:-target}/soak-logs"
mkdir -p "$logs"
summary="$logs/summary.log"
commit="commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ "${SOAK_RESUME:-0}" = 1 ] && [ -s "$summary" ]; then
    if [ "$(head -n 1 "$summary")" != "$commit" ]; then
        echo "soak: $summary is of another commit ($(head -n 1 "$summary")); run without SOAK_RESUME" >&2
        exit 2
    fi
    if grep -q FAILED "$summary"; then
        echo "soak: $summary lists a failed run; run without SOAK_RESUME" >&2
        exit 2
    fi
else
    echo "$commit" >"$summary"
fi
cargo test --no-run --quiet
echo "soak: $copies copies x $rounds rounds of cargo test, logs in $logs"
start=$(date +%s)

copy() {
    local c="$1" r log t0 passed
    passed=$(grep -c "^copy $c run " "$summary" || true)
    for ((r = passed + 1; r <= rounds; r++)); do
        log="$logs/copy-$c-run-$r.log"
        t0=$(date +%s)
        if cargo test --no-fail-fast >"$log" 2>&1; then
            echo "copy $c run $r: passed ($(($(date +%s) - t0)) s)" >>"$summary"
        else
            echo "copy $c run $r: FAILED ($(($(date +%s) - t0)) s): $log" >>"$summary"
        fi
    done
}
pids=()
for ((c = 1; c <= copies; c++)); do
    copy "$c" &
    pids+=("$!")
done
for p in "${pids[@]}"; do
    wait "$p"
done
cat "$summary"
runs=$(grep -c "^copy " "$summary" || true)
failed=$(grep -c "FAILED" "$summary" || true)
echo "soak: $runs runs, $failed failed ($(($(date +%s) - start)) s)"
if [ "$failed" -ne 0 ]; then
    grep -h -E "^test .* FAILED|panicked" "$logs"/copy-*.log | sort | uniq -c
    exit 1
fi
