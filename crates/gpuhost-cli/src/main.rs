//! The `gpuhost` binary: clap dispatch to one module per subcommand.

mod bench;
mod doctor;
mod guests;
mod malloc;
mod run;
mod serve;

use clap::{Parser, Subcommand};

/// jemalloc for the binary's heap (see malloc.rs: why, and what it does with large blocks).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "gpuhost",
    version,
    about = "GPU host runtime for Rust services"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Which CUDA driver and devices gpuhost finds, and their facts (or exactly why none).
    Doctor(doctor::Args),
    /// Launch, completion, bind-on-entry and swap benchmarks, side by side with the raw driver API.
    Bench(bench::Args),
    /// Run a WebAssembly guest (wasm32-wasip2 component) with the gpuhost:cuda imports.
    Run(Box<run::Args>),
    /// Serve a repository of HTTP functions (wasi:http components launching kernels) with
    /// version swaps under load, KServe v2 health, Prometheus metrics and a status page.
    Serve(serve::Args),
}

fn main() -> anyhow::Result<()> {
    malloc::tune();
    match Cli::parse().command {
        Command::Doctor(a) => doctor::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Run(a) => run::run(*a),
        Command::Serve(a) => serve::run(a),
    }
}
