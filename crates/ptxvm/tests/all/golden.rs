//! The sandbox's rewritten PTX, pinned: every corpus, example-guest and fixture module (and the
//! red-team module) rewrites to exactly the text recorded in tests/fixtures/sandbox.golden (its
//! length and FNV-1a hash, or the refusal message). A refactor of the rewriter or of the
//! instruction table must leave this unchanged; a deliberate change to the emitted PTX re-records
//! it with `PTXVM_BLESS=1 cargo test -p ptxvm --test all golden` and says why in its commit.

use ptxvm::sandbox::{Policy, sandbox};

use super::sandbox::all_modules;

/// FNV-1a, 64-bit: a stable digest (std's hashers may change between Rust releases).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One line per module: its path from the repository root and what the sandbox made of it.
fn record() -> String {
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let mut files = all_modules();
    files.push(root.join("tests/fixtures/redteam.ptx"));
    let mut out = String::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f
            .canonicalize()
            .unwrap()
            .strip_prefix(root.join("../..").canonicalize().unwrap())
            .unwrap()
            .display()
            .to_string();
        let what = match sandbox(&text, &Policy::default()) {
            Ok(s) => format!("{} bytes, fnv1a {:016x}", s.ptx.len(), fnv1a(&s.ptx)),
            Err(e) => format!("refused: {e}"),
        };
        out.push_str(&format!("{name}: {what}\n"));
    }
    out
}

#[test]
fn the_sandbox_rewrites_every_module_to_its_recorded_text() {
    let path = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .join("tests/fixtures/sandbox.golden");
    let now = record();
    if std::env::var_os("PTXVM_BLESS").is_some() {
        std::fs::write(&path, &now).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&path).expect("tests/fixtures/sandbox.golden");
    let changed: Vec<String> = now
        .lines()
        .zip(recorded.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  now:      {a}\n  recorded: {b}"))
        .collect();
    assert!(
        changed.is_empty() && now.lines().count() == recorded.lines().count(),
        "the sandbox's output changed ({} of {} modules differ; the module list has {} lines, \
         the record {}):\n{}\nif the change is deliberate, re-record with PTXVM_BLESS=1",
        changed.len(),
        now.lines().count(),
        now.lines().count(),
        recorded.lines().count(),
        changed.join("\n")
    );
}
