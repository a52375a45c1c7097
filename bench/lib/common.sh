# Helpers shared by the cases of scripts/bench (bench/cases/*). Sourced, not run:
#
#   source "$SCRIPT_DIR/../bench/lib/common.sh" bench-NAME
#
# with SCRIPT_DIR the scripts/ directory (scripts/kafka); the name prefixes the case's messages
# and names the file (bench/cases/NAME without bench-) whose header comment `usage` prints.

BENCH_NAME=$1
BENCH_SCRIPT=$SCRIPT_DIR/../bench/cases/${1#bench-}

# The header comment of the script, from its second line to `set -euo`.
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$BENCH_SCRIPT"; }
die() { echo "$BENCH_NAME: error: $*" >&2; exit 1; }
info() { echo "$BENCH_NAME: $*" >&2; }

# The common options scripts/bench parsed (it sets BENCH_OPT_<NAME> for each one given) over
# the case's defaults: each VAR gets BENCH_OPT_<VAR>, or VAR=NAME BENCH_OPT_<NAME> (a case's
# own name for a common option: RUNS=ROUNDS), when it is set and not empty.
bench_opts() { # VAR[=NAME]...
    local _bench_spec _bench_opt
    for _bench_spec; do
        _bench_opt=BENCH_OPT_${_bench_spec#*=}
        [[ -n ${!_bench_opt:-} ]] && printf -v "${_bench_spec%%=*}" '%s' "${!_bench_opt}"
    done
    return 0
}

# The last N (default 3) non-empty lines of FILE on one line, colours stripped, at most 400
# characters (for a row's error). An empty or missing file gives an empty string, not a
# failure (the scripts run with pipefail).
# The last lines of a log, on one line. A command line in backquotes (cargo quotes the whole
# rustc command when it fails) is cut to its first word: what the reader needs is the cause
# after it (a signal, "No space left on device"), which the cut to 400 characters would drop.
last_lines() { { sed 's/\x1b\[[0-9;]*m//g; s/`\([^` ]*\) [^`]*`/`\1 ...`/g' "$1" 2>/dev/null | grep -v '^\s*$' || true; } | tail -n "${2:-3}" | tr '\n' ' ' | cut -c1-400; }

# A run's directory: sets RUN_ID (UTC time), WORK (target/bench-NAME), RUN (WORK/run-RUN_ID,
# created), RESULTS (RUN/results.jsonl, empty) and START_SECONDS (for the report's duration).
bench_run_dir() {
    RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)
    WORK=$(cd "$SCRIPT_DIR/.." && pwd)/target/$BENCH_NAME
    RUN=$WORK/run-$RUN_ID
    mkdir -p "$RUN"
    RESULTS=$RUN/results.jsonl
    : >"$RESULTS"
    START_SECONDS=$SECONDS
}

need_gnu_time() {
    [[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) is needed for CPU and RSS: apt-get install time"
}

# Starts the broker (`scripts/kafka up`; it honours KAFKA_VERSION, KAFKA_PORT_OFFSET,
# KAFKA_SHARE_STATE) and sets BOOTSTRAP and KAFKA_VER. LOG gets its messages. NODES (default
# 1): more than 1 starts the cluster of `scripts/kafka up --nodes NODES` instead (topics get
# its default replication factor, 3).
bench_broker_up() { # LOG [NODES]
    local nodes=${2:-1} dir=single args=()
    if ((nodes > 1)); then dir=cluster args=(--nodes "$nodes"); fi
    info "starting the broker (scripts/kafka up ${args[*]})"
    BOOTSTRAP=$("$SCRIPT_DIR/kafka" up "${args[@]}" 2>"$1" | tail -n 1) || { cat "$1" >&2; die "scripts/kafka up failed"; }
    KAFKA_VER=$(cat "${KAFKA_SHARE_STATE:-$SCRIPT_DIR/../target/kafka}/$dir/version" 2>/dev/null || echo "${KAFKA_VERSION:-4.4.0}")
    info "broker $KAFKA_VER at $BOOTSTRAP"
}

# Builds the harnesses (bench/: the `kafka-share-bench` binary, every subcommand) with cargo's
# PROFILE (release or debug) and sets KSB to the binary. The same build in every script (the
# crate's features are fixed in bench/Cargo.toml), so the scripts of one run, and the smoke
# runs after .ci/run's build step, find it built. Further arguments go to cargo (--features
# tls). Returns non-zero with cargo's output in LOG when it does not build.
bench_build() { # PROFILE LOG [cargo args...]
    local profile=$1 log=$2 flag=()
    shift 2
    [[ $profile == release ]] && flag=(--release)
    KSB=${CARGO_TARGET_DIR:-$SCRIPT_DIR/../target}/$profile/kafka-share-bench
    info "building kafka-share-bench ($profile${*:+, $*})"
    (cd "$SCRIPT_DIR/.." && cargo build "${flag[@]}" -p kafka-share-bench "$@") >"$log" 2>&1
}

# Creates TOPIC with PARTITIONS partitions and writes RECORDS values of SIZE bytes with our
# producer (KS: kafka-share-bench); sets PRODUCE_LINE (its summary). Dies on failure.
bench_produce() { # KS TOPIC RECORDS SIZE PARTITIONS LOG
    info "producing $3 records to $2"
    "$1" produce --bootstrap "$BOOTSTRAP" --topic "$2" --records "$3" --size "$4" --partitions "$5" >"$6" 2>&1 ||
        { cat "$6" >&2; die "producing the topic failed"; }
    PRODUCE_LINE=$(grep -o 'produced .*' "$6" | tail -n 1 || true)
    info "$PRODUCE_LINE"
}

# The broker's first share group creates its share-state topic (__share_group_state) and
# loads the share coordinator: seconds (3.6 s in a bench-peers run on a fresh broker, against
# 1.0 s for every later client) that would fall on whichever client happens to run first. And
# the brokers' JIT compiles the share-fetch, acknowledge and share-state paths only under load,
# for longer than one might think: on a fresh 3-node cluster warmed by 1M records, ours paid
# 3.9 s of broker CPU per million records in the first round and 1.1 s in the last, and 0.9 on
# the same cluster in a second run (runs 20261205T164129Z, 20261205T164814Z). So throwaway
# groups consume a throwaway topic (explicit acknowledgement, the cases' partition count)
# pass after pass, until their cost per record stops falling: a pass that costs the brokers
# at least 1/1.15 of the pass before (BENCH_WARM_PASSES passes at most, default 8); every
# client then meets warm brokers.
# That settles a single broker (0.51, 0.30, 0.30 s / M in run 20261205T180532Z), not a fresh
# 3-node cluster: its passes went 10.6, 5.4, 4.3, 4.1 and the first client still paid 3.1
# against 1.0 in the last round (run 20261205T180657Z); its JIT goes on compiling for tens of
# millions of records. Compare clients on three nodes in a second run on the same cluster
# (`scripts/bench peers` leaves it up).
# RECORDS (default BENCH_WARM_RECORDS, else 1,000,000; one record and one pass in a smoke run)
# is one pass: one record warms the share state only. Sets SHARE_WARM_LINE (what it took, or
# that it failed and what that means for the figures; the reports print it). A failure is
# reported, not fatal.
bench_warm_share_state() { # KS LOG [RECORDS]
    local t=bench-warmup-${RUN_ID:-0}-$$ n pass max per prev="" costs=() t0=$SECONDS failed="" settled=0
    n=${3:-${BENCH_WARM_RECORDS:-1000000}}
    max=${BENCH_WARM_PASSES:-8}
    ((${SMOKE:-0})) && n=1 max=1
    # What a cold broker does to the figures, for the line when the warm-up fails.
    local cold="the brokers may still be cold: the first client measured may pay for the share-state topic's creation and the brokers' JIT, so its figures (and its round's) may be slower and cost more broker CPU than the rest"
    if ! "$1" produce --bootstrap "$BOOTSTRAP" --topic "$t" --records "$n" --size 100 \
        --partitions "${PARTITIONS:-1}" >"$2" 2>&1; then
        failed=$(last_lines "$2")
        SHARE_WARM_LINE="warm-up failed (producing its topic: ${failed% }); $cold"
        info "$SHARE_WARM_LINE"
        return
    fi
    for ((pass = 1; pass <= max; pass++)); do
        local g=bench-warmup-g$pass-${RUN_ID:-0}-$$
        bench_cpu_snapshot "${NODES:-1}" >"$2.cpu"
        if ! bench_group "$1" "$g" "$2.group" ||
            ! "$1" consume --bootstrap "$BOOTSTRAP" --topic "$t" --group "$g" --records "$n" \
                --timeout-s $((60 + n / 20000)) --mode explicit >>"$2" 2>&1; then
            failed=$(last_lines "$2")
            failed="pass $pass of $max: ${failed% }"
            break
        fi
        bench_cpu_snapshot "${NODES:-1}" >>"$2.cpu"
        # The brokers' CPU seconds per million records of this pass (parse.py: cpu-window's
        # arithmetic, as every case's rows get it); "?" when the snapshots are unreadable.
        per=$(python3 "$SCRIPT_DIR/../bench/lib/parse.py" broker-cpu-per-m "$2.cpu" "$n")
        costs+=("${per:-?}")
        # Settled: this pass cost at least 1/1.15 of the one before (it stopped falling).
        if [[ -n $prev && -n $per ]] && awk -v p="$prev" -v c="$per" 'BEGIN{exit !(p <= 1.15 * c)}'; then
            settled=1
            break
        fi
        prev=$per
    done
    if [[ -n $failed ]]; then
        SHARE_WARM_LINE="warm-up failed in $failed (broker CPU s per million records by pass before it: ${costs[*]:-none}); $cold"
        info "$SHARE_WARM_LINE"
    else
        SHARE_WARM_LINE="$((pass > max ? max : pass)) pass(es) of $n records through throwaway share groups, $((SECONDS - t0)) s; broker CPU s per million records by pass: ${costs[*]:-none}"
        # One pass (a smoke run) has nothing to settle against.
        ((settled || max == 1)) || SHARE_WARM_LINE+=" (still falling at the last pass: the first client may pay for the rest)"
        info "the brokers are warm: $SHARE_WARM_LINE"
    fi
    "$1" cleanup --bootstrap "$BOOTSTRAP" --topic "$t" >>"$2" 2>&1 || true
}

# One line of CPU clock ticks: the brokers' (user+sys of every node's JVM, /proc/PID/stat),
# then the whole machine's busy and total (/proc/stat, iowait counted idle). Taken before
# and after a client, it says what the brokers spent on that client's records and whether
# the machine's cores were all busy meanwhile: the evidence for a CPU bound (parse.py).
bench_cpu_snapshot() { # [NODES]
    local nodes=${1:-1} pid b=0
    for pid in $("$SCRIPT_DIR/kafka" pids --nodes "$nodes" 2>/dev/null); do
        b=$((b + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    awk -v b="$b" '/^cpu /{t = 0; for (i = 2; i <= 9; i++) t += $i; print b, t - $5 - $6, t; exit}' /proc/stat
}

# A smoke run's verdict (the cases' last step under --smoke): exits 1 when a row of RESULTS
# failed, naming each by its FIELDs (client; side case ...) with its error, or when RESULTS
# holds no row and EMPTY_OK is 0 (a smoke run that measured nothing did not pass).
bench_smoke_check() { # RESULTS EMPTY_OK FIELD...
    python3 - "$BENCH_NAME" "$@" <<'EOF'
import json, sys
name, results, empty_ok, fields = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
rows = [json.loads(l) for l in open(results) if l.strip()]
bad = [r for r in rows if not r.get("ok")]
for r in bad:
    print(f"{name}: smoke: {' '.join(str(r.get(f)) for f in fields)} failed: {r.get('error')}", file=sys.stderr)
if not rows and not empty_ok:
    print(f"{name}: smoke: no results in {results}: no run was measured", file=sys.stderr)
sys.exit(1 if bad or not (rows or empty_ok) else 0)
EOF
}

# share.auto.offset.reset=earliest on GROUP (a new share group starts at the latest offset).
bench_group() { # KS GROUP LOG: share.auto.offset.reset=earliest, plus GROUP_CONFIG (key=value ...)
    local extra=() kv
    for kv in ${GROUP_CONFIG:-}; do extra+=(--config "$kv"); done
    "$1" group --bootstrap "$BOOTSTRAP" --group "$2" "${extra[@]}" >"$3" 2>&1
}

# Deletes the topics (a benchmark topic can be hundreds of MB on a shared broker); a failure
# is reported, not fatal.
bench_cleanup() { # KS LOG TOPIC...
    local ks=$1 log=$2 t args=()
    shift 2
    (($#)) || return 0
    for t in "$@"; do args+=(--topic "$t"); done
    "$ks" cleanup --bootstrap "$BOOTSTRAP" "${args[@]}" >"$log" 2>&1 ||
        info "deleting the run's topics failed: $(last_lines "$log")"
}
