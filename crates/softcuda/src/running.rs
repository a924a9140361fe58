//! The kernels running on each device, so that the calls which wait for them on NVIDIA's driver
//! wait here too, and a program (gpuhost's tests) that makes one of them where it must not
//! stalls on softcuda as it would on a GPU.
//!
//! Measured on the H200, driver 580 (bench/h200-runs/2026-12-02-s12/unload-stall/README.md):
//! module loads (PTX or a linked image) and cuMemHostUnregister return only once every kernel
//! running in the context has ended. cuMemFree and cuModuleUnload wait too; softcuda's already
//! wait for all of the context's queued work. What does not wait there does not here either:
//! cuLinkComplete, cuMemAllocAsync/FreeAsync, the virtual memory calls, cuMemHostRegister.
//!
//! A kernel counts from when its stream's worker starts running it until it ends; kernels queued
//! behind it are not waited for unless they start meanwhile.

use std::sync::{Condvar, Mutex, PoisonError};

use crate::driver::MAX_DEVICES;

static RUNNING: Mutex<[u32; MAX_DEVICES]> = Mutex::new([0; MAX_DEVICES]);
static ENDED: Condvar = Condvar::new();

/// A kernel running on a device, counted while this lives.
pub(crate) struct Running(usize);

/// Counts a kernel of `device` as running until the guard is dropped.
pub(crate) fn start(device: i32) -> Running {
    let d = slot(device);
    RUNNING.lock().unwrap_or_else(PoisonError::into_inner)[d] += 1;
    Running(d)
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        running[self.0] -= 1;
        if running[self.0] == 0 {
            ENDED.notify_all();
        }
    }
}

fn slot(device: i32) -> usize {
    usize::try_from(device).unwrap_or(0).min(MAX_DEVICES - 1)
}

/// Blocks until no kernel of `device` is running.
pub(crate) fn wait_idle(device: i32) {
    let d = slot(device);
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    while running[d] > 0 {
        running = ENDED.wait(running).unwrap_or_else(PoisonError::into_inner);
    }
}
