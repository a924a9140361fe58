//! `gpuhost run GUEST.wasm [-- args]`: runs a WebAssembly guest (WASI CLI world: stdio, args,
//! env) with the gpuhost:cuda imports on one device, under per-guest quotas set by flags.
//! Exits with the guest's exit code; every failure gets a message saying what to do.

use std::path::PathBuf;

use anyhow::{Context, bail};
use gpuhost_wasm::{Error, Limits, Output, RunOptions, Runtime};

/// Flags of `gpuhost run`. Quota defaults are gpuhost-wasm's `Limits::default()`.
#[derive(clap::Args)]
pub struct Args {
    /// The guest: a WebAssembly component built for wasm32-wasip2.
    #[arg(required_unless_present = "example")]
    guest: Option<PathBuf>,
    /// Instead of a file: an example guest of this checkout (saxpy, reduce, matmul), built first.
    #[arg(long, conflicts_with = "guest")]
    example: Option<String>,
    /// Arguments passed to the guest (after `--`).
    #[arg(last = true)]
    guest_args: Vec<String>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Environment variable for the guest, KEY=VALUE (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Bytes across the guest's live device buffers.
    #[arg(long)]
    max_buffer_bytes: Option<u64>,
    /// Live device buffers.
    #[arg(long)]
    max_buffers: Option<u32>,
    /// Modules loaded at once.
    #[arg(long)]
    max_modules: Option<u32>,
    /// Total bytes of loaded module images.
    #[arg(long)]
    max_module_bytes: Option<u64>,
    /// Size of one PTX or cubin image.
    #[arg(long)]
    max_ptx_bytes: Option<u64>,
    /// Launches enqueued and not yet synchronized.
    #[arg(long)]
    max_launches_in_flight: Option<u32>,
    /// Live kernel handles plus bound launches.
    #[arg(long)]
    max_kernels: Option<u32>,
    /// Live streams plus events.
    #[arg(long)]
    max_streams_and_events: Option<u32>,
    /// wasmtime fuel for the guest's CPU side; 0 for unmetered.
    #[arg(long)]
    fuel: Option<u64>,
    /// Guest linear memory, in bytes.
    #[arg(long)]
    max_wasm_memory: Option<usize>,
    /// Bytes of the guest's linear memory that may be page-locked so its large, repeated writes
    /// go to the device with one DMA from that memory; 0 stages every write [default: 256 MiB].
    #[arg(long)]
    max_locked_memory_bytes: Option<u64>,
    /// Run the guest trusted: its PTX and cubins run unchanged, unconfined (the default
    /// sandbox confines its kernels to its own memory and stops runaway launches).
    #[arg(long)]
    trusted: bool,
    /// GPU time one launch of a sandboxed guest may run, in milliseconds, before it is stopped
    /// [default: 10000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_kernel_ms: Option<u64>,
    /// Bytes of module globals (.global/.const variables) across a sandboxed guest's modules.
    #[arg(long)]
    max_globals_bytes: Option<u64>,
    /// Local memory one launch of a sandboxed guest may need: bytes per thread times resident
    /// threads.
    #[arg(long)]
    max_launch_local_bytes: Option<u64>,
    /// Launches of a trusted guest's burst on one stream replayed as one CUDA graph at most; 0
    /// turns graph batching off.
    #[arg(long)]
    max_graph_batch: Option<u32>,
    /// Instantiated graphs one guest keeps for replay.
    #[arg(long)]
    max_cached_graphs: Option<u32>,
}

impl Args {
    fn limits(&self) -> Limits {
        let mut l = Limits::default();
        macro_rules! set {
            ($($f:ident => $field:ident),*) => {$(if let Some(v) = self.$f { l.$field = v; })*};
        }
        set!(max_buffer_bytes => max_buffer_bytes, max_buffers => max_buffers, max_modules => max_modules,
             max_module_bytes => max_module_bytes, max_ptx_bytes => max_ptx_bytes,
             max_launches_in_flight => max_launches_in_flight, max_kernels => max_kernels,
             max_streams_and_events => max_streams_and_events, max_wasm_memory => max_wasm_memory_bytes,
             max_globals_bytes => max_globals_bytes, max_launch_local_bytes => max_launch_local_bytes,
             max_graph_batch => max_graph_batch, max_cached_graphs => max_cached_graphs,
             max_locked_memory_bytes => max_locked_memory_bytes);
        l.sandbox = !self.trusted;
        if let Some(ms) = self.max_kernel_ms {
            l.max_kernel_time = std::time::Duration::from_millis(ms);
        }
        if let Some(f) = self.fuel {
            l.fuel = (f > 0).then_some(f);
        }
        l
    }
}

/// Runs the guest and exits the process with its exit code.
pub fn run(a: Args) -> anyhow::Result<()> {
    let mut env = Vec::new();
    for kv in &a.env {
        let Some((k, v)) = kv.split_once('=') else {
            bail!("--env {kv:?} is not KEY=VALUE");
        };
        env.push((k.to_string(), v.to_string()));
    }
    let guest_path = match (&a.guest, &a.example) {
        (Some(path), _) => path.clone(),
        (None, Some(name)) => crate::guests::dir()?.join(format!("{name}.wasm")),
        (None, None) => bail!("name a guest file or --example NAME"),
    };
    if !guest_path.is_file() {
        bail!(
            "guest file {} does not exist (build one with `cargo build --release --target wasm32-wasip2`)",
            guest_path.display()
        );
    }
    // The file's own problems are reported before the device is opened.
    let what = guest_path.display().to_string();
    let bytes = std::fs::read(&guest_path).with_context(|| format!("reading {what}"))?;
    gpuhost_wasm::precheck(&what, &bytes)?;
    let host = gpuhost::host(a.device)
        .with_context(|| format!("opening CUDA device {} (see `gpuhost doctor`)", a.device))?;
    let runtime = Runtime::new(host)?;
    let guest = runtime.load(&what, &bytes)?;
    let mut args = vec![
        guest_path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    ];
    args.extend(a.guest_args.iter().cloned());
    let opts = RunOptions {
        args,
        env,
        limits: a.limits(),
        stdout: Output::Inherit,
        stderr: Output::Inherit,
        inherit_stdin: true,
        calls: None,
        modules: None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match rt.block_on(runtime.run(&guest, opts)) {
        Ok(outcome) => {
            if outcome.quota_refusals > 0 {
                eprintln!(
                    "gpuhost: {} call(s) of the guest were refused by a quota; last: {} (raise it with the matching --max-* flag, see `gpuhost run --help`)",
                    outcome.quota_refusals,
                    outcome.last_refusal.as_deref().unwrap_or("?")
                );
            }
            std::process::exit(outcome.exit_code)
        }
        Err(Error::Trap {
            out_of_fuel: true, ..
        }) => {
            bail!(
                "the guest ran out of fuel (its CPU quota); raise it with --fuel N, or --fuel 0 for none"
            )
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: Args,
    }

    #[test]
    fn quota_flags_set_the_limits_they_name_and_leave_the_rest_at_their_defaults() {
        let cli = Cli::try_parse_from([
            "gpuhost",
            "guest.wasm",
            "--max-locked-memory-bytes",
            "0",
            "--max-graph-batch",
            "4",
            "--max-kernel-ms",
            "250",
            "--fuel",
            "0",
        ])
        .unwrap();
        let l = cli.run.limits();
        let d = Limits::default();
        assert_eq!(l.max_locked_memory_bytes, 0);
        assert_eq!(l.max_graph_batch, 4);
        assert_eq!(l.max_kernel_time, std::time::Duration::from_millis(250));
        assert_eq!(l.fuel, None);
        assert_eq!(l.max_buffer_bytes, d.max_buffer_bytes);
        assert_eq!(l.max_wasm_memory_bytes, d.max_wasm_memory_bytes);
        assert!(l.sandbox);
    }
}
