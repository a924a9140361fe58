#!/usr/bin/env bash
# Next session: pack for call4.sh, on branch s33-next (s33-entry-read, s31-entry-read's rewrite
# ported onto main, merged with s33-imm-check, the 32-bit versioned-loop checks; the s31
# originals stay on s31-entry-read, in bench/h200-runs/2026-12-04-s31/): the
# branch's .gpu (scripts/gpu-pack.sh), plus main's sandbox_bench beside it
# (.gpu/sandbox_bench.main, built in a worktree of main), so that call4.sh runs main's rewrite
# and the branch's alternately in one call. Then: device tool, command
# "bash bench/h200-runs/next/call4.sh", carry [".gpu"] (or call5.sh: call4.sh's comparison and every
# GPU suite in one call). Move this folder to the session's own
# (bench/h200-runs/DATE-sNN/) when it has run.
set -euo pipefail
cd "$(dirname "$0")/../../.."
# BRANCH (default s33-next): the candidate; either of its two parts alone can be packed too.
branch="${BRANCH:-s33-next}"
[ "$(git rev-parse --abbrev-ref HEAD)" = "$branch" ] || { echo "check out $branch first" >&2; exit 2; }
bash scripts/gpu-pack.sh
wt=$(mktemp -d)
git worktree add -q "$wt" main
(cd "$wt" && CARGO_TARGET_DIR="$PWD/../wt-main-target" cargo build -q --release -p conformance --example sandbox_bench)
cp "$wt/../wt-main-target/release/examples/sandbox_bench" .gpu/sandbox_bench.main
strip .gpu/sandbox_bench.main
echo "main $(git rev-parse --short main)" > .gpu/sandbox_bench.main.commit
git worktree remove --force "$wt"
du -sh .gpu
