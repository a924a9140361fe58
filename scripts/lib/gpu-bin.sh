# shellcheck shell=bash
# Sourced, from the checkout root, by the scripts that run the packed binaries on the GPU machine.
# scripts/gpu-pack.sh ships .gpu/bin as one xz archive: the device tool carries at most 64 MiB
# with the tree, and the stripped binaries alone (test suites, gpuhost, oha) are about 70 MB.
# Unpacked once; later scripts find .gpu/bin there.
if [ -f .gpu/bin.tar.xz ] && [ ! -d .gpu/bin ]; then
  mkdir -p .gpu/bin && tar -C .gpu/bin -xJf .gpu/bin.tar.xz
fi
