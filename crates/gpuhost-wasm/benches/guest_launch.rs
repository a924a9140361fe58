//! Guest vs native launch cost and launch → synchronize round trip, side by side in one run
//! (see `gpuhost_wasm::bench`). `cargo bench -p gpuhost-wasm --bench guest_launch [-- N]`
//! (default N = 2000); prints a markdown table for bench/RESULTS.md, then the JSON line.

use std::path::PathBuf;

use gpuhost_wasm::Runtime;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let host = match gpuhost::host(0) {
        Ok(h) => h,
        Err(e) => {
            println!("skipped: no driver ({e})");
            return Ok(());
        }
    };
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../..");
    let dir = gpuhost_wasm::example_guests::build(&root)?;
    let runtime = Runtime::new(host)?;
    let guest = runtime.load_file(&dir.join("launchbench.wasm"))?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = tokio.block_on(gpuhost_wasm::bench::guest_vs_native(&runtime, &guest, n))?;
    let driver = gpuhost::driver()
        .map(|d| d.kind.to_string())
        .unwrap_or_default();
    println!("driver: {driver}\n{}\n{}", report.markdown(), report.json());
    Ok(())
}
