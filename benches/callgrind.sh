#!/usr/bin/env bash
# Instructions per decision under callgrind, with manual clocks (needs valgrind): the warm-up
# buckets beside governor, the shedder, and the layers beside tower's pair (see instructions.rs).
#
# Usage: benches/callgrind.sh [--check]
#
# Prints one row per limiter and scenario: its instructions per call, the ceiling committed in
# benches/callgrind-ceilings.txt (gated rows only) and, where it has one, its peer's count and
# the ratio to it. With --check (CI), exits non-zero naming each gated row above its ceiling by
# more than MARGIN_PERCENT. The peers (governor, tower) are printed, not gated.
set -euo pipefail
cd "$(dirname "$0")/.."

# How far above its ceiling a gated row may rise before --check fails: the counts are exact for
# one build, and this covers the codegen drift of unrelated changes (see the ceilings file).
MARGIN_PERCENT=3
CEILINGS=benches/callgrind-ceilings.txt

check=false
case "${1:-}" in
"") ;;
--check) check=true ;;
*)
    echo "usage: benches/callgrind.sh [--check]" >&2
    exit 2
    ;;
esac

for tool in valgrind callgrind_annotate; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "callgrind.sh: $tool not found: install valgrind (apt-get install valgrind)" >&2
        exit 1
    fi
done
[ -f "$CEILINGS" ] || { echo "callgrind.sh: $CEILINGS not found" >&2; exit 1; }

# `limiter scenario` and its peer's `limiter scenario` (or `-`): every row instructions.rs runs.
ROWS="
sentinel     admit               governor   admit
sentinel     reject              governor   reject
smooth       saturated           governor   saturated
smooth       saturated-set-rate  governor   saturated
smooth       light               governor   light
smooth       light-set-rate      governor   light
smooth       cold-ramp           governor   admit
smooth       reject              governor   stepped-reject
smooth       cold-reject         governor   reject
governor     admit               -          -
governor     reject              -          -
governor     saturated           -          -
governor     light               -          -
governor     stepped-reject      -          -
shed         admit               -          -
shed         reject              -          -
shed-layer   admit               tower-pair admit
shed-layer   reject              tower-pair reject
shed-http    admit               shed-layer admit
warmup-layer admit               tower-pair admit
warmup-layer reject              tower-pair reject
bound-layer  admit               shed-layer admit
bound-layer  reject              shed-layer reject
drain-layer  admit               -          -
drain-layer  reject              -          -
tower-pair   admit               -          -
tower-pair   reject              -          -
"

declare -A ceiling=()
while read -r limiter scenario value rest; do
    case "$limiter" in "" | "#"*) continue ;; esac
    if [ -n "$rest" ] || ! [[ "$value" =~ ^[0-9]+$ ]]; then
        echo "callgrind.sh: $CEILINGS: bad line: $limiter $scenario $value $rest" >&2
        exit 1
    fi
    if ! grep -qE "^$limiter +$scenario " <<<"$ROWS"; then
        echo "callgrind.sh: $CEILINGS: no row \`$limiter $scenario\` in benches/callgrind.sh" >&2
        exit 1
    fi
    ceiling["$limiter $scenario"]=$value
done <"$CEILINGS"

# The counting binary compiles as one codegen unit, in its own target directory (the criterion
# benchmarks keep cargo's defaults): how generic code is split between units otherwise changes
# which calls inline, moving the counts by tens of instructions between builds of unrelated
# changes.
export CARGO_TARGET_DIR=target/callgrind
cargo build --release -p admit-benches --bin instructions \
    --config 'profile.release.package.admit-benches.codegen-units=1'
bin=$CARGO_TARGET_DIR/release/instructions
# The counts per call are exact: two runs 100 000 calls apart cancel start-up and set-up.
small=20000
large=120000

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

instructions() { # limiter scenario calls: the program's total instructions
    local out=$work/callgrind.out log=$work/valgrind.log total
    if ! valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" "$1" "$2" "$3" \
        >"$log" 2>&1; then
        echo "callgrind.sh: \`instructions $1 $2 $3\` failed under valgrind:" >&2
        cat "$log" >&2
        return 1
    fi
    total=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    if ! [[ "$total" =~ ^[0-9]+$ ]]; then
        echo "callgrind.sh: no program total for \`$1 $2 $3\` from callgrind_annotate" >&2
        return 1
    fi
    echo "$total"
}

declare -A per_call=()
measure() { # limiter scenario: sets per_call["limiter scenario"]
    local a b
    a=$(instructions "$1" "$2" "$small")
    b=$(instructions "$1" "$2" "$large")
    per_call["$1 $2"]=$(awk -v a="$a" -v b="$b" -v n=$((large - small)) \
        'BEGIN { printf "%.1f", (b - a) / n }')
}

while read -r limiter scenario _ _; do
    [ -n "$limiter" ] || continue
    measure "$limiter" "$scenario"
done <<<"$ROWS"

format='%-13s %-19s %9s %8s %8s %-6s %-26s %9s %7s\n'
# shellcheck disable=SC2059
printf "$format" limiter scenario instr/call ceiling limit gate peer "peer/call" ratio
above=()
below=()
while read -r limiter scenario peer_limiter peer_scenario; do
    [ -n "$limiter" ] || continue
    row="$limiter $scenario"
    count=${per_call[$row]}
    cap=- limit=- gate=- peer=- peer_count=- ratio=-
    if [ -n "${ceiling[$row]:-}" ]; then
        cap=${ceiling[$row]}
        limit=$(awk -v c="$cap" -v m="$MARGIN_PERCENT" 'BEGIN { printf "%.1f", c * (1 + m / 100) }')
        gate=ok
        if awk -v x="$count" -v c="$cap" -v m="$MARGIN_PERCENT" \
            'BEGIN { exit !(x > c * (1 + m / 100)) }'; then
            gate=ABOVE
            above+=("$row: $count instructions per call, above its ceiling $cap + $MARGIN_PERCENT % ($limit)")
        elif awk -v x="$count" -v c="$cap" -v m="$MARGIN_PERCENT" \
            'BEGIN { exit !(x < c * (1 - m / 100)) }'; then
            below+=("$row: $count instructions per call, below its ceiling $cap by more than $MARGIN_PERCENT %")
        fi
    fi
    if [ "$peer_limiter" != - ]; then
        peer="$peer_limiter $peer_scenario"
        peer_count=${per_call[$peer]}
        ratio=$(awk -v x="$count" -v p="$peer_count" 'BEGIN { printf "%.2fx", x / p }')
    fi
    # shellcheck disable=SC2059
    printf "$format" "$limiter" "$scenario" "$count" "$cap" "$limit" "$gate" "$peer" "$peer_count" "$ratio"
done <<<"$ROWS"

for row in "${below[@]}"; do
    echo "note: $row: lower it in $CEILINGS"
done
if [ "${#above[@]}" -gt 0 ]; then
    for row in "${above[@]}"; do
        echo "ABOVE CEILING: $row" >&2
    done
    if $check; then
        echo "callgrind.sh --check: ${#above[@]} row(s) above their ceilings. If the rise is" \
            "intended, copy the new counts into $CEILINGS and say why in the commit." >&2
        exit 1
    fi
elif $check; then
    echo "callgrind.sh --check: every gated row within $MARGIN_PERCENT % of its ceiling"
fi
