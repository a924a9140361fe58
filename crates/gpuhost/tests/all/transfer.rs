//! Stream-ordered transfers (`Stream::upload`, `download`, `fill`, `copy`): correct across
//! staging chunks at unaligned offsets, ordered after the stream's launches, checked, and never
//! blocking the thread that awaits them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gpuhost::{Arg, LaunchConfig};

use crate::common::{
    TAG_A, block_on, bundle, exclusive, expected, host, pattern, read_u32s, shared,
};

#[test]
fn uploads_and_downloads_spanning_several_staging_chunks_round_trip_at_unaligned_offsets() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let size = (3 << 20) + 123;
    let buf = host.alloc(size).unwrap();
    let data = pattern((5 << 19) + 5, 7);
    block_on(async {
        s.fill(&buf, 0, size, 0xEE).unwrap().await.unwrap();
        s.upload(&buf, 7, &data).await.unwrap();
        let mut back = vec![0u8; size];
        s.download(&buf, 0, &mut back).await.unwrap();
        assert!(
            back[..7].iter().all(|&b| b == 0xEE),
            "bytes before the upload"
        );
        assert!(back[7..7 + data.len()] == data[..], "the uploaded bytes");
        assert!(
            back[7 + data.len()..].iter().all(|&b| b == 0xEE),
            "bytes after it"
        );
        // A device-to-device copy, then a small read at an odd offset.
        let other = host.alloc(size).unwrap();
        s.copy(&other, 1, &buf, 7, data.len())
            .unwrap()
            .await
            .unwrap();
        let mut small = vec![0u8; 301];
        s.download(&other, 1 + 1000, &mut small).await.unwrap();
        assert_eq!(small, data[1000..1301]);
    });
}

#[test]
fn a_download_is_ordered_after_the_launches_queued_before_it() {
    let _g = shared();
    let Some(host) = host() else { return };
    let reg = gpuhost::Registry::load(&host, bundle("stamp-a")).unwrap();
    let k = reg.kernel("stamp").unwrap();
    let s = host.stream().unwrap();
    let n = 1 << 18;
    let out = host.alloc(n as usize * 4).unwrap();
    block_on(async {
        s.fill(&out, 0, n as usize * 4, 0).unwrap().await.unwrap();
        let launched = s
            .launch(
                &k,
                LaunchConfig::for_elements(n, 256),
                &[Arg::Buffer(&out, 0), Arg::U32(n)],
            )
            .unwrap();
        let mut bytes = vec![0u8; n as usize * 4];
        s.download(&out, 0, &mut bytes).await.unwrap();
        assert!(
            launched.is_done(),
            "the download's fence covered the launch"
        );
        let got: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(got, expected(TAG_A, n));
    });
    assert_eq!(read_u32s(&out, 4), expected(TAG_A, 4));
}

#[test]
fn transfers_out_of_range_are_refused_before_anything_is_enqueued() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let buf = host.alloc(64).unwrap();
    let oob = |r: gpuhost::Result<()>| matches!(r, Err(gpuhost::Error::OutOfBounds { .. }));
    block_on(async {
        assert!(oob(s.upload(&buf, 60, &[0; 8]).await));
        assert!(oob(s.download(&buf, usize::MAX, &mut [0; 2]).await));
        assert!(oob(s.fill(&buf, 65, 0, 1).map(drop)));
        assert!(oob(s.copy(&buf, 0, &buf, 32, 33).map(drop)));
        s.upload(&buf, 0, &[9; 64]).await.unwrap();
    });
}

#[test]
fn a_large_download_leaves_its_thread_free_for_other_tasks() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let size = 64 << 20;
    let buf = host.alloc(size).unwrap();
    let (ticks, done) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let ticker = {
            let (ticks, done) = (ticks.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    ticks.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            })
        };
        s.fill(&buf, 0, size, 3).unwrap().await.unwrap();
        let before = ticks.load(Ordering::Relaxed);
        let mut out = vec![0u8; size];
        s.download(&buf, 0, &mut out).await.unwrap();
        let during = ticks.load(Ordering::Relaxed) - before;
        done.store(true, Ordering::Relaxed);
        ticker.await.unwrap();
        assert!(out.iter().all(|&b| b == 3));
        // One thread runs both: the other task ran between the chunks at least, whether the
        // device kept the download waiting or had each chunk ready before it was awaited.
        let chunks = (size / host.transfer_config().chunk_bytes) as u64;
        assert!(
            during >= chunks,
            "the download held its thread: another task ran {during} times"
        );
        println!("{during} ticks of another task during a 64 MiB download");
    });
}

#[test]
fn pageable_transfers_round_trip_under_every_staging_configuration() {
    // Alone: the configuration is the host's, and another test checks it is left unchanged.
    let _g = exclusive();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let before = host.transfer_config();
    let configs = [
        (64 << 10, 1, 0),
        (64 << 10, 2, 1),
        (1 << 20, 3, 4),
        (8 << 20, 16, 8),
    ];
    let sizes = [1usize, 100_000, (3 << 20) + 123, 5 << 20];
    let buf = host.alloc((5 << 20) + 64).unwrap();
    for (chunk_bytes, chunks_in_flight, copy_threads) in configs {
        let cfg = gpuhost::TransferConfig {
            chunk_bytes,
            chunks_in_flight,
            copy_threads,
        };
        host.set_transfer_config(cfg).unwrap();
        assert_eq!(host.transfer_config(), cfg);
        for (i, &len) in sizes.iter().enumerate() {
            let data = pattern(len, i as u32 + chunk_bytes as u32);
            let mut back = vec![0u8; len + 2];
            block_on(async {
                s.fill(&buf, 0, buf.len(), 0x11).unwrap().await.unwrap();
                s.upload(&buf, 33, &data).await.unwrap();
                s.download(&buf, 32, &mut back).await.unwrap();
            });
            let what = format!("{cfg:?}, {len} bytes");
            assert_eq!(back[0], 0x11, "{what}: the byte before");
            assert!(back[1..=len] == data[..], "{what}: the data");
            assert_eq!(back[len + 1], 0x11, "{what}: the byte after");
        }
    }
    host.set_transfer_config(before).unwrap();
}

#[test]
fn transfer_configurations_out_of_bounds_are_refused_naming_the_setting() {
    let _g = shared();
    let Some(host) = host() else { return };
    let ok = host.transfer_config();
    let cases = [
        (1024, 3, 1, "chunk_bytes"),
        (1 << 30, 3, 1, "chunk_bytes"),
        (1 << 20, 0, 1, "chunks_in_flight"),
        (1 << 20, 17, 1, "chunks_in_flight"),
        (1 << 20, 3, 1000, "copy_threads"),
    ];
    for (chunk_bytes, chunks_in_flight, copy_threads, name) in cases {
        let cfg = gpuhost::TransferConfig {
            chunk_bytes,
            chunks_in_flight,
            copy_threads,
        };
        match host.set_transfer_config(cfg) {
            Err(e @ gpuhost::Error::TransferConfig { .. }) => {
                assert!(e.to_string().contains(name), "{e}")
            }
            other => panic!("{cfg:?}: expected TransferConfig, got {other:?}"),
        }
        assert_eq!(
            host.transfer_config(),
            ok,
            "a refused config changed nothing"
        );
    }
}
