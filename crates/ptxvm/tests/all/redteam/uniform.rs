//! The values the fences trust, kept out of NVIDIA's uniform registers. ptxas was seen letting
//! a divergent sibling path overwrite a uniform register that held a fence's base or limit
//! (docs/ISOLATION.md, "A fourth"), which sent a fenced access outside the arena. The rewrite's
//! answer is textual, so it is checked here, on every module the sandbox is tested with: each
//! such value gets the head's opaque per-lane zero added before anything reads it. ptxvm runs
//! the zero like any other value (every red-team and differential test would fail if it were
//! not 0); whether ptxas then keeps these values in vector registers is checked on the H200
//! (bench/h200-runs/2026-12-04-s31/).

use crate::sandbox::all_modules;

/// The registers the fences, relocated globals, polls and windows read, each with the `add`
/// that makes it per-lane (the opaque zero of its width).
const TRUSTED: [(&str, &str); 8] = [
    (
        "%__sbx_base",
        "add.u64 %__sbx_base, %__sbx_base, %__sbx_zz;",
    ),
    (
        "%__sbx_size",
        "add.u64 %__sbx_size, %__sbx_size, %__sbx_zz;",
    ),
    (
        "%__sbx_globals",
        "add.u64 %__sbx_globals, %__sbx_globals, %__sbx_zz;",
    ),
    ("%__sbx_ctl", "add.u64 %__sbx_ctl, %__sbx_ctl, %__sbx_zz;"),
    ("%__sbx_sl", "add.u32 %__sbx_sl, %__sbx_sl, %__sbx_z;"),
    ("%__sbx_ss", "add.u32 %__sbx_ss, %__sbx_ss, %__sbx_z;"),
    ("%__sbx_ll", "add.u32 %__sbx_ll, %__sbx_ll, %__sbx_z;"),
    ("%__sbx_ls", "add.u32 %__sbx_ls, %__sbx_ls, %__sbx_z;"),
];

/// The lines that may name a trusted register before its zero is added: declarations, its own
/// definition, and a window's size taken from its raw start (both are then made per-lane).
fn defines(line: &str, reg: &str) -> bool {
    let t = line.trim();
    t.starts_with(".reg ")
        || t.starts_with(&format!("ld.param.u64 {reg},"))
        || t.starts_with(&format!("cvt.u32.u64 {reg},"))
        || t == "sub.u32 %__sbx_ss, %__sbx_ss, %__sbx_sl;"
        || t == "sub.u32 %__sbx_ls, %__sbx_ls, %__sbx_ll;"
}

fn mentions(line: &str, reg: &str) -> bool {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '%'))
        .any(|tok| tok == reg)
}

/// Every function with a prologue, as the lines from its first hidden-value load to the next
/// function's (declarations come before it, and a lean function has no prologue).
fn prologued(text: &str) -> Vec<Vec<&str>> {
    let mut fns: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("ld.param.u64 %__sbx_base,") {
            fns.push(Vec::new());
        }
        if let Some(f) = fns.last_mut() {
            f.push(line);
        }
    }
    fns
}

/// Where in `f` the trusted register `reg` is first read other than by [`defines`], and
/// whether `add` (its zero) came before: `Err` names the line that reads it raw.
fn first_read_is_opaque(f: &[&str], reg: &str, add: &str) -> Result<(), String> {
    for line in f {
        if line.trim() == add {
            return Ok(());
        }
        if mentions(line, reg) && !defines(line, reg) {
            return Err(format!(
                "{reg} is read before its opaque zero: `{}`",
                line.trim()
            ));
        }
    }
    Ok(())
}

#[test]
fn every_value_a_fence_trusts_gets_the_opaque_zero_before_anything_reads_it() {
    let mut checked = 0;
    for path in all_modules() {
        let ptx = std::fs::read_to_string(&path).expect("read a test module");
        let s = ptxvm::sandbox::sandbox(&ptx, &ptxvm::sandbox::Policy::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for f in prologued(&s.ptx) {
            let head = f.iter().take(16).copied().collect::<Vec<_>>().join("\n");
            assert!(
                head.contains("mov.u32 %__sbx_t, %lanemask_lt;")
                    && head.contains("add.u32 %__sbx_z, %__sbx_t, 1;")
                    && head.contains("and.b32 %__sbx_z, %__sbx_z, %__sbx_t;")
                    && head.contains("mov.b64 %__sbx_zz, {%__sbx_z, %__sbx_z};"),
                "{}: the head makes no opaque zero:\n{head}",
                path.display()
            );
            for (reg, add) in TRUSTED {
                if let Err(e) = first_read_is_opaque(&f, reg, add) {
                    panic!("{}: {e}", path.display());
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} functions with a prologue");
}

#[test]
fn a_trusted_value_read_before_its_zero_is_caught() {
    let f = [
        "\tld.param.u64 %__sbx_base, [__gpuhost_sbx_base];",
        "\tsub.u64 %__sbx_x, %rd1, %__sbx_base;",
        "\tadd.u64 %__sbx_base, %__sbx_base, %__sbx_zz;",
    ];
    let (reg, add) = TRUSTED[0];
    let e = first_read_is_opaque(&f, reg, add).unwrap_err();
    assert!(e.contains("sub.u64 %__sbx_x"), "{e}");
    assert!(first_read_is_opaque(&f[..1], reg, add).is_ok());
    assert!(first_read_is_opaque(&f[2..], reg, add).is_ok());
    assert!(!mentions("\tadd.u64 %__sbx_basex, %r1, 1;", "%__sbx_base"));
}
