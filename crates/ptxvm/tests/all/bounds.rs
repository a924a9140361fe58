//! Shared and local accesses through registers the sandbox can bound (bounds.rs): a masked or
//! byte-sized index scaled onto a static variable's address runs with no window check and gives
//! the right answer, while every register that only looks bounded (a mask too wide or too
//! fine, a second write of unknown value, a loop step, a negative offset, a sign-extended byte,
//! a bound that reaches into the next variable) keeps its check and is fenced at run time.

use super::fastpath::{entry, output_in};
use super::redteam::ptx;
use super::sandbox::{Arg, Shape, load_sandboxed};

const BINS: &str = "
.visible .entry masked_bins(.param .u64 out)
{
    .shared .align 4 .b8 bins[64];
    .reg .b64 %rd<4>;
    .reg .b32 %r<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    shl.b32 %r3, %r1, 2;
    and.b32 %r4, %r3, 60;
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5], 0;
    bar.sync 0;
    atom.shared.add.u32 %r6, [%r5], 1;
    bar.sync 0;
    ld.shared.u32 %r7, [%r5];
    cvt.u64.u32 %rd2, %r4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r7;
    ret;
}

.visible .entry byte_bins(.param .u64 data, .param .u64 out)
{
    .shared .align 4 .b8 bins[1024];
    .reg .b16 %rs<2>;
    .reg .b64 %rd<11>;
    .reg .b32 %r<8>;
    ld.param.u64 %rd1, [data];
    ld.param.u64 %rd2, [out];
    mov.u64 %rd3, bins;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.u64 %rd5, %rd3, %rd4;
    st.shared.u32 [%rd5], 0;
    bar.sync 0;
    cvt.u64.u32 %rd6, %r1;
    add.u64 %rd7, %rd1, %rd6;
    ld.global.u8 %rs1, [%rd7];
    cvt.u32.u8 %r2, %rs1;
    mul.wide.u32 %rd8, %r2, 4;
    add.u64 %rd9, %rd3, %rd8;
    atom.shared.add.u32 %r3, [%rd9], 1;
    bar.sync 0;
    ld.shared.u32 %r4, [%rd5];
    add.u64 %rd10, %rd2, %rd4;
    st.global.u32 [%rd10], %r4;
    ret;
}
";

#[test]
fn shared_accesses_through_a_masked_or_byte_index_run_unchecked_and_count_right() {
    let (s, m) = load_sandboxed(&ptx(BINS));
    let k = entry(&s.ptx, "masked_bins");
    for verbatim in [
        "st.shared.u32 [%r5], 0;",
        "atom.shared.add.u32 %r6, [%r5], 1;",
        "ld.shared.u32 %r7, [%r5];",
    ] {
        assert!(k.contains(verbatim), "{verbatim} unchecked in\n{k}");
    }
    // 32 threads on 16 bins: two a bin.
    let got = output_in(&m, "masked_bins", Shape::linear(1, 32), 64, &[], false);
    assert_eq!(got, [2u32.to_le_bytes(); 16].concat());

    let k = entry(&s.ptx, "byte_bins");
    assert!(k.contains("atom.shared.add.u32 %r3, [%rd9], 1;"), "{k}");
    // The zeroing store's index is the thread's: it keeps its check.
    assert!(!k.contains("st.shared.u32 [%rd5], 0;"), "{k}");
    // Thread t reads byte t of data; bytes 0..64 are 3, 3, 3, 7, 7, 7, ... (value 3 + 4 * (t / 3)
    // mod 256), so bin b holds how many of the 64 bytes equal b.
    let data: Vec<u8> = (0..64u32).map(|t| (3 + 4 * (t / 3)) as u8).collect();
    let mut want = vec![0u32; 64];
    for b in &data {
        if (*b as usize) < 64 {
            want[*b as usize] += 1;
        }
    }
    let mut out = 0;
    let mem = super::redteam::attack_in(
        &m,
        "byte_bins",
        Shape::linear(1, 64),
        |g| {
            let d = g.alloc(64);
            g.write(d, &data);
            out = g.alloc(256);
            vec![Arg::U64(d), Arg::U64(out)]
        },
        false,
    );
    let got: Vec<u32> = mem
        .read(out, 256)
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, want);
}

/// One kernel per look-alike; `%r9` (the launch's `x`) is 0 for an in-window run and large
/// for an out-of-window one.
const LOOKALIKES: &str = "
.visible .entry too_wide(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<10>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    shl.b32 %r3, %r1, 2;
    and.b32 %r4, %r3, 124;
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5], 1;
    ret;
}

.visible .entry too_fine(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<10>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    and.b32 %r4, %r1, 61;
    add.u32 %r5, %r2, %r4;
    st.shared.u8 [%r5], 1;
    st.shared.u32 [%r5], 1;
    ret;
}

.visible .entry second_write(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<10>;
    .reg .pred %p<2>;
    ld.param.u32 %r9, [x];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    and.b32 %r4, %r1, 12;
    add.u32 %r5, %r2, %r4;
    setp.ne.u32 %p1, %r9, 0;
    @%p1 add.u32 %r5, %r2, %r9;
    st.shared.u32 [%r5], 1;
    ret;
}

.visible .entry stepped(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<10>;
    .reg .pred %p<2>;
    mov.u32 %r5, bins;
    mov.u32 %r1, 0;
L:
    st.shared.u32 [%r5], 1;
    add.u32 %r5, %r5, 4;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 20;
    @%p1 bra L;
    ret;
}

.visible .entry below(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<10>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    and.b32 %r4, %r1, 12;
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5+-4], 1;
    ret;
}

.visible .entry signed_byte(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[1024];
    .reg .b16 %rs<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u32 %r9, [x];
    cvt.u16.u32 %rs1, %r9;
    cvt.s32.s8 %r1, %rs1;
    mov.u32 %r2, bins;
    shl.b32 %r3, %r1, 2;
    add.u32 %r5, %r2, %r3;
    st.shared.u32 [%r5], 1;
    ret;
}

.visible .entry huge_offset(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<10>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    and.b32 %r4, %r1, 12;
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5+9223372036854775804], 1;
    ret;
}

.visible .entry into_next(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 a[16];
    .shared .align 4 .b8 b[48];
    .reg .b32 %r<10>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, a;
    mov.u32 %r6, b;
    st.shared.u32 [%r6], 0;
    shl.b32 %r3, %r1, 2;
    and.b32 %r4, %r3, 60;
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5], 1;
    ret;
}
";

#[test]
fn shared_accesses_that_only_look_bounded_keep_their_check_and_are_fenced() {
    let (s, m) = load_sandboxed(&ptx(LOOKALIKES));
    // (kernel, the access that must stay checked, x, whether that launch is fenced)
    let cases: [(&str, &str, u32, bool); 9] = [
        ("too_wide", "st.shared.u32 [%r5], 1;", 0, true),
        ("too_fine", "st.shared.u32 [%r5], 1;", 0, false),
        ("second_write", "st.shared.u32 [%r5], 1;", 0, false),
        ("second_write", "st.shared.u32 [%r5], 1;", 4096, true),
        ("stepped", "st.shared.u32 [%r5], 1;", 0, true),
        ("below", "st.shared.u32 [%r5+-4], 1;", 0, true),
        ("signed_byte", "st.shared.u32 [%r5], 1;", 0x80, true),
        ("into_next", "st.shared.u32 [%r5], 1;", 0, false),
        // An offset near i64::MAX: no overflow, and the access is fenced.
        (
            "huge_offset",
            "st.shared.u32 [%r5+9223372036854775804], 1;",
            0,
            true,
        ),
    ];
    for (kernel, access, x, fenced) in cases {
        let k = entry(&s.ptx, kernel);
        assert!(
            !k.contains(&format!("\t{access}")),
            "{kernel}: {access} unchecked in\n{k}"
        );
        output_in(&m, kernel, Shape::linear(1, 32), 4, &[Arg::U32(x)], fenced);
    }
    // The byte store of too_fine is in range at every offset the mask allows.
    assert!(entry(&s.ptx, "too_fine").contains("\tst.shared.u8 [%r5], 1;"));
}

const EARLY_READ: &str = "
.visible .entry read_before_write(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b64 %rd<4>;
    .reg .b32 %r<10>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r9, [x];
    mov.u32 %r2, bins;
    st.shared.u32 [%r2], 5;
    st.shared.u32 [%r2+4], 6;
    setp.eq.u32 %p1, %r9, 0;
    @%p1 bra USE;
    and.b32 %r4, %r9, 60;
    add.u32 %r5, %r2, %r4;
USE:
    ld.shared.u32 %r6, [%r5];
    st.global.u32 [%rd1], %r6;
    ret;
}
";

#[test]
fn a_bounded_register_read_before_its_write_starts_inside_its_variable() {
    let (s, m) = load_sandboxed(&ptx(EARLY_READ));
    let k = entry(&s.ptx, "read_before_write");
    assert!(k.contains("\tld.shared.u32 %r6, [%r5];"), "{k}");
    // On the x == 0 path %r5 is never written: the kernel sets it (and what it is built from)
    // to bins + 0 before the body, so the unchecked load reads bins[0].
    let init = k.find("mov.u32 %r5, bins;").expect("%r5 initialised");
    assert!(init < k.find("ld.param.u64 %rd1, [out];").unwrap(), "{k}");
    let got = output_in(
        &m,
        "read_before_write",
        Shape::linear(1, 32),
        4,
        &[Arg::U32(0)],
        false,
    );
    assert_eq!(got, 5u32.to_le_bytes());
    let got = output_in(
        &m,
        "read_before_write",
        Shape::linear(1, 32),
        4,
        &[Arg::U32(4)],
        false,
    );
    assert_eq!(got, 6u32.to_le_bytes());
}

const LOCAL: &str = "
.visible .entry local_masked(.param .u64 out)
{
    .local .align 4 .b8 depot[64];
    .reg .b64 %rd<6>;
    .reg .b32 %r<6>;
    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, depot;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 15;
    mul.wide.u32 %rd3, %r2, 4;
    add.u64 %rd4, %rd2, %rd3;
    st.local.u32 [%rd4], %r1;
    ld.local.u32 %r3, [%rd4];
    mul.wide.u32 %rd5, %r1, 4;
    add.u64 %rd5, %rd1, %rd5;
    st.global.u32 [%rd5], %r3;
    ret;
}
";

#[test]
fn local_accesses_through_a_masked_index_run_unchecked_and_right() {
    let (s, m) = load_sandboxed(&ptx(LOCAL));
    let k = entry(&s.ptx, "local_masked");
    assert!(k.contains("\tst.local.u32 [%rd4], %r1;"), "{k}");
    assert!(k.contains("\tld.local.u32 %r3, [%rd4];"), "{k}");
    let got = output_in(&m, "local_masked", Shape::linear(1, 32), 128, &[], false);
    let want: Vec<u8> = (0..32u32).flat_map(u32::to_le_bytes).collect();
    assert_eq!(got, want);
}
