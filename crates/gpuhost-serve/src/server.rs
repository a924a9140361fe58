//! The server's state: the devices, the engine, the repository's functions and their routes,
//! and the repository operations (Triton's repository extension): index, load (a new version
//! beside the old, published atomically, the old drained and released) and unload.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::config::{Devices, FunctionConfig};
use crate::engine::Wasm;
use crate::error::{Error, Result};
use crate::function::{Function, State};
use crate::metrics::Metrics;
use crate::version::{ReleaseOutcome, Version};

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The repository folder: one folder per function.
    pub repository: PathBuf,
    /// The devices to use.
    pub devices: Devices,
    /// How long a swap or unload waits for the old version's requests before giving up on
    /// releasing its device code (it is then released when they end).
    pub drain_timeout: Duration,
    /// Load every function of the repository at start (Triton's default mode).
    pub load_all: bool,
    /// Longest wait for a request's head: from a connection's opening, or from the end of its
    /// last response, to the head's last byte. A connection past it is closed, so a client that
    /// never finishes its head (slowloris) or idles between requests holds no socket for long.
    pub header_read_timeout: Duration,
    /// Longest time a connection's sent data may stay unacknowledged (a client that stopped
    /// reading its response) before the kernel drops the connection, with the response it
    /// holds (Linux's TCP_USER_TIMEOUT; elsewhere not applied).
    pub send_timeout: Duration,
    /// Longest wait for a request's body, from the request's arrival (never past its
    /// function's own time limit): the body is read before the request takes a place in its
    /// function's queue, so a client slow to send it, or that never does, holds none; past it
    /// the request is answered 408.
    pub body_read_timeout: Duration,
    /// Request-body bytes the server buffers at once, over all requests: each body's bytes are
    /// counted as they arrive and until its request ends; a body that would pass it is answered
    /// 503 with Retry-After, and one longer than all of it 413 (no retry could fit it).
    pub max_buffered_body_bytes: u64,
    /// Connections open at once: at the cap the server accepts no more until one closes (the
    /// kernel's backlog holds the next ones meanwhile).
    pub max_connections: usize,
    /// Connections one client (peer IPv4 address, or IPv6 /64 prefix) may hold open on the
    /// public listener; its next one is closed at once. The control listener has no such cap
    /// (its clients are operators' tools, all one loopback address). Off (None) by default:
    /// behind a Kubernetes Service whose traffic is source-NATed, an ingress controller or any
    /// proxy, every connection comes from the few addresses of the proxies, and a cap sized for
    /// one client would refuse most of the traffic. Set it where clients connect straight to
    /// the server, to a few times what one client needs. An IPv6 client is its address's /64,
    /// as a host is normally given a whole /64 to pick addresses from; an IPv4-mapped one its
    /// IPv4 address (crate::clients).
    pub max_connections_per_client: Option<usize>,
}

impl ServeOptions {
    /// Defaults for `repository`: all devices, 30 s drain, load everything, 30 s for a
    /// request's head (hyper's default, which it applies only where a timer is given), 30 s for
    /// a client to take sent data.
    pub fn new(repository: impl Into<PathBuf>) -> Self {
        Self {
            repository: repository.into(),
            devices: Devices::All,
            drain_timeout: Duration::from_secs(30),
            load_all: true,
            header_read_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(10),
            max_buffered_body_bytes: 256 << 20,
            max_connections: 10_000,
            max_connections_per_client: None,
        }
    }
}

/// One row of the repository index.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexEntry {
    /// The function (folder) name.
    pub name: String,
    /// The serving version, as a string (Triton's convention); empty when none.
    pub version: String,
    /// READY or UNAVAILABLE.
    pub state: String,
    /// Why not ready (empty when ready).
    pub reason: String,
}

/// What a successful load did.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The version now serving.
    pub version: u64,
    /// Compile and bundle-load time of the new version.
    pub load_time: Duration,
    /// Its component came from the compile cache.
    pub compile_cached: bool,
    /// Warm Stores made before it was published: as many as the version it replaced had grown
    /// to on the same devices, or those done within [`crate::warm::PREWARM_WAIT`] (none on a
    /// first load, or a reload after a context loss: those publish at once).
    pub warmed: usize,
    /// The time they took (the new version was not serving yet; the old one was).
    pub warm_time: Duration,
    /// How releasing the previous version went (None: there was none).
    pub released: Option<ReleaseOutcome>,
}

/// The running server's state (shared by every connection).
pub struct Server {
    pub(crate) wasm: Arc<Wasm>,
    /// One host per device the server uses, in --devices order.
    pub(crate) hosts: Vec<Arc<gpuhost::Host>>,
    pub(crate) repository: PathBuf,
    functions: ArcSwap<HashMap<String, Arc<Function>>>,
    /// (route, function) pairs, longest route first.
    routes: ArcSwap<Vec<(String, Arc<Function>)>>,
    /// Serialises changes to `functions` and `routes`.
    changing: tokio::sync::Mutex<()>,
    pub(crate) metrics: Arc<Metrics>,
    draining: AtomicBool,
    pub(crate) drain_timeout: Duration,
    /// [`ServeOptions::header_read_timeout`].
    pub(crate) header_read_timeout: Duration,
    /// [`ServeOptions::send_timeout`].
    pub(crate) send_timeout: Duration,
    /// [`ServeOptions::body_read_timeout`].
    pub(crate) body_read_timeout: Duration,
    /// [`ServeOptions::max_buffered_body_bytes`], and what bodies hold of it now.
    pub(crate) body_budget: crate::body::Budget,
    /// [`ServeOptions::max_connections`].
    pub(crate) max_connections: usize,
    /// [`ServeOptions::max_connections_per_client`].
    pub(crate) max_connections_per_client: Option<usize>,
    retired: std::sync::Mutex<Vec<String>>,
    /// Every request's deadline, enforced by one task.
    pub(crate) deadlines: crate::deadline::Deadlines,
}

/// The longest duration a server option may be: far past any use, and far enough from the
/// clock's end that adding it to an `Instant` cannot overflow. hyper adds the header read
/// timeout to `Instant::now()` per connection, and a drain adds its timeout, unchecked: at
/// `u64::MAX` seconds every connection's task panicked before answering, and every swap,
/// unload and shutdown at its drain.
const MAX_OPTION_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Options that would leave the server unable to serve a request.
fn check_options(opts: &ServeOptions) -> Result<()> {
    let zero = |option: &'static str| {
        Err(Error::InvalidOption {
            option,
            reason: "must be more than zero".into(),
        })
    };
    for (option, duration) in [
        ("drain_timeout (--drain-timeout)", opts.drain_timeout),
        (
            "header_read_timeout (--header-read-timeout)",
            opts.header_read_timeout,
        ),
        ("send_timeout (--send-timeout)", opts.send_timeout),
        (
            "body_read_timeout (--body-read-timeout)",
            opts.body_read_timeout,
        ),
    ] {
        if duration > MAX_OPTION_DURATION {
            return Err(Error::InvalidOption {
                option,
                reason: format!(
                    "must be at most {} seconds (a day); got {} seconds",
                    MAX_OPTION_DURATION.as_secs(),
                    duration.as_secs()
                ),
            });
        }
    }
    if opts.body_read_timeout.is_zero() {
        return zero("body_read_timeout (--body-read-timeout)");
    }
    if opts.max_buffered_body_bytes == 0 {
        return zero("max_buffered_body_bytes (--max-buffered-body-bytes)");
    }
    if opts.max_connections == 0 {
        return zero("max_connections (--max-connections)");
    }
    if opts.max_connections_per_client == Some(0) {
        return zero("max_connections_per_client (--max-connections-per-client)");
    }
    Ok(())
}

/// A function name is a plain folder name of the repository.
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Error::UnknownFunction {
            name: name.chars().take(128).collect(),
        })
    }
}

impl Server {
    /// Opens the devices and the engine; loads nothing yet (see [`Server::load_all`]).
    pub fn new(opts: &ServeOptions) -> Result<Arc<Self>> {
        check_options(opts)?;
        std::fs::read_dir(&opts.repository).map_err(|source| Error::Repository {
            path: opts.repository.clone(),
            source,
        })?;
        let ordinals = match &opts.devices {
            Devices::All => {
                let n = gpuhost::device_count()
                    .map_err(|source| Error::Device { device: 0, source })?;
                (0..n).collect()
            }
            Devices::List(list) => list.clone(),
        };
        let mut hosts = Vec::new();
        for device in ordinals {
            let host = gpuhost::host(device).map_err(|source| Error::Device { device, source })?;
            // Staging for one guest transfer, page-locked now: a request's transfer that had to
            // page-lock memory would wait in the driver for every kernel running (NVIDIA); more
            // at once than this still work, allocating what they lack.
            host.reserve_staging(1)
                .map_err(|source| Error::Device { device, source })?;
            host.set_staging_growth(false);
            hosts.push(host);
        }
        if hosts.is_empty() {
            return Err(Error::NoDevices);
        }
        let wasm = Arc::new(Wasm::new()?);
        tracing::debug!(pooling = wasm.pooling, "wasm engine ready");
        Ok(Arc::new(Self {
            wasm,
            hosts,
            repository: opts.repository.clone(),
            functions: ArcSwap::from_pointee(HashMap::new()),
            routes: ArcSwap::from_pointee(Vec::new()),
            changing: tokio::sync::Mutex::new(()),
            metrics: Metrics::new(),
            draining: AtomicBool::new(false),
            drain_timeout: opts.drain_timeout,
            header_read_timeout: opts.header_read_timeout,
            send_timeout: opts.send_timeout,
            body_read_timeout: opts.body_read_timeout,
            body_budget: crate::body::Budget::new(opts.max_buffered_body_bytes),
            max_connections: opts.max_connections,
            max_connections_per_client: opts.max_connections_per_client,
            retired: std::sync::Mutex::new(Vec::new()),
            deadlines: Default::default(),
        }))
    }

    /// The device ordinals in use.
    pub fn devices(&self) -> Vec<usize> {
        self.hosts.iter().map(|h| h.ordinal()).collect()
    }

    /// Folder names of the repository that hold a function.wasm, sorted.
    pub fn repository_names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.repository)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.path().join("function.wasm").is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| check_name(n).is_ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Loads every function of the repository; failures are logged and shown in the index.
    pub async fn load_all(&self) {
        for name in self.repository_names() {
            match self.load(&name).await {
                Ok(r) => {
                    tracing::info!(function = %name, version = r.version, load_ms = r.load_time.as_millis() as u64, "loaded")
                }
                Err(e) => tracing::error!(function = %name, error = %e, "load failed"),
            }
        }
    }

    /// The function called `name`, if the server knows it.
    pub fn function(&self, name: &str) -> Option<Arc<Function>> {
        self.functions.load().get(name).cloned()
    }

    /// The function whose route holds `path`.
    pub(crate) fn route(&self, path: &str) -> Option<Arc<Function>> {
        let routes = self.routes.load();
        routes
            .iter()
            .find(|(route, _)| {
                path.strip_prefix(route.as_str()).is_some_and(|rest| {
                    rest.is_empty() || rest.starts_with('/') || rest.starts_with('?')
                })
            })
            .map(|(_, f)| f.clone())
    }

    /// Triton's repository index: every function folder and every known function.
    pub fn index(&self) -> Vec<IndexEntry> {
        let functions = self.functions.load();
        let mut names = self.repository_names();
        names.extend(functions.keys().cloned());
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| {
                let f = functions.get(&name);
                let version = f.and_then(|f| f.current()).map(|v| v.number.to_string());
                let state = f.map(|f| f.state());
                let (state, reason) = match state {
                    Some(State::Ready) => ("READY", String::new()),
                    Some(State::Unavailable(r)) => ("UNAVAILABLE", r),
                    None => ("UNAVAILABLE", "not loaded".to_string()),
                };
                IndexEntry {
                    name,
                    version: version.unwrap_or_default(),
                    state: state.to_string(),
                    reason,
                }
            })
            .collect()
    }

    /// Loads `name` from the repository as a new version, beside the serving one; publishes it
    /// atomically, then drains and releases the old. On failure the old version keeps serving.
    pub async fn load(&self, name: &str) -> Result<LoadReport> {
        check_name(name)?;
        let dir = self.repository.join(name);
        if !dir.join("function.wasm").is_file() {
            return Err(Error::UnknownFunction {
                name: name.to_string(),
            });
        }
        let function = self.function_entry(name).await;
        let _one_at_a_time = function.loading.lock().await;
        let (mut report, old) = self.load_and_publish(&function, &dir).await?;
        if let Some(old) = old {
            let released = old.drain_and_release(self.drain_timeout).await;
            self.note_release(name, Some(&released));
            report.released = Some(released);
        }
        Ok(report)
    }

    /// Loads a new version of `function` from `dir` and publishes it; returns the version it
    /// replaced, still to be drained and released. The caller holds `function.loading`.
    pub(crate) async fn load_and_publish(
        &self,
        function: &Function,
        dir: &Path,
    ) -> Result<(LoadReport, Option<Arc<Version>>)> {
        let name = function.name.as_str();
        let version = match self.load_version(function, dir).await {
            // Numbered on success: versions are the consecutive successful loads.
            Ok(mut v) => {
                v.number = function.take_version_number();
                v
            }
            Err(e) => {
                function.load_failed(&e.to_string());
                tracing::warn!(function = %name, error = %e, "load failed; the serving version (if any) stays");
                return Err(e);
            }
        };
        let (number, load_time, compile_cached) =
            (version.number, version.load_time, version.compile_cached);
        let route = version.config.route.clone();
        let max_body = version.config.max_body_bytes;
        if max_body > self.body_budget.cap() as u64 {
            // Not refused: bodies up to the budget are served, and the operator may mean it.
            tracing::warn!(function = %name, max_body_bytes = max_body, max_buffered_body_bytes = self.body_budget.cap(), "the function's max_body_bytes is more than the server buffers at once: bodies over --max-buffered-body-bytes always get 413; raise it or lower max_body_bytes");
        }
        let version = Arc::new(version);
        let warm_start = Instant::now();
        let warmed =
            crate::warm::prewarm(&version, function.current().as_deref(), &function.metrics).await;
        let warm_time = warm_start.elapsed();
        let old = function.publish(version);
        self.rebuild_routes().await;
        tracing::info!(function = %name, version = number, %route, load_ms = load_time.as_millis() as u64, warmed, warm_ms = warm_time.as_millis() as u64, "published");
        let report = LoadReport {
            version: number,
            load_time,
            compile_cached,
            warmed,
            warm_time,
            released: None,
        };
        Ok((report, old))
    }

    async fn load_version(&self, function: &Function, dir: &Path) -> Result<Version> {
        let config = FunctionConfig::load(dir)?;
        // Another function already answering this route would make routing ambiguous.
        for (route, other) in self.routes.load().iter() {
            if *route == config.route && other.name != function.name {
                return Err(Error::Config {
                    path: dir.join("function.toml"),
                    reason: format!(
                        "route {route} is already served by function `{}`",
                        other.name
                    ),
                });
            }
        }
        let hosts =
            match &config.devices {
                None => self.hosts.clone(),
                Some(list) => {
                    let mut hosts = Vec::new();
                    for d in list {
                        let host = self.hosts.iter().find(|h| h.ordinal() == *d).ok_or_else(
                            || Error::Config {
                                path: dir.join("function.toml"),
                                reason: format!(
                                    "device {d} is not one the server uses ({:?}; see --devices)",
                                    self.devices()
                                ),
                            },
                        )?;
                        hosts.push(host.clone());
                    }
                    hosts
                }
            };
        let wasm = self.wasm.clone();
        let previous = function.current();
        // Compiling and JIT-loading are CPU work: off the executor.
        tokio::task::spawn_blocking(move || {
            Version::load(&wasm, config, &hosts, previous.as_deref())
        })
        .await
        .map_err(|e| Error::Engine(format!("the load task failed: {e}")))?
    }

    /// Unpublishes `name`, drains its requests and releases its device code.
    pub async fn unload(&self, name: &str) -> Result<Option<ReleaseOutcome>> {
        check_name(name)?;
        let Some(function) = self.function(name) else {
            return Err(Error::UnknownFunction {
                name: name.to_string(),
            });
        };
        let _one_at_a_time = function.loading.lock().await;
        let released = function.unpublish(self.drain_timeout).await;
        self.rebuild_routes().await;
        self.note_release(name, released.as_ref());
        tracing::info!(function = %name, "unloaded");
        Ok(released)
    }

    /// Unloads everything (at shutdown), and waits until each host's queued module unloads
    /// are made: gpuhost makes them on a background thread, which the process's exit would
    /// otherwise cut short.
    pub async fn unload_all(&self) {
        let names: Vec<String> = self.functions.load().keys().cloned().collect();
        for name in names {
            let _ = self.unload(&name).await;
        }
        let hosts = self.hosts.clone();
        let waited = tokio::task::spawn_blocking(move || {
            for host in hosts {
                host.wait_unloads();
            }
        })
        .await;
        if let Err(e) = waited {
            tracing::warn!("waiting for module unloads at shutdown failed: {e}");
        }
    }

    async fn function_entry(&self, name: &str) -> Arc<Function> {
        let _g = self.changing.lock().await;
        if let Some(f) = self.function(name) {
            return f;
        }
        let f = Arc::new(Function::new(name, self.metrics.function(name)));
        let mut map = HashMap::clone(&self.functions.load());
        map.insert(name.to_string(), f.clone());
        self.functions.store(Arc::new(map));
        f
    }

    async fn rebuild_routes(&self) {
        let _g = self.changing.lock().await;
        let mut routes: Vec<(String, Arc<Function>)> = self
            .functions
            .load()
            .values()
            .filter_map(|f| f.config().map(|c| (c.route, f.clone())))
            .collect();
        routes.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        self.routes.store(Arc::new(routes));
    }

    pub(crate) fn note_release(&self, name: &str, released: Option<&ReleaseOutcome>) {
        let Some(r) = released else { return };
        if r.refused.is_empty() {
            tracing::info!(function = %name, drain_ms = r.took.as_millis() as u64, "old version drained and released");
            return;
        }
        tracing::warn!(function = %name, refused = ?r.refused, "old version retired, not released");
        let mut retired = self.retired.lock().unwrap_or_else(|p| p.into_inner());
        retired.extend(r.refused.iter().map(|e| format!("{name}: {e}")));
        self.metrics.set_retired(retired.len());
    }

    /// Versions whose device code could not be released, with why.
    pub fn retired(&self) -> Vec<String> {
        self.retired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Live: no device of the server is poisoned. A kernel that faults (a trusted function's
    /// out-of-bounds store, say) poisons its device for the rest of the process: NVIDIA's driver
    /// cannot recover it in process, so every later request there fails until the process
    /// restarts, which is what a failing liveness probe has Kubernetes do. One cheap driver
    /// call per device (the memory figures), which a poisoned device answers with its fault.
    pub fn live(&self) -> bool {
        !self
            .hosts
            .iter()
            .any(|h| matches!(h.mem_info(), Err(gpuhost::Error::ContextPoisoned { .. })))
    }

    /// Ready: not shutting down, no function's last load failed with no version serving, and
    /// no function's serving version lost its device code to a context loss (until it is
    /// reloaded: [`Server::recover`]). Each device is entered first, which is how a foreign
    /// reset of its primary context is noticed when no request has touched it since.
    pub fn ready(&self) -> bool {
        if self.draining.load(Ordering::SeqCst) {
            return false;
        }
        for host in &self.hosts {
            // Only to notice a loss (the host moves to a new generation); a poisoned device is
            // liveness's to report.
            let _ = host.enter();
        }
        !self
            .functions
            .load()
            .values()
            .any(|f| f.failed() || f.stale())
    }

    /// The functions whose serving version lost its device code to a context loss.
    pub(crate) fn lost_functions(&self) -> Vec<Arc<Function>> {
        let functions = self.functions.load();
        functions.values().filter(|f| f.stale()).cloned().collect()
    }

    /// Marks the server as shutting down: ready turns false.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether shutdown has begun.
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// The `/metrics` text.
    pub fn render_metrics(&self) -> String {
        for f in self.functions.load().values() {
            let Some(v) = f.current() else {
                f.metrics.sandbox_kept.set(0);
                f.metrics.sandbox_pending.set(0);
                continue;
            };
            let (kept, pending) = v.sandbox_kept();
            f.metrics.sandbox_kept.set(kept as i64);
            f.metrics.sandbox_pending.set(pending as i64);
            f.metrics.sandbox_takes(v.sandbox_takes());
            f.metrics.module_loads(v.module_loads());
        }
        let buffered = self.body_budget.in_use();
        self.metrics
            .body_bytes_buffered
            .set(i64::try_from(buffered).unwrap_or(i64::MAX));
        self.metrics.render(&self.hosts)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    /// The value of the sample `name{labels}` in a `/metrics` text (0 when absent).
    fn sample(text: &str, name: &str, labels: &str) -> f64 {
        let prefix = format!("{name}{{{labels}}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    #[test]
    fn options_that_would_serve_nothing_or_pass_the_clocks_end_are_refused_naming_the_flag() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
        let opts = crate::ServeOptions::new(root.join("../../examples/repository"));
        let refused = [
            crate::ServeOptions {
                body_read_timeout: Duration::ZERO,
                ..opts.clone()
            },
            crate::ServeOptions {
                max_buffered_body_bytes: 0,
                ..opts.clone()
            },
            crate::ServeOptions {
                max_connections: 0,
                ..opts.clone()
            },
            // Past the clock's end when added to an `Instant`.
            crate::ServeOptions {
                header_read_timeout: Duration::from_secs(u64::MAX),
                ..opts.clone()
            },
            crate::ServeOptions {
                drain_timeout: Duration::MAX,
                ..opts.clone()
            },
            crate::ServeOptions {
                send_timeout: Duration::from_secs(24 * 3600 + 1),
                ..opts
            },
        ];
        for (opts, flag) in refused.iter().zip([
            "--body-read-timeout",
            "--max-buffered-body-bytes",
            "--max-connections",
            "--header-read-timeout",
            "--drain-timeout",
            "--send-timeout",
        ]) {
            let error = crate::Server::new(opts).err().map(|e| e.to_string());
            assert!(
                error.as_ref().is_some_and(|e| e.contains(flag)),
                "{error:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_scrape_counts_the_sandbox_pairs_a_functions_stores_took_from_its_pools() {
        let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
        let opts = crate::ServeOptions::new(root.join("../../examples/repository"));
        let server = crate::Server::new(&opts).unwrap();
        server.load("saxpy").await.unwrap();
        // Its warm Stores (made from the publication on) each take a pair: the first ones new.
        let (created, reused, waited) = (
            r#"function="saxpy",result="created""#,
            r#"function="saxpy",result="reused""#,
            r#"function="saxpy",result="waited""#,
        );
        let name = "gpuhost_function_sandbox_takes_total";
        let deadline = Instant::now() + Duration::from_secs(30);
        let text = loop {
            let text = server.render_metrics();
            let warm = sample(&text, "gpuhost_function_warm_stores", r#"function="saxpy""#);
            if warm >= 1.0 || Instant::now() > deadline {
                break text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let warm = sample(&text, "gpuhost_function_warm_stores", r#"function="saxpy""#);
        assert!(warm >= 1.0, "no warm Store was made");
        let taken = sample(&text, name, created)
            + sample(&text, name, reused)
            + sample(&text, name, waited);
        assert!(
            taken >= warm,
            "{warm} warm Stores hold pairs, {taken} takes counted:\n{text}"
        );
        // A later scrape counts no more than the pools have handed out (read after it; a
        // refill may still be taking pairs meanwhile).
        let again = server.render_metrics();
        let version = server.function("saxpy").unwrap().current().unwrap();
        let t = version.sandbox_takes();
        let counted = (
            sample(&again, name, reused),
            sample(&again, name, waited),
            sample(&again, name, created),
        );
        assert!(
            counted.0 <= t.reused as f64
                && counted.1 <= t.waited as f64
                && counted.2 <= t.created as f64
                && counted.0 + counted.1 + counted.2 >= taken,
            "counted {counted:?}, the pools handed out {t:?}"
        );
    }
}
