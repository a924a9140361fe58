#!/usr/bin/env bash
# Builds and runs sandbox-probe.cu on the GPU machine (nvcc there), with ptxas's resource report.
set -uo pipefail
cd "$(dirname "$0")"
out="${OUT:-/tmp/out}"; mkdir -p "$out"
nvcc -O3 -arch=sm_90 -Xptxas -v -o /tmp/sandbox-probe sandbox-probe.cu 2> "$out/probe-ptxas.txt" || { cat "$out/probe-ptxas.txt"; exit 1; }
timeout 90 /tmp/sandbox-probe > "$out/probe.txt" 2>&1; echo "probe rc=$?"; cat "$out/probe.txt"
if ptxas -arch=sm_90 -o /tmp/forms.cubin sandbox-forms.ptx > "$out/forms.txt" 2>&1; then echo "ptxas_forms ok"; else echo "ptxas_forms FAILED"; cat "$out/forms.txt"; fi
