//! Reuse of freed allocations (alloc_cache.rs): a buffer's block serves the next buffer of its
//! size class without the driver, the cache stays within its limit, and kept blocks never cause
//! an out-of-memory. Each test runs alone: another test's allocation could take a kept block.

use gpuhost::Host;

use crate::common::{exclusive, host, settled_stats};

/// Restores the default limit however the test ends (the host is shared by all tests).
struct Limit<'a>(&'a Host);

impl<'a> Limit<'a> {
    fn set(host: &'a Host, bytes: usize) -> Self {
        host.set_alloc_cache_limit(bytes);
        Self(host)
    }
}

impl Drop for Limit<'_> {
    fn drop(&mut self) {
        self.0
            .set_alloc_cache_limit(gpuhost::DEFAULT_ALLOC_CACHE_LIMIT);
    }
}

#[test]
fn a_dropped_buffer_serves_the_next_of_its_size_class_without_a_driver_allocation() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let _limit = Limit::set(&host, gpuhost::DEFAULT_ALLOC_CACHE_LIMIT);
    host.trim_alloc_cache();
    let first = host.alloc(100).unwrap();
    let addr = first.device_ptr();
    first.write(0, &[7u8; 100]).unwrap();
    let before = settled_stats(&host);
    drop(first);
    assert_eq!(host.stats().kept_alloc_bytes, 512, "the block was not kept");
    // 300 bytes is the same class (512): the block comes back, with no cuMemAlloc.
    let second = host.alloc(300).unwrap();
    let after = host.stats();
    assert_eq!(second.device_ptr(), addr);
    assert_eq!(
        second.len(),
        300,
        "a reused block changed the buffer's length"
    );
    assert_eq!(after.driver_allocs, before.driver_allocs);
    assert_eq!(after.kept_alloc_bytes, 0);
    // It is a working buffer: written and read back over its whole length.
    second.write(0, &[9u8; 300]).unwrap();
    let mut back = vec![0u8; 300];
    second.read(0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 9));
    // Another class is a driver allocation.
    let third = host.alloc(4096).unwrap();
    assert_eq!(host.stats().driver_allocs, before.driver_allocs + 1);
    drop((second, third));
}

#[test]
fn with_the_cache_off_every_buffer_is_the_drivers_and_freed_when_dropped() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let _limit = Limit::set(&host, 0);
    assert_eq!(
        host.stats().kept_alloc_bytes,
        0,
        "turning it off keeps blocks"
    );
    let before = host.stats().driver_allocs;
    for _ in 0..3 {
        drop(host.alloc(100).unwrap());
    }
    let after = host.stats();
    assert_eq!(after.driver_allocs, before + 3);
    assert_eq!(after.kept_alloc_bytes, 0);
}

#[test]
fn blocks_kept_up_to_the_whole_device_are_freed_when_an_allocation_needs_the_memory() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    // A limit over the device's memory, so the cache may keep all of it.
    let total = host.mem_info().unwrap().total as usize;
    let _limit = Limit::set(&host, total.saturating_mul(8));
    host.trim_alloc_cache();
    let chunk = (total / 8).next_multiple_of(2 << 20);
    let mut held = Vec::new();
    while let Ok(b) = host.alloc(chunk) {
        held.push(b);
        assert!(held.len() <= 16, "the device never filled");
    }
    assert!(
        held.len() >= 4,
        "only {} chunks of {chunk} bytes fit",
        held.len()
    );
    drop(held);
    assert!(host.stats().kept_alloc_bytes >= 4 * chunk as u64);
    // Another size class, which no kept block serves: it needs the kept memory back.
    let other = host.alloc(chunk + (2 << 20));
    assert!(
        other.is_ok(),
        "kept blocks caused an out-of-memory: {:?}",
        other.err()
    );
    drop(other);
    host.trim_alloc_cache();
    assert_eq!(host.stats().kept_alloc_bytes, 0);
}
