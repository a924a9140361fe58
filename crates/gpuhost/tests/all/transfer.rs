//! Stream-ordered transfers (`Stream::upload`, `download`, `fill`, `copy`): correct across
//! staging chunks at unaligned offsets, ordered after the stream's launches, checked, never
//! blocking the thread that awaits them, served by the staging reserve once there is one (and so
//! are host buffers tried from the pool), and done with the caller's memory as soon as they are
//! dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gpuhost::{Arg, LaunchConfig};

use crate::common::{
    Mapped, TAG_A, block_on, bundle, exclusive, expected, host, pattern, read_u32s, shared,
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
    // Every shape with cached and with streaming host stores.
    let configs = configs.into_iter().flat_map(|c| [(c, false), (c, true)]);
    let sizes = [1usize, 100_000, (3 << 20) + 123, 5 << 20];
    let buf = host.alloc((5 << 20) + 64).unwrap();
    for ((chunk_bytes, chunks_in_flight, copy_threads), streaming_stores) in configs {
        let cfg = gpuhost::TransferConfig {
            chunk_bytes,
            chunks_in_flight,
            copy_threads,
            streaming_stores,
            // The smallest step, so the 5 MiB transfers take several steps per chunk.
            copy_step_bytes: 64 << 10,
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
    // One setting out of bounds in each (a 256 KiB copy step is the default).
    let cases = [
        (1024, 3, 1, 256 << 10, "chunk_bytes"),
        (1 << 30, 3, 1, 256 << 10, "chunk_bytes"),
        (1 << 20, 0, 1, 256 << 10, "chunks_in_flight"),
        (1 << 20, 17, 1, 256 << 10, "chunks_in_flight"),
        (1 << 20, 3, 1000, 256 << 10, "copy_threads"),
        (1 << 20, 3, 1, 1 << 10, "copy_step_bytes"),
        (1 << 20, 3, 1, 1 << 30, "copy_step_bytes"),
    ];
    for (chunk_bytes, chunks_in_flight, copy_threads, copy_step_bytes, name) in cases {
        let cfg = gpuhost::TransferConfig {
            chunk_bytes,
            chunks_in_flight,
            copy_threads,
            streaming_stores: false,
            copy_step_bytes,
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

#[test]
fn a_download_to_a_vec_returns_exactly_the_range_and_refuses_one_out_of_bounds() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let size = (9 << 20) + 77;
    let buf = host.alloc(size).unwrap();
    let data = pattern(size, 3);
    block_on(async {
        s.upload(&buf, 0, &data).await.unwrap();
        for (at, len) in [(0, 0), (5, 1), (13, 100_000), (1, (9 << 20) + 3), (0, size)] {
            let back = s.download_to_vec(&buf, at, len).await.unwrap();
            assert_eq!(back.len(), len);
            assert!(back[..] == data[at..at + len], "{len} bytes at {at}");
        }
        let oob = s.download_to_vec(&buf, size - 3, 4).await;
        assert!(
            matches!(oob, Err(gpuhost::Error::OutOfBounds { .. })),
            "{oob:?}"
        );
    });
}

#[test]
fn after_a_reserve_transfers_of_every_size_and_pooled_host_buffers_page_lock_no_more_memory() {
    crate::common::in_child(
        "transfer::after_a_reserve_transfers_of_every_size_and_pooled_host_buffers_page_lock_no_more_memory",
        transfers_after_a_reserve,
    );
}

fn transfers_after_a_reserve() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let cfg = host.transfer_config();
    let registered = || host.stats().pinned_registrations;
    let at_start = registered();
    host.reserve_staging(1).unwrap();
    let reserved = registered();
    assert_eq!(
        reserved - at_start,
        cfg.chunks_in_flight as u64 + 1,
        "the reserve is page-locked up front: one transfer's chunks in flight, plus one"
    );
    let size = 64 << 20;
    let buf = host.alloc(size + 1).unwrap();
    for (i, len) in [1, 4095, 100_000, (3 << 20) + 123, 9 << 20, size]
        .into_iter()
        .enumerate()
    {
        let data = pattern(len, i as u32);
        block_on(async {
            s.upload(&buf, 1, &data).await.unwrap();
            let back = s.download_to_vec(&buf, 1, len).await.unwrap();
            assert!(back == data, "{len} bytes");
            let mut again = vec![0u8; len];
            s.download(&buf, 1, &mut again).await.unwrap();
            assert!(again == data, "{len} bytes");
        });
    }
    assert_eq!(
        registered(),
        reserved,
        "no transfer page-locked memory of its own"
    );
    // Host buffers tried from the pool take its regions (a staging chunk for 4 bytes), zeroed,
    // until none is free, and never page-lock one.
    let last = pattern(size, 5);
    let mut held = Vec::new();
    while let Some(mut landing) = host.try_host_buffer(4) {
        assert!(landing.as_slice() == [0; 4], "an earlier user's bytes");
        block_on(s.download_into(&buf, 1, &mut landing, 0..4)).unwrap();
        assert!(landing.as_slice() == &last[..4]);
        held.push(landing);
        assert!(held.len() <= 256, "the pool never runs out");
    }
    assert!(held.len() > cfg.chunks_in_flight, "the reserve's regions");
    drop(held);
    assert_eq!(registered(), reserved, "no host buffer page-locked memory");
    // A new chunk size re-makes the reserve at once, not on the next transfers.
    let bigger = gpuhost::TransferConfig {
        chunk_bytes: 16 << 20,
        ..cfg
    };
    host.set_transfer_config(bigger).unwrap();
    let remade = registered();
    assert!(
        remade > reserved,
        "the reserve was re-made for 16 MiB chunks"
    );
    let data = pattern(size, 9);
    block_on(async {
        s.upload(&buf, 0, &data).await.unwrap();
        assert!(s.download_to_vec(&buf, 0, size).await.unwrap() == data);
    });
    assert_eq!(
        registered(),
        remade,
        "transfers under the new config page-lock nothing either"
    );
}

#[test]
fn once_an_upload_is_dropped_midway_nothing_reads_its_source_again() {
    let _g = shared();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let len = 16 << 20;
    let buf = host.alloc(len).unwrap();
    let mut src = Mapped::new(len);
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    {
        let mut upload = std::pin::pin!(s.upload(&buf, 0, src.bytes()));
        // One poll copies one step of the first chunk and yields before the next.
        assert!(upload.as_mut().poll(&mut cx).is_pending());
    }
    // Any read of the source from now on faults and kills this process.
    src.forbid_access();
    block_on(async {
        s.upload(&buf, 0, &pattern(len, 5)).await.unwrap();
        assert!(s.download_to_vec(&buf, 0, len).await.unwrap() == pattern(len, 5));
    });
    s.synchronize().unwrap();
}

#[test]
fn with_staging_growth_off_transfers_past_the_pool_use_the_pageable_path_and_page_lock_nothing() {
    crate::common::in_child(
        "transfer::with_staging_growth_off_transfers_past_the_pool_use_the_pageable_path_and_page_lock_nothing",
        uploads_without_growth,
    );
}

fn uploads_without_growth() {
    let _g = exclusive();
    let Some(host) = host() else { return };
    host.set_staging_growth(false);
    let s = host.stream().unwrap();
    let registered = || host.stats().pinned_registrations;
    let at_start = registered();
    let size = 20 << 20;
    let buf = host.alloc(size + 1).unwrap();
    for (i, len) in [1, 4095, 100_000, (3 << 20) + 123, size]
        .into_iter()
        .enumerate()
    {
        let data = pattern(len, 7 + i as u32);
        block_on(async {
            s.upload(&buf, 1, &data).await.unwrap();
            let mut back = vec![0u8; len];
            buf.read(1, &mut back).unwrap();
            assert!(back == data, "{len} bytes");
            // Downloads too: beyond the pool, the pageable path into the destination itself.
            let down = s.download_to_vec(&buf, 1, len).await.unwrap();
            assert!(down == data, "{len} bytes down");
        });
    }
    assert_eq!(registered(), at_start, "no transfer page-locked memory");
    host.set_staging_growth(true);
}

#[test]
fn pageable_transfers_count_the_bytes_they_stage_and_the_time_spent_copying_and_awaiting_dmas() {
    // Exclusive: the counters are the host's, and another test's transfers would add to them.
    let _g = exclusive();
    let Some(host) = host() else { return };
    let s = host.stream().unwrap();
    let size = (5 << 20) + 17; // several chunks, so some DMA is awaited
    let buf = host.alloc(size).unwrap();
    let data = pattern(size, 3);
    let before = host.stats();
    let mut back = vec![0u8; size];
    block_on(async {
        s.upload(&buf, 0, &data).await.unwrap();
        s.download(&buf, 0, &mut back).await.unwrap();
    });
    assert!(back == data);
    let after = host.stats();
    assert_eq!(
        after.staged_bytes - before.staged_bytes,
        2 * size as u64,
        "every byte staged once each way"
    );
    assert!(after.staging_copy_ns > before.staging_copy_ns, "copy time");
    assert!(after.staging_wait_ns > before.staging_wait_ns, "DMA waits");
    // A HostBuffer's transfer is one DMA, staged nowhere.
    let mut hb = host.host_buffer(size).unwrap();
    block_on(s.download_into(&buf, 0, &mut hb, 0..size)).unwrap();
    assert_eq!(host.stats().staged_bytes, after.staged_bytes);
}
