//! Room for resident threads on each device, when `SOFTCUDA_RESIDENT_THREADS` asks for it: a
//! model of a GPU whose SMs another kernel can fill.
//!
//! On NVIDIA's driver a kernel begins only once one of its blocks fits beside the blocks already
//! resident; a kernel whose blocks fill every SM and never end holds every later kernel of the
//! device, from any stream, until it ends. softcuda runs each stream's kernels on CPU threads and
//! by default lets every stream's kernel run at once, so nothing waits for room. With
//! `SOFTCUDA_RESIDENT_THREADS=N` (N > 0) a device holds at most N resident threads: a kernel
//! waits until its block fits in the room left (the whole room, for a block larger than N),
//! takes room for as many of its blocks as fit (all of them when they do), and gives it back when
//! it ends. Kernels waiting for room begin in the order their streams reached them, so one large
//! kernel is not passed over by a stream of small ones. Programs that must see a busy GPU's
//! queueing (gpuhost's watchdog counts a launch's time from when it begins) run under it.

use std::sync::{Condvar, Mutex, PoisonError};

use crate::driver::{MAX_DEVICES, resident_threads};

/// One device's room: threads in use, and the turns of the kernels waiting for it.
struct Device {
    used: u64,
    /// The next turn to hand out, and the turn that may take room now.
    next: u64,
    serving: u64,
}

static DEVICES: Mutex<[Device; MAX_DEVICES]> = Mutex::new(
    [const {
        Device {
            used: 0,
            next: 0,
            serving: 0,
        }
    }; MAX_DEVICES],
);
static FREED: Condvar = Condvar::new();

/// Room a kernel holds while this lives.
pub(crate) struct Resident {
    device: usize,
    threads: u64,
}

impl Drop for Resident {
    fn drop(&mut self) {
        if self.threads == 0 {
            return;
        }
        let mut d = DEVICES.lock().unwrap_or_else(PoisonError::into_inner);
        d[self.device].used -= self.threads;
        FREED.notify_all();
    }
}

/// Waits for room for a kernel of `blocks` blocks of `per_block` threads on `device`, and holds
/// it until the value returned is dropped. Returns at once when no room is set.
pub(crate) fn enter(device: i32, blocks: u64, per_block: u64) -> Resident {
    let device = usize::try_from(device).unwrap_or(0).min(MAX_DEVICES - 1);
    let Some(room) = resident_threads() else {
        return Resident { device, threads: 0 };
    };
    let mut devices = DEVICES.lock().unwrap_or_else(PoisonError::into_inner);
    let turn = devices[device].next;
    devices[device].next += 1;
    loop {
        let d = &mut devices[device];
        if d.serving == turn
            && let Some(threads) = fits(room, d.used, blocks, per_block)
        {
            d.used += threads;
            d.serving += 1;
            // The next turn may fit in what is left.
            FREED.notify_all();
            return Resident { device, threads };
        }
        devices = FREED.wait(devices).unwrap_or_else(PoisonError::into_inner);
    }
}

/// The threads a kernel of `blocks` blocks of `per_block` threads takes of `room` with `used`
/// taken: as many whole blocks as fit, at least one, or the whole room for a block larger than
/// it; `None` while not one block fits.
fn fits(room: u64, used: u64, blocks: u64, per_block: u64) -> Option<u64> {
    let per_block = per_block.clamp(1, room);
    let free = room.saturating_sub(used);
    (free >= per_block).then(|| (free / per_block).min(blocks.max(1)) * per_block)
}

#[cfg(test)]
mod tests {
    use super::fits;

    #[test]
    fn a_kernel_takes_whole_blocks_of_the_room_left_once_one_fits() {
        // All of a small kernel; as many blocks as fit of a large one.
        assert_eq!(fits(4096, 0, 2, 256), Some(512));
        assert_eq!(fits(4096, 1024, 100, 1024), Some(3072));
        // Not one block fits: it waits.
        assert_eq!(fits(4096, 3584, 4, 1024), None);
        assert_eq!(fits(4096, 4096, 1, 1), None);
        // A block larger than the room takes all of it, once it is all free.
        assert_eq!(fits(512, 0, 3, 1024), Some(512));
        assert_eq!(fits(512, 1, 3, 1024), None);
    }
}
