#!/usr/bin/env bash
# Where `gpuhost serve`'s threads are when it saturates (issue #11): the http-stamp function,
# sandboxed and trusted, under `oha -c $C` (16), sampled $N times by cuda-gdb (the image has no
# perf or gdb; cuda-gdb attaches to host programs); a poor man's profiler. Prints, per thread
# kind, the innermost gpuhost/wasmtime/tokio/libcuda frames seen most often. Needs a gpuhost with
# a symbol table (objcopy --strip-debug, not strip) in .gpu/bin; carry [".gpu"].
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/gpu-bin.sh
gpu=$PWD/.gpu; c=${C:-16}; n=${N:-6}; out="${OUT:-/tmp/out}"; mkdir -p "$out"
export GPUHOST_DRIVER=${GPUHOST_DRIVER:-nvidia}
work=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
source scripts/probes/stamp-repo.sh; stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
"$gpu/bin/gpuhost" serve --repository "$work/repo" --listen 127.0.0.1:18183 > "$work/serve.out" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:18183/sandboxed > /dev/null && break; sleep 0.1; done
for f in sandboxed trusted; do
  "$gpu/bin/oha" --no-tui -z $((n * 3 + 4))s -c "$c" "http://127.0.0.1:18183/$f" > "$work/oha-$f.txt" 2>&1 &
  load=$!
  sleep 3
  for i in $(seq "$n"); do
    timeout 60 cuda-gdb -p $pid -batch -ex "set pagination off" -ex "thread apply all bt 40" > "$out/stacks-$f-$i.txt" 2>&1
    sleep 1
  done
  wait $load
  echo "$f c=$c: $(grep -E 'Requests/sec' "$work/oha-$f.txt" | awk '{print $NF}') req/s (sampled run)"
  python3 - "$out"/stacks-$f-*.txt <<'PY'
import collections, re, sys
kinds = collections.Counter(); frames = collections.Counter()
for path in sys.argv[1:]:
    for block in open(path, errors="replace").read().split("\nThread ")[1:]:
        name = re.search(r'"([^"]*)"', block.splitlines()[0])
        kind = re.sub(r"[-_]?\d+$", "", name.group(1) if name else "?")
        fns = re.findall(r"#\d+\s+(?:0x[0-9a-f]+ in )?([^\s(]+)", block)
        # The innermost frame that is ours or a runtime's, plus the frame the thread blocks in.
        ours = next((f for f in fns if re.search(r"gpuhost|wasmtime|tokio|hyper|axum|cuEvent|cuLaunch|cuMem|cuStream|libcuda", f)), "?")
        kinds[kind] += 1
        frames[(kind, fns[0] if fns else "?", ours[:110])] += 1
print("  threads sampled by kind:", dict(kinds.most_common(8)))
for (kind, top, ours), k in frames.most_common(25):
    print(f"  {k:4d}  {kind:24.24} {top[:40]:40.40}  {ours}")
PY
done
