//! Kernel graphs: a replay computes exactly what the same launches on a stream compute, with
//! arguments updated between replays, and refuses what `Stream::launch` refuses; a replay
//! through `replay_graph` does so with one Completion, checking only the launches not flagged
//! unchanged, and never keeps a buffer its owner dropped (nor replays it).

use gpuhost::{
    Arg, Error, GraphLaunch, KernelGraph, LaunchConfig, ModuleImage, ModuleSource, Registry,
};

use std::sync::Arc;

use gpuhost::Host;

use crate::common::{exclusive, host, settled_stats, shared};

/// `mix(p, v)`: `*p = *p * 3 + v` — the result depends on every launch, its argument and the
/// order the launches ran in.
fn mix_ptx() -> String {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo");
    let path = format!("{dir}/tests/fixtures/mix.ptx");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const ONE: LaunchConfig = LaunchConfig {
    grid: [1, 1, 1],
    block: [1, 1, 1],
    shared_mem_bytes: 0,
};

fn read_u32(b: &gpuhost::DeviceBuffer) -> u32 {
    let mut out = [0u8; 4];
    b.read(0, &mut out).expect("read");
    u32::from_le_bytes(out)
}

/// The buffers the graph wrote hold what the stream launches wrote into theirs.
fn assert_agree(
    round: usize,
    graph: [&gpuhost::DeviceBuffer; 2],
    stream: [&gpuhost::DeviceBuffer; 2],
) {
    assert_eq!(
        graph.map(read_u32),
        stream.map(read_u32),
        "round {round}: graph and stream launches disagree"
    );
}

#[test]
fn graph_replays_match_stream_launches_with_arguments_changed_between_replays() {
    let _g = shared();
    let Some(host) = host() else { return };
    let src = ModuleSource::new("mix", ModuleImage::Ptx(mix_ptx()));
    let reg = Registry::from_sources(&host, "graph-test", vec![src]).unwrap();
    let k = reg.kernel("mix").unwrap();
    let stream = host.stream().unwrap();
    let (a, b) = (host.alloc(4).unwrap(), host.alloc(4).unwrap());
    let (ga, gb) = (host.alloc(4).unwrap(), host.alloc(4).unwrap());
    for buf in [&a, &b, &ga, &gb] {
        buf.write(0, &1u32.to_le_bytes()).unwrap();
    }
    let mut graph: Option<KernelGraph> = None;
    // Three replays: the first builds the graph, the second changes scalars, the third swaps
    // which buffer each node writes.
    for (round, (x, y)) in [
        ((&a, &b), (&ga, &gb)),
        ((&a, &b), (&ga, &gb)),
        ((&b, &a), (&gb, &ga)),
    ]
    .into_iter()
    .enumerate()
    {
        let v = |i: u32| 10 * round as u32 + i;
        let plain = [(x.0, v(1)), (x.1, v(2)), (x.0, v(3)), (x.0, v(4))];
        for (buf, val) in plain {
            drop(
                stream
                    .launch(&k, ONE, &[Arg::Buffer(buf, 0), Arg::U32(val)])
                    .unwrap(),
            );
        }
        let args: Vec<[Arg<'_>; 2]> = [(y.0, v(1)), (y.1, v(2)), (y.0, v(3)), (y.0, v(4))]
            .iter()
            .map(|&(buf, val)| [Arg::Buffer(buf, 0), Arg::U32(val)])
            .collect();
        let launches: Vec<GraphLaunch<'_>> = args
            .iter()
            .map(|a| GraphLaunch {
                kernel: &k,
                cfg: ONE,
                args: a,
            })
            .collect();
        let g = match &mut graph {
            Some(g) => g,
            None => graph.insert(KernelGraph::new(&stream, &launches).unwrap()),
        };
        assert!(g.fits(&launches));
        let done = stream.launch_graph(g, &launches).unwrap();
        assert_eq!(done.len(), 4, "one Completion per launch");
        for d in done {
            d.wait().unwrap();
        }
        stream.synchronize().unwrap();
        assert_agree(round, [&ga, &gb], [&a, &b]);
    }
    assert_ne!(read_u32(&a), 1, "the kernels ran");
}

#[test]
fn graph_refuses_what_a_launch_refuses_and_launches_of_another_shape() {
    let _g = shared();
    let Some(host) = host() else { return };
    let src = ModuleSource::new("mix", ModuleImage::Ptx(mix_ptx()));
    let reg = Registry::from_sources(&host, "graph-refusals", vec![src]).unwrap();
    let k = reg.kernel("mix").unwrap();
    let stream = host.stream().unwrap();
    let buf = host.alloc(4).unwrap();
    let ok = [Arg::Buffer(&buf, 0), Arg::U32(1)];
    let one = |args| GraphLaunch {
        kernel: &k,
        cfg: ONE,
        args,
    };
    match KernelGraph::new(&stream, &[one(&[Arg::U32(1)])]) {
        Err(Error::ArgMismatch { kernel, .. }) => assert_eq!(kernel, "mix"),
        other => panic!("expected ArgMismatch, got {:?}", other.map(|g| g.len())),
    }
    match KernelGraph::new(&stream, &[]) {
        Err(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains("at least one")),
        other => panic!("expected InvalidLaunch, got {:?}", other.map(|g| g.len())),
    }
    let mut g = KernelGraph::new(&stream, &[one(&ok)]).unwrap();
    let wide = GraphLaunch {
        cfg: LaunchConfig {
            block: [2, 1, 1],
            ..ONE
        },
        ..one(&ok)
    };
    match stream.launch_graph(&mut g, &[wide]) {
        Err(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains("shape"), "{reason}"),
        other => panic!("expected InvalidLaunch, got {:?}", other.map(|d| d.len())),
    }
    match stream.launch_graph(&mut g, &[one(&[Arg::Buffer(&buf, 8), Arg::U32(1)])]) {
        Err(Error::ArgMismatch { reason, .. }) => assert!(reason.contains("offset 8"), "{reason}"),
        other => panic!("expected ArgMismatch, got {:?}", other.map(|d| d.len())),
    }
}

/// The host, the `mix` kernel of a registry named `name`, and a stream (None: no driver).
fn mix_kernel(name: &str) -> Option<(Arc<Host>, gpuhost::Kernel, gpuhost::Stream)> {
    let host = host()?;
    let src = ModuleSource::new("mix", ModuleImage::Ptx(mix_ptx()));
    let reg = Registry::from_sources(&host, name, vec![src]).unwrap();
    let k = reg.kernel("mix").unwrap();
    let stream = host.stream().unwrap();
    Some((host, k, stream))
}

/// Four `mix` launches on `bufs[i]` with `vals[i]`, as argument lists.
fn mix_args<'a>(bufs: [&'a gpuhost::DeviceBuffer; 4], vals: [u32; 4]) -> Vec<[Arg<'a>; 2]> {
    bufs.into_iter()
        .zip(vals)
        .map(|(b, v)| [Arg::Buffer(b, 0), Arg::U32(v)])
        .collect()
}

/// A launch of `k` with `args` on one thread.
fn launch_of<'a>(k: &'a gpuhost::Kernel, args: &'a [Arg<'a>]) -> GraphLaunch<'a> {
    GraphLaunch {
        kernel: k,
        cfg: ONE,
        args,
    }
}

/// One launch of `k` on one thread per argument list.
fn graph_launches<'a>(k: &'a gpuhost::Kernel, args: &'a [[Arg<'a>; 2]]) -> Vec<GraphLaunch<'a>> {
    args.iter().map(|a| launch_of(k, a)).collect()
}

#[test]
fn replay_graph_gives_one_completion_counts_every_launch_and_updates_the_nodes_not_flagged() {
    // Alone: the host's launch count is compared.
    let _g = exclusive();
    let Some((host, k, stream)) = mix_kernel("graph-replay") else {
        return;
    };
    let (a, b) = (host.alloc(4).unwrap(), host.alloc(4).unwrap());
    let (ga, gb) = (host.alloc(4).unwrap(), host.alloc(4).unwrap());
    for buf in [&a, &b, &ga, &gb] {
        buf.write(0, &1u32.to_le_bytes()).unwrap();
    }
    let first = mix_args([&ga, &gb, &ga, &ga], [1, 2, 3, 4]);
    let mut graph = KernelGraph::new(&stream, &graph_launches(&k, &first)).unwrap();
    // Replays: as built (all unchanged); nodes 1 and 3 changed (a scalar, then a buffer);
    // the same again with nodes 1 and 3 flagged unchanged (they hold those arguments now).
    let rounds: [([&gpuhost::DeviceBuffer; 4], [u32; 4], [bool; 4]); 3] = [
        ([&ga, &gb, &ga, &ga], [1, 2, 3, 4], [true; 4]),
        (
            [&ga, &gb, &ga, &gb],
            [1, 7, 3, 8],
            [true, false, true, false],
        ),
        (
            [&ga, &gb, &ga, &gb],
            [1, 7, 3, 8],
            [false, true, false, true],
        ),
    ];
    for (round, (gbufs, vals, unchanged)) in rounds.into_iter().enumerate() {
        // The same launches on a stream, on a and b.
        let plain = gbufs.map(|g| if std::ptr::eq(g, &ga) { &a } else { &b });
        for (buf, v) in plain.into_iter().zip(vals) {
            drop(
                stream
                    .launch(&k, ONE, &[Arg::Buffer(buf, 0), Arg::U32(v)])
                    .unwrap(),
            );
        }
        let before = settled_stats(&host).launches;
        let args = mix_args(gbufs, vals);
        let done = stream
            .replay_graph(&mut graph, &graph_launches(&k, &args), &unchanged)
            .unwrap();
        assert_eq!(
            host.stats().launches - before,
            4,
            "round {round}: a replay of 4 launches was not counted as 4"
        );
        done.wait().unwrap();
        assert_agree(round, [&ga, &gb], [&a, &b]);
    }
    assert_ne!(read_u32(&gb), 1, "the kernels ran");
    assert_eq!(
        settled_stats(&host).pending_launches,
        0,
        "a replay stayed pending"
    );
}

#[test]
fn replay_graph_refuses_a_changed_launch_as_a_launch_would_and_any_other_shape() {
    let _g = shared();
    let Some((host, k, stream)) = mix_kernel("graph-replay-refusals") else {
        return;
    };
    let buf = host.alloc(4).unwrap();
    let ok = [Arg::Buffer(&buf, 0), Arg::U32(1)];
    let one = |args| launch_of(&k, args);
    let mut g = KernelGraph::new(&stream, &[one(&ok), one(&ok)]).unwrap();
    let bad = [Arg::Buffer(&buf, 8), Arg::U32(1)];
    match stream.replay_graph(&mut g, &[one(&ok), one(&bad)], &[true, false]) {
        Err(Error::ArgMismatch { reason, .. }) => assert!(reason.contains("offset 8"), "{reason}"),
        other => panic!("expected ArgMismatch, got {:?}", other.map(|_| ())),
    }
    match stream.replay_graph(&mut g, &[one(&[Arg::U32(1)]), one(&ok)], &[false, true]) {
        Err(Error::ArgMismatch { kernel, .. }) => assert_eq!(kernel, "mix"),
        other => panic!("expected ArgMismatch, got {:?}", other.map(|_| ())),
    }
    match stream.replay_graph(&mut g, &[one(&ok)], &[true]) {
        Err(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains("shape"), "{reason}"),
        other => panic!("expected InvalidLaunch, got {:?}", other.map(|_| ())),
    }
    match stream.replay_graph(&mut g, &[one(&ok), one(&ok)], &[true]) {
        Err(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains("flag"), "{reason}"),
        other => panic!("expected InvalidLaunch, got {:?}", other.map(|_| ())),
    }
    // Refused replays changed nothing: the graph still runs its launches.
    buf.write(0, &1u32.to_le_bytes()).unwrap();
    stream
        .replay_graph(&mut g, &[one(&ok), one(&ok)], &[true, true])
        .unwrap()
        .wait()
        .unwrap();
    // mix(mix(1, 1), 1) = (1 * 3 + 1) * 3 + 1
    assert_eq!(read_u32(&buf), 13);
}

#[test]
fn a_buffer_its_owner_drops_is_freed_under_the_graph_that_ran_it_and_never_replayed() {
    // Alone: the host's live buffers are counted.
    let _g = exclusive();
    let Some((host, k, stream)) = mix_kernel("graph-replay-weak") else {
        return;
    };
    let base = settled_stats(&host).live_buffers;
    let held = host.alloc(4).unwrap();
    held.write(0, &1u32.to_le_bytes()).unwrap();
    let args = [Arg::Buffer(&held, 0), Arg::U32(2)];
    let mut g = KernelGraph::new(&stream, &[launch_of(&k, &args)]).unwrap();
    let left_out = [launch_of(&k, &[])];
    stream
        .replay_graph(&mut g, &left_out, &[true])
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        read_u32(&held),
        5,
        "the node left out did not run its arguments"
    );
    drop(held);
    assert_eq!(
        settled_stats(&host).live_buffers,
        base,
        "a buffer its owner dropped was kept by the graph that ran it"
    );
    // A buffer of the same size now, most likely at the freed one's address (the host's
    // allocation cache hands it back): the node's arguments are the same bytes, into a
    // buffer the node never got. Left out, the node is refused, and runs nothing.
    let next = host.alloc(4).unwrap();
    next.write(0, &1u32.to_le_bytes()).unwrap();
    match stream.replay_graph(&mut g, &left_out, &[true]) {
        Err(Error::InvalidLaunch { reason, .. }) => assert!(reason.contains("freed"), "{reason}"),
        other => panic!("expected InvalidLaunch, got {:?}", other.map(|_| ())),
    }
    host.synchronize().unwrap();
    assert_eq!(read_u32(&next), 1, "a refused replay ran");
    // Flagged unchanged with its arguments given, the node is checked and re-set from them.
    let args = [Arg::Buffer(&next, 0), Arg::U32(2)];
    stream
        .replay_graph(&mut g, &[launch_of(&k, &args)], &[true])
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(read_u32(&next), 5);
    // The node holds `next` now: left out, it replays it, and the replay's Completion keeps it
    // until it ran, whoever drops it meanwhile.
    let done = stream.replay_graph(&mut g, &left_out, &[true]).unwrap();
    drop(g);
    drop(next);
    done.wait().unwrap();
    assert_eq!(
        settled_stats(&host).live_buffers,
        base,
        "a graph's buffer leaked"
    );
}
