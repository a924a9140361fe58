#!/usr/bin/env bash
# Packs this machine's perf, with the shared libraries it needs that a plain Linux image may lack
# (not libc, libm, libstdc++ or libgcc_s, which must come from the machine that runs it), into
# .gpu/perf.tar.xz for the GPU machine, whose image has no perf (scripts/probes/serve-profile.sh
# unpacks it there). About 7 MB.
#   bash scripts/lib/perf-pack.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(readlink -f "$(command -v perf)")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/perf/lib" .gpu
cp "$bin" "$tmp/perf/perf"
ldd "$bin" | awk '/=> \// {print $3}' | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*) ;;
    *) cp -L "$lib" "$tmp/perf/lib/" ;;
  esac
done
tar -C "$tmp" -cJf .gpu/perf.tar.xz perf
echo ".gpu/perf.tar.xz: $(du -h .gpu/perf.tar.xz | cut -f1), perf $("$bin" --version | awk '{print $3}')"
