//! `mbarrier` through the PTX sandbox on the driver under test: softcuda here, and NVIDIA's JIT
//! and hardware on the GPU machine, where the rewrite's software barriers (ptxvm's
//! sandbox/mbarrier.rs: plain shared loads and a compare-and-swap on the guest's own word, in
//! place of the hardware barrier) meet ptxas and the hardware's own barriers as written.
//!
//! - testkit's legal programs (a producer/consumer ring of `cp.async` tiles with `full` and
//!   `empty` barriers, waits by parity and consumers leaving by `arrive_drop`; a barrier through
//!   generic addresses, waited on by state) give the same bytes rewritten as written (the
//!   hardware's barriers), and their reference, with nothing reported fenced.
//! - mbarrier_words.rs's kernel of arrivals and waits on words of garbage, which loses the
//!   context as written, runs rewritten without a fault: the next launch and a copy work.
//! - testkit's attacks (a barrier past the shared window, a generic one at another allocation)
//!   end without a fault, are reported in the fault word, and leave the victim as it was.
//!
//! The last two run in a child process, so that a hole poisons only that process.

use std::sync::Arc;

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::{exclusive_device, shared_device};
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::{KernelArg, LaunchShape, Stream};
use ptxvm::sandbox::{CTL_FAULT_TAG, Policy, sandbox};
use testkit::mbarrier::{GENERIC, HEAD, RING, attacks, generic_sum, ring_sums};

use crate::support::{env_or_skip, in_child};

/// Bytes of the guest's arena (at least the sandbox's MIN_ARENA).
const ARENA: usize = 1 << 20;
/// Where the first buffer starts in the arena (off its base, where fenced accesses land).
const FIRST_AT: usize = 4096;
/// The launch tag in the hidden `launch` argument (its epoch is 0: the control block starts
/// zeroed).
const TAG: u64 = 0x6f;
const FAULT_AT: usize = CTL_FAULT_TAG as usize;

/// One guest's memory: its arena and control block, and a stream.
struct Guest {
    arena: DeviceBuffer,
    ctl: DeviceBuffer,
    stream: Stream,
}

impl Guest {
    fn new(ctx: &Arc<Context>) -> Guest {
        let g = Guest {
            arena: DeviceBuffer::alloc(ctx, ARENA).expect("an arena"),
            ctl: DeviceBuffer::alloc(ctx, ptxvm::sandbox::CTL_BYTES as usize)
                .expect("a control block"),
            stream: Stream::new(ctx).expect("a stream"),
        };
        g.arena.fill(0).expect("zero the arena");
        g.ctl.fill(0).expect("zero the control block");
        g
    }

    /// Writes `bufs` into the arena, 256-aligned from [`FIRST_AT`]; their addresses.
    fn place(&self, bufs: &[&[u8]]) -> Vec<u64> {
        let mut at = FIRST_AT;
        bufs.iter()
            .map(|b| {
                self.arena.write_at(at, b).expect("write a buffer");
                let p = self.arena.ptr() + at as u64;
                at = (at + b.len()).div_ceil(256) * 256;
                p
            })
            .collect()
    }

    /// `args` and the five hidden arguments (no globals block).
    fn with_hidden(&self, mut args: Vec<KernelArg>) -> Vec<KernelArg> {
        let hidden = [self.arena.ptr(), ARENA as u64, 0, self.ctl.ptr(), TAG << 32];
        args.extend(hidden.map(KernelArg::U64));
        args
    }

    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let at = (addr - self.arena.ptr()) as usize;
        self.arena.read_at(at, &mut out).expect("read a buffer");
        out
    }

    fn fault_word(&self) -> u32 {
        let mut w = [0u8; 4];
        self.ctl
            .read_at(FAULT_AT, &mut w)
            .expect("read the fault word");
        u32::from_le_bytes(w)
    }
}

/// Kernel `name` of `body` (after testkit's header) run as written, each buffer of `bufs` its
/// own allocation, and rewritten, in a guest's arena; every buffer's bytes after each. The
/// rewritten run must report nothing.
fn both(
    ctx: &Arc<Context>,
    body: &str,
    name: &str,
    shape: LaunchShape,
    bufs: &[&[u8]],
    scalars: &[u32],
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let text = format!("{HEAD}{body}");
    let scalar_args = || scalars.iter().map(|&v| KernelArg::U32(v));
    let stream = Stream::new(ctx).expect("a stream");
    let module = Module::load_ptx(ctx, &text).expect("the program loads as written");
    let f = module.function(name).expect("its kernel");
    let plain: Vec<DeviceBuffer> = bufs
        .iter()
        .map(|b| {
            let d = DeviceBuffer::alloc(ctx, b.len()).expect("a buffer");
            d.write(b).expect("write a buffer");
            d
        })
        .collect();
    let args: Vec<KernelArg> = plain
        .iter()
        .map(|d| KernelArg::Ptr(d.ptr()))
        .chain(scalar_args())
        .collect();
    stream
        .launch(&f, shape, &args)
        .and_then(|()| stream.synchronize())
        .unwrap_or_else(|e| panic!("{name} as written: {e}"));
    let written = plain
        .iter()
        .zip(bufs)
        .map(|(d, b)| {
            let mut out = vec![0u8; b.len()];
            d.read(&mut out).expect("read a buffer");
            out
        })
        .collect();

    let s = sandbox(&text, &Policy::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    let module = Module::load_ptx(ctx, &s.ptx).expect("the program loads rewritten");
    let f = module.function(name).expect("its kernel, rewritten");
    let g = Guest::new(ctx);
    let ptrs = g.place(bufs);
    let args = g.with_hidden(
        ptrs.iter()
            .map(|&p| KernelArg::U64(p))
            .chain(scalar_args())
            .collect(),
    );
    g.stream
        .launch(&f, shape, &args)
        .and_then(|()| g.stream.synchronize())
        .unwrap_or_else(|e| panic!("{name} rewritten: {e}"));
    assert_eq!(g.fault_word(), 0, "{name}: a legal program reports nothing");
    let rewritten = ptrs
        .iter()
        .zip(bufs)
        .map(|(&p, b)| g.read(p, b.len()))
        .collect();
    (written, rewritten)
}

fn words(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

#[test]
fn legal_mbarrier_programs_give_their_bytes_as_written_rewritten_on_the_driver() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain the primary context");
    for tiles in [1u32, 3, 8] {
        let inp: Vec<u32> = (0..32 * tiles).map(|k| k * 7 + 3).collect();
        let bytes: Vec<u8> = inp.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (written, rewritten) = both(
            &ctx,
            RING,
            "ring",
            shape_1d(2, 96),
            &[&bytes, &[0u8; 256]],
            &[tiles],
        );
        assert_eq!(
            words(&written[1]),
            ring_sums(&inp, tiles),
            "{tiles} tiles as written"
        );
        assert_eq!(written, rewritten, "{tiles} tiles on {}", env.choice.kind);
    }
    let (written, rewritten) = both(&ctx, GENERIC, "gen", shape_1d(1, 64), &[&[0u8; 256]], &[]);
    assert!(
        words(&written[0]).iter().all(|&s| s == generic_sum()),
        "as written"
    );
    assert_eq!(
        written, rewritten,
        "generic barriers on {}",
        env.choice.kind
    );
}

#[test]
fn mbarrier_operations_on_garbage_words_rewritten_neither_fault_nor_lose_the_context() {
    in_child(
        "mbarrier_sandboxed::mbarrier_operations_on_garbage_words_rewritten_neither_fault_nor_lose_the_context",
        || {
            let _exclusive = exclusive_device();
            let Some(env) = env_or_skip() else { return };
            let ctx = Context::primary(env).expect("retain the primary context");
            let s = sandbox(crate::mbarrier_words::KERNEL, &Policy::default())
                .expect("the sandbox rewrites the garbage kernel");
            let module = Module::load_ptx(&ctx, &s.ptx).expect("it loads rewritten");
            let f = module.function("garbage").expect("its function");
            let g = Guest::new(&ctx);
            let out = g.place(&[&[0u8; 128 * 4]])[0];
            let args = g.with_hidden(vec![KernelArg::U64(out)]);
            for run in ["a first", "a second"] {
                g.stream
                    .launch(&f, shape_1d(1, 128), &args)
                    .and_then(|()| g.stream.synchronize())
                    .unwrap_or_else(|e| panic!("{run} launch on {}: {e}", env.choice.kind));
            }
            assert_eq!(
                g.fault_word(),
                0,
                "the words are the guest's own: nothing fenced"
            );
            g.arena.write(&[7u8; 64]).expect("a copy after it works");
        },
    );
}

#[test]
fn mbarrier_attacks_rewritten_touch_nothing_outside_the_guest_and_are_reported() {
    in_child(
        "mbarrier_sandboxed::mbarrier_attacks_rewritten_touch_nothing_outside_the_guest_and_are_reported",
        || {
            let _exclusive = exclusive_device();
            let Some(env) = env_or_skip() else { return };
            let ctx = Context::primary(env).expect("retain the primary context");
            let s = sandbox(&attacks(), &Policy::default()).expect("the sandbox rewrites them");
            let module = Module::load_ptx(&ctx, &s.ptx).expect("they load rewritten");
            let secret: Vec<u8> = b"VICTIM-SECRET-42".repeat(16);
            let victim = DeviceBuffer::alloc(&ctx, secret.len()).expect("a victim");
            victim.write(&secret).expect("write the victim");
            for (kernel, arg) in [
                ("mb_offset", KernelArg::U32(4096)),
                ("mb_offset", KernelArg::U32(0xFFFF_FFF8)),
                ("mb_scalar", KernelArg::U64(0xdead_8000_0000)),
                ("mb_generic", KernelArg::U64(victim.ptr() + 8)),
                ("mb_generic", KernelArg::U64(0)),
            ] {
                let f = module.function(kernel).expect("the attack's kernel");
                let g = Guest::new(&ctx);
                let out = g.place(&[&[0u8; 4]])[0];
                let args = g.with_hidden(vec![KernelArg::U64(out), arg]);
                g.stream
                    .launch(&f, shape_1d(2, 64), &args)
                    .and_then(|()| g.stream.synchronize())
                    .unwrap_or_else(|e| panic!("{kernel} {arg:?} on {}: {e}", env.choice.kind));
                assert_eq!(u64::from(g.fault_word()), TAG, "{kernel} {arg:?}: reported");
                // A skipped wait reads as over.
                assert_eq!(words(&g.read(out, 4)), [1], "{kernel} {arg:?}");
                let mut now = vec![0u8; secret.len()];
                victim.read(&mut now).expect("read the victim");
                assert_eq!(now, secret, "{kernel} {arg:?}: the victim is unchanged");
            }
        },
    );
}
