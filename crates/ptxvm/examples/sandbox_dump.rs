//! Rewrites PTX files with the sandbox and writes the results: `cargo run -p ptxvm --example
//! sandbox_dump -- OUT_DIR FILE.ptx|DIR...` (or `SANDBOX_OUT=dir` and only inputs). Each input
//! `<dir>/<name>.ptx` becomes `OUT_DIR/<dir>__<name>.ptx`, plus `<dir>__<name>.globals` (the
//! initial globals block) when the module has globals. `SANDBOX_POLL_INTERVAL=N` rewrites with
//! that poll interval rather than the default, and `SANDBOX_OFF=versioning,ifconvert,early`
//! without those optional passes. scripts/sandbox-probe.sh uses it to carry
//! rewritten kernels to a GPU host and check them under NVIDIA's JIT.

use std::path::{Path, PathBuf};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let out = match std::env::var("SANDBOX_OUT") {
        Ok(d) if !d.is_empty() => PathBuf::from(d),
        _ if !args.is_empty() => PathBuf::from(args.remove(0)),
        _ => {
            eprintln!("usage: sandbox_dump OUT_DIR FILE.ptx|DIR...");
            std::process::exit(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("{}: {e}", out.display());
        std::process::exit(1);
    }
    let mut files = Vec::new();
    for a in &args {
        let p = Path::new(a);
        if p.is_dir() {
            let Ok(rd) = std::fs::read_dir(p) else {
                continue;
            };
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "ptx") {
                    files.push(e.path());
                }
            }
        } else {
            files.push(p.to_path_buf());
        }
    }
    files.sort();
    let mut failed = 0;
    let mut policy = ptxvm::sandbox::Policy::default();
    if let Some(n) = std::env::var("SANDBOX_POLL_INTERVAL")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        policy.poll_interval = n;
    }
    // `SANDBOX_OFF=versioning,ifconvert,early`: the optional passes to leave out, as the
    // conformance suite's ablations of a failing generated program do.
    for pass in std::env::var("SANDBOX_OFF").unwrap_or_default().split(',') {
        match pass.trim() {
            "versioning" => policy.version_loops = false,
            "ifconvert" => policy.if_convert = false,
            "early" => policy.early_loop_free_check = false,
            "" => {}
            other => {
                eprintln!("SANDBOX_OFF: no pass {other:?}; name versioning, ifconvert or early");
                std::process::exit(2);
            }
        }
    }
    for f in files {
        let text = match std::fs::read_to_string(&f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                failed += 1;
                continue;
            }
        };
        let parent = f
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned());
        let stem = f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match parent {
            Some(p) => format!("{p}__{stem}.ptx"),
            None => format!("{stem}.ptx"),
        };
        match ptxvm::sandbox::sandbox(&text, &policy) {
            Ok(s) => {
                // The initial globals block next to the module (the GPU probe loads it).
                if s.globals.size > 0 && s.globals.size <= 16 << 20 {
                    let mut image = s.globals.init.clone();
                    image.resize(s.globals.size as usize, 0);
                    let g = out.join(name.replace(".ptx", ".globals"));
                    if let Err(e) = std::fs::write(&g, image) {
                        eprintln!("{}: {e}", g.display());
                        failed += 1;
                    }
                }
                if let Err(e) = std::fs::write(out.join(&name), s.ptx) {
                    eprintln!("{name}: {e}");
                    failed += 1;
                } else {
                    println!(
                        "{name}: ok ({} kernels, globals {} bytes)",
                        s.kernels.len(),
                        s.globals.size
                    );
                }
            }
            // A refusal is the sandbox working (device printf/assert call functions outside the
            // module): reported, not a failure of the dump.
            Err(e @ ptxvm::Error::Refused { .. }) => println!("{name}: refused: {e}"),
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                failed += 1;
            }
        }
    }
    std::process::exit(i32::from(failed > 0));
}
