# shellcheck shell=bash
# Sourced, from the checkout root, by the scripts that run the packed binaries on the GPU machine.
# scripts/gpu-pack.sh ships .gpu/bin as one xz archive: the device tool carries at most 64 MiB
# with the tree, and the stripped binaries alone (test suites, gpuhost, oha) are about 70 MB.
# Unpacked once; later scripts find .gpu/bin there.
if [ -f .gpu/bin.tar.xz ] && [ ! -d .gpu/bin ]; then
  mkdir -p .gpu/bin && tar -C .gpu/bin -xJf .gpu/bin.tar.xz
fi

# What the packed suites need besides their binaries (scripts/gpu.sh, probes/suite-stress.sh):
# gpuhost-cli's tests run the `gpuhost` binary from the folder above their own, as cargo lays
# them out; .gpu/run-parallel.sh is .gpu/run.sh with the default test threads; GPU_TEST_SKIPS
# names the two tests the GPU machine cannot run (it has no Chromium and one GPU).
gpu_suites_ready() {
  cp -f .gpu/bin/gpuhost .gpu/gpuhost
  sed 's/ --test-threads=1//' .gpu/run.sh > .gpu/run-parallel.sh
}
GPU_TEST_SKIPS=(--skip the_status_page_shows --skip with_two_devices_a_function)
