//! Page-locked `HostBuffer`s: filled and read in place, transferred with one DMA
//! (`Stream::upload_from`, `download_into`) at any offsets, zeroed when handed out, ranges
//! checked with typed errors, and safe to cancel or to lose the context under.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use gpuhost::{Arg, Error, LaunchConfig};

use crate::common::{
    block_on, bundle, exclusive, foreign_reset, host, pattern, shared, two_workers,
};

#[test]
fn host_buffers_round_trip_every_size_and_offset_leaving_the_bytes_around_untouched() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let sizes = [1usize, 3, 4095, 4096, 4097, 65_537, 1 << 20, (3 << 20) + 5];
    block_on(async {
        for (i, &len) in sizes.iter().enumerate() {
            let (dev_off, host_off) = (i * 7 % 13, i * 5 % 11);
            let data = pattern(len, i as u32);
            let mut src = host.host_buffer(host_off + len + 3).unwrap();
            src.as_mut_slice()[host_off..host_off + len].copy_from_slice(&data);
            let buf = host.alloc(dev_off + len + 9).unwrap();
            s.fill(&buf, 0, buf.len(), 0xEE).unwrap().await.unwrap();
            s.upload_from(&buf, dev_off, &src, host_off..host_off + len)
                .await
                .unwrap();
            // Download the whole device buffer into another host buffer at another offset.
            let mut dst = host.host_buffer(buf.len() + 2).unwrap();
            dst.as_mut_slice().fill(0x55);
            s.download_into(&buf, 0, &mut dst, 2..2 + buf.len())
                .await
                .unwrap();
            let back = dst.as_slice();
            assert_eq!(&back[..2], &[0x55, 0x55], "{len}: bytes before the range");
            let dev = &back[2..];
            assert!(dev[..dev_off].iter().all(|&b| b == 0xEE), "{len}: before");
            assert!(dev[dev_off..dev_off + len] == data[..], "{len}: the data");
            assert!(
                dev[dev_off + len..].iter().all(|&b| b == 0xEE),
                "{len}: after"
            );
            // The pageable path reads what the direct one wrote.
            let mut plain = vec![0u8; len];
            s.download(&buf, dev_off, &mut plain).await.unwrap();
            assert!(plain == data, "{len}: pageable download");
        }
    });
}

#[test]
fn host_buffers_are_zeroed_when_handed_out_even_from_the_pool() {
    let _g = shared();
    let Some(host) = host() else { return };
    for _ in 0..3 {
        let mut b = host.host_buffer(100_000).unwrap();
        assert_eq!(b.len(), 100_000);
        assert!(
            b.as_slice().iter().all(|&x| x == 0),
            "an earlier user's bytes"
        );
        b.as_mut_slice().fill(0xAB);
    }
    let empty = host.host_buffer(0).unwrap();
    assert!(empty.is_empty() && empty.as_slice().is_empty());
}

#[test]
fn host_buffer_ranges_out_of_bounds_are_typed_errors_and_empty_ranges_do_nothing() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let buf = host.alloc(64).unwrap();
    let mut hb = host.host_buffer(32).unwrap();
    block_on(async {
        let host_range = |r: gpuhost::Result<()>, what: &str| match r {
            Err(e @ Error::HostRange { .. }) => assert!(e.to_string().contains("32-byte"), "{e}"),
            other => panic!("{what}: expected HostRange, got {other:?}"),
        };
        host_range(s.upload_from(&buf, 0, &hb, 0..33).await, "past the end");
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 9..3;
        host_range(
            s.upload_from(&buf, 0, &hb, reversed.clone()).await,
            "reversed",
        );
        host_range(
            s.download_into(&buf, 0, &mut hb, reversed).await,
            "reversed",
        );
        host_range(
            s.download_into(&buf, 0, &mut hb, 30..usize::MAX).await,
            "huge",
        );
        let oob = |r: gpuhost::Result<()>| matches!(r, Err(Error::OutOfBounds { .. }));
        assert!(oob(s.upload_from(&buf, 40, &hb, 0..32).await));
        assert!(oob(s.download_into(&buf, usize::MAX, &mut hb, 0..2).await));
        s.upload_from(&buf, 64, &hb, 32..32).await.unwrap();
        s.download_into(&buf, 0, &mut hb, 0..0).await.unwrap();
    });
}

/// Elements of the buffer `stamp_world` makes.
const N: u32 = 1 << 18;

/// The stamp kernel, a stream, and a buffer of N u32s.
fn stamp_world(
    host: &Arc<gpuhost::Host>,
) -> (gpuhost::Kernel, gpuhost::Stream, gpuhost::DeviceBuffer) {
    let reg = gpuhost::Registry::load(host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    (
        k,
        host.stream().unwrap(),
        host.alloc(N as usize * 4).unwrap(),
    )
}

/// Queues a stamp over `n` elements of `buf`: work that keeps what is queued after it waiting
/// (on softcuda surely; on a GPU perhaps not).
fn keep_busy(
    s: &gpuhost::Stream,
    k: &gpuhost::Kernel,
    buf: &gpuhost::DeviceBuffer,
    n: u32,
) -> gpuhost::Completion {
    s.launch(
        k,
        LaunchConfig::for_elements(n, 256),
        &[Arg::Buffer(buf, 0), Arg::U32(n)],
    )
    .unwrap()
}

/// Polls a future once (so it enqueues its work) and drops it.
fn poll_once_then_drop<F: Future>(f: F) -> bool {
    let mut f = std::pin::pin!(f);
    let ready = f.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    matches!(ready, Poll::Ready(_))
}

#[test]
fn a_cancelled_download_leaves_the_host_buffer_whole_and_usable() {
    let _g = shared();
    let Some(host) = host() else { return };
    let (k, s, buf) = stamp_world(&host);
    let n = N;
    let mut hb = host.host_buffer(buf.len()).unwrap();
    for round in 0..4 {
        // Work queued ahead keeps the download's DMA waiting when it is dropped (on softcuda
        // surely; on a GPU it may already be done: both outcomes are whole).
        let busy = keep_busy(&s, &k, &buf, n);
        let finished = poll_once_then_drop(s.download_into(&buf, 0, &mut hb, 0..buf.len()));
        let got = hb.as_slice();
        let zeroed = got.iter().all(|&b| b == 0);
        let expected: Vec<u8> = (0..n)
            .flat_map(|i| (crate::common::TAG_A + i).to_le_bytes())
            .collect();
        assert!(
            zeroed || got == expected,
            "round {round}: neither fresh memory nor the downloaded bytes (finished: {finished})"
        );
        println!("round {round}: moved to fresh memory: {zeroed}");
        busy.wait().unwrap();
        // The buffer still works, wherever its memory now is.
        hb.as_mut_slice().fill(1);
        block_on(s.download_into(&buf, 0, &mut hb, 0..buf.len())).unwrap();
        assert!(hb.as_slice() == expected);
        hb.as_mut_slice().fill(0);
    }
}

#[test]
fn a_context_reset_during_host_buffer_transfers_ends_them_ok_or_lost_then_the_buffer_works_again() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let rt = two_workers();
    const LEN: usize = 16 << 20;
    let data = Arc::new(pattern(LEN, 3));
    let mut keep = host.host_buffer(LEN).unwrap();
    keep.as_mut_slice().copy_from_slice(&data);
    let mut keep = Some(keep);
    for round in 0..3u64 {
        let (stream, buf) = (host.stream().unwrap(), host.alloc(LEN).unwrap());
        let g = host.generation();
        let (src, mut dst) = (keep.take().unwrap(), host.host_buffer(LEN).unwrap());
        let (started, on_start) = std::sync::mpsc::channel();
        let task = rt.spawn(async move {
            let mut outcomes = vec![stream.upload_from(&buf, 0, &src, 0..LEN).await];
            started.send(()).unwrap();
            for _ in 0..6 {
                outcomes.push(stream.upload_from(&buf, 0, &src, 0..LEN).await);
                let r = stream.download_into(&buf, 0, &mut dst, 0..LEN).await;
                if r.is_ok() {
                    assert!(
                        dst.as_slice() == src.as_slice(),
                        "a download read wrong bytes"
                    );
                }
                outcomes.push(r);
            }
            (outcomes, src)
        });
        on_start.recv().unwrap();
        std::thread::sleep(Duration::from_millis(1 + 2 * round));
        foreign_reset();
        let (outcomes, src) = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), task).await })
            .expect("the transfers did not end in time")
            .expect("the transfer task did not panic");
        let lost = outcomes
            .into_iter()
            .filter(|r| match r {
                Ok(()) => false,
                Err(Error::ContextLost { .. }) => true,
                Err(e) => panic!("expected Ok or ContextLost, got {e:?}"),
            })
            .count();
        println!("round {round}: {lost} of 13 transfers lost");
        // The buffer kept across the reset still holds its bytes, and transfers again.
        assert!(
            *src.as_slice() == data[..],
            "a context loss changed a host buffer"
        );
        let (stream, buf) = (host.stream().unwrap(), host.alloc(LEN).unwrap());
        assert!(host.generation() > g, "the reset was seen");
        let mut back = host.host_buffer(LEN).unwrap();
        rt.block_on(async {
            stream.upload_from(&buf, 0, &src, 0..LEN).await.unwrap();
            stream
                .download_into(&buf, 0, &mut back, 0..LEN)
                .await
                .unwrap();
        });
        assert!(*back.as_slice() == data[..], "transfers after recovery");
        keep = Some(src);
    }
}

#[test]
fn a_download_after_an_abandoned_upload_keeps_the_bytes_outside_its_range_and_its_own_result() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let n = 1u32 << 18;
    let (buf, other) = (
        host.alloc(n as usize * 4).unwrap(),
        host.alloc(4096).unwrap(),
    );
    let data = pattern(buf.len(), 9);
    let mut hb = host.host_buffer(buf.len()).unwrap();
    for _ in 0..3 {
        hb.as_mut_slice().copy_from_slice(&data);
        block_on(async { s.fill(&other, 0, 4096, 0x42).unwrap().await.unwrap() });
        let busy = keep_busy(&s, &k, &buf, n);
        // Enqueued behind the kernel, then abandoned: its DMA still reads `hb`.
        poll_once_then_drop(s.upload_from(&buf, 0, &hb, 0..buf.len()));
        block_on(s.download_into(&other, 0, &mut hb, 100..4196)).unwrap();
        busy.wait().unwrap();
        let got = hb.as_slice();
        assert!(got[100..4196].iter().all(|&b| b == 0x42), "the download");
        assert!(got[..100] == data[..100], "the bytes before it");
        assert!(got[4196..] == data[4196..], "the bytes after it");
    }
}

#[test]
fn a_leaked_download_leaves_its_host_buffer_empty_never_racing_the_dma() {
    let _g = shared();
    let Some(host) = host() else { return };
    let (k, s, buf) = stamp_world(&host);
    let n = N;
    let mut hb = host.host_buffer(buf.len()).unwrap();
    let busy = keep_busy(&s, &k, &buf, n);
    let mut download = Box::pin(s.download_into(&buf, 0, &mut hb, 0..buf.len()));
    let ready = download
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
        .is_ready();
    std::mem::forget(download);
    busy.wait().unwrap();
    if ready {
        assert_eq!(
            hb.len(),
            buf.len(),
            "a download that ended gave its memory back"
        );
    } else {
        // Its DMA may still write the region it took: the buffer no longer shows it.
        assert!(hb.is_empty() && hb.as_slice().is_empty() && hb.as_mut_slice().is_empty());
        let r = block_on(s.download_into(&buf, 0, &mut hb, 0..4));
        assert!(matches!(r, Err(Error::HostRange { size: 0, .. })), "{r:?}");
    }
    println!("the first poll ended the download: {ready}");
}
