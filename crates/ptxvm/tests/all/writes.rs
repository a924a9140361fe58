//! Registers written other than by an instruction's usual destination, which every analysis
//! that drops a check because of what a register's writes can give it must count. Red team,
//! session 19, found two such writes that none of them saw:
//! - a call passing or returning registers (`call (%r4), f, (%r1)` to a `.func (.reg .b32
//!   %res) f(.reg .b32 %x)`: valid PTX, which NVIDIA's JIT takes) writes `%r4`. Such calls
//!   are now refused.
//! - `bar.red.popc.u32 %r4, 0, %p1` writes `%r4`, where the instruction table said `bar`
//!   writes nothing. Its write now counts.
//!
//! A register proven to point inside a shared or local variable, or a counted loop's counter,
//! could be set to anything by either, and the unchecked access (a fault on NVIDIA: the device
//! poisoned for every guest) or the poll-free loop (never stopped) ran with it.

use ptxvm::Error;
use ptxvm::sandbox::{Policy, sandbox};

use super::fastpath::{entry, polls};
use super::redteam::ptx;

const CALLEES: &str = "
.func (.reg .b32 %res) big32(.reg .b32 %x)
{
    mov.b32 %res, 4096;
    ret;
}

.func (.reg .b64 %res) big64(.reg .b64 %x)
{
    add.u64 %res, %x, 4096;
    ret;
}

.func (.reg .b32 %res) zero(.reg .b32 %x)
{
    mov.b32 %res, 0;
    ret;
}
";

/// (kernel, line of its call within it, what the refusal names)
const KERNELS: [(&str, u32, &str); 4] = [
    (
        "
.visible .entry shared_bin(.param .u64 out)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<8>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    and.b32 %r4, %r1, 12;
    call (%r4), big32, (%r1);
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5], 1;
    ret;
}",
        9,
        "%r4",
    ),
    (
        "
.visible .entry local_slot(.param .u64 out)
{
    .local .align 4 .b8 depot[64];
    .reg .b64 %rd<4>;
    mov.u64 %rd1, depot;
    add.u64 %rd2, %rd1, 8;
    call (%rd2), big64, (%rd1);
    st.local.u32 [%rd2], 1;
    ret;
}",
        8,
        "%rd2",
    ),
    (
        "
.visible .entry reset_counter(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
L:
    st.global.u32 [%rd1], 1;
    call (%r1), zero, (%r1);
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 100;
    @%p1 bra L;
    ret;
}",
        11,
        "%r1",
    ),
    (
        "
.visible .entry argument_only(.param .u64 out)
{
    .param .b32 ret0;
    .reg .b32 %r<2>;
    mov.u32 %r1, 7;
    call (ret0), zero, (%r1);
    ret;
}",
        7,
        "%r1",
    ),
];

#[test]
fn calls_passing_or_returning_registers_are_refused_naming_the_line() {
    let head_lines = ptx(CALLEES).lines().count() as u32;
    for (kernel, line, reg) in KERNELS {
        let src = ptx(&format!("{CALLEES}{kernel}"));
        match sandbox(&src, &Policy::default()) {
            Err(Error::Refused { line: l, what }) => {
                assert_eq!(l, head_lines + line, "{what}\n{kernel}");
                assert!(what.contains(reg) && what.contains(".param"), "{what}");
            }
            other => panic!("expected a refusal, got {other:?}\n{kernel}"),
        }
    }
}

const BAR_RED: &str = "
.visible .entry popc_bin(.param .u64 out, .param .u32 x)
{
    .shared .align 4 .b8 bins[64];
    .reg .b32 %r<8>;
    .reg .pred %p<2>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bins;
    and.b32 %r4, %r1, 12;
    setp.ge.u32 %p1, %r1, 0;
    bar.red.popc.u32 %r4, 0, %p1;
    shl.b32 %r4, %r4, 2;
    add.u32 %r5, %r2, %r4;
    st.shared.u32 [%r5], 1;
    ret;
}

.visible .entry popc_counter(.param .u64 out)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<4>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
    setp.ne.u32 %p2, %r1, 0;
L:
    st.global.u32 [%rd1], 1;
    bar.red.popc.u32 %r1, 0, %p2;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p1, %r1, 100;
    @%p1 bra L;
    ret;
}
";

/// Checked in the rewritten text only: ptxvm does not run `bar.red` (NVIDIA does).
#[test]
fn a_register_bar_red_writes_keeps_its_accesses_checked_and_its_loop_polled() {
    let s = sandbox(&ptx(BAR_RED), &Policy::default()).expect("sandboxed");
    // `%r4` looks like a masked bin index, but bar.red sets it to the block's count, so with a
    // block of 32 or more the store lands at bins + 128 or further, past the window.
    let k = entry(&s.ptx, "popc_bin");
    assert!(!k.contains("\tst.shared.u32 [%r5], 1;"), "{k}");
    assert!(k.contains("setp.lt.u32 %__sbx_q"), "{k}");
    // `%r1` looks like a counted loop's counter, but bar.red sets it back to 0 each time round.
    let k = entry(&s.ptx, "popc_counter");
    assert_eq!(polls(&s.ptx, "popc_counter"), 1, "{k}");
}
