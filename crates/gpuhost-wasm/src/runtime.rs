//! A ready-made embedding: wasmtime engines and linkers (WASI CLI world + gpuhost:cuda) per
//! device — one with the component model's async support for guests that use streams, one
//! without for all others — compiled guests that can be run many times, each run in a fresh Store with its own
//! quotas. Dropping a run's Store releases everything the guest held, however it ended.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store, StoreLimits, StoreLimitsBuilder, Trap};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{I32Exit, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::calls::CallObserver;
use crate::ctx::{CudaCtx, CudaCtxView, CudaView};
use crate::error::Error;
use crate::limits::{Limits, Usage};
use crate::module_cache::ModuleCache;

/// Fuel between yields to the executor, so a CPU-bound guest shares its thread with others.
const FUEL_YIELD_INTERVAL: u64 = 100_000;
/// Capacity of a captured stdout/stderr (bytes beyond it are dropped).
const CAPTURE_BYTES: usize = 1 << 20;

/// The data of one guest's Store.
pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    cuda: CudaCtx,
    store_limits: StoreLimits,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl CudaView for GuestState {
    fn cuda(&mut self) -> CudaCtxView<'_> {
        CudaCtxView {
            ctx: &mut self.cuda,
            table: &mut self.table,
        }
    }
}

/// Where a guest's stdout or stderr goes.
#[derive(Debug, Clone, Default)]
pub enum Output {
    /// The host process's stream.
    Inherit,
    /// Kept in memory and returned in [`RunOutcome`].
    #[default]
    Capture,
    /// Discarded.
    Null,
    /// Written to this pipe, which the embedder may read while the guest runs (a log shown
    /// live, a line the embedder waits for). Not returned in [`RunOutcome`].
    Pipe(OutputPipe),
}

/// An in-memory pipe for [`Output::Pipe`]: what the guest wrote so far, readable at any time.
#[derive(Debug, Clone)]
pub struct OutputPipe(MemoryOutputPipe);

impl OutputPipe {
    /// A pipe keeping at most `capacity` bytes (a guest writing more gets a write error).
    pub fn new(capacity: usize) -> Self {
        Self(MemoryOutputPipe::new(capacity))
    }

    /// Everything written so far.
    pub fn contents(&self) -> Vec<u8> {
        self.0.contents().to_vec()
    }
}

/// How to run a guest once.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// argv, including `argv[0]` (the program name).
    pub args: Vec<String>,
    /// Environment variables the guest sees (none by default).
    pub env: Vec<(String, String)>,
    /// Quotas for this run.
    pub limits: Limits,
    /// Guest stdout.
    pub stdout: Output,
    /// Guest stderr.
    pub stderr: Output,
    /// Give the guest the host's stdin (otherwise it reads end-of-file).
    pub inherit_stdin: bool,
    /// Sees each gpuhost:cuda call of the guest, timed ([`CudaCtx::with_call_observer`]).
    pub calls: Option<Arc<dyn CallObserver>>,
    /// Sandboxed modules shared with other runs given the same cache
    /// ([`CudaCtx::with_module_cache`]).
    pub modules: Option<Arc<ModuleCache>>,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("args", &self.args)
            .field("env", &self.env)
            .field("limits", &self.limits)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .field("inherit_stdin", &self.inherit_stdin)
            .field("calls", &self.calls.as_ref().map(|_| "observer"))
            .field("modules", &self.modules)
            .finish()
    }
}

/// How a run ended (a trap is an [`Error::Trap`] instead).
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The guest's exit code: 0 when `main` returned, else what it passed to `exit`.
    pub exit_code: i32,
    /// Captured stdout (empty unless [`Output::Capture`]).
    pub stdout: Vec<u8>,
    /// Captured stderr (empty unless [`Output::Capture`]).
    pub stderr: Vec<u8>,
    /// What the guest still held when it ended (all released when the run returns).
    pub held_at_exit: Usage,
    /// Fuel consumed, when metered.
    pub fuel_used: Option<u64>,
    /// Calls refused by a quota (each returned `quota-exceeded` to the guest).
    pub quota_refusals: u32,
    /// The last refusal's message.
    pub last_refusal: Option<String>,
    /// False when launches of the guest were still running when `run` stopped waiting for
    /// them, a few seconds after its Store was dropped and its kernels told to stop; its memory
    /// stays reserved until they end. Always true for a trusted guest, whose kernels are
    /// neither stopped nor waited for.
    pub launches_ended: bool,
    /// Launches of the guest replayed through CUDA graphs (graph batching, see
    /// `Limits::max_graph_batch`); the others went to their stream one by one.
    pub graph_launches: u64,
}

/// A compiled, pre-linked guest: compile once, run many times (concurrently too).
#[derive(Clone)]
pub struct Guest {
    pre: CommandPre<GuestState>,
}

impl Guest {
    /// The engine it was compiled for: [`Runtime::engine`] unless it uses streams.
    pub fn engine(&self) -> &Engine {
        self.pre.engine()
    }
}

/// Engines and linkers bound to one device: one without the component model's async support,
/// for every guest that can do without it, and one with it, for guests that use
/// `buffer.read-stream` (its `stream<u8>`). Async support costs every host call a task of its
/// own (wasmtime's `host_task_create`), which measurably slows guests' launches.
pub struct Runtime {
    engine: Engine,
    linker: Linker<GuestState>,
    streams: Engine,
    streams_linker: Linker<GuestState>,
    host: Arc<gpuhost::Host>,
}

/// A fuel-metered engine, with the component model's async support (streams) or without it,
/// and its linker: WASI (CLI world) and gpuhost:cuda.
fn engine_and_linker(streams: bool) -> Result<(Engine, Linker<GuestState>), Error> {
    let engine_err = |e: wasmtime::Error| Error::Engine(format!("{e:#}"));
    let mut config = Config::new();
    config.wasm_component_model(true).consume_fuel(true);
    // Memories gpuhost can page-lock, so a guest's large writes are one DMA from its memory.
    // Copy-on-write initial images need wasmtime's own mmap memories (with another creator,
    // wasmtime 48 reaches an `unreachable!`): data segments are copied in instead.
    config
        .with_host_memory(Arc::new(crate::GuestMemoryCreator::default()))
        .memory_init_cow(false);
    if streams {
        config.wasm_component_model_async(true);
    } else {
        config.concurrency_support(false);
    }
    let engine = Engine::new(&config).map_err(engine_err)?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(engine_err)?;
    crate::ctx::add_to_linker(&mut linker).map_err(engine_err)?;
    Ok((engine, linker))
}

fn is_core_module(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}

/// Cheap checks of a guest's bytes before any device or compiler work: refuses a core module
/// ([`Error::NotAComponent`]) and anything that is not WebAssembly ([`Error::InvalidComponent`]).
pub fn precheck(what: &str, bytes: &[u8]) -> Result<(), Error> {
    if is_core_module(bytes) {
        return Err(Error::NotAComponent {
            what: what.to_string(),
        });
    }
    if bytes.len() < 8 || bytes[..4] != *b"\0asm" {
        let reason = "it does not start with the WebAssembly magic bytes".to_string();
        return Err(Error::InvalidComponent {
            what: what.to_string(),
            reason,
        });
    }
    Ok(())
}

impl Runtime {
    /// A runtime on `host`: async, fuel-metered engine; WASI (CLI world) and gpuhost:cuda
    /// linked; staging for one guest transfer at a time page-locked up front
    /// ([`gpuhost::Host::reserve_staging`]: call it for more if guests run concurrently).
    pub fn new(host: Arc<gpuhost::Host>) -> Result<Self, Error> {
        let (engine, linker) = engine_and_linker(false)?;
        let (streams, streams_linker) = engine_and_linker(true)?;
        // Guests' transfers must not page-lock memory while they run (see reserve_staging):
        // one transfer's staging up front, and beyond it the driver's pageable path.
        host.reserve_staging(1)?;
        host.set_staging_growth(false);
        Ok(Self {
            engine,
            linker,
            streams,
            streams_linker,
            host,
        })
    }

    /// The device guests of this runtime use.
    pub fn host(&self) -> &Arc<gpuhost::Host> {
        &self.host
    }

    /// The wasmtime engine of guests that do without streams (each [`Guest`] runs on its own
    /// engine).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Reads and compiles a guest component file.
    pub fn load_file(&self, path: &Path) -> Result<Guest, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.load(&path.display().to_string(), &bytes)
    }

    /// Compiles a guest component (`what` names it in errors) and checks its imports: on the
    /// engine without async support, or, if it uses what needs it (streams), on the one with it.
    pub fn load(&self, what: &str, bytes: &[u8]) -> Result<Guest, Error> {
        if is_core_module(bytes) {
            return Err(Error::NotAComponent {
                what: what.to_string(),
            });
        }
        let (component, linker) = match Component::new(&self.engine, bytes) {
            Ok(c) => (c, &self.linker),
            Err(_) => match Component::new(&self.streams, bytes) {
                Ok(c) => (c, &self.streams_linker),
                Err(e) => {
                    return Err(Error::InvalidComponent {
                        what: what.to_string(),
                        reason: format!("{e:#}"),
                    });
                }
            },
        };
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| Error::MissingImport {
                reason: format!("{e:#}"),
            })?;
        let pre = CommandPre::new(pre).map_err(|e| Error::NotACommand {
            reason: format!("{e:#}"),
        })?;
        Ok(Guest { pre })
    }

    /// Runs `guest`'s `main` once in a fresh Store. Returns when it exits; a trap is
    /// [`Error::Trap`]. Either way every handle the guest held has been released on return.
    pub async fn run(&self, guest: &Guest, opts: RunOptions) -> Result<RunOutcome, Error> {
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&opts.args).envs(&opts.env);
        if opts.inherit_stdin {
            wasi.inherit_stdin();
        }
        let stdout = MemoryOutputPipe::new(CAPTURE_BYTES);
        let stderr = MemoryOutputPipe::new(CAPTURE_BYTES);
        match &opts.stdout {
            Output::Inherit => drop(wasi.inherit_stdout()),
            Output::Capture => drop(wasi.stdout(stdout.clone())),
            Output::Null => {}
            Output::Pipe(p) => drop(wasi.stdout(p.0.clone())),
        }
        match &opts.stderr {
            Output::Inherit => drop(wasi.inherit_stderr()),
            Output::Capture => drop(wasi.stderr(stderr.clone())),
            Output::Null => {}
            Output::Pipe(p) => drop(wasi.stderr(p.0.clone())),
        }
        let fuel = opts.limits.fuel;
        let store_limits = StoreLimitsBuilder::new()
            .memory_size(opts.limits.max_wasm_memory_bytes)
            .trap_on_grow_failure(false)
            .build();
        let mut cuda = CudaCtx::new(self.host.clone(), opts.limits);
        if let Some(observer) = opts.calls {
            cuda = cuda.with_call_observer(observer);
        }
        if let Some(cache) = opts.modules {
            cuda = cuda.with_module_cache(cache);
        }
        let state = GuestState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            cuda,
            store_limits,
        };
        let mut store = Store::new(guest.pre.engine(), state);
        store.limiter(|s| &mut s.store_limits);
        let engine_err = |e: wasmtime::Error| Error::Engine(format!("{e:#}"));
        store
            .set_fuel(fuel.unwrap_or(u64::MAX))
            .map_err(engine_err)?;
        store
            .fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))
            .map_err(engine_err)?;

        // The guest's memories, made as it is instantiated, count against its locked-memory
        // limit from the start (guest_memory/tally.rs).
        let locked = store.data().cuda.locked.clone();
        let max_locked = store.data().cuda.limits.max_locked_memory_bytes;
        let instantiated = crate::guest_memory::made_for(
            locked,
            max_locked,
            self.host.ordinal(),
            guest.pre.instantiate_async(&mut store),
        );
        let result = match instantiated.await {
            Ok(command) => command.wasi_cli_run().call_run(&mut store).await,
            Err(e) => Err(e),
        };
        let held_at_exit = store.data().cuda.usage().clone();
        let graph_launches = store.data().cuda.graph_launches();
        let (quota_refusals, last_refusal) = store.data().cuda.quota_refusals();
        let last_refusal = last_refusal.map(str::to_string);
        let fuel_used = fuel.map(|f| f.saturating_sub(store.get_fuel().unwrap_or(0)));
        let watch = store.data().cuda.watch();
        // Everything the guest held goes with the Store, before we report: its kernels are
        // stopped, and we wait (bounded) until they have ended.
        drop(store);
        let launches_ended = match watch {
            Some(w) => w.drained().await,
            None => true,
        };
        let exit_code = match result {
            Ok(Ok(())) => 0,
            Ok(Err(())) => 1,
            Err(e) => match e.downcast_ref::<I32Exit>() {
                Some(exit) => exit.0,
                None => {
                    let out_of_fuel = matches!(e.downcast_ref::<Trap>(), Some(Trap::OutOfFuel));
                    return Err(Error::Trap {
                        reason: format!("{e:?}"),
                        out_of_fuel,
                    });
                }
            },
        };
        Ok(RunOutcome {
            exit_code,
            stdout: stdout.contents().to_vec(),
            stderr: stderr.contents().to_vec(),
            held_at_exit,
            graph_launches,
            fuel_used,
            quota_refusals,
            last_refusal,
            launches_ended,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_module_header_is_told_apart_from_a_component() {
        assert!(is_core_module(b"\0asm\x01\0\0\0"));
        assert!(!is_core_module(b"\0asm\x0d\0\x01\0"));
        assert!(!is_core_module(b"\0as"));
    }
}
