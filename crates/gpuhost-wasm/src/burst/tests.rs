//! Tests of graph batching (the parent module): collected launches run what the guest
//! launched, in order, through cached graphs, counted as the direct path counts them.

use wasmtime::component::{Resource, ResourceTable};

use super::*;
use crate::bindings::gpuhost::cuda::memory::HostBuffer;
use crate::bindings::gpuhost::cuda::module::HostModule;
use crate::bindings::gpuhost::cuda::stream::{
    Arg, BufferArg, HostBoundLaunch, HostStream, LaunchConfig,
};
use crate::bindings::gpuhost::cuda::types::Dim3;
use crate::bound_launch::BoundLaunchRes;
use crate::ctx::CudaCtxView;
use crate::memory::BufferRes;
use crate::stream::StreamRes;
use crate::{CudaCtx, Limits};

/// `mix(p, v)`: `*p = *p * 3 + v`, so the value tells which launches ran, in which order.
const PTX: &str = include_str!("../../../gpuhost/tests/fixtures/mix.ptx");

fn mix(value: u32, v: u32) -> u32 {
    value.wrapping_mul(3).wrapping_add(v)
}

fn borrow<T: 'static>(r: &Resource<T>) -> Resource<T> {
    Resource::new_borrow(r.rep())
}

/// A trusted guest (on device 0) with one 4-byte buffer and one stream, the buffer's value
/// 1, and a bound launch of `mix(buffer, 0)` on one thread (`shared` bytes of shared memory).
struct Guest {
    ctx: CudaCtx,
    table: ResourceTable,
    buf: Resource<BufferRes>,
    stream: Resource<StreamRes>,
    bound: Resource<BoundLaunchRes>,
}

fn config(shared: u32) -> LaunchConfig {
    let one = Dim3 { x: 1, y: 1, z: 1 };
    LaunchConfig {
        grid: one,
        block: one,
        shared_mem_bytes: shared,
    }
}

impl Guest {
    async fn new(limits: Limits) -> Self {
        let mut ctx = CudaCtx::new(gpuhost::host(0).unwrap(), limits);
        let mut table = ResourceTable::new();
        let mut v = CudaCtxView {
            ctx: &mut ctx,
            table: &mut table,
        };
        let module = HostModule::from_ptx(&mut v, PTX.into()).unwrap();
        let kernel = HostModule::kernel(&mut v, borrow(&module), "mix".into()).unwrap();
        let buf = HostBuffer::create(&mut v, 4).unwrap();
        HostBuffer::write(&mut v, borrow(&buf), 0, 1u32.to_le_bytes().to_vec())
            .await
            .unwrap();
        let stream = HostStream::create(&mut v).unwrap();
        let args = vec![
            Arg::Buffer(BufferArg {
                buffer: borrow(&buf),
                offset: 0,
            }),
            Arg::U32(0),
        ];
        let bound = HostBoundLaunch::bind(&mut v, borrow(&kernel), config(0), args).unwrap();
        // The guest keeps only the bound launch: it holds the kernel and its module.
        crate::bindings::gpuhost::cuda::module::HostKernel::drop(&mut v, kernel).unwrap();
        HostModule::drop(&mut v, module).unwrap();
        Self {
            ctx,
            table,
            buf,
            stream,
            bound,
        }
    }

    /// A guest whose stream collects: a burst of 4 and a synchronize are behind it. Also
    /// returns the buffer's value then.
    async fn collecting(limits: Limits) -> (Self, u32) {
        let mut g = Self::new(limits).await;
        g.enqueue(4);
        let want = (0..4).fold(1, |x, _| mix(x, 0));
        assert_eq!(g.value().await, want);
        assert!(
            g.collected().is_empty(),
            "a burst after a launch was collected"
        );
        (g, want)
    }

    fn view(&mut self) -> CudaCtxView<'_> {
        CudaCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }

    fn enqueue(&mut self, n: usize) {
        let (s, b) = (borrow(&self.stream), borrow(&self.bound));
        for _ in 0..n {
            HostStream::enqueue(&mut self.view(), borrow(&s), borrow(&b)).unwrap();
        }
    }

    /// A kernel handle of its own module (another shape than the bound launch's).
    fn list_kernel(&mut self) -> Resource<crate::module::KernelRes> {
        let mut v = self.view();
        let module = HostModule::from_ptx(&mut v, PTX.into()).unwrap();
        HostModule::kernel(&mut v, module, "mix".into()).unwrap()
    }

    /// Launches `mix(buffer, v)` of `kernel` with an argument list.
    fn launch_list(&mut self, kernel: &Resource<crate::module::KernelRes>, v: u32) {
        let (s, k, b) = (borrow(&self.stream), borrow(kernel), borrow(&self.buf));
        let args = vec![
            Arg::Buffer(BufferArg {
                buffer: b,
                offset: 0,
            }),
            Arg::U32(v),
        ];
        HostStream::launch(&mut self.view(), s, k, config(0), args).unwrap();
    }

    fn set_scalar(&mut self, v: u32) {
        let b = borrow(&self.bound);
        HostBoundLaunch::set_arg(&mut self.view(), b, 1, Arg::U32(v)).unwrap();
    }

    /// Flushes the stream, checking that its 4 collected launches went out as graph replays.
    fn flush_as_graph(&mut self, round: usize) {
        let graphed = self.ctx.graphs.launches();
        let s = borrow(&self.stream);
        self.view().flush(&s).unwrap();
        assert_eq!(
            self.ctx.graphs.launches(),
            graphed + 4,
            "round {round}: the burst was no graph"
        );
    }

    async fn synchronize(&mut self) {
        let s = borrow(&self.stream);
        HostStream::synchronize(&mut self.view(), s).await.unwrap();
    }

    async fn value(&mut self) -> u32 {
        self.synchronize().await;
        let b = borrow(&self.buf);
        let bytes = HostBuffer::read(&mut self.view(), b, 0, 4).await.unwrap();
        u32::from_le_bytes(bytes.try_into().unwrap())
    }

    /// The collected launches of the stream, each as the address of its shared form (None
    /// for one it owns).
    fn collected(&self) -> Vec<Option<*const Deferred>> {
        let s = self.table.get(&self.stream).unwrap();
        s.burst
            .pending()
            .iter()
            .map(|c| match c {
                Collected::Own(_) => None,
                Collected::Shared(d) => Some(Arc::as_ptr(d)),
            })
            .collect()
    }
}

fn trusted() -> Limits {
    Limits {
        sandbox: false,
        ..Limits::default()
    }
}

#[tokio::test]
async fn a_bound_launch_is_collected_as_one_shared_form_until_a_change_makes_a_new_one() {
    let (mut g, mut want) = Guest::collecting(trusted()).await;
    g.enqueue(3);
    g.set_scalar(5);
    g.enqueue(2);
    let c = g.collected();
    assert!(
        c.iter().all(Option::is_some),
        "an enqueue copied its launch"
    );
    assert!(c[..3].iter().all(|p| *p == c[0]) && c[3..].iter().all(|p| *p == c[3]));
    assert_ne!(c[0], c[3], "a changed launch reused its old collected form");
    let graphed = g.ctx.graphs.launches();
    want = (0..3).fold(want, |x, _| mix(x, 0));
    want = (0..2).fold(want, |x, _| mix(x, 5));
    assert_eq!(
        g.value().await,
        want,
        "collected launches ran other arguments"
    );
    assert_eq!(
        g.ctx.graphs.launches(),
        graphed + 5,
        "the burst was no graph"
    );
    // A new shape (shared memory) is not collected: the launches collected go first.
    g.enqueue(4);
    let b = borrow(&g.bound);
    HostBoundLaunch::set_config(&mut g.view(), b, config(16)).unwrap();
    g.enqueue(1);
    assert!(
        g.collected().is_empty(),
        "a launch of a new shape was collected"
    );
    want = (0..5).fold(want, |x, _| mix(x, 5));
    assert_eq!(g.value().await, want);
    assert_eq!(g.ctx.usage.launches_in_flight, 0);
}

#[tokio::test]
async fn a_cached_graph_replays_changed_launches_with_their_new_arguments_and_counts_each_in_flight()
 {
    let (mut g, mut want) = Guest::collecting(trusted()).await;
    let mut scalar = 0;
    // Each burst replays one cached graph: some nodes get the collected form they ran last
    // time (unchanged), the others one made by a set-arg since.
    for (round, burst) in [
        [0, 0, 0, 0],
        [0, 0, 5, 5],
        [5, 5, 5, 5],
        [5, 5, 5, 5],
        [7, 5, 5, 7],
    ]
    .into_iter()
    .enumerate()
    {
        for v in burst {
            if v != scalar {
                g.set_scalar(v);
                scalar = v;
            }
            g.enqueue(1);
            want = mix(want, v);
        }
        g.flush_as_graph(round);
        assert_eq!(
            g.ctx.usage.launches_in_flight, 4,
            "round {round}: a replay's launches are not each counted in flight"
        );
        assert_eq!(
            g.value().await,
            want,
            "round {round}: a replay ran other arguments"
        );
        assert_eq!(g.ctx.usage.launches_in_flight, 0);
        assert_eq!(g.ctx.usage.cached_graphs, 1, "one shape made another graph");
    }
}

#[tokio::test]
async fn a_cached_graph_replays_an_argument_list_launch_whose_scalar_changed_with_the_new_one() {
    let (mut g, mut want) = Guest::collecting(trusted()).await;
    let kernel = g.list_kernel();
    // The driver accepts the list launch's shape; the stream goes on collecting.
    for _ in 0..4 {
        g.launch_list(&kernel, 0);
        want = mix(want, 0);
    }
    assert_eq!(g.value().await, want);
    // One cached graph: identical bursts replay unchanged nodes, and a node whose scalar
    // changed since its last replay (to a new value, or back) must run the new one.
    for (round, burst) in [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
        [0, 9, 0, 0],
        [0, 9, 0, 0],
        [0, 0, 0, 0],
        [1, 1, 1, 1],
    ]
    .into_iter()
    .enumerate()
    {
        for v in burst {
            g.launch_list(&kernel, v);
            want = mix(want, v);
        }
        assert_eq!(g.collected(), [None; 4], "round {round}: not collected");
        g.flush_as_graph(round);
        assert_eq!(
            g.value().await,
            want,
            "round {round}: a replay ran other arguments than the guest launched"
        );
        assert_eq!(g.ctx.usage.cached_graphs, 1, "one shape made another graph");
    }
}

#[test]
fn owned_arguments_are_the_same_only_with_the_same_type_and_bits() {
    use GpuArg as A;
    let same = |a, b| Owned::Scalar(a).same(&Owned::Scalar(b));
    assert!(same(A::U32(7), A::U32(7)));
    assert!(!same(A::U32(7), A::U32(8)), "a changed scalar");
    assert!(!same(A::U32(7), A::I32(7)), "another type, the same value");
    assert!(
        !same(A::F32(0.0), A::F32(-0.0)),
        "-0.0 is other bits than 0.0"
    );
    assert!(same(A::F64(f64::NAN), A::F64(f64::NAN)), "the same bits");
    let bytes = |b: &[u8]| Owned::Bytes(b.into());
    assert!(bytes(&[1, 2]).same(&bytes(&[1, 2])) && !bytes(&[1, 2]).same(&bytes(&[1, 3])));
    assert!(!bytes(&[7, 0, 0, 0]).same(&Owned::Scalar(A::U32(7))));
}

#[tokio::test]
async fn at_the_in_flight_quota_collected_bound_launches_are_issued_and_the_next_refused() {
    let (mut g, mut want) = Guest::collecting(Limits {
        max_launches_in_flight: 6,
        ..trusted()
    })
    .await;
    g.enqueue(6);
    assert_eq!(g.collected().len(), 6);
    let (s, b) = (borrow(&g.stream), borrow(&g.bound));
    let refused = HostStream::enqueue(&mut g.view(), s, b).unwrap_err();
    assert!(
        format!("{refused:?}").contains("launches in flight"),
        "{refused:?}"
    );
    assert!(
        g.collected().is_empty(),
        "the quota left launches collected"
    );
    want = (0..6).fold(want, |x, _| mix(x, 0));
    assert_eq!(g.value().await, want);
}

#[tokio::test]
async fn a_bound_launch_dropped_with_launches_collected_keeps_its_module_counted_until_they_run() {
    // No graph cache: a cached graph would keep the module counted itself.
    let (mut g, mut want) = Guest::collecting(Limits {
        max_cached_graphs: 0,
        ..trusted()
    })
    .await;
    g.enqueue(3);
    let b = std::mem::replace(&mut g.bound, Resource::new_own(u32::MAX));
    HostBoundLaunch::drop(&mut g.view(), b).unwrap();
    assert_eq!(g.collected().len(), 3);
    assert_eq!(
        g.ctx.usage.modules, 1,
        "a collected launch's module went uncounted"
    );
    want = (0..3).fold(want, |x, _| mix(x, 0));
    assert_eq!(g.value().await, want);
    assert_eq!(
        g.ctx.usage.modules, 0,
        "the module stayed counted after its launches"
    );
}
