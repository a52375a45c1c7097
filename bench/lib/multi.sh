#!/usr/bin/env bash
# K processes of one bench command sharing the topic's count, as one client of
# scripts/bench peers (client ks-4p): each runs `CMD... --shared-count DIR --process I`
# (kafka-share-bench consume) and stops when the processes' counts add up to the
# topic. Prints one RESULT line for the whole: records and bytes summed, elapsed from the
# first process's start to the last one's end, first record from that start too. Each
# process's own output follows on stderr (its fetch figures among them).
#
#   bench/lib/multi.sh K DIR CMD...
#
# Run under GNU time by bench-peers, which then counts the CPU of all K processes (they are
# its waited-for children) and the largest one's peak RSS.
set -euo pipefail
k=${1:?K}
dir=${2:?DIR}
shift 2
rm -rf "$dir"
mkdir -p "$dir"
pids=()
for ((i = 0; i < k; i++)); do
    "$@" --shared-count "$dir" --process "$i" >"$dir/out-$i" 2>&1 &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for ((i = 0; i < k; i++)); do grep -v '^RESULT ' "$dir/out-$i" >&2 || true; done
python3 - "$dir" "$k" <<'EOF'
import json, re, sys
d, k = sys.argv[1], int(sys.argv[2])
rs = []
for i in range(k):
    m = re.findall(r"^RESULT (\{.*\})\s*$", open(f"{d}/out-{i}", errors="replace").read(), re.M)
    if m:
        rs.append(json.loads(m[-1]))
if len(rs) == k:
    t0 = min(r["start_ms"] for r in rs)
    end = max(r["start_ms"] + r["elapsed_s"] * 1000 for r in rs)
    firsts = [r["start_ms"] + r["first_s"] * 1000 for r in rs if r["first_s"] > 0]
    print("RESULT " + json.dumps({
        "records": sum(r["records"] for r in rs),
        "bytes": sum(r["bytes"] for r in rs),
        "elapsed_s": round((end - t0) / 1000, 4),
        "first_s": round((min(firsts) - t0) / 1000, 4) if firsts else 0,
        "per_process": [r["records"] for r in rs],
    }))
EOF
exit "$rc"
