//! Prometheus metrics through `prometheus-client` (the text format is the crate's, not ours;
//! the histograms are ours, lock-free, and so are the counters read from them: metrics/histogram.rs).
//! Per function: requests by outcome, latency, queue-time and request-phase histograms, the
//! guest run's CPU time until its response (a thread CPU clock around each poll), running
//! and queued requests, requests whose body is still arriving, GPU memory held by its requests,
//! kernel launches, gpuhost:cuda host calls (counts, seconds and their spread: metrics/calls.rs),
//! swaps, the serving version, log lines held back. Per device (read from
//! gpuhost's `HostStats` at scrape time): launches, launch batches a request completed on its own
//! thread (the rest waited for the completion thread), live modules and buffers, context losses,
//! memory in use. Server-wide: open connections, those refused for their client's cap and those
//! ended in an error of hyper's, request-body bytes buffered, versions retired. The status page at
//! `/` reads the same `/metrics`.
//!
//! Names follow Triton's where the meaning matches: `nv_inference_request_success`/`_failure`
//! are here `gpuhost_requests_total{outcome}`, `nv_inference_request_duration_us` is
//! `gpuhost_request_duration_seconds`, `nv_inference_queue_duration_us` is
//! `gpuhost_queue_duration_seconds`, `nv_inference_pending_request_count` is
//! `gpuhost_requests_queued`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::Registry;

mod calls;
mod histogram;
pub(crate) use calls::CallCounters;
use histogram::{HistogramTotal, SecondsHistogram};

use crate::version::SandboxTakes;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FunctionLabel {
    function: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    function: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TakeLabels {
    function: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    function: String,
    phase: String,
}

/// A stretch of a request's life on the server, timed in `gpuhost_request_phase_seconds{phase}`:
/// where the time goes that the guest's own work does not explain. A Store made ahead of its
/// request (crate::warm) is timed under the `warm_` phases: that work follows an earlier
/// request's response, and is no part of any request's latency. Timed as `setup`,
/// `instantiate` and `sandbox` it read as a request's own (session 52's H100 run: instantiate
/// 10.9 µs "per request" at one connection, where every request took a warm Store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Making the request's Store (WASI and CUDA contexts, fuel, limits).
    Setup,
    /// Instantiating the component in it.
    Instantiate,
    /// Taking a sandboxed function's arena and control block for the Store (from the pool,
    /// zeroed) before its handler runs.
    Sandbox,
    /// From the start of the guest's handler to its response head (to its end, for a guest that
    /// answers and ends in one go: its response is then taken whole).
    Respond,
    /// Dropping the Store after the guest ended (its buffers, streams, sandbox back to the pool).
    Teardown,
    /// [`Phase::Setup`] of a Store made ahead of its request.
    WarmSetup,
    /// [`Phase::Instantiate`] of a Store made ahead of its request.
    WarmInstantiate,
    /// [`Phase::Sandbox`] of a Store made ahead of its request.
    WarmSandbox,
}

/// For whom a Store is made: the request waiting for it, or a later one (a warm Store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Made {
    ForRequest,
    Ahead,
}

impl Made {
    /// The phase a Store's making is timed under: `phase` (setup, instantiate or sandbox), or
    /// its `warm_` twin for a Store made ahead.
    pub(crate) fn phase(self, phase: Phase) -> Phase {
        match (self, phase) {
            (Self::ForRequest, p) => p,
            (Self::Ahead, Phase::Setup) => Phase::WarmSetup,
            (Self::Ahead, Phase::Instantiate) => Phase::WarmInstantiate,
            (Self::Ahead, Phase::Sandbox) => Phase::WarmSandbox,
            (Self::Ahead, p) => p,
        }
    }
}

impl Phase {
    const ALL: [Phase; 8] = [
        Self::Setup,
        Self::Instantiate,
        Self::Sandbox,
        Self::Respond,
        Self::Teardown,
        Self::WarmSetup,
        Self::WarmInstantiate,
        Self::WarmSandbox,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Setup => "setup",
            Self::Instantiate => "instantiate",
            Self::Sandbox => "sandbox",
            Self::Respond => "respond",
            Self::Teardown => "teardown",
            Self::WarmSetup => "warm_setup",
            Self::WarmInstantiate => "warm_instantiate",
            Self::WarmSandbox => "warm_sandbox",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    function: String,
    call: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabel {
    device: String,
}

/// Why a connection ended in an error of hyper's, as counted in
/// `gpuhost_connection_errors_total{cause}`: hyper answers a head it cannot parse (400) or one
/// over the cap (431) itself, with no body, before the server sees a request, so this count is
/// the only trace of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionError {
    /// A head hyper could not parse: it answered 400.
    BadRequest,
    /// A head over the cap (crate::MAX_HEAD_BYTES): it answered 431.
    HeadTooLarge,
    /// No whole head within --header-read-timeout: closed unanswered.
    HeaderTimeout,
    /// The client left mid-message.
    Incomplete,
    /// Anything else: an I/O error, a response body that failed midway.
    Other,
}

impl ConnectionError {
    const ALL: [ConnectionError; 5] = [
        Self::BadRequest,
        Self::HeadTooLarge,
        Self::HeaderTimeout,
        Self::Incomplete,
        Self::Other,
    ];

    pub(crate) fn of(e: &hyper::Error) -> Self {
        if e.is_parse_too_large() {
            Self::HeadTooLarge
        } else if e.is_parse() {
            Self::BadRequest
        } else if e.is_timeout() {
            Self::HeaderTimeout
        } else if e.is_incomplete_message() {
            Self::Incomplete
        } else {
            Self::Other
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::HeadTooLarge => "head_too_large",
            Self::HeaderTimeout => "header_timeout",
            Self::Incomplete => "incomplete",
            Self::Other => "other",
        }
    }
}

/// How a request ended, as counted in `gpuhost_requests_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The function answered 1xx–3xx.
    Success,
    /// The function answered 4xx, or the request's body could not be read (400: the
    /// connection failed mid-body).
    ClientError,
    /// The function answered 5xx.
    FunctionError,
    /// The guest trapped or never answered.
    Trap,
    /// Over the function's wall-time limit, or the request's body did not arrive within the
    /// body-read timeout (408).
    Timeout,
    /// Refused for want of room: the function's queue was full (429), or the server buffers as
    /// many request-body bytes as it may at once (503). Both say Retry-After.
    Overload,
    /// Refused: no version serving, or the server is shutting down (503).
    Unavailable,
    /// Refused: the request body was over the function's limit (413).
    TooLarge,
}

impl Outcome {
    const ALL: [Outcome; 8] = [
        Self::Success,
        Self::ClientError,
        Self::FunctionError,
        Self::Trap,
        Self::Timeout,
        Self::Overload,
        Self::Unavailable,
        Self::TooLarge,
    ];

    /// Its label in `requests_total{outcome}`, and the `kind` of the server's own error bodies.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::ClientError => "client_error",
            Self::FunctionError => "function_error",
            Self::Trap => "trap",
            Self::Timeout => "timeout",
            Self::Overload => "overload",
            Self::Unavailable => "unavailable",
            Self::TooLarge => "too_large",
        }
    }
}

fn latency_histogram() -> SecondsHistogram {
    // 50 µs .. ~100 s.
    SecondsHistogram::new(exponential_buckets(50e-6, 2.0, 22))
}

/// One request in this many has its run timed on the CPU clock: reading a thread's CPU clock
/// is a system call (no vDSO path; about 1 µs on the 2-core VM that builds gpuhost), two a poll
/// of the run, so timing every request would add a few µs to each.
pub(crate) const RUN_CPU_SAMPLED_EVERY: u64 = 16;

fn phase_histogram() -> SecondsHistogram {
    // 5 µs .. ~80 ms: the phases are short, and their sums are what a breakdown reads.
    SecondsHistogram::new(exponential_buckets(5e-6, 2.0, 15))
}

/// Every metric family of the server.
pub struct Metrics {
    registry: Registry,
    requests: Family<OutcomeLabels, Counter>,
    duration: Family<FunctionLabel, SecondsHistogram, fn() -> SecondsHistogram>,
    queue: Family<FunctionLabel, SecondsHistogram, fn() -> SecondsHistogram>,
    phases: Family<PhaseLabels, SecondsHistogram, fn() -> SecondsHistogram>,
    respond_cpu: Family<FunctionLabel, SecondsHistogram, fn() -> SecondsHistogram>,
    running: Family<FunctionLabel, Gauge>,
    queued: Family<FunctionLabel, Gauge>,
    reading_body: Family<FunctionLabel, Gauge>,
    gpu_memory: Family<FunctionLabel, Gauge>,
    sandbox_kept: Family<FunctionLabel, Gauge>,
    sandbox_pending: Family<FunctionLabel, Gauge>,
    warm: Family<FunctionLabel, Gauge>,
    warm_making: Family<FunctionLabel, Gauge>,
    warm_takes: Family<TakeLabels, Counter>,
    sandbox_takes: Family<TakeLabels, Counter>,
    module_loads: Family<TakeLabels, Counter>,
    bundle_bytes: Family<FunctionLabel, Gauge>,
    launches: Family<FunctionLabel, Counter>,
    version: Family<FunctionLabel, Gauge>,
    swaps: Family<OutcomeLabels, Counter>,
    host_calls: Family<CallLabels, HistogramTotal<false>>,
    host_call_seconds: Family<CallLabels, HistogramTotal<true>>,
    host_call_duration: Family<CallLabels, SecondsHistogram, fn() -> SecondsHistogram>,
    log_suppressed: Family<FunctionLabel, Counter>,
    retired: Gauge,
    /// Connections open now (`connections_open`), counted by the accept loop.
    pub(crate) connections_open: Gauge,
    /// Connections closed at once, their client at --max-connections-per-client.
    pub(crate) connections_refused_per_client: Counter,
    /// Connections that ended in an error of hyper's, by [`ConnectionError`].
    connection_errors: Vec<Counter>,
    /// Request-body bytes buffered now (`request_body_bytes_buffered`), set at scrape time.
    pub(crate) body_bytes_buffered: Gauge,
    device_launches: Family<DeviceLabel, Counter>,
    device_context_losses: Family<DeviceLabel, Counter>,
    device_batches_by_poll: Family<DeviceLabel, Counter>,
    device_live_modules: Family<DeviceLabel, Gauge>,
    device_live_buffers: Family<DeviceLabel, Gauge>,
    device_kept_alloc: Family<DeviceLabel, Gauge>,
    device_memory_used: Family<DeviceLabel, Gauge>,
    /// Last HostStats counters seen per device, to add only the change to the counters.
    seen: Mutex<HashMap<usize, Seen>>,
}

/// A device's `HostStats` counters as last added to the metric families.
#[derive(Default)]
struct Seen {
    launches: u64,
    losses: u64,
    by_poll: u64,
}

/// The metric handles of one function (clones share the values in the registry).
pub struct FunctionMetrics {
    name: String,
    metrics: Arc<Metrics>,
    pub(crate) duration: SecondsHistogram,
    pub(crate) queue: SecondsHistogram,
    /// `request_respond_cpu_seconds`: the guest run's CPU time until its response, of one
    /// request in [`RUN_CPU_SAMPLED_EVERY`] ([`FunctionMetrics::sample_run_cpu`]).
    pub(crate) respond_cpu: SecondsHistogram,
    /// Requests started, for [`FunctionMetrics::sample_run_cpu`].
    run_cpu_turn: AtomicU64,
    pub(crate) running: Gauge,
    pub(crate) queued: Gauge,
    /// Requests whose body is still arriving (they hold no place in the queue yet).
    pub(crate) reading_body: Gauge,
    pub(crate) gpu_memory: Gauge,
    pub(crate) sandbox_kept: Gauge,
    pub(crate) sandbox_pending: Gauge,
    pub(crate) warm: Gauge,
    /// Warm Stores being made (claimed by a refill, not ready yet).
    pub(crate) warm_making: Gauge,
    /// Requests that found a warm Store ready (`warm_store_takes_total{result="hit"}`).
    pub(crate) warm_hits: Counter,
    /// Requests that made their own Store (`{result="miss"}`).
    pub(crate) warm_misses: Counter,
    /// `sandbox_takes_total{result="reused"|"waited"|"created"}`, from the pools' totals.
    sandbox_takes: ScrapedTotals<3>,
    /// `module_loads_total{result="cached"|"loaded"}`, from the module caches' totals.
    module_loads: ScrapedTotals<2>,
    pub(crate) bundle_bytes: Gauge,
    pub(crate) launches: Counter,
    pub(crate) version: Gauge,
    /// `requests_total{outcome}` by `Outcome as usize`, made once (no label work per request).
    outcomes: Vec<Counter>,
    /// `request_phase_seconds{phase}` by `Phase as usize`, made once likewise.
    phases: Vec<SecondsHistogram>,
    /// Given to every Store's gpuhost:cuda context: counts and times its host calls.
    pub(crate) calls: Arc<CallCounters>,
    /// Log lines its failed requests did not write, over its budget (crate::log_budget).
    pub(crate) log_suppressed: Counter,
}

/// Counters of one function by `result`, brought up at scrape time to totals kept elsewhere
/// (a version's pools or module caches): each scrape adds what the totals grew by since the
/// last. Totals lower than last seen (a new version's, counting from zero) add nothing and are
/// counted from.
struct ScrapedTotals<const N: usize> {
    counters: [Counter; N],
    seen: Mutex<[u64; N]>,
}

impl<const N: usize> ScrapedTotals<N> {
    fn new(family: &Family<TakeLabels, Counter>, function: &str, results: [&str; N]) -> Self {
        Self {
            counters: results.map(|result| {
                family.get_or_create_owned(&TakeLabels {
                    function: function.to_string(),
                    result: result.to_string(),
                })
            }),
            seen: Mutex::new([0; N]),
        }
    }

    fn catch_up(&self, now: [u64; N]) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for ((counter, now), seen) in self.counters.iter().zip(now).zip(seen.iter()) {
            counter.inc_by(now.saturating_sub(*seen));
        }
        *seen = now;
    }
}

impl FunctionMetrics {
    /// Counts one finished request.
    pub fn request(&self, outcome: Outcome) {
        self.outcomes[outcome as usize].inc();
    }

    /// Brings `sandbox_takes_total` up to the serving version's pools' totals, read at scrape
    /// time. A version whose pools are new (a changed arena size) starts lower: counting
    /// restarts from its totals.
    pub(crate) fn sandbox_takes(&self, now: SandboxTakes) {
        self.sandbox_takes
            .catch_up([now.reused, now.waited, now.created]);
    }

    /// Brings `module_loads_total` up to the serving version's module caches' totals (`cached`
    /// hits, `loaded` misses), read at scrape time; a new version's caches count from zero.
    pub(crate) fn module_loads(&self, now: [u64; 2]) {
        self.module_loads.catch_up(now);
    }

    /// Whether this request's run is timed on the CPU clock (`request_respond_cpu_seconds`):
    /// the first of the function's requests and every [`RUN_CPU_SAMPLED_EVERY`]th after it.
    pub(crate) fn sample_run_cpu(&self) -> bool {
        self.run_cpu_turn
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(RUN_CPU_SAMPLED_EVERY)
    }

    /// Records `seconds` spent in `phase` by one request.
    pub fn phase(&self, phase: Phase, seconds: f64) {
        self.phases[phase as usize].observe(seconds);
    }

    /// Counts one swap (or load) attempt.
    pub fn swap(&self, ok: bool) {
        let labels = OutcomeLabels {
            function: self.name.clone(),
            outcome: if ok { "ok" } else { "failed" }.to_string(),
        };
        self.metrics.swaps.get_or_create(&labels).inc();
    }
}

impl Metrics {
    /// Counts a connection that ended in `e`.
    pub(crate) fn connection_error(&self, e: &hyper::Error) {
        if let Some(c) = self.connection_errors.get(ConnectionError::of(e) as usize) {
            c.inc();
        }
    }

    /// A registry with every family registered.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("gpuhost");
        let mut m = Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            queue: Family::new_with_constructor(latency_histogram),
            phases: Family::new_with_constructor(phase_histogram),
            respond_cpu: Family::new_with_constructor(phase_histogram),
            running: Family::default(),
            queued: Family::default(),
            reading_body: Family::default(),
            gpu_memory: Family::default(),
            sandbox_kept: Family::default(),
            sandbox_pending: Family::default(),
            warm: Family::default(),
            warm_making: Family::default(),
            warm_takes: Family::default(),
            sandbox_takes: Family::default(),
            module_loads: Family::default(),
            bundle_bytes: Family::default(),
            launches: Family::default(),
            version: Family::default(),
            swaps: Family::default(),
            host_calls: Family::default(),
            host_call_seconds: Family::default(),
            host_call_duration: Family::new_with_constructor(calls::call_histogram),
            log_suppressed: Family::default(),
            retired: Gauge::default(),
            connections_open: Gauge::default(),
            connections_refused_per_client: Counter::default(),
            connection_errors: Vec::new(),
            body_bytes_buffered: Gauge::default(),
            device_launches: Family::default(),
            device_context_losses: Family::default(),
            device_batches_by_poll: Family::default(),
            device_live_modules: Family::default(),
            device_live_buffers: Family::default(),
            device_kept_alloc: Family::default(),
            device_memory_used: Family::default(),
            seen: Mutex::new(HashMap::new()),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "requests",
            "Requests by function and outcome",
            m.requests.clone(),
        );
        r.register(
            "function_bundle_bytes",
            "Bytes of the serving version's bundle modules, times the devices it is loaded on",
            m.bundle_bytes.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Wall time from arrival to the end of the response, by function",
            m.duration.clone(),
        );
        r.register(
            "queue_duration_seconds",
            "Time a request waited for a free slot of its function",
            m.queue.clone(),
        );
        r.register(
            "request_phase_seconds",
            "Time a request spent in each phase of its Store's life (setup, instantiate, sandbox, respond: handler start to response head or, for a guest that answered and ended at once, its end; teardown), by function; warm_setup, warm_instantiate and warm_sandbox time Stores made ahead of their requests, off any request's path",
            m.phases.clone(),
        );
        r.register(
            "request_respond_cpu_seconds",
            format!("CPU time the server's threads spent running the function's guest until its response, by function, of one request in {RUN_CPU_SAMPLED_EVERY} (the first, then every {RUN_CPU_SAMPLED_EVERY}th): the polls of the run (its wasm, wasi:http, its gpuhost:cuda calls' own work, and the instantiation of a Store the request made itself), not its waits for the device; the respond phase's wall time less this is time the run waited or was not running"),
            m.respond_cpu.clone(),
        );
        r.register(
            "requests_in_flight",
            "Requests running, by function",
            m.running.clone(),
        );
        r.register(
            "requests_queued",
            "Requests waiting for a slot, by function",
            m.queued.clone(),
        );
        r.register(
            "requests_reading_body",
            "Requests whose body is still arriving, by function (read before a request takes a place in the function's queue)",
            m.reading_body.clone(),
        );
        r.register(
            "request_body_bytes_buffered",
            "Request-body bytes the server holds now, over all requests (from their arrival to their request's end; at most --max-buffered-body-bytes)",
            m.body_bytes_buffered.clone(),
        );
        r.register(
            "connections_open",
            "Client connections open (at most --max-connections; at the cap the server accepts none until one closes)",
            m.connections_open.clone(),
        );
        r.register(
            "connections_refused_per_client",
            "Connections closed as soon as accepted because their client (peer IPv4 address, or IPv6 /64 prefix) had --max-connections-per-client open",
            m.connections_refused_per_client.clone(),
        );
        let errors = Family::<CauseLabel, Counter>::default();
        m.connection_errors = ConnectionError::ALL
            .iter()
            .map(|c| {
                let label = CauseLabel {
                    cause: c.label().to_string(),
                };
                errors.get_or_create(&label).clone()
            })
            .collect();
        r.register(
            "connection_errors",
            "Connections that ended in an error before or between requests, by cause: bad_request and head_too_large are hyper's own 400 and 431 (it answers them, with no body, before the server sees a request), header_timeout a head not sent within --header-read-timeout, incomplete a client gone mid-message, other the rest (I/O errors)",
            errors,
        );
        r.register(
            "function_gpu_memory_bytes",
            "Bytes of device buffers held by the function's running requests",
            m.gpu_memory.clone(),
        );
        r.register(
            "function_sandbox_kept",
            "Sandbox arenas and control blocks the serving version keeps for reuse (each one live device buffer, its control block, plus its arena's mapped memory)",
            m.sandbox_kept.clone(),
        );
        r.register(
            "function_sandbox_pending",
            "Of those, the ones not ready for a request yet: waiting for their last request's kernels and watch to let go, or being reset or freed (0 once the server is idle and settled)",
            m.sandbox_pending.clone(),
        );
        r.register(
            "function_warm_stores",
            "Stores made and instantiated ahead of requests, ready for one request each, over the function's versions and devices",
            m.warm.clone(),
        );
        r.register(
            "function_warm_stores_making",
            "Warm Stores being made now, not counted in function_warm_stores yet (a sandboxed function's may hold its arena and control block already), by function",
            m.warm_making.clone(),
        );
        r.register(
            "function_warm_store_takes",
            "Requests by whether a warm Store was ready for them (hit) or they made their own (miss), by function",
            m.warm_takes.clone(),
        );
        r.register(
            "function_sandbox_takes",
            "Sandbox arenas and control blocks the serving version's Stores took from its pools: reused (reset by the pool and ready), waited (reset by the pool, after a wait for its zeroing or its return) or created because none came (a virtual-memory map and a control block each), by function",
            m.sandbox_takes.clone(),
        );
        r.register(
            "function_module_loads",
            "Modules the serving version's sandboxed Stores loaded from PTX: cached (rewritten and loaded by an earlier Store of the version on that device, and shared) or loaded (rewritten and JIT-loaded for this one), by function",
            m.module_loads.clone(),
        );
        r.register(
            "function_launches",
            "Kernel launches by function",
            m.launches.clone(),
        );
        r.register(
            "function_version",
            "The version serving, by function (0: none)",
            m.version.clone(),
        );
        r.register(
            "swaps",
            "Version loads and swaps by function and outcome",
            m.swaps.clone(),
        );
        r.register(
            "host_calls",
            "gpuhost:cuda host calls made by the function's guests, by call (interface/resource.function)",
            m.host_calls.clone(),
        );
        r.register(
            "host_call_seconds",
            "Wall time the host spent in the function's gpuhost:cuda calls (an async call's device wait included), by call",
            m.host_call_seconds.clone(),
        );
        r.register(
            "host_call_duration_seconds",
            "How long each of the function's gpuhost:cuda calls took (an async call's device wait included), by call: host_call_seconds_total's spread",
            m.host_call_duration.clone(),
        );
        r.register(
            "log_lines_suppressed",
            "Warnings of the function's failed requests (a guest's trap or missing response, a failed reload's refusal) not written to the log, over its budget (function.toml's [serve] log_lines_burst, log_lines_per_minute); the next one written says how many were held back",
            m.log_suppressed.clone(),
        );
        r.register(
            "retired_versions",
            "Old versions whose device code could not be released (something still held it)",
            m.retired.clone(),
        );
        r.register(
            "device_launches",
            "Kernel launches by device",
            m.device_launches.clone(),
        );
        r.register(
            "device_context_losses",
            "Device context losses detected by device",
            m.device_context_losses.clone(),
        );
        r.register(
            "device_batches_completed_by_poll",
            "Launch batches completed by the request awaiting them, on its own thread, rather than by the device's completion thread (a hand-off the request waits for)",
            m.device_batches_by_poll.clone(),
        );
        r.register(
            "device_live_modules",
            "Modules loaded by device",
            m.device_live_modules.clone(),
        );
        r.register(
            "device_live_buffers",
            "Live device buffers by device",
            m.device_live_buffers.clone(),
        );
        r.register(
            "device_kept_alloc_bytes",
            "Freed device allocations kept for reuse by device (counted in memory used)",
            m.device_kept_alloc.clone(),
        );
        r.register(
            "device_memory_used_bytes",
            "Device memory in use (total - free) by device",
            m.device_memory_used.clone(),
        );
        Arc::new(Self { registry, ..m })
    }

    /// The handles of function `name`.
    pub fn function(self: &Arc<Self>, name: &str) -> Arc<FunctionMetrics> {
        let l = FunctionLabel {
            function: name.to_string(),
        };
        Arc::new(FunctionMetrics {
            name: name.to_string(),
            metrics: self.clone(),
            duration: self.duration.get_or_create_owned(&l),
            queue: self.queue.get_or_create_owned(&l),
            respond_cpu: self.respond_cpu.get_or_create_owned(&l),
            run_cpu_turn: AtomicU64::new(0),
            running: self.running.get_or_create_owned(&l),
            queued: self.queued.get_or_create_owned(&l),
            reading_body: self.reading_body.get_or_create_owned(&l),
            gpu_memory: self.gpu_memory.get_or_create_owned(&l),
            sandbox_kept: self.sandbox_kept.get_or_create_owned(&l),
            sandbox_pending: self.sandbox_pending.get_or_create_owned(&l),
            warm: self.warm.get_or_create_owned(&l),
            warm_making: self.warm_making.get_or_create_owned(&l),
            warm_hits: self.warm_takes.get_or_create_owned(&TakeLabels {
                function: name.to_string(),
                result: "hit".to_string(),
            }),
            warm_misses: self.warm_takes.get_or_create_owned(&TakeLabels {
                function: name.to_string(),
                result: "miss".to_string(),
            }),
            sandbox_takes: ScrapedTotals::new(
                &self.sandbox_takes,
                name,
                ["reused", "waited", "created"],
            ),
            module_loads: ScrapedTotals::new(&self.module_loads, name, ["cached", "loaded"]),
            bundle_bytes: self.bundle_bytes.get_or_create_owned(&l),
            launches: self.launches.get_or_create_owned(&l),
            version: self.version.get_or_create_owned(&l),
            outcomes: Outcome::ALL
                .iter()
                .map(|o| {
                    let labels = OutcomeLabels {
                        function: name.to_string(),
                        outcome: o.label().to_string(),
                    };
                    self.requests.get_or_create_owned(&labels)
                })
                .collect(),
            phases: Phase::ALL
                .iter()
                .map(|p| {
                    let labels = PhaseLabels {
                        function: name.to_string(),
                        phase: p.label().to_string(),
                    };
                    self.phases.get_or_create_owned(&labels)
                })
                .collect(),
            log_suppressed: self.log_suppressed.get_or_create_owned(&l),
            calls: Arc::new(CallCounters::new(name, self.clone())),
        })
    }

    /// Sets the count of retired versions.
    pub fn set_retired(&self, n: usize) {
        self.retired.set(n as i64);
    }

    /// Reads each device's stats into the device families, then encodes everything.
    pub fn render(&self, hosts: &[Arc<gpuhost::Host>]) -> String {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        for host in hosts {
            let stats = host.stats();
            let l = DeviceLabel {
                device: host.ordinal().to_string(),
            };
            let last = seen.entry(host.ordinal()).or_default();
            self.device_launches
                .get_or_create(&l)
                .inc_by(stats.launches.saturating_sub(last.launches));
            self.device_context_losses
                .get_or_create(&l)
                .inc_by(stats.context_losses.saturating_sub(last.losses));
            self.device_batches_by_poll
                .get_or_create(&l)
                .inc_by(stats.batches_completed_by_poll.saturating_sub(last.by_poll));
            *last = Seen {
                launches: stats.launches,
                losses: stats.context_losses,
                by_poll: stats.batches_completed_by_poll,
            };
            self.device_live_modules
                .get_or_create(&l)
                .set(stats.live_modules as i64);
            self.device_live_buffers
                .get_or_create(&l)
                .set(stats.live_buffers as i64);
            self.device_kept_alloc
                .get_or_create(&l)
                .set(stats.kept_alloc_bytes as i64);
            if let Ok(mem) = host.mem_info() {
                let used = mem.total.saturating_sub(mem.free);
                self.device_memory_used.get_or_create(&l).set(used as i64);
            }
        }
        drop(seen);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
