//! NVIDIA's own compiler on the sandbox's output, without a GPU: every rewritten module through
//! ptxas -O3 (CUDA 13.0.88, the H200's toolkit), its SASS checked by the canary the H200 runs
//! (scripts/probes/sass-uniform.py) for the compiler fault of docs/ISOLATION.md ("A fourth"):
//! ptxas let a divergent sibling path overwrite a uniform register that held a fence's base, so
//! a rewritten access reached outside its arena. The rewrite keeps base, size, globals and ctl
//! in per-lane registers (an opaque zero added to each); this holds it for the corpus, the
//! example and test guests' kernels, and generated programs, legal and hostile.
//!
//! ptxas, cuobjdump and nvdisasm (which cuobjdump runs) come from NVIDIA's public wheels (.ci/run
//! installs them into `target/nvcc` and `target/sass-tools`; `GPUHOST_NVCC_DIR` and
//! `GPUHOST_SASS_TOOLS_DIR` name other CUDA trees holding `bin/ptxas` and `bin/cuobjdump`). In CI (`CI=true`) a missing tool fails the test; elsewhere it is skipped, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use ptxvm::sandbox::{Policy, sandbox};
use testkit::ptxgen::{self, Mode};

/// Generated programs per mode by default: ptxas takes tens of milliseconds a module, and CI
/// has two cores.
const GENERATED: u64 = 60;

struct Tools {
    ptxas: PathBuf,
    cuobjdump: PathBuf,
    /// Where cuobjdump finds nvdisasm.
    bin: PathBuf,
    canary: PathBuf,
}

fn repo() -> PathBuf {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&dir).join("../..")
}

/// The tools, or `None` (skipped) where they are missing outside CI.
fn tools() -> Option<Tools> {
    let root = repo();
    let nvcc = std::env::var_os("GPUHOST_NVCC_DIR")
        .map_or_else(|| root.join("target/nvcc/nvidia/cu13"), PathBuf::from);
    let bin = std::env::var_os("GPUHOST_SASS_TOOLS_DIR")
        .map_or_else(|| root.join("target/sass-tools/nvidia/cu13"), PathBuf::from)
        .join("bin");
    let t = Tools {
        ptxas: nvcc.join("bin/ptxas"),
        cuobjdump: bin.join("cuobjdump"),
        canary: root.join("scripts/probes/sass-uniform.py"),
        bin,
    };
    let python = Command::new("python3").arg("--version").output();
    let missing: Vec<String> = [&t.ptxas, &t.cuobjdump, &t.bin.join("nvdisasm")]
        .into_iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .chain(python.is_err().then(|| "python3".to_string()))
        .collect();
    if missing.is_empty() {
        return Some(t);
    }
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "missing {missing:?}: .ci/run installs ptxas and cuobjdump from NVIDIA's wheels"
    );
    println!(
        "skipped: missing {missing:?} (run .ci/run's installs, or set GPUHOST_NVCC_DIR and GPUHOST_SASS_TOOLS_DIR)"
    );
    None
}

/// Compiles `ptx` (a rewritten module) with ptxas -O3 and runs the canary on its SASS; the
/// canary's report when it fails.
fn check(t: &Tools, scratch: &Path, name: &str, ptx: &str) -> Result<(), String> {
    let src = scratch.join(format!("{name}.ptx"));
    let cubin = scratch.join(format!("{name}.cubin"));
    let sass = scratch.join(format!("{name}.sass"));
    std::fs::write(&src, ptx).map_err(|e| format!("{name}: writing {}: {e}", src.display()))?;
    let run = |c: &mut Command| {
        c.output()
            .map_err(|e| format!("{name}: {c:?}: {e}"))
            .and_then(|o| {
                if o.status.success() {
                    Ok(o.stdout)
                } else {
                    Err(format!(
                        "{name}: {c:?} failed: {}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    ))
                }
            })
    };
    run(Command::new(&t.ptxas)
        .args(["-arch=sm_90", "-O3"])
        .arg(&src)
        .arg("-o")
        .arg(&cubin))?;
    let listing = run(Command::new(&t.cuobjdump)
        .env("NVDISASM_PATH", &t.bin)
        .arg("-sass")
        .arg(&cubin))?;
    std::fs::write(&sass, listing).map_err(|e| format!("{name}: writing the SASS: {e}"))?;
    run(Command::new("python3").arg(&t.canary).arg(&src).arg(&sass)).map(|_| ())
}

/// Checks every module on as many threads as the machine has; the failures.
fn check_all(t: &Tools, modules: &[(String, String)]) -> Vec<String> {
    // Tests run on parallel threads of one process: each call gets a folder of its own, in
    // `SANDBOX_SASS_KEEP` (kept, to read a failure's PTX and SASS) or the temp dir (removed).
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let keep = std::env::var_os("SANDBOX_SASS_KEEP").map(PathBuf::from);
    let scratch = keep
        .clone()
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("ptxvm-sass-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch folder in the temp dir");
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, ptx)) = modules.get(k) else {
                        break;
                    };
                    if let Err(e) = check(t, &scratch, name, ptx) {
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    failures.into_inner().unwrap()
}

/// The committed kernels that the sandbox accepts, rewritten under the default policy.
fn committed() -> Vec<(String, String)> {
    let root = repo();
    let dirs = [
        "corpus/nvcc",
        "corpus/clang",
        "examples/guests/kernels",
        "crates/gpuhost-wasm/tests/guests/kernels",
    ];
    let mut out = Vec::new();
    for d in dirs {
        let rd = std::fs::read_dir(root.join(d)).unwrap_or_else(|e| panic!("{d}: {e}"));
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "ptx"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            // Hostile fixtures the sandbox refuses at load have nothing to compile.
            if let Ok(s) = sandbox(&text, &Policy::default()) {
                let stem = f.file_stem().unwrap().to_string_lossy();
                out.push((format!("{}__{stem}", d.replace('/', "_")), s.ptx));
            }
        }
    }
    out
}

/// What writes a generated program: testkit's `program` or one of its variants.
type Write = fn(u64, Mode) -> String;

/// Generated programs, rewritten under each case's own policy: `SANDBOX_SASS_CASES` of each mode
/// (default [`GENERATED`]) from seed `SANDBOX_SASS_SEED` (default 1), every third also in its
/// variant with `ldmatrix`, every third after it with count-down loops, and the rest with
/// `mbarrier` exchanges.
fn generated() -> Vec<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = var("SANDBOX_SASS_CASES").unwrap_or(GENERATED);
    let first = var("SANDBOX_SASS_SEED").unwrap_or(1);
    let mut out = Vec::new();
    for (mode, tag) in [(Mode::Legal, "legal"), (Mode::Hostile, "hostile")] {
        for seed in first..first + cases {
            let (policy, _) = super::generated::policy_for(seed, mode);
            let text = ptxgen::program(seed, mode);
            let s = sandbox(&text, &policy)
                .unwrap_or_else(|e| panic!("generated {tag} {seed} is refused: {e}"));
            out.push((format!("gen_{tag}_{seed}"), s.ptx));
            // A third of them again with `ldmatrix` of shared rows (its fence redirects rows),
            // another third with count-down loops (versioned: a fast copy of each), the last
            // third with mbarrier exchanges (software barriers).
            let variant: Option<(&str, Write)> = match (seed - first) % 3 {
                0 => Some(("ldmatrix", ptxgen::program_with_matrix)),
                1 => Some(("countdown", ptxgen::program_with_countdown)),
                _ => Some(("mbarrier", ptxgen::program_with_mbarrier)),
            };
            if let Some((name, write)) = variant {
                let s = sandbox(&write(seed, mode), &policy)
                    .unwrap_or_else(|e| panic!("generated {tag} {seed} ({name}) is refused: {e}"));
                out.push((format!("gen_{tag}_{name}_{seed}"), s.ptx));
            }
        }
    }
    out
}

#[test]
fn ptxas_keeps_every_value_a_fence_trusts_out_of_uniform_registers() {
    let Some(t) = tools() else { return };
    let mut modules = committed();
    assert!(
        modules.len() >= 40,
        "the corpus and guests' kernels are committed; found {} rewritten",
        modules.len()
    );
    modules.extend(generated());
    // testkit's mbarrier programs: their software barriers (sandbox/mbarrier.rs) through ptxas.
    use testkit::mbarrier::{GENERIC, HEAD, RING, attacks};
    for (name, text) in [
        ("mbarrier_ring", format!("{HEAD}{RING}")),
        ("mbarrier_generic", format!("{HEAD}{GENERIC}")),
        ("mbarrier_attacks", attacks()),
    ] {
        let s = sandbox(&text, &Policy::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        modules.push((name.to_string(), s.ptx));
    }
    let failures = check_all(&t, &modules);
    assert!(
        failures.is_empty(),
        "{} of {} rewritten modules read a trusted value from a uniform register, or did not \
         compile:\n{}",
        failures.len(),
        modules.len(),
        failures.join("\n")
    );
}

/// The canary itself: session 30's rewrite of generated program 5682, before the opaque zero,
/// whose fences ptxas compiled against uniform registers (the form that miscompiled on the
/// H200), is flagged.
#[test]
fn the_canary_flags_a_rewrite_whose_fences_read_uniform_registers() {
    let Some(t) = tools() else { return };
    let old = repo().join("bench/h200-runs/2026-12-04-s30/seed5682/sbx5682.ptx");
    let ptx = std::fs::read_to_string(&old).unwrap_or_else(|e| panic!("{}: {e}", old.display()));
    let failures = check_all(&t, &[("s30_sbx5682".to_string(), ptx)]);
    assert!(
        failures.len() == 1 && failures[0].contains("RAW"),
        "the canary should flag session 30's rewrite: {failures:?}"
    );
}
