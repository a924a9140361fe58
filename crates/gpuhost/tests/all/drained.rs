//! `Stream::start_download` (`DrainedDownload`): every byte in order through windows of any
//! size, refused out of range, and, dropped midway with staging growth off, its staging goes
//! back to the pool and nothing more is page-locked; one left undrained never stalls another.

use std::sync::Arc;

use gpuhost::{DrainedDownload, Error};

use crate::common::{block_on, exclusive, host, in_child, pattern, shared};

/// Drains `d` through windows of `window` bytes, awaiting each landing, into a new `Vec`.
fn drain_all(d: &mut DrainedDownload, window: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = vec![0u8; window];
    while d.remaining() > 0 {
        block_on(std::future::poll_fn(|cx| d.poll_landed(cx))).unwrap();
        assert!(d.landed().unwrap() > 0, "a landing leaves bytes to drain");
        let n = d.drain_into(&mut w).unwrap();
        assert!(
            n > 0 && n <= window,
            "{n} bytes into a {window}-byte window"
        );
        out.extend_from_slice(&w[..n]);
    }
    assert_eq!(d.drain_into(&mut w).unwrap(), 0, "nothing after the end");
    out
}

#[test]
fn a_drained_download_delivers_every_byte_in_order_through_windows_of_any_size() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = Arc::new(host.stream().unwrap());
    let size = (9 << 20) + 5;
    let buf = host.alloc(size).unwrap();
    let data = pattern(size, 3);
    block_on(s.upload(&buf, 0, &data)).unwrap();
    for (len, window) in [
        (0, 16),
        (1, 1),
        (4095, 7),
        ((1 << 20) + 3, 4097),
        (size - 3, 1 << 20),
        (size - 3, size),
    ] {
        let mut d = s.start_download(&buf, 3, len).unwrap();
        assert_eq!(d.remaining(), len);
        let back = drain_all(&mut d, window);
        assert!(
            back == data[3..3 + len],
            "{len} bytes through {window}-byte windows"
        );
    }
}

#[test]
fn a_drained_download_out_of_range_is_refused_before_anything_is_enqueued() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = Arc::new(host.stream().unwrap());
    let buf = host.alloc(4096).unwrap();
    for (offset, len) in [(4097, 0), (4096, 1), (1, 4096), (usize::MAX, 2)] {
        match s.start_download(&buf, offset, len) {
            Err(Error::OutOfBounds { .. }) => {}
            other => panic!("({offset}, {len}): {other:?}"),
        }
    }
}

#[test]
fn drained_downloads_dropped_midway_without_staging_growth_page_lock_nothing_and_none_stalls() {
    in_child(
        "drained::drained_downloads_dropped_midway_without_staging_growth_page_lock_nothing_and_none_stalls",
        dropped_without_growth,
    );
}

fn dropped_without_growth() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    host.reserve_staging(1).unwrap();
    host.set_staging_growth(false);
    let registered = || host.stats().pinned_registrations;
    let at_start = registered();
    let s = Arc::new(host.stream().unwrap());
    let size = 40 << 20;
    let buf = host.alloc(size).unwrap();
    let data = pattern(size, 9);
    block_on(s.upload(&buf, 0, &data)).unwrap();
    for i in 0..10 {
        let mut d = s.start_download(&buf, 0, size).unwrap();
        block_on(std::future::poll_fn(|cx| d.poll_landed(cx))).unwrap();
        let mut w = vec![0u8; 1000 + i];
        let n = d.drain_into(&mut w).unwrap();
        assert!(w[..n] == data[..n], "the first bytes of a dropped download");
        // Dropped with DMAs still queued: the next download waits for their staging.
    }
    let mut d = s.start_download(&buf, 0, size).unwrap();
    assert!(
        drain_all(&mut d, 3 << 20) == data,
        "a whole download after the drops"
    );
    assert_eq!(registered(), at_start, "no download page-locked memory");

    // One left open and undrained holds staging indefinitely: another still completes.
    let mut held = s.start_download(&buf, 0, size).unwrap();
    block_on(std::future::poll_fn(|cx| held.poll_landed(cx))).unwrap();
    let mut other = s.start_download(&buf, 0, size).unwrap();
    assert!(
        drain_all(&mut other, 3 << 20) == data,
        "a download beside an undrained one"
    );
    assert!(
        drain_all(&mut held, 1 << 20) == data,
        "the undrained one, drained at last"
    );
    host.set_staging_growth(true);
}
