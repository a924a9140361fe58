//! The wasmtime side: one engine and linker for the whole server (WASI p2 + wasi:http +
//! gpuhost:cuda), and the data of one request's Store. A component is compiled once per function
//! version and pre-instantiated ([`ProxyPre`]); each request instantiates it in a fresh Store.

use std::sync::Arc;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, StoreLimits,
};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::error::{Error, Result};
use crate::metrics::FunctionMetrics;

/// Fuel between yields to the executor, so a CPU-bound guest shares its thread and its
/// request's timeout can fire.
pub(crate) const FUEL_YIELD_INTERVAL: u64 = 100_000;

/// Outgoing HTTP is not offered to functions: a GPU function answers its request only.
pub(crate) struct NoOutgoing;

impl WasiHttpHooks for NoOutgoing {
    /// wasmtime-wasi-http's own list, asked directly: its default answer builds (allocates) a
    /// filter closure for every header a request or a guest's `fields` names, several a request.
    fn is_forbidden_header(&mut self, name: &http::HeaderName) -> bool {
        wasmtime_wasi_http::DEFAULT_FORBIDDEN_HEADERS.contains(name)
    }

    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<wasmtime_wasi_http::WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        // The guest sees `HTTP-request-denied`.
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}

/// Keeps a function's GPU memory and launch metrics current from one Store's gpuhost:cuda
/// usage: updated on every gpuhost:cuda call (by the change since the last one) and settled when
/// the Store goes.
pub(crate) struct Meter {
    metrics: Arc<FunctionMetrics>,
    bytes: u64,
    launches: u64,
}

impl Meter {
    pub(crate) fn new(metrics: Arc<FunctionMetrics>) -> Self {
        Self {
            metrics,
            bytes: 0,
            launches: 0,
        }
    }

    fn observe(&mut self, cuda: &gpuhost_wasm::CudaCtx) {
        let bytes = cuda.usage().buffer_bytes;
        if bytes != self.bytes {
            let delta = bytes as i64 - self.bytes as i64;
            self.metrics.gpu_memory.inc_by(delta);
            self.bytes = bytes;
        }
        let launches = cuda.launches();
        if launches > self.launches {
            self.metrics.launches.inc_by(launches - self.launches);
            self.launches = launches;
        }
    }
}

/// The data of one request's Store.
pub(crate) struct RequestState {
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) table: ResourceTable,
    pub(crate) cuda: gpuhost_wasm::CudaCtx,
    pub(crate) store_limits: StoreLimits,
    pub(crate) hooks: NoOutgoing,
    pub(crate) meter: Meter,
}

impl Drop for RequestState {
    fn drop(&mut self) {
        // The buffers are freed as the fields drop right after this: count them gone now.
        self.meter.observe(&self.cuda);
        self.meter
            .metrics
            .gpu_memory
            .dec_by(self.meter.bytes as i64);
    }
}

impl WasiView for RequestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for RequestState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl gpuhost_wasm::CudaView for RequestState {
    fn cuda(&mut self) -> gpuhost_wasm::CudaCtxView<'_> {
        self.meter.observe(&self.cuda);
        gpuhost_wasm::CudaCtxView {
            ctx: &mut self.cuda,
            table: &mut self.table,
        }
    }
}

/// Requests (Stores) of all functions that run at once, each with one component instance from
/// the pool.
const POOLED_STORES: u32 = 1024;

/// Bytes of each pooled memory and table reset in place rather than by madvise. With the
/// kernel's PAGEMAP_SCAN (Linux 6.7+) only the pages a request dirtied are reset, wherever they
/// are, so a request touching a few pages costs a few pages; without it the lowest
/// [`KEEP_RESIDENT_NO_SCAN`] bytes are memset whole.
const KEEP_RESIDENT: usize = 16 << 20;
/// [`KEEP_RESIDENT`] where PAGEMAP_SCAN is missing: a Rust guest's stack ends at 1 MiB, so this
/// covers its stack; a larger memset would cost more than the page faults it saves.
const KEEP_RESIDENT_NO_SCAN: usize = 1 << 20;

/// Bytes of each pooled memory and table reset in place, with or without PAGEMAP_SCAN.
fn keep_resident(scan: bool) -> usize {
    if scan {
        KEEP_RESIDENT
    } else {
        KEEP_RESIDENT_NO_SCAN
    }
}

/// The instance pool: [`POOLED_STORES`] component instances, and per instance room for the
/// core instances, memories and tables a wasi:http guest built by Rust's or another wasm32
/// toolchain has (its main module and the canonical ABI's shims). A memory slot is wasm32's
/// whole 4 GiB (reserved address space, not memory), so `limits.max_wasm_memory_bytes` of
/// function.toml stays the only bound on a guest's memory.
fn pooling(scan: bool) -> PoolingAllocationConfig {
    let keep = keep_resident(scan);
    let mut p = PoolingAllocationConfig::default();
    p.total_component_instances(POOLED_STORES)
        .total_core_instances(POOLED_STORES * 8)
        .total_memories(POOLED_STORES * 2)
        .total_tables(POOLED_STORES * 8)
        .total_stacks(POOLED_STORES)
        .max_memory_size(1 << 32)
        // A slot given back is reset for the next request: the pages a request dirtied (or,
        // without PAGEMAP_SCAN, the first bytes) in place, so what a small guest touched stays
        // resident (no page faults, no TLB shootdown of an madvise per request); the rest with
        // madvise, in batches.
        .linear_memory_keep_resident(keep)
        .table_keep_resident(keep)
        .decommit_batch_size(16)
        .pagemap_scan(if scan { Enabled::Yes } else { Enabled::No });
    p
}

/// Components compiled recently, by their exact bytes: a new version whose function.wasm did
/// not change (a new bundle, new weights, new limits) is not compiled again.
const COMPILED_KEPT: usize = 8;

/// The server's engine and linker.
pub(crate) struct Wasm {
    pub(crate) engine: Engine,
    /// Whether the engine pools instances (see [`pooling`]).
    pub(crate) pooling: bool,
    /// Stores alive at once, over all functions: a request waits for one (in its queue time)
    /// rather than fail when the pool's slots are all in use.
    pub(crate) stores: Arc<tokio::sync::Semaphore>,
    linker: Linker<RequestState>,
    /// The engine and linker of functions that use streams (component-model async).
    streams: (Engine, Linker<RequestState>),
    compiled: std::sync::Mutex<std::collections::VecDeque<(Arc<[u8]>, Component)>>,
}

/// A linker on `engine` with all of WASI p2 (Rust's std imports more than the proxy world
/// names; each request's context is empty: no files, no environment, no sockets), wasi:http and
/// gpuhost:cuda.
fn new_linker(engine: &Engine) -> wasmtime::Result<Linker<RequestState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    gpuhost_wasm::add_to_linker(&mut linker)?;
    Ok(linker)
}

impl Wasm {
    pub(crate) fn new() -> Result<Self> {
        let mut config = Config::new();
        // Without the component model's async support: with it, every host call creates a
        // wasmtime host task (a bound guest launch took 52 µs instead of 39 in a debug build on
        // softcuda). Functions that use streams (`buffer.read-stream`) get their own engine.
        config
            .wasm_component_model(true)
            .concurrency_support(false)
            .consume_fuel(true);
        // Each request's instance, memories, tables and async stack come from slots reserved
        // once (copy-on-write images, reset with madvise) instead of mmap and munmap per request.
        // If this host cannot reserve the slots (a virtual-memory ulimit), instances are
        // allocated on demand as before.
        let pooled = |scan| {
            let mut c = config.clone();
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(scan)));
            Engine::new(&c)
        };
        // PAGEMAP_SCAN where the kernel has it (Enabled::Yes fails the engine where it does not).
        let (engine, pooling, scan) = match pooled(true) {
            Ok(engine) => (engine, true, true),
            Err(no_scan) => match pooled(false) {
                Ok(engine) => {
                    tracing::info!(reason = %format!("{no_scan:#}"), "PAGEMAP_SCAN is unavailable: pooled memories are reset by memset and madvise");
                    (engine, true, false)
                }
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "wasmtime's pooling allocator is unavailable; instances are allocated per request");
                    let engine =
                        Engine::new(&config).map_err(|e| Error::Engine(format!("{e:#}")))?;
                    (engine, false, false)
                }
            },
        };
        // Once at start, so that a run's log says how its requests' instances were reset.
        tracing::info!(
            pooling,
            pagemap_scan = scan,
            keep_resident = if pooling { keep_resident(scan) } else { 0 },
            "wasm instance allocation"
        );
        let err = |e: wasmtime::Error| Error::Engine(format!("{e:#}"));
        let linker = new_linker(&engine).map_err(err)?;
        // The streams engine allocates instances on demand: functions that use streams are
        // few, and a second pool would reserve its slots' address space twice.
        let mut async_config = Config::new();
        async_config
            .wasm_component_model(true)
            .wasm_component_model_async(true)
            .consume_fuel(true);
        let streams = Engine::new(&async_config).map_err(err)?;
        let streams_linker = new_linker(&streams).map_err(err)?;
        Ok(Self {
            engine,
            streams: (streams, streams_linker),
            pooling,
            stores: Arc::new(tokio::sync::Semaphore::new(POOLED_STORES as usize)),
            linker,
            compiled: std::sync::Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// The compiled component of `bytes`: from the cache when these exact bytes were compiled
    /// recently, else compiled now (and kept). Returns whether it was cached.
    fn compile(&self, bytes: &[u8]) -> wasmtime::Result<(Component, bool)> {
        let lock = || self.compiled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = lock().iter().find(|(b, _)| **b == *bytes) {
            return Ok((c.clone(), true));
        }
        // The plain engine unless the component needs async support (it then fails to compile
        // there, and compiles on the streams engine).
        let component = Component::new(&self.engine, bytes)
            .or_else(|_| Component::new(&self.streams.0, bytes))?;
        let mut cache = lock();
        if cache.len() == COMPILED_KEPT {
            cache.pop_front();
        }
        cache.push_back((Arc::from(bytes), component.clone()));
        Ok((component, false))
    }

    /// Compiles a function's component (or takes it from the cache: the bool says which) and
    /// pre-instantiates it against the linker.
    pub(crate) fn prepare(
        &self,
        function: &str,
        bytes: &[u8],
    ) -> Result<(ProxyPre<RequestState>, bool)> {
        let what = format!("{function}/function.wasm");
        let component_err = |source| Error::Component {
            function: function.to_string(),
            source,
        };
        gpuhost_wasm::precheck(&what, bytes).map_err(component_err)?;
        let (component, cached) = self.compile(bytes).map_err(|e| {
            component_err(gpuhost_wasm::Error::InvalidComponent {
                what: what.clone(),
                reason: format!("{e:#}"),
            })
        })?;
        let linker = if Engine::same(component.engine(), &self.engine) {
            &self.linker
        } else {
            &self.streams.1
        };
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| Error::MissingImport {
                function: function.to_string(),
                reason: format!("{e:#}"),
            })?;
        let pre = ProxyPre::new(pre).map_err(|e| Error::NotAnHttpFunction {
            function: function.to_string(),
            reason: format!("{e:#}"),
        })?;
        Ok((pre, cached))
    }
}
