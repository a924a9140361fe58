//! Red-team attacks on `ldmatrix`/`stmatrix` rows: every lane names its own row address, drawn
//! at random from inside the kernel's shared tile (aligned or not), just past it, below it, and
//! from other memory altogether (another tenant's allocation, the arena, small and huge
//! numbers), through generic and `.shared` addresses, for `.x1`, `.x2` and `.x4`. Whatever the
//! mix, the launch never faults and the victim is never looked at; the fault is reported
//! exactly when a lane whose row is read had one outside the tile; and when every row is an
//! aligned one inside it, `ldmatrix` gives each lane the elements of the rows it named.

use super::*;
use crate::harness::Rng;

/// The kernel's one shared variable, and so its whole shared window.
const TILE: u64 = 512;

/// The rows kernel for `x` matrices, generic (`ldmatrix` and `stmatrix` without a space) or
/// `.shared`. Lane `l` reads its address from `addrs[l]`: for kind 0 an offset into the tile
/// (its generic address, or its shared one, plus the offset), for kind 1 the raw value.
fn kernel(x: u32, generic: bool) -> String {
    let regs: Vec<String> = (0..x).map(|j| format!("%r{}", 10 + j)).collect();
    let regs = regs.join(", ");
    let (space, addr) = if generic {
        ("", "%rd6")
    } else {
        (".shared", "%rd7")
    };
    ptx(&format!(
        r#"
.visible .entry rows(.param .u64 addrs, .param .u64 out)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    .shared .align 16 .b8 tile[{TILE}];
    ld.param.u64 %rd1, [addrs];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %laneid;
    // The tile holds its element indices: u16 k at byte 2k.
    shl.b32 %r2, %r1, 3;
    mov.u32 %r3, tile;
    shl.b32 %r4, %r1, 4;
    add.s32 %r5, %r3, %r4;
    mov.u32 %r6, 0;
FILL:
    add.s32 %r7, %r2, %r6;
    shl.b32 %r8, %r6, 1;
    add.s32 %r9, %r5, %r8;
    st.shared.u16 [%r9], %r7;
    add.s32 %r6, %r6, 1;
    setp.lt.u32 %p1, %r6, 8;
    @%p1 bra FILL;
    bar.sync 0;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r7, [%rd4];
    ld.global.u64 %rd5, [%rd4+8];
    setp.ne.u32 %p1, %r7, 0;
    cvta.shared.u64 %rd6, tile;
    add.s64 %rd6, %rd6, %rd5;
    mov.u64 %rd7, tile;
    add.s64 %rd7, %rd7, %rd5;
    @%p1 mov.u64 %rd6, %rd5;
    @%p1 mov.u64 %rd7, %rd5;
    ldmatrix.sync.aligned.m8n8.x{x}{space}.b16 {{{regs}}}, [{addr}];
    stmatrix.sync.aligned.m8n8.x{x}{space}.b16 [{addr}], {{{regs}}};
    mul.wide.u32 %rd8, %r1, 16;
    add.s64 %rd9, %rd2, %rd8;
    st.global.v4.u32 [%rd9], {{%r10, %r11, %r12, %r13}};
    ret;
}}
"#
    ))
}

/// One lane's row: kind 0 with an offset into (or past) the tile, or kind 1 with a raw value.
#[derive(Clone, Copy, Debug)]
struct Row {
    kind: u32,
    val: u64,
}

impl Row {
    /// Whether the sandbox must move this row: its 32-bit shared offset (the tile is the
    /// kernel's only shared variable, at offset 0; a generic address converts to a shared one
    /// by subtracting the shared window's base, whose low 32 bits are 0), aligned down, leaves
    /// the tile.
    fn outside(self) -> bool {
        u64::from(self.val as u32 & !15) + 16 > TILE
    }
    fn aligned_inside(self) -> bool {
        self.kind == 0 && !self.outside() && self.val.is_multiple_of(16)
    }
}

fn random_row(rng: &mut Rng, victim: u64, arena: u64) -> Row {
    let r = rng.next_u32();
    let at = |val| Row { kind: 0, val };
    let raw = |val| Row { kind: 1, val };
    match r % 10 {
        0..=3 => at(u64::from(r >> 8) % 32 * 16),
        4 => at(u64::from(r >> 8) % (TILE - 15)),
        5 => at(TILE - 16 + u64::from(r >> 8) % 40),
        6 => at((-16i64 * (1 + i64::from(r >> 8) % 4)) as u64),
        7 => raw(victim + u64::from(r >> 8) % 64 * 16),
        8 => raw(arena + u64::from(r >> 8) % 1024 * 16),
        _ => raw([0, 16, 0x7fff_fff0, u64::MAX - 15][(r >> 8) as usize % 4]),
    }
}

#[test]
fn random_matrix_rows_never_fault_or_touch_the_victim_and_are_reported_exactly_when_outside() {
    let mut rng = Rng::new(0x5eed_0035);
    let mut seen = [0usize; 2];
    for x in [1u32, 2, 4] {
        for generic in [false, true] {
            let (_, m) = load_sandboxed(&kernel(x, generic));
            for round in 0..60 {
                // A third of the rounds all rows are aligned and inside, so the values are
                // checked; a third only the rows read are, the lanes past them wild (for .x1 and
                // .x2 nothing may be reported: the hardware ignores those lanes' addresses).
                let (tame, edge) = (round % 3 == 0, round % 3 == 1);
                let mut g = GuestMem::new();
                let (victim, arena) = (g.victim(), g.base());
                let rows: Vec<Row> = (0..32)
                    .map(|l| {
                        loop {
                            let row = random_row(&mut rng, victim, arena);
                            let read = l < 8 * x as usize;
                            if !(tame || edge && read) || row.aligned_inside() {
                                break row;
                            }
                        }
                    })
                    .collect();
                let bytes: Vec<u8> = rows
                    .iter()
                    .flat_map(|r| {
                        let mut b = u64::from(r.kind).to_le_bytes().to_vec();
                        b.extend(r.val.to_le_bytes());
                        b
                    })
                    .collect();
                let table = g.alloc(32 * 16);
                g.write(table, &bytes);
                let out = g.alloc(32 * 16);
                g.ctl_word(0).store(EPOCH, Ordering::SeqCst);
                let hidden = Hidden {
                    globals: 0,
                    epoch: EPOCH,
                };
                let args = [Arg::U64(table), Arg::U64(out)];
                run_sandboxed(&m, "rows", Shape::linear(1, 32), &args, &hidden, &g)
                    .unwrap_or_else(|f| panic!("x{x} generic {generic}: {f}\n{rows:?}"));
                g.assert_victim_safe();
                // Only lanes below 8x give rows.
                let fenced = rows[..8 * x as usize].iter().any(|r| r.outside());
                let word = g.ctl_word(FAULT).load(Ordering::SeqCst);
                assert_eq!(
                    word,
                    if fenced { TAG } else { 0 },
                    "x{x} generic {generic}: {rows:?}"
                );
                seen[usize::from(fenced)] += 1;
                if tame || edge {
                    let got: Vec<u32> = g
                        .read(out, 32 * 16)
                        .chunks(4)
                        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                        .collect();
                    for l in 0..32 {
                        for j in 0..x as usize {
                            // Register j of lane l: row l / 4 of matrix j, from lane 8j + l / 4's
                            // row, columns 2(l % 4) and +1 (element k of the tile is k).
                            let start = rows[8 * j + l / 4].val / 2 + 2 * (l as u64 % 4);
                            let want = start as u32 | ((start as u32 + 1) << 16);
                            assert_eq!(
                                got[4 * l + j],
                                want,
                                "x{x} generic {generic} lane {l} reg {j}"
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(seen[0] > 0 && seen[1] > 0, "both outcomes drawn: {seen:?}");
}
