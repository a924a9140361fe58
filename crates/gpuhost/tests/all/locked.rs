//! Someone else's memory page-locked for uploads (`Host::lock_memory`, `Stream::upload_locked`):
//! any ranges reach the device with one registration, end to end, bad ranges are typed errors, the owner
//! is dropped only once no upload can read the memory, and a context loss re-registers it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Waker};

use gpuhost::{Error, Host, LockedMemory};

use crate::common::{Mapped, block_on, exclusive, foreign_reset, host, pattern, shared};

/// A mapping handed to `Host::lock_memory` as its owner, with a flag its drop sets.
struct Owner {
    _mapped: Mapped,
    dropped: Arc<AtomicBool>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// Locks the whole of `m` with `host`, handing it over as the owner; returns the handle and the
/// flag the owner's drop sets.
fn lock(m: Mapped, host: &Arc<Host>) -> (LockedMemory, Arc<AtomicBool>) {
    let (ptr, len, dropped) = (m.ptr(), m.len(), Arc::new(AtomicBool::new(false)));
    let owner = Owner {
        _mapped: m,
        dropped: dropped.clone(),
    };
    // SAFETY: `ptr..ptr + len` is the mapping, page-aligned, mapped readable and writable until
    // the owner (holding the mapping) drops; nothing else registers it.
    let locked = unsafe { host.lock_memory(ptr, len, Box::new(owner)) }.unwrap();
    (locked, dropped)
}

#[test]
fn locked_memory_uploads_any_range_exactly_and_is_registered_once() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let len = 3 << 20;
    let m = Mapped::filled(len, 9);
    let (locked, _) = lock(m, &host);
    assert_eq!(locked.registrations(), 1);
    let want = pattern(len, 9);
    let buf = host.alloc(len + 64).unwrap();
    block_on(async {
        for (from, to, at) in [
            (0, len, 0),
            (1, 4097, 63),
            (len - 5, len, 3),
            (4096, 2 << 20, 17),
        ] {
            s.fill(&buf, 0, buf.len(), 0xEE).unwrap().await.unwrap();
            s.upload_locked(&buf, at, &[(&locked, from..to)])
                .await
                .unwrap();
            let back = s.download_to_vec(&buf, 0, buf.len()).await.unwrap();
            assert!(
                back[..at].iter().all(|&b| b == 0xEE),
                "{from}..{to}: before"
            );
            assert!(
                back[at..at + to - from] == want[from..to],
                "{from}..{to}: the data"
            );
            assert!(
                back[at + to - from..].iter().all(|&b| b == 0xEE),
                "{from}..{to}: after"
            );
        }
    });
    assert_eq!(locked.registrations(), 1, "uploads registered nothing more");
    // Parts of two locked memories, end to end in one call.
    let other = Mapped::filled(1 << 20, 2);
    let (second, _) = lock(other, &host);
    let two = pattern(1 << 20, 2);
    block_on(async {
        let parts = [
            (&second, 5..4096),
            (&locked, 100..300_000),
            (&second, 0..0),
            (&second, 0..7),
        ];
        s.upload_locked(&buf, 9, &parts).await.unwrap();
        let back = s
            .download_to_vec(&buf, 9, 4091 + 299_900 + 7)
            .await
            .unwrap();
        let want: Vec<u8> = [&two[5..4096], &want[100..300_000], &two[..7]].concat();
        assert!(back == want, "the parts, end to end");
    });
}

#[test]
fn bad_ranges_are_typed_errors_naming_what_to_fix() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let m = Mapped::new(1 << 20);
    let owner = || Box::new(()) as Box<dyn std::any::Any + Send + Sync>;
    for (ptr, len) in [
        (m.ptr(), 0),
        (m.ptr(), 4095),
        (m.ptr().wrapping_add(1), 4096),
    ] {
        // SAFETY: refused before the driver sees it; in range of the mapping either way.
        let r = unsafe { host.lock_memory(ptr, len, owner()) };
        let e = r.unwrap_err();
        assert!(matches!(e, Error::HostMemory { .. }), "{e}");
        assert!(e.to_string().contains("whole pages"), "{e}");
    }
    let (locked, _) = lock(m, &host);
    // The same memory again: the driver refuses an overlapping registration.
    // SAFETY: the range is the locked mapping's first page, still mapped.
    let again = unsafe { host.lock_memory(locked.addr() as *mut u8, 4096, owner()) };
    assert!(matches!(again, Err(Error::Driver { .. })), "{again:?}");
    let buf = host.alloc(4096).unwrap();
    block_on(async {
        let r = s
            .upload_locked(&buf, 0, &[(&locked, 0..(1 << 20) + 1)])
            .await;
        assert!(matches!(r, Err(Error::HostRange { .. })), "{r:?}");
        #[allow(clippy::reversed_empty_ranges)]
        let r = s.upload_locked(&buf, 0, &[(&locked, 8..4)]).await;
        assert!(matches!(r, Err(Error::HostRange { .. })), "{r:?}");
        let r = s.upload_locked(&buf, 1, &[(&locked, 0..4096)]).await;
        assert!(matches!(r, Err(Error::OutOfBounds { .. })), "{r:?}");
        s.upload_locked(&buf, 4096, &[(&locked, 5..5)])
            .await
            .unwrap();
    });
}

#[test]
fn the_owner_is_dropped_only_after_the_handle_and_every_upload_reading_it_are_gone() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let len = 8 << 20;
    let m = Mapped::filled(len, 3);
    let (locked, dropped) = lock(m, &host);
    let buf = host.alloc(len).unwrap();
    block_on(s.upload_locked(&buf, 0, &[(&locked, 0..len)])).unwrap();
    s.synchronize().unwrap();
    host.wait_unloads();
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped while its handle lives"
    );
    // An upload polled once (its DMA enqueued) and abandoned, then the handle dropped: the
    // batch fencing the DMA holds the memory until the DMA ends.
    {
        let parts = [(&locked, 0..len)];
        let mut up = std::pin::pin!(s.upload_locked(&buf, 0, &parts));
        let _ = up.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    }
    drop(locked);
    s.synchronize().unwrap();
    // The completion thread lets go of the batch after its fence resolves, and the release
    // thread then unregisters the memory and drops the owner.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !dropped.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
        host.wait_unloads();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(
        dropped.load(Ordering::SeqCst),
        "the owner was never dropped"
    );
    // Whatever the abandoned upload did, the device buffer is usable and the bytes land.
    block_on(async {
        s.upload(&buf, 0, &pattern(len, 4)).await.unwrap();
        assert!(s.download_to_vec(&buf, 0, len).await.unwrap() == pattern(len, 4));
    });
}

#[test]
fn after_a_context_loss_locked_memory_is_registered_again_and_uploads_work() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let len = 1 << 20;
    let m = Mapped::filled(len, 7);
    let (locked, dropped) = lock(m, &host);
    foreign_reset();
    // The first call after the reset sees the loss; the next ones run in the new context.
    let ok = |r: gpuhost::Result<()>| match r {
        Ok(()) | Err(Error::ContextLost { .. }) => {}
        Err(e) => panic!("neither done nor lost: {e}"),
    };
    ok(host.stream().and_then(|s| s.synchronize()));
    let s = host.stream().unwrap();
    let buf = host.alloc(len).unwrap();
    block_on(async {
        s.upload_locked(&buf, 0, &[(&locked, 0..len)])
            .await
            .unwrap();
        assert!(s.download_to_vec(&buf, 0, len).await.unwrap() == pattern(len, 7));
    });
    assert_eq!(
        locked.registrations(),
        2,
        "registered again in the new context"
    );
    drop(locked);
    host.wait_unloads();
    assert!(dropped.load(Ordering::SeqCst));
}
