//! Kernel graphs: a replay computes exactly what the same launches on a stream compute, with
//! arguments updated between replays, and refuses what `Stream::launch` refuses.

use gpuhost::{
    Arg, Error, GraphLaunch, KernelGraph, LaunchConfig, ModuleImage, ModuleSource, Registry,
};

use crate::common::{host, shared};

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
        assert_eq!(
            (read_u32(&ga), read_u32(&gb)),
            (read_u32(&a), read_u32(&b)),
            "round {round}: graph and stream launches disagree"
        );
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
