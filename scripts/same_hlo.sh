#!/usr/bin/env bash
# Whether two builds give XLA the same program to run: runs a bench
# binary of each build with the same arguments, has XLA dump each
# compiled module's optimized HLO, and compares them module by module
# with instruction names and source metadata left out. Where they agree,
# the step runs the same kernels in both builds, so a change that only
# rewrites the StableHLO lowering (an IR pass, the emitter) cannot have
# moved the step time, whatever a timing run on a busy machine shows.
#
# Usage:
#   scripts/same_hlo.sh OLD_BIN NEW_BIN [ARGS...]
#   e.g. scripts/same_hlo.sh /tmp/old/models target/release/deps/models-* detect 3
# where each binary is a `cargo bench --bench <name> --no-run` executable
# (copy the old build's before rebuilding). Exit status 1 when a module
# differs (its differing lines are printed), 0 when all agree.
# Needs the PJRT plugin, as for the tests (LAZYXLA_PJRT_PATH).
set -euo pipefail
[ $# -ge 2 ] || {
    echo "usage: $0 OLD_BIN NEW_BIN [ARGS...]" >&2
    exit 2
}
old="$1" new="$2"
shift 2
dir=$(mktemp -d)
for side in old new; do
    bin="${!side}"
    XLA_FLAGS="--xla_dump_to=$dir/$side --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=NONE" \
        "$bin" "$@" >/dev/null 2>&1
done
status=0
python3 - "$dir" <<'PY' || status=1
import collections, glob, os, re, sys

def canon(path):
    lines = collections.Counter()
    for line in open(path):
        line = re.sub(r"%[\w.\-]+", "%x", line)
        line = re.sub(r"metadata=\{[^}]*\}", "", line)
        lines[line.strip()] += 1
    return lines

d = sys.argv[1]
old = sorted(glob.glob(f"{d}/old/*cpu_after_optimizations.txt"))
new = sorted(glob.glob(f"{d}/new/*cpu_after_optimizations.txt"))
if not old or len(old) != len(new):
    print(f"modules: {len(old)} old, {len(new)} new")
    sys.exit(1)
same = True
for a, b in zip(old, new):
    ca, cb = canon(a), canon(b)
    gone, added = ca - cb, cb - ca
    name = os.path.basename(a).split(".cpu_after")[0]
    print(f"{name}: {sum(ca.values())} lines, {sum(gone.values())} only old, {sum(added.values())} only new")
    for line in list(gone)[:5]:
        print("  -", line[:160])
    for line in list(added)[:5]:
        print("  +", line[:160])
    same = same and not gone and not added
sys.exit(0 if same else 1)
PY
rm -rf "$dir"
exit $status
