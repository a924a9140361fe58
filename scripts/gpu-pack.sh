#!/usr/bin/env bash
# Builds here everything scripts/gpu.sh runs on the GPU machine (which has no Rust toolchain):
# release test binaries of the driver-facing suites (gpuhost-cli's serve tests among them), the gpuhost binary, the example guests, and
# softcuda's library (for the loader tests). Then: device tool, command "bash scripts/gpu.sh",
# carry [".gpu"].
set -euo pipefail
cd "$(dirname "$0")/.."
# The probes (launch_probe, rewrite_time) only with PACK_PROBES=1: with them the stripped
# binaries passed the pack's 60 MiB in session 44. PACK_SUITES names the crates whose test
# suites go (default: all four; conformance brings sandbox_bench), for a call that needs fewer
# and the probes beside them (session 46: PACK_SUITES="gpuhost gpuhost-wasm" PACK_PROBES=1).
targets=()
for crate in ${PACK_SUITES:-gpuhost conformance gpuhost-wasm gpuhost-cli}; do
  targets+=(--and test -p "$crate" --test all)
done
case " ${PACK_SUITES:-conformance} " in
  *" conformance "*) targets+=(--and bin -p conformance --example sandbox_bench) ;;
esac
if [ -n "${PACK_PROBES:-}" ]; then
  targets+=(--and bin -p gpuhost --example launch_probe --and bin -p ptxvm --example rewrite_time)
fi
../shared/gpu/pack bin -p gpuhost-cli --bin gpuhost "${targets[@]}"
# The guests' target (.ci/run installs it too; a fresh machine lacks it).
if ! rustup target list --installed | grep -qx wasm32-wasip2; then
  rustup target add wasm32-wasip2
fi
for ws in examples/guests crates/gpuhost-wasm/tests/guests; do
  cargo build --release --target wasm32-wasip2 --manifest-path "$ws/Cargo.toml" \
    --target-dir target/guests
done
mkdir -p .gpu/guests .gpu/lib
cp target/guests/wasm32-wasip2/release/*.wasm .gpu/guests/
cp "$(ls target/release/libsoftcuda.so target/release/deps/libsoftcuda.so 2>/dev/null | head -1)" .gpu/lib/
# oha, the load generator of scripts/bench-serve.sh (the GPU machine has no cargo, no network).
if [ ! -x target/oha/bin/oha ]; then
  cargo install --locked oha --root target/oha || echo "oha: install failed; bench-serve.sh needs it"
fi
mkdir -p .gpu/bin && cp target/oha/bin/oha .gpu/bin/ 2>/dev/null || true
# Every rewritten module and the red-team kernels for NVIDIA's JIT (scripts/sandbox-probe.sh run).
bash scripts/sandbox-probe.sh pack >/dev/null
# The device tool carries at most 64 MiB, tree included: strip, and ship the binaries as one xz
# archive (scripts/lib/gpu-bin.sh unpacks it on the GPU machine).
# ../shared/gpu/pack strips the binaries too: backtraces taken on the GPU machine show addresses,
# which scripts/lib/symbolize.py names here from the unstripped build in target/release/deps.
strip .gpu/lib/libsoftcuda.so .gpu/bin/* 2>/dev/null || true
# gpuhost keeps its symbol table (not its debug info, ~3 MB more packed): the GPU machine has no
# perf, so scripts/probes/serve-profile.sh brings this machine's (.gpu/perf.tar.xz, ~7 MB), which
# names gpuhost's frames there from it.
# The gpuhost binary is the shipped build, Cargo's `dist` profile (whole-program LTO, as
# deploy/Dockerfile builds it), so the benchmarks measure what users run; its first build takes
# ~15 min on two cores and each relink ~5. PACK_PROFILE=release packs the release build instead
# (the test suites are always release builds).
profile=${PACK_PROFILE:-dist}
if [ "$profile" != release ]; then
  cargo build --profile "$profile" -p gpuhost-cli --bin gpuhost
fi
strip --strip-debug -o .gpu/bin/gpuhost "target/$profile/gpuhost"
# PACK_RELEASE_TOO=1 adds the release build beside it as gpuhost-rel, for calls that set the two
# side by side (bench/h200-runs/2026-12-07-s56/call1/call1.sh).
if [ -n "${PACK_RELEASE_TOO:-}" ] && [ "$profile" != release ]; then
  strip --strip-debug -o .gpu/bin/gpuhost-rel target/release/gpuhost
fi
if command -v perf > /dev/null; then bash scripts/lib/perf-pack.sh; fi
rm -f .gpu/bin.tar.xz && tar -C .gpu/bin -cJf .gpu/bin.tar.xz . && rm -rf .gpu/bin
git rev-parse HEAD > .gpu/COMMIT
echo "gpuhost: the $profile profile" >> .gpu/COMMIT
git diff --quiet HEAD -- crates corpus wit examples || echo "dirty" >> .gpu/COMMIT
du -sh .gpu
echo "carry [\".gpu\"]; scripts/gpu.sh and the probes unpack .gpu/bin.tar.xz (by hand: source scripts/lib/gpu-bin.sh, then bash .gpu/run.sh)"
