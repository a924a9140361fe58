//! One request to a function: its body read whole (crate::body), admission (429 when the queue
//! is full), a running slot (queue time measured), the serving version pinned for the whole
//! request, a fresh Store on the least busy of the version's devices (made ahead of the request
//! when it can be: crate::warm), the guest's `wasi:http/incoming-handler.handle` run in the
//! request's own task, and a wall-time limit covering all of it. Every failure is a status with
//! a JSON body (a failed guest's detail goes to the log, not the client: crate::failure); the
//! version that answered is in the `x-gpuhost-version` header, the request's id in `x-request-id`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use hyper::body::{Body as _, Frame};
use smallvec::SmallVec;
use wasmtime::{Store, StoreLimitsBuilder, Trap};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi_http::WasiHttpCtx;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{WasiHttpView, p2::body::HyperOutgoingBody};

use crate::cpu_clock::ThreadCpu;
use crate::deadline::{Deadline, Elapsed};
use crate::engine::{FUEL_YIELD_INTERVAL, Meter, NoOutgoing, RequestState};
use crate::failure::{Failed, GuestFailure, REQUEST_ID_HEADER, RequestId};
use crate::function::Function;
use crate::metrics::{Made, Outcome, Phase};
use crate::server::Server;
use crate::stderr::StderrTail;
use crate::version::{Version, VersionGuard};

/// The header naming the version that answered.
pub const VERSION_HEADER: &str = "x-gpuhost-version";
/// Seconds a client refused for want of room (429, 503) is told to wait.
const RETRY_AFTER_SECS: &str = "1";

/// `resp` with the Retry-After header of a refusal for want of room.
fn with_retry_after(mut resp: Response<Body>) -> Response<Body> {
    resp.headers_mut()
        .insert("retry-after", HeaderValue::from_static(RETRY_AFTER_SECS));
    resp
}

/// A response with a JSON error body.
pub(crate) fn json_error(
    status: StatusCode,
    message: &str,
    extra: serde_json::Value,
) -> Response<Body> {
    let mut body = serde_json::json!({ "error": message });
    if let (Some(obj), serde_json::Value::Object(more)) = (body.as_object_mut(), extra) {
        obj.extend(more);
    }
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    resp
}

fn outcome_of(status: StatusCode) -> Outcome {
    if status.is_server_error() {
        Outcome::FunctionError
    } else if status.is_client_error() {
        Outcome::ClientError
    } else {
        Outcome::Success
    }
}

/// Serves `req` with `function`.
pub(crate) async fn invoke(
    function: Arc<Function>,
    server: &Server,
    req: Request<Body>,
) -> Response<Body> {
    let arrived = Instant::now();
    let metrics = &function.metrics;
    let name = function.name.as_str();
    let id = RequestId::next();
    let finish = |outcome: Outcome, mut resp: Response<Body>| {
        metrics.request(outcome);
        metrics.duration.observe(arrived.elapsed().as_secs_f64());
        resp.headers_mut().insert(REQUEST_ID_HEADER, id.header());
        resp
    };
    // The server's own refusals: the error body's `kind` is the outcome the request is counted
    // under (a failed guest's kinds are finer: failure.rs), its version that of the request once
    // pinned. The context is built only on the way to an error response.
    let ctx = |o: Outcome, version| crate::failure::context(o.label(), name, version, &id);
    // An overload (the queue full, the body budget spent) is always told when to retry.
    let refuse = |outcome: Outcome, status, msg: &str, version: Option<u64>| {
        let resp = json_error(status, msg, ctx(outcome, version));
        let resp = match outcome {
            Outcome::Overload => with_retry_after(resp),
            _ => resp,
        };
        finish(outcome, resp)
    };

    // The serving version's limits bound the body and the queue; the version that runs is
    // picked after the queue (the newest then).
    let Some((timeout, max_body_bytes)) = function.serving_limits() else {
        let msg = "the function has no version loaded: POST /v2/repository/models/{name}/load";
        return refuse(
            Outcome::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            msg,
            None,
        );
    };
    if !names_its_host(&req) {
        let msg = "the request names no host: send a Host header of visible ASCII (HTTP/1.1 requires one; an HTTP/1.0 client must add it)";
        return refuse(Outcome::ClientError, StatusCode::BAD_REQUEST, msg, None);
    }
    // The body before admission, so a client slow to send it (or that never does) holds no
    // place in the function's queue; its bytes count in the server's budget until the end.
    let (parts, body) = req.into_parts();
    let read_limit = timeout.min(server.body_read_timeout);
    let limits = crate::body::Limits {
        max_bytes: max_body_bytes,
        until: arrived + read_limit,
        budget: &server.body_budget,
        deadlines: &server.deadlines,
        reading: &metrics.reading_body,
    };
    let (body, body_held) = match crate::body::read(body, limits).await {
        Ok(read) => read,
        Err(refused) => {
            let budget = &server.body_budget;
            let (outcome, status, msg) = refused.answer(max_body_bytes, read_limit, budget);
            return refuse(outcome, status, &msg, None);
        }
    };

    let admission = function.admission();
    let Some(admitted) = admission.try_admit() else {
        let msg = "the function's queue is full: retry after the Retry-After seconds";
        return refuse(Outcome::Overload, StatusCode::TOO_MANY_REQUESTS, msg, None);
    };
    // On the server's list, not a tokio timer per request (deadline.rs says why); from the
    // request's arrival, so the body's read counts in its time limit.
    let deadline = server.deadlines.start(arrived + timeout);

    let queued = GaugeHold::new(&metrics.queued);
    let queued_at = Instant::now();
    let permit = deadline.bound(admission.run_slot()).await;
    drop(queued);
    metrics.queue.observe(queued_at.elapsed().as_secs_f64());
    let permit = match permit {
        Ok(Some(p)) => p,
        Ok(None) => {
            let msg = "the function is shutting down";
            return refuse(
                Outcome::Unavailable,
                StatusCode::SERVICE_UNAVAILABLE,
                msg,
                None,
            );
        }
        Err(_) => {
            let msg = format!(
                "the request waited its whole time limit ({:?}) in the function's queue",
                timeout
            );
            return refuse(Outcome::Timeout, StatusCode::GATEWAY_TIMEOUT, &msg, None);
        }
    };

    // Pin the version serving now for the whole request (a swap publishes the next one for the
    // next request; this one keeps its version alive until it ends).
    let Some(guard) = function.pin() else {
        let msg = "the function was unloaded";
        return refuse(
            Outcome::Unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            msg,
            None,
        );
    };
    let number = guard.0.number;
    let expose = guard.0.config.expose_errors;
    let pinned = Pinned::new(guard);
    // The device's warm Store if one is ready (it holds its own slot of the instance pool; the
    // next is made after this request), else a slot for a Store made here (free unless a
    // thousand requests run at once), and the device keeps one more warm from now on.
    let version = pinned.version();
    let store = match version.devices[pinned.device].spare.take() {
        Some(warm) => {
            metrics.warm_hits.inc();
            Taken::Warm(warm)
        }
        None => {
            metrics.warm_misses.inc();
            crate::warm::missed(version, pinned.device);
            let slot = deadline.bound(version.stores.clone().acquire_owned()).await;
            match slot {
                Ok(Ok(slot)) => Taken::Slot(slot),
                Ok(Err(_closed)) => {
                    let msg = "the server is shutting down";
                    return refuse(
                        Outcome::Unavailable,
                        StatusCode::SERVICE_UNAVAILABLE,
                        msg,
                        Some(number),
                    );
                }
                Err(_) => {
                    let msg = format!(
                        "the request waited its whole time limit ({timeout:?}) for a free instance slot: the server runs as many requests as its instance pool holds"
                    );
                    return refuse(
                        Outcome::Timeout,
                        StatusCode::GATEWAY_TIMEOUT,
                        &msg,
                        Some(number),
                    );
                }
            }
        }
    };
    // Counted as running while the guest runs (its task may outlive a client that left).
    let held = (
        permit,
        admitted,
        body_held,
        GaugeHold::new(&metrics.running),
    );
    let result = run_guest(pinned, store, metrics, parts, body, deadline, held).await;
    let (outcome, mut resp) = match result {
        Ok(resp) => (outcome_of(resp.status()), resp),
        Err(failure) => failure.respond(&Failed {
            function: name,
            version: number,
            id: &id,
            expose,
            timeout,
            log: &function.log_budget(),
        }),
    };
    resp.headers_mut()
        .insert(VERSION_HEADER, HeaderValue::from(number));
    finish(outcome, resp)
}

/// Whether `req` has the authority wasi:http gives every guest's request: from an absolute
/// request target, else from a Host header that is text. wasmtime-wasi-http refuses a request
/// without one when the Store is being set up: it was answered 500, "the function trapped",
/// counted and logged as a trap, after it had taken a place in the queue and a warm Store.
fn names_its_host(req: &Request<Body>) -> bool {
    req.uri().authority().is_some()
        || req
            .headers()
            .get(axum::http::header::HOST)
            .is_some_and(|host| host.to_str().is_ok())
}

/// Bytes of a guest's stderr kept for the log (and the error response, under expose_errors):
/// the last it wrote.
const STDERR_KEPT: usize = 8 * 1024;
/// Resource handles a Store's table has room for before it grows.
const RESOURCES_RESERVED: usize = 16;

/// Holds a gauge one up until dropped, so a request future dropped mid-way (the client left)
/// does not leave it high.
pub(crate) struct GaugeHold(prometheus_client::metrics::gauge::Gauge);

impl GaugeHold {
    pub(crate) fn new(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for GaugeHold {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A request's hold on its version and the device it runs on: counted in that device's load
/// (where the version has more than one) until dropped, then the version's guard goes.
struct Pinned {
    guard: VersionGuard,
    device: usize,
}

impl Pinned {
    /// Pins the least busy of the version's devices.
    fn new(guard: VersionGuard) -> Self {
        let device = guard.0.pick_device();
        if guard.0.devices.len() > 1 {
            guard.0.devices[device]
                .running
                .fetch_add(1, Ordering::Relaxed);
        }
        Self { guard, device }
    }

    fn version(&self) -> &Arc<Version> {
        &self.guard.0
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // (The guard, a field, drops after this: the device's count goes first.)
        let version = &self.guard.0;
        if version.devices.len() > 1 {
            version.devices[self.device]
                .running
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Where the request's Store comes from: the device's warm one (with its instance-pool slot),
/// or a slot of the instance pool for one made now.
enum Taken {
    Warm(crate::warm::Ready),
    Slot(tokio::sync::OwnedSemaphorePermit),
}

/// Everything a running guest holds, dropped in this order however the request ends (a
/// timeout aborts the task): the Store first, releasing all the guest held, then its device's
/// count and the version guard, so a drain never sees the version free while a Store still holds
/// its bundle; then what `Held` holds (the Store's instance-pool slot among it).
struct InFlight<Held> {
    store: Store<RequestState>,
    _pinned: Pinned,
    _held: Held,
}

/// How the guest's handler ended (`Err`: past the request's deadline), and everything the request
/// held: dropped last, as its teardown.
type Ended<Held> = (Result<wasmtime::Result<()>, Elapsed>, InFlight<Held>);

/// The guest's run, polled by the request's own (the connection's) task. Most guests answer and
/// end in one go: the response, head and body, is then whole when the request takes it, and
/// nothing crosses to another task. If the request stops polling an unfinished run (the head came
/// first: a guest still writing its body; or the client left), [`Drop`] moves the run onto a task
/// of its own, so a guest still runs to its end or its deadline, and its Store is torn down after.
struct Run<Held: Send + 'static> {
    run: Option<std::pin::Pin<Box<dyn Future<Output = Ended<Held>> + Send>>>,
    /// Set when the run ends stopped (trapped or past its deadline), before its teardown.
    stopped: Arc<AtomicBool>,
    /// Taken by whoever tears the run down (the request, or [`Drop`]).
    after: Option<After>,
}

impl<Held: Send + 'static> Drop for Run<Held> {
    fn drop(&mut self) {
        let (Some(run), Some(after)) = (self.run.take(), self.after.take()) else {
            return;
        };
        let stopped = self.stopped.clone();
        // Outside a runtime (it is shutting down) the run is dropped here: its Store with it.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let (result, held) = run.await;
                // Before the teardown, which ends an unfinished body (see `Guarded`).
                note_stopped(&stopped, &result);
                // The connection's task, woken by the end of the body, sends it first.
                tokio::task::yield_now().await;
                after.run(held).await;
            });
        }
    }
}

/// What follows a request once its response is on its way, on the device it ran on.
struct After {
    version: Arc<Version>,
    device: usize,
    metrics: Arc<crate::metrics::FunctionMetrics>,
}

impl After {
    /// Drops what the request held (its Store first), timed as the teardown phase.
    fn teardown<Held>(&self, held: InFlight<Held>) {
        let started = Instant::now();
        drop(held);
        self.metrics
            .phase(Phase::Teardown, started.elapsed().as_secs_f64());
    }

    /// [`After::teardown`], then the refill of the device's warm Stores, in this task (one
    /// task per request for both: a second task for the refill cost each request the spawn and,
    /// where another worker was parked, the wake-up of one). The refill starts here rather than
    /// when the request took its Store: made then, a Store (its instantiation, a sandbox's
    /// arena zeroed and waited for) took the CPU, and at times the very thread, that the
    /// request's guest was running on.
    async fn run<Held: Send + 'static>(self, held: InFlight<Held>) {
        self.teardown(held);
        if let Some(refilling) =
            crate::warm::start_refill(&self.version, self.device, &self.metrics)
        {
            refilling.await;
        }
    }

    /// [`After::run`] on a task spawned now: on this thread, it runs once the connection's task
    /// yields, after it has written the response (the teardown is no part of the request's
    /// latency). Tearing down on a blocking-pool thread instead (4883013) measured slower on the
    /// H200 (bench/h200-runs/2026-12-01-s8/: teardown 22 -> 38 µs, c=64 0.56 -> 0.45 of native).
    /// (`None`: the run's teardown was taken already, which never happens: dropped here.)
    fn later<Held: Send + 'static>(after: Option<Self>, held: InFlight<Held>) {
        let Some(after) = after else {
            return drop(held);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(after.run(held))),
            Err(_) => after.teardown(held),
        }
    }
}

/// Runs the guest in a fresh Store (`taken`'s warm one, else one made now), polled by this task
/// (see [`Run`]); the run owns the version guard and the admission, so a drain waits for it.
async fn run_guest<Held: Send + 'static>(
    pinned: Pinned,
    taken: Taken,
    metrics: &Arc<crate::metrics::FunctionMetrics>,
    parts: axum::http::request::Parts,
    body: Bytes,
    deadline: Deadline,
    held: Held,
) -> Result<Response<Body>, GuestFailure> {
    let (version, slot_index) = (pinned.version().clone(), pinned.device);
    let setup = |e: wasmtime::Error| GuestFailure::Trap {
        reason: format!("setting up the request's Store failed: {e:#}"),
        out_of_fuel: false,
        stderr: String::new(),
    };
    let (mut store, proxy, stderr, store_slot) = match taken {
        Taken::Warm(w) => (w.store, Some(w.proxy), w.stderr, w.slot),
        Taken::Slot(slot) => {
            let (store, stderr) =
                new_store(&version, slot_index, metrics, Made::ForRequest).map_err(setup)?;
            (store, None, stderr, slot)
        }
    };

    let req = axum::http::Request::from_parts(
        parts,
        Full::new(body)
            .map_err(|e: std::convert::Infallible| -> wasmtime_wasi_http::Error { match e {} }),
    );
    let (sender, mut receiver) = tokio::sync::oneshot::channel();
    let data = store.data_mut();
    let incoming = data
        .http()
        .new_incoming_request(Scheme::Http, req)
        .map_err(setup)?;
    let out = data.http().new_response_outparam(sender).map_err(setup)?;
    // The instance, or (a Store made here) the component to instantiate in the run.
    let instance = proxy.ok_or_else(|| (version.pre.clone(), metrics.clone()));
    let sandboxed = version.config.limits.sandbox;
    let mut in_flight = InFlight {
        store,
        _pinned: pinned,
        _held: (held, store_slot),
    };
    // Set by the run when the handler starts (after instantiating, for a Store made here).
    let handler_started = Arc::new(OnceLock::new());
    let run_started = handler_started.clone();
    let mut run = Run {
        run: Some(Box::pin(async move {
            let result = deadline
                .bound(async {
                    let proxy = match instance {
                        Ok(p) => p,
                        Err((pre, metrics)) => {
                            let instantiating = Instant::now();
                            let p = pre.instantiate_async(&mut in_flight.store).await?;
                            metrics
                                .phase(Phase::Instantiate, instantiating.elapsed().as_secs_f64());
                            if sandboxed {
                                let store = &mut in_flight.store;
                                crate::warm::prepare_sandbox(store, &metrics, Made::ForRequest)
                                    .await;
                            }
                            p
                        }
                    };
                    let _ = run_started.set(Instant::now());
                    proxy
                        .wasi_http_incoming_handler()
                        .call_handle(&mut in_flight.store, incoming, out)
                        .await
                })
                .await;
            (result, in_flight)
        })),
        after: Some(After {
            version,
            device: slot_index,
            metrics: metrics.clone(),
        }),
        stopped: Arc::new(AtomicBool::new(false)),
    };

    let failure = |result: Result<wasmtime::Result<()>, _>| match result {
        Ok(Ok(())) => GuestFailure::NoResponse("the handler returned".into()),
        Ok(Err(e)) => GuestFailure::Trap {
            out_of_fuel: matches!(e.downcast_ref::<Trap>(), Some(Trap::OutOfFuel)),
            reason: format!("{e:?}"),
            stderr: stderr.contents(),
        },
        Err(_elapsed) => GuestFailure::Timeout,
    };
    // The run first: a guest that answers and ends in this poll is taken whole. In a sampled
    // request each poll of the run is timed on the thread's CPU clock: the sum is the run's CPU
    // time until its response, which the respond phase's wall time less is the run's waiting.
    let timed = metrics.sample_run_cpu();
    let mut run_cpu = Duration::ZERO;
    let first = std::future::poll_fn(|cx| {
        if let Some(r) = run.run.as_mut() {
            let cpu = timed.then(ThreadCpu::now);
            let polled = r.as_mut().poll(cx);
            if let Some(cpu) = cpu {
                run_cpu += cpu.elapsed();
            }
            if let Poll::Ready(ended) = polled {
                run.run = None;
                return Poll::Ready(Ok(ended));
            }
        }
        std::pin::Pin::new(&mut receiver).poll(cx).map(Err)
    })
    .await;
    let respond = |metrics: &crate::metrics::FunctionMetrics| {
        if let Some(t) = handler_started.get() {
            metrics.phase(Phase::Respond, t.elapsed().as_secs_f64());
            if timed {
                metrics.respond_cpu.observe(run_cpu.as_secs_f64());
            }
        }
    };
    match first {
        Ok((result, in_flight)) => {
            note_stopped(&run.stopped, &result);
            // Its answer, if it gave one, is waiting (the Store, alive still, holds the sender).
            let answer = match receiver.try_recv() {
                Ok(Ok(resp)) => {
                    respond(metrics);
                    Ok(into_axum_whole(resp, &run.stopped))
                }
                Ok(Err(code)) => Err(GuestFailure::NoResponse(format!(
                    "the function answered with an error code: {code:?}"
                ))),
                Err(_) => Err(failure(result)),
            };
            After::later(run.after.take(), in_flight);
            answer
        }
        // The head, while the guest runs on (`run`'s drop moves it to a task).
        Err(Ok(Ok(resp))) => {
            respond(metrics);
            Ok(into_axum(resp, &run.stopped))
        }
        Err(Ok(Err(code))) => Err(GuestFailure::NoResponse(format!(
            "the function answered with an error code: {code:?}"
        ))),
        // The guest dropped its response-outparam unset and runs on: its end says how it failed.
        Err(Err(_closed)) => match run.run.take() {
            Some(r) => {
                let (result, in_flight) = r.await;
                After::later(run.after.take(), in_flight);
                Err(failure(result))
            }
            None => Err(GuestFailure::NoResponse("the handler returned".into())),
        },
    }
}

/// A new Store for a request on device `device` of `version`: its WASI and CUDA contexts (with
/// the device's bundle and sandbox pool), memory limits and fuel. Timed as the setup phase
/// (`made`'s: a warm Store's is `warm_setup`).
pub(crate) fn new_store(
    version: &Version,
    device: usize,
    metrics: &Arc<crate::metrics::FunctionMetrics>,
    made: Made,
) -> wasmtime::Result<(Store<RequestState>, StderrTail)> {
    let started = Instant::now();
    let slot = &version.devices[device];
    let limits = version.config.limits.clone();
    let fuel = limits.fuel;
    let store_limits = StoreLimitsBuilder::new()
        .memory_size(limits.max_wasm_memory_bytes)
        .trap_on_grow_failure(false)
        .build();
    let mut cuda = gpuhost_wasm::CudaCtx::new(slot.host.clone(), limits)
        .with_call_observer(metrics.calls.clone());
    if let Some(bundle) = slot.bundle.load_full() {
        cuda = match &slot.rewrite {
            Some(rewrite) => cuda.with_sandboxed_bundle(bundle, rewrite.clone()),
            None => cuda.with_bundle(bundle),
        };
    }
    if let Some(pool) = &slot.sandbox {
        cuda = cuda.with_sandbox_pool(pool.clone());
    }
    if version.config.limits.sandbox {
        cuda = cuda.with_module_cache(slot.modules.clone());
    }
    let stderr = StderrTail::new(STDERR_KEPT);
    let state = RequestState {
        wasi: WasiCtxBuilder::new().stderr(stderr.clone()).build(),
        http: WasiHttpCtx::new(),
        // Room for a request's usual handles (its request, response, fields, body and stream,
        // a few CUDA objects) in one allocation, where growing from empty took two or three.
        table: wasmtime::component::ResourceTable::with_capacity(RESOURCES_RESERVED),
        cuda,
        store_limits,
        hooks: NoOutgoing,
        meter: Meter::new(metrics.clone()),
    };
    let mut store = Store::new(version.pre.engine(), state);
    store.limiter(|s| &mut s.store_limits);
    store.set_fuel(fuel.unwrap_or(u64::MAX))?;
    store.fuel_async_yield_interval(Some(FUEL_YIELD_INTERVAL))?;
    metrics.phase(made.phase(Phase::Setup), started.elapsed().as_secs_f64());
    Ok((store, stderr))
}

/// Marks a run whose guest ended otherwise than by returning (a trap, or past its deadline) as
/// stopped, for its streamed body to end in an error ([`Guarded`]).
fn note_stopped(stopped: &AtomicBool, result: &Result<wasmtime::Result<()>, Elapsed>) {
    if !matches!(result, Ok(Ok(()))) {
        stopped.store(true, Ordering::Release);
    }
}

/// A guest's response body, streamed; it ends in an error rather than cleanly if its guest was
/// stopped (`stopped`: trapped or past its time limit), so hyper cuts the connection (no last
/// chunk) and the client sees the body is incomplete. wasmtime-wasi-http ends the body cleanly
/// when its `outgoing-body` is dropped unfinished, as the Store's teardown does: a guest stopped
/// mid-body had its cut-short body sent as if whole.
fn into_axum(resp: Response<HyperOutgoingBody>, stopped: &Arc<AtomicBool>) -> Response<Body> {
    let stopped = stopped.clone();
    resp.map(|body| Body::new(Guarded { body, stopped }))
}

/// See [`into_axum`].
struct Guarded {
    body: HyperOutgoingBody,
    stopped: Arc<AtomicBool>,
}

impl hyper::body::Body for Guarded {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        let frame = std::task::ready!(std::pin::Pin::new(&mut this.body).poll_frame(cx));
        if frame.is_none() && this.stopped.load(Ordering::Acquire) {
            return Poll::Ready(Some(Err(std::io::Error::other(
                "the function was stopped (a trap or its time limit) before it finished its \
                 response body; the body is cut short",
            ))));
        }
        Poll::Ready(frame.map(|f| {
            f.map(without_server_fields)
                .map_err(|code| std::io::Error::other(format!("function body error: {code:?}")))
        }))
    }
}

/// `frame` without the guest's own `x-request-id` and `x-gpuhost-version`, if it is trailers:
/// the head's are the server's (set in the head, where a guest's are replaced), and a client
/// that asked for trailers (`te: trailers`) and merges them into the headers got a second of
/// each, of the guest's making, naming a request the log never saw.
fn without_server_fields(mut frame: Frame<Bytes>) -> Frame<Bytes> {
    if let Some(trailers) = frame.trailers_mut() {
        trailers.remove(REQUEST_ID_HEADER);
        trailers.remove(VERSION_HEADER);
    }
    frame
}

/// The response of a guest that has ended: its body frames are all queued already, so they are
/// taken now into one body of known length (hyper writes it with the head, with a content-length,
/// as a native handler's). A body that does not end in what is queued, or has trailers or an
/// error, goes on as a stream after the frames taken.
fn into_axum_whole(resp: Response<HyperOutgoingBody>, stopped: &Arc<AtomicBool>) -> Response<Body> {
    let (parts, mut body) = resp.into_parts();
    let mut cx = Context::from_waker(std::task::Waker::noop());
    // Most bodies are one frame (`http::respond` writes one): no list is made for it.
    let mut data: SmallVec<[Bytes; 1]> = SmallVec::new();
    let rest = loop {
        match std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(None) => break None,
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(bytes) => data.push(bytes),
                Err(frame) => break Some(Some(Ok(frame))),
            },
            Poll::Ready(Some(Err(e))) => break Some(Some(Err(e))),
            Poll::Pending => break Some(None),
        }
    };
    let Some(next) = rest else {
        let whole: Bytes = match data.len() {
            1 => data.pop().unwrap_or_default(),
            _ => data.concat().into(),
        };
        return Response::from_parts(parts, Body::from(whole));
    };
    let taken = data.into_iter().map(|b| Ok(Frame::data(b))).chain(next);
    let stream = futures_util::stream::iter(taken).chain(BodyStream::new(body));
    into_axum(
        Response::from_parts(parts, StreamBody::new(stream).boxed_unsync()),
        stopped,
    )
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;
    use hyper::body::Body as _;

    use super::*;

    /// A guest's response whose body frames are all queued, as when its guest has ended.
    fn ended(frames: &[&'static str]) -> Response<HyperOutgoingBody> {
        let frames: Vec<Result<Frame<Bytes>, wasmtime_wasi_http::Error>> = frames
            .iter()
            .map(|f| Ok(Frame::data(Bytes::from_static(f.as_bytes()))))
            .collect();
        Response::new(StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync())
    }

    #[tokio::test]
    async fn an_ended_guests_body_of_any_number_of_frames_is_sent_whole_with_its_length() {
        for frames in [&["one frame"][..], &["three ", "frames", "!"], &[]] {
            let resp = into_axum_whole(ended(frames), &Default::default());
            let length = resp.body().size_hint().exact();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let expected = frames.concat();
            assert_eq!(body, expected.as_bytes(), "frames {frames:?}");
            assert_eq!(length, Some(expected.len() as u64), "frames {frames:?}");
        }
    }
}
