#!/usr/bin/env bash
# Instructions per decision under callgrind, with manual clocks (needs valgrind): the warm-up
# buckets beside governor, the shedder, and the layers beside tower's pair (see instructions.rs).
# Usage: benches/callgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# The counting binary compiles as one codegen unit, in its own target directory (the criterion
# benchmarks keep cargo's defaults): how generic code is split between units otherwise changes
# which calls inline, moving the counts by tens of instructions between builds of unrelated
# changes.
export CARGO_TARGET_DIR=target/callgrind
cargo build --release -p admit-benches --bin instructions \
    --config 'profile.release.package.admit-benches.codegen-units=1'
bin=$CARGO_TARGET_DIR/release/instructions
small=200000
large=1200000

instructions() { # limiter scenario calls
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" >/dev/null 2>&1
    callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
    rm -f "$out"
}

printf '%-20s %-8s %s\n' limiter scenario instructions/call
for scenario in admit reject; do
    for limiter in sentinel smooth smooth-cold governor shed shed-layer warmup-layer drain-layer tower-pair; do
        a=$(instructions "$limiter" "$scenario" "$small")
        b=$(instructions "$limiter" "$scenario" "$large")
        printf '%-20s %-8s %.1f\n' "$limiter" "$scenario" "$(echo "($b - $a) / ($large - $small)" | bc -l)"
    done
done
