//! Guest arenas and control blocks: allocations lie inside the mapped range, are zeroed (reused
//! ranges too), never move when the arena grows, work as launch arguments and in transfers;
//! a full arena is a typed error; nothing leaks; a dead generation's arena gives its physical
//! memory back; and a control block is shared between a running kernel and the host in both
//! directions, with no driver call (so a store stops a kernel even while another thread waits
//! in the driver for it), in memory that outlives a foreign reset.

use std::sync::Arc;

use gpuhost::sys::{self, CUresult};
use gpuhost::{
    Arg, CONTROL_BYTES, DEVICE_WINDOW, DeviceBuffer, Error, Host, LaunchConfig, ModuleImage,
    ModuleSource, Registry,
};

use crate::common::{
    TAG_A, block_on, bundle, exclusive, expected, foreign_reset, host, read_u32s, settled_stats,
    shared, stamp,
};

/// `dst[0] = src[0]`, with a volatile load (the value may come from host-mapped memory).
const COPY_WORD: &str = r#"
.version 7.0
.target sm_80
.address_size 64

.visible .entry copy_word(.param .u64 src, .param .u64 dst)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    ld.volatile.global.u32 %r1, [%rd1];
    st.global.u32 [%rd2], %r1;
    ret;
}
"#;

/// Kernel `name`, the only one of module text `ptx` (loaded now: a module load each call).
fn one_kernel(host: &Arc<Host>, name: &str, ptx: &str) -> gpuhost::Kernel {
    let reg = Registry::from_sources(
        host,
        "arena-test",
        vec![ModuleSource::new(name, ModuleImage::Ptx(ptx.into()))],
    )
    .unwrap_or_else(|e| panic!("load {name}: {e}"));
    reg.kernel(name).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn copy_word_kernel(host: &Arc<Host>) -> gpuhost::Kernel {
    one_kernel(host, "copy_word", COPY_WORD)
}

fn bytes_of(buf: &DeviceBuffer) -> Vec<u8> {
    let mut out = vec![0u8; buf.len()];
    buf.read(0, &mut out).expect("read back");
    out
}

fn inside(arena: &gpuhost::Arena, buf: &DeviceBuffer) -> bool {
    let (p, end) = (buf.device_ptr(), buf.device_ptr() + buf.len() as u64);
    p >= arena.base() && end <= arena.base() + arena.mapped()
}

#[test]
fn allocations_are_256_aligned_and_inside_the_mapped_range() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(16 << 20).unwrap();
    assert_eq!(arena.base() % (64 << 10), 0, "base aligned to 64 KiB");
    assert_eq!(arena.reserved() % arena.granularity(), 0);
    assert!(arena.reserved() >= 16 << 20);
    assert_eq!(
        arena.mapped(),
        arena.granularity(),
        "one chunk mapped at creation: [base, base + mapped) is never empty"
    );
    let sizes = [1u64, 0, 255, 256, 257, 4096, 3 << 20, 100];
    let bufs: Vec<DeviceBuffer> = sizes.iter().map(|&n| arena.alloc(n).unwrap()).collect();
    for (b, &n) in bufs.iter().zip(&sizes) {
        assert_eq!(b.len() as u64, n);
        assert_eq!(b.device_ptr() % 256, 0, "256-byte aligned");
        assert!(
            inside(&arena, b),
            "{n}-byte buffer outside [base, base+mapped)"
        );
    }
    assert!(arena.mapped() <= arena.reserved());
    assert_eq!(arena.mapped() % arena.granularity(), 0);
    let used: u64 = sizes.iter().map(|&n| n.max(1).div_ceil(256) * 256).sum();
    assert_eq!(arena.used(), used);
    drop(bufs);
    assert_eq!(arena.used(), 0, "every range given back");
}

#[test]
fn allocations_are_zeroed_even_when_a_written_range_is_reused() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(4 << 20).unwrap();
    let first = arena.alloc(8192).unwrap();
    assert!(bytes_of(&first).iter().all(|&b| b == 0), "fresh memory");
    first.fill(0, 8192, 0xAB).unwrap();
    let ptr = first.device_ptr();
    drop(first);
    let again = arena.alloc(8000).unwrap();
    assert_eq!(again.device_ptr(), ptr, "first fit reuses the freed range");
    assert!(
        bytes_of(&again).iter().all(|&b| b == 0),
        "a reused range shows none of the earlier bytes"
    );
    // Also through a kernel's writes, and a range reused by a smaller buffer at its start.
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    stamp(&s, &k, &again, 2000).unwrap();
    drop(again);
    let small = arena.alloc(256).unwrap();
    assert_eq!(small.device_ptr(), ptr);
    assert!(bytes_of(&small).iter().all(|&b| b == 0));
}

#[test]
fn memory_a_kernel_wrote_past_its_buffer_is_zeroed_when_it_is_first_handed_out() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(4 << 20).unwrap();
    // Nothing handed out past it and no kernel yet: the next allocations are still zero, and
    // gpuhost skips their zeroing (arena.rs); this kernel then writes 16 KiB from its 256-byte
    // buffer on, over memory never handed out (an unconfined kernel can; a sandboxed one may
    // write anywhere in its window).
    let small = arena.alloc(256).unwrap();
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let args = [gpuhost::Arg::Buffer(&small, 0), gpuhost::Arg::U32(4096)];
    let cfg = gpuhost::LaunchConfig::for_elements(4096, 64);
    s.launch(&k, cfg, &args).unwrap().wait().unwrap();
    let next = arena.alloc(8192).unwrap();
    assert_eq!(
        next.device_ptr(),
        small.device_ptr() + 256,
        "first fit, right after"
    );
    assert!(
        bytes_of(&next).iter().all(|&b| b == 0),
        "a new allocation shows what a kernel wrote there"
    );
}

#[test]
fn growing_never_moves_or_changes_earlier_buffers() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(64 << 20).unwrap();
    let mut kept = Vec::new();
    for i in 0..6u8 {
        let mapped_before = arena.mapped();
        // 1.5 granules each: every allocation maps more, and most straddle two chunks.
        let b = arena.alloc(arena.granularity() * 3 / 2).unwrap();
        assert!(
            arena.mapped() > mapped_before,
            "allocation {i} grew the arena"
        );
        b.fill(0, b.len(), 0x10 + i).unwrap();
        kept.push((b.device_ptr(), b));
        for (j, (ptr, old)) in kept.iter().enumerate() {
            assert_eq!(old.device_ptr(), *ptr, "buffer {j} moved");
            let mut probe = [0u8; 2];
            old.read(0, &mut probe[..1]).unwrap();
            old.read(old.len() - 1, &mut probe[1..]).unwrap();
            assert_eq!(probe, [0x10 + j as u8; 2], "buffer {j} changed");
        }
    }
}

#[test]
fn launches_and_transfers_through_arena_buffers_are_correct() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(8 << 20).unwrap();
    let reg = Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    // A buffer straddling the first chunk boundary.
    let pad = arena.alloc(arena.granularity() - 4096).unwrap();
    let n = 4096u32;
    let out = arena.alloc(n as u64 * 4).unwrap();
    assert!(out.device_ptr() < arena.base() + arena.granularity());
    assert!(out.device_ptr() + out.len() as u64 > arena.base() + arena.granularity());
    assert_eq!(stamp(&s, &k, &out, n).unwrap(), expected(TAG_A, n));
    // Stream transfers and copies between an arena buffer and a plain one.
    let plain = host.alloc(out.len()).unwrap();
    let back = block_on(async {
        s.copy(&plain, 0, &out, 0, out.len())
            .unwrap()
            .await
            .unwrap();
        s.fill(&out, 0, out.len(), 0).unwrap().await.unwrap();
        s.copy(&out, 0, &plain, 0, out.len())
            .unwrap()
            .await
            .unwrap();
        s.upload(&out, 0, &7u32.to_le_bytes()).await.unwrap();
        let mut back = vec![0u8; out.len()];
        s.download(&out, 0, &mut back).await.unwrap();
        back
    });
    let mut want = expected(TAG_A, n);
    want[0] = 7;
    let got: Vec<u32> = back
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, want);
    // An argument at an offset inside the arena buffer.
    s.launch(
        &k,
        LaunchConfig::for_elements(16, 16),
        &[Arg::Buffer(&out, 64), Arg::U32(16)],
    )
    .unwrap()
    .wait()
    .unwrap();
    assert_eq!(read_u32s(&out, 32)[16..], expected(TAG_A, 16)[..]);
    drop(pad);
}

#[test]
fn exceeding_max_bytes_is_arena_full_with_a_message_that_says_what_to_do() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(1 << 20).unwrap();
    let a = arena.alloc(600 << 10).unwrap();
    let err = arena.alloc(600 << 10).unwrap_err();
    match &err {
        Error::ArenaFull {
            requested,
            used,
            limit,
            ..
        } => {
            assert_eq!(*requested, 600 << 10);
            assert_eq!(*used, 600 << 10);
            assert_eq!(*limit, 1 << 20);
        }
        other => panic!("expected ArenaFull, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("larger max_bytes") && msg.contains("drop buffers"),
        "{msg}"
    );
    // Hostile sizes: typed errors, never a panic or a wrap-around.
    for huge in [u64::MAX, u64::MAX - 255, 1 << 62] {
        assert!(
            matches!(arena.alloc(huge), Err(Error::ArenaFull { .. })),
            "{huge}"
        );
    }
    assert!(host.arena(u64::MAX).is_err(), "an arena of u64::MAX bytes");
    // The arena still works after the refusals, up to its limit exactly.
    drop(a);
    let whole = arena.alloc(1 << 20).unwrap();
    assert!(inside(&arena, &whole));
    assert!(matches!(arena.alloc(1), Err(Error::ArenaFull { .. })));
}

fn free_bytes(host: &Host) -> u64 {
    host.mem_info().unwrap().free
}

#[test]
fn arenas_control_blocks_and_their_buffers_leak_nothing() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    // The first control block gives the host its pool's first slab, which it keeps for good.
    drop(host.control_block().unwrap());
    let before = settled_stats(&host);
    let free0 = free_bytes(&host);
    {
        let arena = host.arena(32 << 20).unwrap();
        let ctl = host.control_block().unwrap();
        let bufs: Vec<DeviceBuffer> = (0..10).map(|_| arena.alloc(3 << 20).unwrap()).collect();
        let anchor = arena.anchor();
        let ctl_anchor = ctl.anchor();
        let during = host.stats();
        assert_eq!(during.live_arenas, before.live_arenas + 1);
        assert_eq!(during.live_control_blocks, before.live_control_blocks + 1);
        assert_eq!(during.live_buffers, before.live_buffers + 12);
        assert!(
            free_bytes(&host) < free0,
            "mapped chunks count as used device memory"
        );
        // The anchors keep the memory alive after every other holder is gone (the control
        // block's host side goes; its device memory is the anchor).
        drop((bufs, arena, ctl));
        let held = host.stats();
        assert_eq!(
            held.live_arenas,
            before.live_arenas + 1,
            "the anchor holds the arena"
        );
        assert_eq!(held.live_control_blocks, before.live_control_blocks);
        assert_eq!(
            held.live_buffers,
            before.live_buffers + 2,
            "the two anchors"
        );
        assert_eq!(anchor.len(), 0);
        assert_eq!(ctl_anchor.len(), DEVICE_WINDOW + CONTROL_BYTES);
    }
    let after = host.stats();
    assert_eq!(after.live_arenas, before.live_arenas);
    assert_eq!(after.live_control_blocks, before.live_control_blocks);
    assert_eq!(after.live_buffers, before.live_buffers);
    assert_eq!(after.drop_errors, before.drop_errors, "no drop failed");
    // NVIDIA returns a little memory lazily (see conformance/memory.rs): allow 4 MiB.
    let free1 = free_bytes(&host);
    assert!(free1 + (4 << 20) >= free0, "free went {free0} → {free1}");
}

#[test]
fn a_dead_generations_arena_gives_its_physical_memory_back_and_a_new_one_works() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let arena = host.arena(32 << 20).unwrap();
    // Several chunks mapped: the first at creation, the rest as allocations grow.
    let bufs: Vec<DeviceBuffer> = (0..4).map(|_| arena.alloc(6 << 20).unwrap()).collect();
    let mapped = arena.mapped();
    let ctl = host.control_block().unwrap();
    ctl.store_u32(0, 5);
    let before = host.stats();
    foreign_reset();
    assert!(matches!(arena.alloc(256), Err(Error::ContextLost { .. })));
    assert!(matches!(
        bufs[0].read(0, &mut [0u8; 4]),
        Err(Error::ContextLost { .. })
    ));
    assert!(
        matches!(ctl.try_load_u32(0), Err(Error::ContextLost { .. })),
        "the block belongs to the dead generation"
    );
    // Physical memory outlives the context (NVIDIA's driver; softcuda does the same): the
    // arena's chunks still count as used until the arena releases them.
    let free_after_reset = free_bytes(&host);
    drop((bufs, arena, ctl));
    let free_after_drop = free_bytes(&host);
    let after = host.stats();
    assert_eq!(after.live_arenas + 1, before.live_arenas);
    assert_eq!(
        after.drop_errors, before.drop_errors,
        "releasing a dead arena recorded an error"
    );
    // NVIDIA returns a little memory lazily (see conformance/memory.rs): allow 4 MiB.
    assert!(
        free_after_drop + (4 << 20) >= free_after_reset + mapped,
        "the dead arena's {mapped} mapped bytes were not given back: free went \
         {free_after_reset} → {free_after_drop}"
    );
    let fresh = host.arena(4 << 20).unwrap();
    let b = fresh.alloc(1024).unwrap();
    assert!(bytes_of(&b).iter().all(|&x| x == 0));
}

#[test]
fn a_control_block_is_shared_by_a_kernel_and_the_host_both_ways() {
    let _g = shared();
    let Some(host) = host() else { return };
    let k = copy_word_kernel(&host);
    let arena = host.arena(2 << 20).unwrap();
    let ctl = host.control_block().unwrap();
    let ctl_buf = ctl.anchor();
    assert_eq!(ctl_buf.device_ptr(), ctl.device_ptr());
    for off in (0..CONTROL_BYTES).step_by(4) {
        assert_eq!(ctl.load_u32(off), 0, "zeroed at {off}");
        assert_eq!(
            ctl.load_u32(DEVICE_WINDOW + off),
            0,
            "zeroed at {DEVICE_WINDOW:#x}+{off}"
        );
    }
    let s = host.stream().unwrap();
    let word = arena.alloc(4).unwrap();
    let copy = |src: Arg<'_>, dst: Arg<'_>| {
        s.launch(&k, LaunchConfig::for_elements(1, 1), &[src, dst])
            .unwrap()
            .wait()
            .unwrap()
    };
    // Host → kernel: the kernel reads the word the host stored.
    ctl.store_u32(0, 0xC0FFEE);
    copy(Arg::Buffer(&ctl_buf, 0), Arg::Buffer(&word, 0));
    assert_eq!(read_u32s(&word, 1), [0xC0FFEE]);
    // Kernel → host: the kernel writes a word of the device window, the host loads it.
    word.write(0, &0xFA17u32.to_le_bytes()).unwrap();
    copy(
        Arg::Buffer(&word, 0),
        Arg::Buffer(&ctl_buf, DEVICE_WINDOW + 4),
    );
    assert_eq!(ctl.load_u32(DEVICE_WINDOW + 4), 0xFA17);
    assert_eq!(ctl.load_u32(0), 0xC0FFEE, "the other window is untouched");
}

#[test]
fn a_store_reaches_a_kernel_while_it_runs() {
    // The sandbox's abort: the host stores a new epoch while the guest's kernel is running,
    // and the kernel must see it then — not after it ends, which it never would.
    let _g = shared();
    let Some(host) = host() else { return };
    let ctl = host.control_block().unwrap();
    let (done, out, _stream) = spin_on(&host, &ctl);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!done.is_done(), "the kernel is still spinning on the word");
    ctl.try_store_u32(0, 1)
        .expect("a store while the kernel runs");
    done.wait().unwrap();
    let polls = read_u32s(&out, 1)[0];
    assert!(
        polls < i32::MAX as u32,
        "the kernel stopped on the store, not its bound ({polls} polls)"
    );
}

/// Launches `testkit::WAIT_WORD_PTX` on the control block, returning its completion, output
/// word and stream (kept until the completion is waited for, so the wait completes the launch
/// itself and releases its buffers before the test ends).
fn spin_on(
    host: &Arc<Host>,
    ctl: &gpuhost::ControlBlock,
) -> (gpuhost::Completion, DeviceBuffer, gpuhost::Stream) {
    let k = one_kernel(host, testkit::WAIT_WORD_ENTRY, testkit::WAIT_WORD_PTX);
    let out = host.alloc(4).unwrap();
    let s = host.stream().unwrap();
    let done = s
        .launch(
            &k,
            LaunchConfig::for_elements(1, 1),
            &[Arg::Buffer(&ctl.anchor(), 0), Arg::Buffer(&out, 0)],
        )
        .unwrap();
    (done, out, s)
}

#[test]
fn a_store_stops_a_kernel_while_another_thread_waits_in_the_driver_for_the_device() {
    // On the H200 a module load (like a launch that grows local memory, or a large cuMemAlloc)
    // waits inside libcuda until running kernels end, holding a lock that a copy into device
    // memory needs: the old copy-based store hung there until the kernel's own bound. The store
    // is a CPU store now, and must get through.
    let _g = shared();
    let Some(host) = host() else { return };
    let ctl = host.control_block().unwrap();
    let (done, out, _stream) = spin_on(&host, &ctl);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let loader = {
        let host = Arc::clone(&host);
        std::thread::spawn(move || copy_word_kernel(&host))
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    ctl.try_store_u32(0, 1)
        .expect("a store while another thread is inside the driver");
    done.wait().unwrap();
    loader
        .join()
        .expect("the module load finishes once the kernel stops");
    let polls = read_u32s(&out, 1)[0];
    assert!(
        polls < i32::MAX as u32,
        "the kernel stopped on the store, not its bound ({polls} polls)"
    );
}

#[test]
fn control_block_memory_outlives_a_foreign_reset_and_serves_the_next_generation() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let ctl = host.control_block().unwrap();
    ctl.store_u32(0, 7);
    let addr = ctl.device_ptr();
    foreign_reset();
    let before = host.generation();
    // The next entry notices the reset (whatever it answers itself).
    let _ = host.synchronize();
    assert_ne!(host.generation(), before, "a new generation");
    assert!(matches!(
        ctl.try_store_u32(0, 8),
        Err(Error::ContextLost { .. })
    ));
    drop(ctl);
    // The slot goes back to the pool, zeroed, and the next block (of the new generation) is
    // the same memory: it was never freed, and the new context's kernels reach it.
    let ctl = host.control_block().unwrap();
    assert_eq!(
        ctl.device_ptr(),
        addr,
        "the pool hands the same slot out again"
    );
    assert_eq!(ctl.load_u32(0), 0, "cleared for its next user");
    let k = copy_word_kernel(&host);
    let word = host.alloc(4).unwrap();
    ctl.store_u32(0, 0xBEEF);
    let s = host.stream().unwrap();
    s.launch(
        &k,
        LaunchConfig::for_elements(1, 1),
        &[Arg::Buffer(&ctl.anchor(), 0), Arg::Buffer(&word, 0)],
    )
    .unwrap()
    .wait()
    .unwrap();
    assert_eq!(read_u32s(&word, 1), [0xBEEF]);
}

#[test]
fn concurrent_allocations_never_overlap_and_are_always_zeroed() {
    let _g = shared();
    let Some(host) = host() else { return };
    let arena = host.arena(64 << 20).unwrap();
    let threads: Vec<_> = (0..6u8)
        .map(|t| {
            let arena = Arc::clone(&arena);
            std::thread::spawn(move || {
                let mut kept: Vec<(u8, DeviceBuffer)> = Vec::new();
                let mut seed = 0x9E37_79B9u32.wrapping_mul(u32::from(t) + 1);
                for i in 0..40u8 {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    let len = 1 + (seed % (300 << 10)) as usize;
                    let b = arena.alloc(len as u64).unwrap();
                    assert!(bytes_of(&b).iter().all(|&x| x == 0), "thread {t} alloc {i}");
                    let tag = t.wrapping_mul(41).wrapping_add(i) | 1;
                    b.fill(0, len, tag).unwrap();
                    kept.push((tag, b));
                    if seed.is_multiple_of(3) {
                        kept.swap_remove((seed as usize / 3) % kept.len());
                    }
                }
                kept
            })
        })
        .collect();
    let live: Vec<(u8, DeviceBuffer)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    for (tag, b) in &live {
        assert!(inside(&arena, b));
        assert!(
            bytes_of(b).iter().all(|x| x == tag),
            "a live buffer was overwritten: two allocations overlapped"
        );
    }
    let used: u64 = live
        .iter()
        .map(|(_, b)| (b.len() as u64).div_ceil(256) * 256)
        .sum();
    assert_eq!(arena.used(), used);
}

/// Everything in `[base, base + mapped)`, read with a raw copy (as a sandboxed kernel may).
fn whole_mapped_range(host: &Host, arena: &gpuhost::Arena) -> Vec<u8> {
    host.enter().unwrap();
    let mut out = vec![0u8; arena.mapped() as usize];
    // SAFETY: the context is bound; `out` is writable for its length; the range is mapped.
    let r = unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), arena.base(), out.len()) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    out
}

#[test]
fn mapped_memory_never_shows_an_earlier_arenas_bytes() {
    let _g = shared();
    let Some(host) = host() else { return };
    // Earlier arenas fill all their memory and go, so their physical memory can be recycled.
    for _ in 0..3 {
        let old = host.arena(8 << 20).unwrap();
        let all = old.alloc(8 << 20).unwrap();
        all.fill(0, all.len(), 0x5A).unwrap();
    }
    let fresh = host.arena(8 << 20).unwrap();
    assert!(
        whole_mapped_range(&host, &fresh).iter().all(|&b| b == 0),
        "the first chunk, before any allocation"
    );
    let small = fresh.alloc(100).unwrap();
    small.fill(0, 100, 1).unwrap();
    let _grown = fresh.alloc(5 << 20).unwrap();
    let bytes = whole_mapped_range(&host, &fresh);
    let offset = (small.device_ptr() - fresh.base()) as usize;
    assert!(bytes[offset..offset + 100].iter().all(|&b| b == 1));
    bytes[..offset]
        .iter()
        .chain(&bytes[offset + 100..])
        .enumerate()
        .for_each(|(i, &b)| assert_eq!(b, 0, "stale byte near offset {i} of the mapped range"));
}

#[test]
fn arenas_zeroed_under_one_fence_come_back_whole_and_zeroed_together() {
    let _g = shared();
    let Some(host) = host() else { return };
    let stream = host.stream().unwrap();
    let arenas: Vec<_> = (0..3).map(|_| host.arena(4 << 20).unwrap()).collect();
    let bases: Vec<u64> = arenas.iter().map(|a| a.base()).collect();
    for arena in &arenas {
        // What a guest's kernel leaves: bytes past its buffer too.
        let all = arena.alloc(arena.mapped()).unwrap();
        all.fill(0, all.len(), 0x5A).unwrap();
    }
    let zeroings: Vec<_> = arenas
        .into_iter()
        .map(|a| match a.queue_zeroing(&stream).unwrap() {
            Ok(z) => z,
            Err(_) => panic!("an arena nothing holds was refused"),
        })
        .collect();
    let resets = gpuhost::Zeroing::fence_all(zeroings, &stream).unwrap();
    assert_eq!(resets.len(), 3);
    let mut back = Vec::new();
    for reset in resets {
        back.push(block_on(reset.zeroed()).unwrap());
    }
    for (arena, base) in back.iter().zip(bases) {
        assert_eq!(arena.base(), base, "not the arena queued, or not in order");
        let left = whole_mapped_range(&host, arena)
            .iter()
            .filter(|&&b| b != 0)
            .count();
        assert_eq!(left, 0, "{left} bytes survived the zeroing");
    }
}

#[test]
fn an_arena_zeroing_held_elsewhere_is_refused_unchanged() {
    let _g = shared();
    let Some(host) = host() else { return };
    let stream = host.stream().unwrap();
    let arena = host.arena(4 << 20).unwrap();
    let buffer = arena.alloc(256).unwrap();
    buffer.fill(0, 256, 7).unwrap();
    let back = match arena.queue_zeroing(&stream).unwrap() {
        Ok(_) => panic!("an arena with a live buffer was zeroed"),
        Err(arena) => arena,
    };
    assert_eq!(
        bytes_of(&buffer),
        vec![7; 256],
        "the buffer's bytes changed"
    );
    drop((buffer, back));
}
