#!/usr/bin/env bash
# Times `hottext order` on a generated profile of 1 M functions and 5 M call arcs.
# Goals: C3 under 5 s and 1 GB (issue 2); auto, which runs all three, under 10 s and 1 GB (issue 10).
# Results and how they moved: bench/RESULTS.md. Run on an otherwise idle machine:
#   bash bench/order/run.sh            # every algorithm and auto (which runs all three), 3 runs each
set -euo pipefail
cd "$(dirname "$0")/../.."
work=${WORK:-/tmp/hottext-bench-order}
mkdir -p "$work"
profile=$work/1m-functions-5m-calls.profile
if [ ! -s "$profile" ]; then
    echo "generating $profile (about 20 s)" >&2
    python3 bench/order/gen_graph.py --functions 1000000 --edges 5000000 --seed 1 >"$profile.tmp"
    mv "$profile.tmp" "$profile"
fi
cargo build --release --quiet
echo "profile: $(grep -c '^fn ' "$profile") functions, $(grep -c '^call ' "$profile") calls, $(du -m "$profile" | cut -f1) MB"
for algorithm in c3 ph cdsort auto; do
    for run in 1 2 3; do
        /usr/bin/time -f "$algorithm run $run: %e s wall, %U s user, %M KiB max RSS" \
            target/release/hottext order "$profile" --algorithm "$algorithm" --format ld-script \
            -o "$work/order.$algorithm.ld" 2>&1 | grep ' run '
    done
done
