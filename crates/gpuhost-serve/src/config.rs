//! A function's folder in the repository: `function.wasm`, an optional `bundle/` (a
//! manifest.toml as `gpuhost::Registry::load` reads it) and an optional `function.toml`:
//!
//! ```toml
//! route = "/saxpy"        # default: "/<folder name>"
//! devices = [0, 1]        # default: every device the server uses
//! sandbox = true          # default true: untrusted guest (gpuhost-wasm `Limits::sandbox`: its
//!                         # PTX confined, launches stopped past limits.max_kernel_time_ms)
//! [serve]
//! max_concurrency = 8     # requests running at once (default 16); a sandboxed function keeps
//!                         # up to twice this many arenas + control blocks per device for reuse
//! max_queue = 64          # requests waiting beyond those; more are refused with 429 (default 64)
//! timeout_ms = 30000      # wall time from arrival to the guest's end (default 30 s)
//! max_body_bytes = 16777216
//! expose_errors = false   # default false: a client whose request trapped gets its kind, function,
//!                         # version and request id, and the log the detail (the guest's backtrace)
//!                         # and stderr; true (for development) sends those to the client too
//! log_lines_burst = 20    # warnings of failed requests (a trap, no response) logged at once,
//! log_lines_per_minute = 60  # then this many a minute; past them they are counted, not
//!                         # logged (gpuhost_log_lines_suppressed_total): crate::log_budget
//! [limits]                # gpuhost-wasm quotas of each request's Store (defaults: Limits::default();
//!                         # max_kernel_time_ms is Limits::max_kernel_time)
//! max_buffer_bytes = 268435456
//! fuel = 2000000000
//! ```

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Upper bounds on what function.toml may ask for, so a typo cannot make the server unusable.
const MAX_CONCURRENCY: u32 = 4096;
const MAX_QUEUE: u32 = 1 << 16;
const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// function.toml as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionToml {
    route: Option<String>,
    devices: Option<Vec<usize>>,
    sandbox: Option<bool>,
    #[serde(default)]
    serve: ServeToml,
    #[serde(default)]
    limits: LimitsToml,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeToml {
    max_concurrency: Option<u32>,
    max_queue: Option<u32>,
    timeout_ms: Option<u64>,
    max_body_bytes: Option<u64>,
    expose_errors: Option<bool>,
    log_lines_burst: Option<u32>,
    log_lines_per_minute: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsToml {
    max_module_bytes: Option<u64>,
    max_modules: Option<u32>,
    max_ptx_bytes: Option<u64>,
    max_buffers: Option<u32>,
    max_buffer_bytes: Option<u64>,
    max_transfer_bytes: Option<u64>,
    max_launches_in_flight: Option<u32>,
    max_launch_args: Option<u32>,
    max_streams_and_events: Option<u32>,
    max_kernels: Option<u32>,
    fuel: Option<u64>,
    max_wasm_memory_bytes: Option<usize>,
    max_kernel_time_ms: Option<u64>,
    max_globals_bytes: Option<u64>,
    max_launch_local_bytes: Option<u64>,
    max_graph_batch: Option<u32>,
    max_cached_graphs: Option<u32>,
}

/// A function's configuration, defaults filled in.
#[derive(Debug, Clone)]
pub struct FunctionConfig {
    /// The folder name.
    pub name: String,
    /// The folder.
    pub dir: PathBuf,
    /// The URL path prefix it answers (`/name` and `/name/...`).
    pub route: String,
    /// Device ordinals it may use; None: all of the server's.
    pub devices: Option<Vec<usize>>,
    /// Untrusted guest (the default): gpuhost-wasm's sandbox confines its PTX (also in `limits`).
    pub sandbox: bool,
    /// Requests running at once.
    pub max_concurrency: u32,
    /// Requests waiting beyond those.
    pub max_queue: u32,
    /// Wall time of one request, from arrival to the guest's end.
    pub timeout: Duration,
    /// Largest request body accepted.
    pub max_body_bytes: u64,
    /// Send a failed request's detail (a trap's wasmtime error with the guest's backtrace) and
    /// the guest's stderr to the client, not only to the log: for development, as they show the
    /// function's internals and whatever it logged to whoever can call it.
    pub expose_errors: bool,
    /// Warnings of its failed requests (a guest's trap or missing response) the log takes at
    /// once; past them, [`FunctionConfig::log_lines_per_minute`].
    pub log_lines_burst: NonZeroU32,
    /// Such warnings the log takes a minute once the burst is spent; the rest are counted in
    /// `gpuhost_log_lines_suppressed_total`, not written, so a client driving a failing function
    /// cannot write the log at its own rate.
    pub log_lines_per_minute: NonZeroU32,
    /// Quotas of each request's Store.
    pub limits: gpuhost_wasm::Limits,
}

impl FunctionConfig {
    /// Reads `dir/function.toml` (absent: all defaults).
    pub fn load(dir: &Path) -> Result<Self> {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = dir.join("function.toml");
        let toml: FunctionToml = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|e| Error::Config {
                path: path.clone(),
                reason: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => FunctionToml::default(),
            Err(source) => return Err(Error::Read { path, source }),
        };
        let bad = |reason: String| Error::Config {
            path: path.clone(),
            reason,
        };
        let route = toml.route.unwrap_or_else(|| format!("/{name}"));
        check_route(&route).map_err(bad)?;
        let serve = &toml.serve;
        let max_concurrency = serve.max_concurrency.unwrap_or(16);
        if max_concurrency == 0 || max_concurrency > MAX_CONCURRENCY {
            return Err(bad(format!(
                "serve.max_concurrency must be 1..={MAX_CONCURRENCY} (got {max_concurrency})"
            )));
        }
        let max_queue = serve.max_queue.unwrap_or(64);
        if max_queue > MAX_QUEUE {
            return Err(bad(format!("serve.max_queue must be at most {MAX_QUEUE}")));
        }
        let timeout_ms = serve.timeout_ms.unwrap_or(30_000);
        if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
            return Err(bad(format!(
                "serve.timeout_ms must be 1..={MAX_TIMEOUT_MS} (got {timeout_ms})"
            )));
        }
        let at_least_one = |key: &str, value: Option<u32>, default: NonZeroU32| match value {
            None => Ok(default),
            Some(v) => NonZeroU32::new(v).ok_or_else(|| {
                bad(format!(
                    "serve.{key} must be at least 1 (a failing function's first warnings are \
                     the operator's only view of why it fails)"
                ))
            }),
        };
        let log_lines_burst = at_least_one(
            "log_lines_burst",
            serve.log_lines_burst,
            crate::log_budget::DEFAULT_BURST,
        )?;
        let log_lines_per_minute = at_least_one(
            "log_lines_per_minute",
            serve.log_lines_per_minute,
            crate::log_budget::DEFAULT_PER_MINUTE,
        )?;
        if toml.devices.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad("devices must name at least one device ordinal".into()));
        }
        Ok(Self {
            name,
            dir: dir.to_path_buf(),
            route,
            devices: toml.devices,
            sandbox: toml.sandbox.unwrap_or(true),
            max_concurrency,
            max_queue,
            timeout: Duration::from_millis(timeout_ms),
            max_body_bytes: serve.max_body_bytes.unwrap_or(16 << 20),
            expose_errors: serve.expose_errors.unwrap_or(false),
            log_lines_burst,
            log_lines_per_minute,
            limits: gpuhost_wasm::Limits {
                sandbox: toml.sandbox.unwrap_or(true),
                ..toml.limits.apply(gpuhost_wasm::Limits::default())
            },
        })
    }

    /// The component file.
    pub fn wasm_path(&self) -> PathBuf {
        self.dir.join("function.wasm")
    }

    /// The bundle folder, when the function has one.
    pub fn bundle_dir(&self) -> Option<PathBuf> {
        let dir = self.dir.join("bundle");
        dir.join("manifest.toml").is_file().then_some(dir)
    }
}

impl LimitsToml {
    fn apply(&self, mut l: gpuhost_wasm::Limits) -> gpuhost_wasm::Limits {
        macro_rules! set {
            ($($f:ident),*) => {$( if let Some(v) = self.$f { l.$f = v; } )*};
        }
        set!(
            max_module_bytes,
            max_modules,
            max_ptx_bytes,
            max_buffers,
            max_buffer_bytes,
            max_transfer_bytes,
            max_launches_in_flight,
            max_launch_args,
            max_streams_and_events,
            max_kernels,
            max_wasm_memory_bytes,
            max_globals_bytes,
            max_launch_local_bytes,
            max_graph_batch,
            max_cached_graphs
        );
        if self.fuel.is_some() {
            l.fuel = self.fuel;
        }
        if let Some(ms) = self.max_kernel_time_ms {
            l.max_kernel_time = Duration::from_millis(ms);
        }
        l
    }
}

/// A route is an absolute path prefix of plain segments, and not one of the server's own.
fn check_route(route: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "-_./".contains(c);
    if !route.starts_with('/') || route.len() < 2 || !route.chars().all(ok_char) {
        return Err(format!(
            "route `{route}` must be a path like \"/name\" (letters, digits, - _ . /)"
        ));
    }
    if route.ends_with('/') || route.contains("//") || route.split('/').any(|s| s == "..") {
        return Err(format!(
            "route `{route}` must not end in / nor hold // or .."
        ));
    }
    if route == "/metrics" || route.starts_with("/v2") {
        return Err(format!(
            "route `{route}` is the server's own (/metrics, /v2/...)"
        ));
    }
    Ok(())
}

/// Which devices the server uses: `all` or a comma-separated list of ordinals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// Every device the driver reports.
    All,
    /// These ordinals.
    List(Vec<usize>),
}

impl std::str::FromStr for Devices {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(Self::All);
        }
        let list = s
            .split(',')
            .map(|p| p.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("--devices takes `all` or ordinals like 0,1 (got `{s}`)"))?;
        if list.is_empty() {
            return Err("--devices names no device".into());
        }
        Ok(Self::List(list))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_that_escape_or_shadow_the_server_are_refused() {
        assert!(check_route("/saxpy").is_ok());
        assert!(check_route("/models/mlp").is_ok());
        for bad in [
            "saxpy", "/", "/a/", "/a//b", "/a/../b", "/metrics", "/v2/x", "/a b", "/é",
        ] {
            assert!(check_route(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn devices_parse_all_or_a_list_and_refuse_junk() {
        assert_eq!("all".parse::<Devices>(), Ok(Devices::All));
        assert_eq!("0,1".parse::<Devices>(), Ok(Devices::List(vec![0, 1])));
        assert!("0,x".parse::<Devices>().is_err());
        assert!("".parse::<Devices>().is_err());
    }

    #[test]
    fn function_toml_fills_defaults_and_rejects_unknown_keys() {
        let dir = std::env::temp_dir().join(format!("gpuhost-serve-cfg-{}", std::process::id()));
        let f = dir.join("fn1");
        std::fs::create_dir_all(&f).unwrap();
        let c = FunctionConfig::load(&f).unwrap();
        assert_eq!(
            (
                c.route.as_str(),
                c.sandbox,
                c.max_concurrency,
                c.expose_errors
            ),
            ("/fn1", true, 16, false)
        );
        std::fs::write(
            f.join("function.toml"),
            "route = \"/x\"\nsandbox = false\n[serve]\nexpose_errors = true\n[limits]\nfuel = 7\nmax_kernel_time_ms = 250\n",
        )
        .unwrap();
        let c = FunctionConfig::load(&f).unwrap();
        assert_eq!((c.route.as_str(), c.limits.fuel), ("/x", Some(7)));
        assert!(
            !c.sandbox && !c.limits.sandbox,
            "sandbox = false reaches Limits"
        );
        assert_eq!(c.limits.max_kernel_time, Duration::from_millis(250));
        assert!(c.expose_errors);
        assert_eq!(
            (c.log_lines_burst.get(), c.log_lines_per_minute.get()),
            (20, 60),
            "the log budget's defaults"
        );
        std::fs::write(
            f.join("function.toml"),
            "[serve]\nlog_lines_burst = 3\nlog_lines_per_minute = 1\n",
        )
        .unwrap();
        let c = FunctionConfig::load(&f).unwrap();
        assert_eq!(
            (c.log_lines_burst.get(), c.log_lines_per_minute.get()),
            (3, 1)
        );
        std::fs::write(f.join("function.toml"), "rout = \"/x\"\n").unwrap();
        let e = FunctionConfig::load(&f).unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{e}");
        std::fs::write(f.join("function.toml"), "[serve]\nmax_concurrency = 0\n").unwrap();
        assert!(FunctionConfig::load(&f).is_err());
        std::fs::write(f.join("function.toml"), "[serve]\nlog_lines_burst = 0\n").unwrap();
        let e = FunctionConfig::load(&f).unwrap_err().to_string();
        assert!(e.contains("log_lines_burst must be at least 1"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
