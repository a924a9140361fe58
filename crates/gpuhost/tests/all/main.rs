//! Integration tests of gpuhost on a real driver: softcuda in CI, NVIDIA's on the GPU machine,
//! the same code. Without any driver each test prints "skipped: no driver" and returns.

mod arena;
mod common;
mod concurrency;
mod context_loss;
mod launch;
mod nodriver;
mod registry;
mod swap;
mod transfer;
