#!/usr/bin/env bash
# Instructions per decision under callgrind, with manual clocks (needs valgrind): the warm-up
# buckets beside governor, the shedder, and the layers beside tower's pair (see instructions.rs).
# Usage: benches/callgrind.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p admit-benches --bin instructions
bin=target/release/instructions
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
    for limiter in sentinel smooth governor shed shed-layer warmup-layer drain-layer tower-pair; do
        a=$(instructions "$limiter" "$scenario" "$small")
        b=$(instructions "$limiter" "$scenario" "$large")
        printf '%-20s %-8s %.1f\n' "$limiter" "$scenario" "$(echo "($b - $a) / ($large - $small)" | bc -l)"
    done
done
