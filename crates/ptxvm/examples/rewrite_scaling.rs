//! How the PTX sandbox's rewrite time grows with hostile shapes of text (issue #9: a guest's
//! module is rewritten on the host's thread, so a shape whose cost grows faster than its text
//! holds that thread for as long as the guest likes): `cargo run --release -p ptxvm --example
//! rewrite_scaling`. Each shape is generated at n and 4n units and rewritten (median of 5); a
//! rewrite linear in its text grows about 4x from one to the other, a quadratic one about 16x.
//! CPU only: no driver is opened.

use std::fmt::Write;
use std::time::Instant;

const HEADER: &str = ".version 7.0\n.target sm_50\n.address_size 64\n";

/// `n` loops nested in one another, each storing and counting to 10.
fn nested_loops(n: usize) -> String {
    let mut t = format!(
        "{HEADER}.visible .entry k(.param .u64 o)\n{{\n.reg .b32 %r<{}>;\n.reg .pred %p<{}>;\n\
         .reg .b64 %rd<2>;\nld.param.u64 %rd1, [o];\n",
        n + 1,
        n + 1
    );
    for i in 0..n {
        let _ = writeln!(t, "mov.u32 %r{i}, 0;\nL{i}:");
    }
    for i in (0..n).rev() {
        let _ = writeln!(
            t,
            "st.global.u32 [%rd1], %r{i};\nadd.u32 %r{i}, %r{i}, 1;\n\
             setp.lt.u32 %p{i}, %r{i}, 10;\n@%p{i} bra L{i};"
        );
    }
    t + "ret;\n}\n"
}

/// One function of `n` straight-line statements with a loop back to a recent label every ten.
fn many_loops(n: usize) -> String {
    let mut t = format!(
        "{HEADER}.visible .entry k(.param .u64 o)\n{{\n.reg .b32 %r<{}>;\n.reg .pred %p<2>;\n\
         .reg .b64 %rd<2>;\nld.param.u64 %rd1, [o];\nmov.u32 %r0, 0;\n",
        n + 1
    );
    for i in 0..n {
        match i % 10 {
            0 => {
                let _ = writeln!(t, "L{i}:\nadd.u32 %r{}, %r{i}, 1;", i + 1);
            }
            5 => {
                let _ = writeln!(t, "st.global.u32 [%rd1+{}], %r{i};", 4 * (i % 64));
            }
            9 => {
                let _ = writeln!(
                    t,
                    "setp.lt.u32 %p1, %r{i}, 100;\n@%p1 bra L{};",
                    i - 9 - 10 * (i / 10 % 3).min(i / 10)
                );
            }
            _ => {
                let _ = writeln!(t, "add.u32 %r{}, %r{i}, {i};", i + 1);
            }
        }
    }
    t + "ret;\n}\n"
}

/// A chain of `n` device functions, each storing once and calling the next.
fn call_chain(n: usize) -> String {
    let mut t = HEADER.to_string();
    for i in (0..n).rev() {
        let call = if i + 1 < n {
            format!(
                "{{ .param .b64 q; st.param.b64 [q], %rd1; call f{}, (q); }}\n",
                i + 1
            )
        } else {
            String::new()
        };
        let _ = write!(
            t,
            ".func f{i}(.param .b64 p)\n{{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [p];\n\
             st.global.u32 [%rd1], 1;\n{call}ret;\n}}\n"
        );
    }
    t + ".visible .entry k(.param .u64 o)\n{\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [o];\n\
         { .param .b64 q; st.param.b64 [q], %rd1; call f0, (q); }\nret;\n}\n"
}

/// A shape's name, its generator and its smaller size.
type Shape = (&'static str, fn(usize) -> String, usize);

/// Median milliseconds of rewriting `ptx`, or the refusal.
fn time(ptx: &str) -> Result<f64, String> {
    let policy = ptxvm::sandbox::Policy::default();
    let mut ms = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        ptxvm::sandbox::sandbox(ptx, &policy).map_err(|e| e.to_string())?;
        ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

fn main() {
    let shapes: [Shape; 3] = [
        ("nested loops", nested_loops, 2000),
        ("many loops", many_loops, 25_000),
        ("call chain", call_chain, 2000),
    ];
    println!("| shape | n | KB | ms | 4n | KB | ms | growth (linear 4, quadratic 16) |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, make, n) in shapes {
        let (small, large) = (make(n), make(4 * n));
        match (time(&small), time(&large)) {
            (Ok(a), Ok(b)) => println!(
                "| {name} | {n} | {:.0} | {a:.2} | {} | {:.0} | {b:.2} | {:.1} |",
                small.len() as f64 / 1024.0,
                4 * n,
                large.len() as f64 / 1024.0,
                b / a
            ),
            (a, b) => println!("| {name} | refused: {:?} {:?} |", a.err(), b.err()),
        }
    }
}
