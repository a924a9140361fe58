//! Integration tests of gpuhost on a real driver: softcuda in CI, NVIDIA's on the GPU machine,
//! the same code. Without any driver each test fails (testkit's rule; `GPUHOST_TEST_ALLOW_SKIP=1`
//! lets them print "skipped: no driver" and return instead).

mod alloc_cache;
mod arena;
mod common;
mod concurrency;
mod context_loss;
mod drained;
mod graph;
mod host_buffer;
mod launch;
mod locked;
mod no_stall;
mod nodriver;
mod registry;
mod swap;
mod transfer;
