//! Guest `buffer.write` and `buffer.read`: bytes round trip at every size, served by the
//! runtime's staging reserve (no page-locking while guests run), a run dropped in the middle
//! of a write stops at once, leaving nothing behind that reads the guest's memory, and zero
//! fills clear whatever wrote the buffer before (the host skips only those with nothing to do).

use std::time::Duration;

use gpuhost_wasm::{Output, OutputPipe};

use crate::{assert_ok, device_alone, guest, opts, run};

/// The host's page-locked registrations once the completion thread has released what the
/// device finished with (every transfer region goes back to the pool).
pub(crate) fn registrations(host: &gpuhost::Host) -> u64 {
    host.synchronize().unwrap();
    host.stats().pinned_registrations
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_writes_and_reads_of_every_size_round_trip_without_page_locking_memory() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let before = registrations(rt.host());
    let o = run(rt, "misbehave", &["transfers"]).await.unwrap();
    assert_ok(&o, "transfers ok");
    assert_eq!(
        registrations(rt.host()),
        before,
        "guest transfers took all their staging from the runtime's reserve"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_fill_is_skipped_only_while_nothing_can_have_written_the_buffer() {
    let Some((rt, _shared)) = crate::device().await else {
        return;
    };
    // Sandboxed (the default): a kernel writing past its buffer stays in the guest's arena.
    let o = run(rt, "misbehave", &["zero-fills"]).await.unwrap();
    assert_ok(&o, "zero-fills ok");
}

/// Runs `name` with `args` until it prints `marker` and a little longer (it is then all but
/// surely inside the transfer it does back to back), then drops the run, and with it its Store
/// and the guest's linear memory, while the transfer's future is suspended. A copy thread still
/// touching that memory would fault and end this process.
pub(crate) async fn drop_run_midway(
    rt: &gpuhost_wasm::Runtime,
    name: &str,
    args: &[&str],
    marker: &str,
) {
    let pipe = OutputPipe::new(1024);
    let mut o = opts(name, args);
    o.stdout = Output::Pipe(pipe.clone());
    let g = guest(name);
    let run = rt.run(&g, o);
    tokio::pin!(run);
    let inside = async {
        while !String::from_utf8_lossy(&pipe.contents()).contains(marker) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    };
    tokio::select! {
        r = &mut run => panic!("the guest ended on its own: {r:?}"),
        () = inside => {}
    }
}

/// Asserts that the host's live buffers come back to at most `before` (earlier tests' buffers
/// may still be on their way out; never in, as the caller runs alone).
pub(crate) async fn assert_buffers_freed(host: &gpuhost::Host, before: u64) {
    let mut live = host.stats().live_buffers;
    for _ in 0..500 {
        if live <= before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        live = host.stats().live_buffers;
    }
    assert!(
        live <= before,
        "the dropped guest's buffer was freed: {before} live before, {live} after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_during_a_guest_write_ends_it_at_once_and_leaves_the_host_usable() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host();
    let buffers = host.stats().live_buffers;
    let before = registrations(host);
    drop_run_midway(rt, "misbehave", &["write-forever"], "writing").await;
    let o = run(rt, "misbehave", &["transfers"]).await.unwrap();
    assert_ok(&o, "transfers ok");
    assert_eq!(
        registrations(host),
        before,
        "the dropped write's staging went back to the reserve"
    );
    assert_buffers_freed(host, buffers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guests_repeated_large_writes_go_straight_from_its_locked_memory_and_land_exactly() {
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    let host = rt.host();
    let pinned = registrations(host);
    let direct = gpuhost_wasm::guest_memory_stats().direct_writes;
    let o = run(rt, "misbehave", &["locked-writes", "a5", "5a"])
        .await
        .unwrap();
    assert_ok(&o, "locked-writes ok");
    // Three writes of one region: the first staged, the next two straight from the memory
    // (locked at the second, or already, when the memory is one reused from the pool).
    let direct = gpuhost_wasm::guest_memory_stats().direct_writes - direct;
    assert_eq!(direct, 2, "writes uploaded straight from guest memory");
    assert_eq!(registrations(host), pinned, "staging came from the reserve");
}

/// Red team: a guest's memory is page-locked and pooled when it ends, so the next guest's
/// memory may be the very same pages. That guest must see none of the old bytes — neither in
/// its memory, nor on the device through its own writes (a locked page whose process mapping
/// was replaced would upload the old guest's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_reused_from_a_guest_that_ended_holds_none_of_its_bytes_and_uploads_the_new_ones()
{
    let Some((rt, _alone)) = device_alone().await else {
        return;
    };
    // The same code twice: the second guest's 24 MiB lands where the first guest's did.
    locked_writes_in_a_reused_memory(rt, &["a5", "5a"], || {}, &["3c", "a5"]).await;
}

/// Runs the `locked-writes` guest with `first` (its arguments after the mode), then `between`,
/// then the guest again with `second`, whose memory must be the first one's, reused from the
/// pool. Each run checks that it saw none of the other's bytes and read back its own.
async fn locked_writes_in_a_reused_memory(
    rt: &gpuhost_wasm::Runtime,
    first: &[&str],
    between: impl FnOnce(),
    second: &[&str],
) {
    fn args<'a>(a: &[&'a str]) -> Vec<&'a str> {
        [&["locked-writes"][..], a].concat()
    }
    let o = run(rt, "misbehave", &args(first)).await.unwrap();
    assert_ok(&o, "locked-writes ok");
    rt.host().synchronize().unwrap();
    between();
    let reused = gpuhost_wasm::guest_memory_stats().reused;
    let o = run(rt, "misbehave", &args(second)).await.unwrap();
    assert_ok(&o, "locked-writes ok");
    assert!(
        gpuhost_wasm::guest_memory_stats().reused > reused,
        "the second guest's memory was not the first one's, reused from the pool"
    );
}

/// Red team: a memory reused from a larger guest keeps that guest's locked pieces, and their
/// pages past the new guest's size are inaccessible (wasmtime leaves a 32-bit memory's bounds
/// to its guard pages). After a context loss a piece is registered again, whole, which the
/// driver refuses for such pages (softcuda models the pinning since session 46): the write is
/// staged instead and lands exactly, where before the guest got the driver's error. In a child
/// process: the foreign reset ends every context handle of the process's runtime.
#[test]
fn after_a_context_loss_a_reused_memorys_write_is_staged_when_its_pieces_cannot_be_locked_again() {
    crate::redteam::in_child(
        "transfers::after_a_context_loss_a_reused_memorys_write_is_staged_when_its_pieces_cannot_be_locked_again",
        async |rt| {
            // 40 MiB written from a memory of about 85: its first three granules locked; then
            // 4 MiB from the same memory, now about 10 MiB: most of the pieces lie past it.
            locked_writes_in_a_reused_memory(
                rt,
                &["a5", "5a", "40"],
                crate::foreign_reset,
                &["3c", "a5", "4"],
            )
            .await;
        },
    );
}

/// A runtime of its own on `shared`'s device, whose memory pool starts empty (no memory comes
/// with pieces an earlier guest locked, so what the process locks meanwhile is its guests'
/// alone), and the locked-writes guest twice in one component ([`crate::twice`]): two instances,
/// each with its own linear memory.
fn runtime_and_guest_twice(
    shared: &gpuhost_wasm::Runtime,
) -> (gpuhost_wasm::Runtime, gpuhost_wasm::Guest) {
    let rt = gpuhost_wasm::Runtime::new(shared.host().clone()).unwrap();
    let command = std::fs::read(crate::guest_dir().join("misbehave.wasm")).unwrap();
    let g = rt
        .load("misbehave, twice", &crate::twice::twice(&command))
        .unwrap();
    (rt, g)
}

/// Runs `g` (from [`runtime_and_guest_twice`]) with a locked-memory limit of `limit` bytes: each
/// instance writes 24 MiB three times from its own memory (two 16 MiB lock granules) and checks
/// what it reads back. The memory stats before and after.
async fn run_twice(
    rt: &gpuhost_wasm::Runtime,
    g: &gpuhost_wasm::Guest,
    limit: u64,
) -> (
    gpuhost_wasm::GuestMemoryStats,
    gpuhost_wasm::GuestMemoryStats,
) {
    let mut o = opts("misbehave", &["locked-writes", "a5", "5a"]);
    o.limits.max_locked_memory_bytes = limit;
    let before = gpuhost_wasm::guest_memory_stats();
    let out = rt.run(g, o).await.unwrap();
    let after = gpuhost_wasm::guest_memory_stats();
    assert_ok(&out, "locked-writes ok");
    assert_eq!(
        crate::stdout(&out).matches("locked-writes ok").count(),
        2,
        "both instances ran"
    );
    (before, after)
}

/// Red team: `Limits::max_locked_memory_bytes` bounds a guest, not each of its memories. A
/// component may hold many core modules, each with a linear memory of its own (wasmtime's
/// StoreLimits allow thousands); locking the limit in each would let one guest pin its
/// creator's whole budget and leave every other guest's writes staged. Here two memories lock
/// two granules each under a limit of three: either fits alone, both do not. The first
/// instance's later writes go straight from its memory, the second's are staged, every write
/// lands exactly, and the guest locks no more than its limit in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_with_several_memories_locks_no_more_than_its_limit_across_them() {
    let Some((shared, _alone)) = device_alone().await else {
        return;
    };
    let (rt, g) = runtime_and_guest_twice(shared);
    let limit = 48 << 20;
    let (before, after) = run_twice(&rt, &g, limit).await;
    assert_eq!(after.reused, before.reused, "every memory was fresh");
    let locked = after.locked_bytes.saturating_sub(before.locked_bytes);
    assert!(
        locked <= limit,
        "the guest locked {} MiB across its memories, over its limit of {} MiB",
        locked >> 20,
        limit >> 20
    );
    assert_eq!(
        after.direct_writes - before.direct_writes,
        2,
        "writes straight from guest memory: the first instance's second and third"
    );
}

/// Red team: memories with locked pieces are pooled when their guest ends, and a guest's
/// memories are made as it is instantiated, before any of its writes. A component of many
/// memories would take as many locked memories from the pool, up to the creator's whole budget,
/// pinning what earlier guests locked where only it can use it. Its memories count against its
/// limit from the start: with two pooled memories of two granules each and a limit of three, it
/// gets one of them and a fresh memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_with_several_memories_takes_no_more_pooled_locked_memory_than_its_limit() {
    let Some((shared, _alone)) = device_alone().await else {
        return;
    };
    let (rt, g) = runtime_and_guest_twice(shared);
    // Both memories lock two granules, and are pooled when the guest ends.
    let (before, after) = run_twice(&rt, &g, 1 << 30).await;
    assert_eq!(after.direct_writes - before.direct_writes, 4);
    let (before, after) = run_twice(&rt, &g, 48 << 20).await;
    assert_eq!(
        after.reused - before.reused,
        1,
        "pooled memories the guest got (the second's pieces would take it past its limit)"
    );
    assert_eq!(
        after.locked_bytes, before.locked_bytes,
        "locked by the guest: nothing (its pooled memory's pieces serve its writes)"
    );
    assert_eq!(
        after.direct_writes - before.direct_writes,
        2,
        "the pooled memory's second and third writes"
    );
}
