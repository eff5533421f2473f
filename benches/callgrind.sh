#!/usr/bin/env bash
# Instructions per `try_acquire` / `check()` / `allow` + `pass` under callgrind, with manual clocks (needs valgrind).
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
    for limiter in admit governor shed; do
        a=$(instructions "$limiter" "$scenario" "$small")
        b=$(instructions "$limiter" "$scenario" "$large")
        printf '%-20s %-8s %.1f\n' "$limiter" "$scenario" "$(echo "($b - $a) / ($large - $small)" | bc -l)"
    done
done
