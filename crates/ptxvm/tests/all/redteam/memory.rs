//! Red-team attacks on memory: pointers with offsets, scans, raw addresses in scalars,
//! generic pointers, atomics and vectors, non-coherent loads, shared and local windows, and
//! misaligned accesses. Each is fenced, and the victim is untouched.

use super::*;

#[test]
fn pointer_plus_offset_reaches_no_other_allocation() {
    for sign in [1i64, -1] {
        attack(
            "offset_rw",
            Shape::linear(1, 64),
            |m| {
                let (buf, out) = (m.alloc(256), m.alloc(256));
                let delta = if sign > 0 {
                    m.victim().wrapping_sub(buf)
                } else {
                    // Below the arena: base - 64 KiB.
                    (m.base().wrapping_sub(65536)).wrapping_sub(buf)
                };
                vec![Arg::U64(buf), Arg::U64(delta), Arg::U64(out)]
            },
            true,
        );
    }
}

#[test]
fn scanning_past_the_arena_reads_only_the_arena() {
    // Starts 8 KiB below the victim and walks 64 KiB: the victim lies in the middle.
    attack(
        "scan",
        Shape::linear(1, 1),
        |m| {
            let out = m.alloc(8 * 128);
            vec![Arg::U64(m.victim() - 8192), Arg::U64(128), Arg::U64(out)]
        },
        true,
    );
}

#[test]
fn raw_addresses_in_u64_scalars_are_fenced() {
    for target in ["victim", "zero", "wild", "ctl"] {
        let mem = attack(
            "raw",
            Shape::linear(1, 1),
            |m| {
                let addr = match target {
                    "victim" => m.victim() + 64,
                    "zero" => 0,
                    "wild" => 0xdead_0000_0000,
                    _ => m.ctl(),
                };
                vec![Arg::U64(addr), Arg::U64(m.alloc(8))]
            },
            true,
        );
        assert_eq!(
            mem.ctl_word(0).load(Ordering::SeqCst),
            EPOCH,
            "{target}: ctl+0 kept"
        );
    }
}

#[test]
fn generic_pointers_into_global_shared_and_local_windows_are_fenced() {
    let mut out = 0;
    let mem = attack(
        "generic",
        Shape::linear(1, 1),
        |m| {
            out = m.alloc(16);
            vec![Arg::U64(m.victim()), Arg::U64(out)]
        },
        true,
    );
    assert_eq!(
        mem.read(out + 12, 4),
        7u32.to_le_bytes(),
        "in-window generic accesses work"
    );
}

#[test]
fn atomics_and_vector_accesses_are_fenced() {
    attack(
        "atoms",
        Shape::linear(1, 32),
        |m| vec![Arg::U64(m.victim()), Arg::U64(m.alloc(64))],
        true,
    );
}

#[test]
fn non_coherent_and_cache_hinted_loads_are_fenced() {
    attack(
        "nc",
        Shape::linear(1, 1),
        |m| vec![Arg::U64(m.victim()), Arg::U64(m.alloc(16))],
        true,
    );
}

#[test]
fn shared_memory_out_of_range_is_fenced() {
    attack(
        "shared_oob",
        Shape::linear(1, 64),
        |m| vec![Arg::U64(m.alloc(256)), Arg::U32(4096)],
        true,
    );
}

#[test]
fn local_memory_out_of_range_is_fenced() {
    let mut out = 0;
    let mem = attack(
        "local_oob",
        Shape::linear(1, 32),
        |m| {
            out = m.alloc(8);
            vec![Arg::U64(out), Arg::U64(1 << 20)]
        },
        true,
    );
    assert_eq!(
        mem.read(out + 4, 4),
        9u32.to_le_bytes(),
        "in-range locals work"
    );
}

#[test]
fn misaligned_accesses_are_aligned_down_not_faulted() {
    let mut buf = 0;
    let mem = attack(
        "misaligned",
        Shape::linear(1, 1),
        |m| {
            buf = m.alloc(32);
            m.write(buf + 4, &0x1234_5678u32.to_le_bytes());
            vec![Arg::U64(buf)]
        },
        false,
    );
    assert_eq!(
        mem.read(buf + 8, 4),
        0x1234_5678u32.to_le_bytes(),
        "read from buf+4"
    );
    assert_eq!(mem.read(buf + 16, 8), buf.to_le_bytes(), "wrote at buf+16");
}
