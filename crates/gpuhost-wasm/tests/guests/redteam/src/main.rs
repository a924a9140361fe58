//! The red-team guest of gpuhost-wasm's isolation suite (tests/all/redteam.rs).
//!
//! `victim SECRET WORDS` holds WORDS u32 words equal to SECRET in device memory, prints
//! `victim ready addr=0x.. bytes=N`, then re-reads them every few milliseconds, printing
//! `checked N` each time, and exits 1 if they ever change (the harness cancels it when the
//! attack is over). All numbers on the command line are hexadecimal.
//!
//! `ATTACK VICTIM_ADDR SECRET` runs one attack (VICTIM_ADDR 0: learn nothing from the harness,
//! guess from its own buffers' addresses) and prints one line
//! `result ATTACK outcome=CASE[+CASE..] seen=N`: the host's answers in order of first appearance
//! (`ok` or the WIT error case) and how many words equal to SECRET the attacker read back. Each
//! error's message goes to stderr as `error CASE: MESSAGE`. The harness judges the outcome.
//! `ATTACK-after` runs the same attack with each launch's end and its results taken by one
//! `stream.read-after` instead of `synchronize` and `buffer.read`.

use gpuhost_guest::{Buffer, Error, Kernel, Launch, Module, Stream, quotas};

const ATTACKS: &str = include_str!("../../kernels/attacks.ptx");
/// Blocks of the `fill` attack: 64 for each of 256 SMs, twice what an SM holds.
const FILL_BLOCKS: u32 = 16384;
const COMPILED: &str = include_str!("../../kernels/compiled.ptx");
const TRAP: &str = include_str!("../../kernels/trap.ptx");
const HUGE_GLOBALS: &str = include_str!("../../kernels/huge_globals.ptx");
const GLOBALS: &str = include_str!("../../kernels/globals.ptx");
const TENSOR: &str = include_str!("../../kernels/tensor.ptx");
/// Threads of one block waiting at two barrier ids: a launch that never completes on its own.
const TWO_BARRIERS: &str = ".version 7.0
.target sm_70
.address_size 64
.visible .entry two_barriers()
{
    .reg .b32 %r<2>;
    .reg .pred %p<2>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra FIRST;
    bar.sync 1;
    ret;
FIRST:
    bar.sync 0;
    ret;
}
";

/// A secret no honest computation here produces (for reads that are not attacks).
const SECRET_NEVER: u32 = 0x5ec2_e7ff;
/// A store the attacks write where they should not.
const MARK: u32 = 0xbad0_bad0;
/// Where guesses start from the attacker's own buffer: one past it, and common strides.
const GUESSES: [i64; 8] = [
    4096,
    1 << 16,
    1 << 20,
    2 << 20,
    64 << 20,
    -4096,
    -(1 << 20),
    -(2 << 20),
];

/// The WIT case of an error, as the interface spells it.
fn case(e: &Error) -> &'static str {
    match e {
        Error::InvalidPtx(_) => "invalid-ptx",
        Error::InvalidModule(_) => "invalid-module",
        Error::KernelNotFound(_) => "kernel-not-found",
        Error::ArgMismatch(_) => "arg-mismatch",
        Error::OutOfBounds(_) => "out-of-bounds",
        Error::InvalidLaunch(_) => "invalid-launch",
        Error::QuotaExceeded(_) => "quota-exceeded",
        Error::OutOfMemory(_) => "out-of-memory",
        Error::ContextLost(_) => "context-lost",
        Error::DeviceFault(_) => "device-fault",
        Error::InvalidHandle(_) => "invalid-handle",
        Error::NotReady(_) => "not-ready",
        Error::NotSupported(_) => "not-supported",
        Error::Driver(_) => "driver",
        Error::TimeLimit(_) => "time-limit",
        Error::MemoryFenced(_) => "memory-fenced",
        Error::BinaryRefused(_) => "binary-refused",
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

/// Setup that must work (allocations, the attack module): anything else is a harness bug.
fn must<T>(r: Result<T, Error>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(&format!("setup {what}: {e:?}")))
}

/// What the host answered, and what the attacker saw.
#[derive(Default)]
struct Report {
    outcomes: Vec<&'static str>,
    seen: u32,
}

impl Report {
    fn note<T>(&mut self, r: Result<T, Error>) -> Option<T> {
        let c = match &r {
            Ok(_) => "ok",
            Err(e) => {
                eprintln!("error {}: {e:?}", case(e));
                case(e)
            }
        };
        if !self.outcomes.contains(&c) {
            self.outcomes.push(c);
        }
        r.ok()
    }

    /// Enqueues and synchronizes, noting the one answer: the enqueue's error, or what the
    /// synchronize returned.
    fn launch(&mut self, launch: Launch<'_>, stream: &Stream) {
        match launch.enqueue(stream) {
            Err(e) => self.note::<()>(Err(e)),
            Ok(()) => self.note(stream.synchronize()),
        };
    }

    /// Counts the secret in `words` read back from the attacker's own buffer.
    fn saw(&mut self, words: &[u32], secret: u32) {
        self.seen += words.iter().filter(|w| **w == secret).count() as u32;
    }
}

fn words(buf: &Buffer, n: u64) -> Vec<u32> {
    to_words(&must(buf.read(0, n * 4), "read"))
}

fn to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A zeroed buffer of `bytes`.
fn zeroed(bytes: u64) -> Buffer {
    let b = must(Buffer::create(bytes), "alloc");
    must(b.fill(0, bytes, 0), "fill");
    b
}

/// The attacker's kit: its own buffers and kernels.
struct Kit {
    /// Allocated first, so a fenced access (sent to the start of the guest's memory) lands here
    /// and not in the buffers whose contents are reported.
    _pad: Buffer,
    own: Buffer,
    own_addr: u64,
    out: Buffer,
    module: Module,
    stream: Stream,
    /// Results are taken with `read-after` (mode suffix `-after`).
    after: bool,
}

impl Kit {
    fn new(after: bool) -> Self {
        let pad = zeroed(1 << 16);
        let own = zeroed(4096);
        let out = zeroed(64);
        let module = must(Module::from_ptx(ATTACKS), "load attacks.ptx");
        let stream = must(Stream::create(), "stream");
        let addr_of = must(module.kernel("addr_of"), "addr_of");
        must(
            Launch::new(&addr_of)
                .arg(arg(&own))
                .arg(arg(&out))
                .enqueue(&stream),
            "addr_of",
        );
        must(stream.synchronize(), "addr_of synchronize");
        let w = words(&out, 2);
        let own_addr = u64::from(w[0]) | (u64::from(w[1]) << 32);
        Self {
            _pad: pad,
            own,
            own_addr,
            out,
            module,
            stream,
            after,
        }
    }

    fn kernel(&self, name: &str) -> Kernel {
        must(self.module.kernel(name), name)
    }

    /// Enqueues and synchronizes, noting the answer; then reads `n` words of `out` back and
    /// returns them. With `after`, one `read-after` does both; when it refuses the bytes, they
    /// are read anyway, to count the secret in what the kernel wrote.
    fn run(&self, r: &mut Report, launch: Launch<'_>, n: u64, secret: u32) -> Vec<u32> {
        must(self.out.fill(0, 64, 0), "clear out");
        let w = if !self.after {
            r.launch(launch, &self.stream);
            words(&self.out, n)
        } else {
            // One answer, as `Report::launch` notes: the enqueue's error or read-after's.
            let taken = match launch.enqueue(&self.stream) {
                Err(e) => r.note::<Vec<u8>>(Err(e)),
                Ok(()) => r.note(self.stream.read_after(&self.out, 0, n * 4)),
            };
            match taken {
                Some(bytes) => to_words(&bytes),
                None => words(&self.out, n),
            }
        };
        r.saw(&w, secret);
        w
    }

    /// Addresses to aim at: the victim's (when given) and guesses around the own buffer.
    fn targets(&self, victim: u64) -> Vec<u64> {
        let mut t: Vec<u64> = GUESSES
            .iter()
            .map(|d| self.own_addr.wrapping_add_signed(*d))
            .collect();
        t.extend([0, 0xdead_0000_0000, u64::MAX - 3]);
        if victim != 0 {
            t.insert(0, victim);
        }
        t
    }
}

fn arg(b: &Buffer) -> gpuhost_guest::Arg<'_> {
    gpuhost_guest::Arg::Buffer(gpuhost_guest::BufferArg {
        buffer: b,
        offset: 0,
    })
}

fn victim(secret: u32, n: u64) -> ! {
    let bytes = n * 4;
    let buf = must(Buffer::create(bytes), "victim alloc");
    let data: Vec<u8> = (0..n).flat_map(|_| secret.to_le_bytes()).collect();
    must(buf.write(0, &data), "victim write");
    let kit = Kit::new(false);
    let addr_of = kit.kernel("addr_of");
    kit.run(
        &mut Report::default(),
        Launch::new(&addr_of).arg(arg(&buf)).arg(arg(&kit.out)),
        2,
        0,
    );
    let w = words(&kit.out, 2);
    let addr = u64::from(w[0]) | (u64::from(w[1]) << 32);
    println!("victim ready addr={addr:#x} bytes={bytes}");
    for check in 0..12_000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        if let Some(i) = words(&buf, n).iter().position(|w| *w != secret) {
            println!("victim changed at word {i}");
            std::process::exit(1);
        }
        println!("checked {check}");
    }
    println!("victim ok");
    std::process::exit(0)
}

fn attack(mode: &str, victim: u64, secret: u32) -> Report {
    let mut r = Report::default();
    let (mode, after) = match mode.strip_suffix("-after") {
        Some(m) => (m, true),
        None => (mode, false),
    };
    let kit = Kit::new(after);
    let targets = kit.targets(victim);
    match mode {
        "offsets" => {
            let k = kit.kernel("peek_poke");
            for t in &targets {
                let off = t.wrapping_sub(kit.own_addr);
                let l = Launch::new(&k).arg(arg(&kit.own)).scalar(off);
                kit.run(&mut r, l.scalar(MARK).arg(arg(&kit.out)), 1, secret);
            }
        }
        "raw" => {
            let k = kit.kernel("peek_poke");
            for t in &targets {
                let l = Launch::new(&k).scalar(*t).scalar(0u64).scalar(MARK);
                kit.run(&mut r, l.arg(arg(&kit.out)), 1, secret);
            }
        }
        "scan" => {
            // Around the own buffer (64 MiB each way, a word every 4 KiB: reading only, as part
            // of it is the attacker's own memory), then word by word around the victim,
            // writing over what it reads.
            let k = kit.kernel("scan");
            let from = kit.own_addr.wrapping_sub(64 << 20);
            let mut ranges = vec![(from, 4096u64, 128u32, 0u32)];
            if victim != 0 {
                ranges.push((victim.wrapping_sub(1 << 16), 4, 512, 1));
            }
            for (start, stride, n, write) in ranges {
                let l = Launch::new(&k).block1(256).scalar(start).scalar(stride);
                let l = l.scalar(n).scalar(secret).scalar(write).arg(arg(&kit.out));
                must(kit.out.fill(0, 64, 0), "clear out");
                r.launch(l, &kit.stream);
                r.seen += words(&kit.out, 1)[0];
            }
            let compiled = must(Module::from_ptx(COMPILED), "load compiled.ptx");
            let c_scan = must(compiled.kernel("c_scan"), "c_scan");
            // Pointer arithmetic off the own buffer: word indices reaching the victim.
            let lo = (victim.wrapping_sub(kit.own_addr) as i64) / 4 - 4096;
            let l = Launch::new(&c_scan).block1(256).arg(arg(&kit.own)).scalar(lo);
            let l = l.scalar(lo + 8192).scalar(256i64).scalar(secret).arg(arg(&kit.out));
            must(kit.out.fill(0, 64, 0), "clear out");
            r.launch(l, &kit.stream);
            r.seen += words(&kit.out, 1)[0];
        }
        "generic" => {
            let k = kit.kernel("generic_peek_poke");
            for t in &targets {
                let l = Launch::new(&k).scalar(*t).scalar(MARK).arg(arg(&kit.out));
                kit.run(&mut r, l, 1, secret);
            }
            let compiled = must(Module::from_ptx(COMPILED), "load compiled.ptx");
            let c_generic = must(compiled.kernel("c_generic"), "c_generic");
            for t in &targets {
                let l = Launch::new(&c_generic).scalar(*t).scalar(MARK);
                kit.run(&mut r, l.arg(arg(&kit.out)), 2, secret);
            }
        }
        "atomics" | "vectors" | "nc" => {
            let name = match mode {
                "atomics" => "atomics",
                "vectors" => "vectors",
                _ => "nc_loads",
            };
            let k = kit.kernel(name);
            for t in &targets {
                kit.run(&mut r, Launch::new(&k).scalar(*t).arg(arg(&kit.out)), 4, secret);
            }
        }
        "shared" | "local" => {
            let k = kit.kernel(if mode == "shared" { "shared_oob" } else { "local_oob" });
            // In range first (it must work), then out of range: confined, never a fault.
            for index in [5u32, 64, 1000, 1 << 20, u32::MAX / 4, u32::MAX] {
                kit.run(&mut r, Launch::new(&k).scalar(index).arg(arg(&kit.out)), 1, secret);
                if index == 5 && words(&kit.out, 1)[0] != 7 {
                    r.note::<()>(Err(Error::Driver("wrong value read back".into())));
                }
            }
        }
        "misaligned" => {
            let k = kit.kernel("misaligned");
            let l = Launch::new(&k).arg(arg(&kit.own)).arg(arg(&kit.out));
            kit.run(&mut r, l, 2, secret);
        }
        "trap" => {
            r.note(Module::from_ptx(TRAP));
        }
        "barriers" => {
            // Were it loaded, its launch would wait forever on NVIDIA, and on softcuda fault
            // with an error that ends every guest of the process.
            if let Some(m) = r.note(Module::from_ptx(TWO_BARRIERS)) {
                let k = must(m.kernel("two_barriers"), "two_barriers");
                kit.run(&mut r, Launch::new(&k).block1(32), 1, secret);
            }
            // The device is still the guest's to use.
            long_loop(&kit, &mut r, 1000);
        }
        "endless" => {
            let k = kit.kernel("endless");
            let began = std::time::Instant::now();
            kit.run(&mut r, Launch::new(&k).arg(arg(&kit.out)), 1, secret);
            // From the launch call to the stop's error: the GPU-time limit plus how late the
            // watchdog stopped the kernel (issue #9: at most 10 ms).
            println!("endless stopped after {} us", began.elapsed().as_micros());
            // The guest goes on after the stop: the next launch on the same stream works.
            long_loop(&kit, &mut r, 1000);
        }
        "fill" => {
            // One-warp blocks, more than the SMs of any GPU hold at once (32 per SM), each
            // endless: the launch holds the whole device, and every other guest's kernel waits
            // for room, until this one is stopped. The line tells the test it is queued.
            let k = kit.kernel("endless");
            let fill = Launch::new(&k).grid1(FILL_BLOCKS).block1(32).arg(arg(&kit.out));
            r.note(fill.enqueue(&kit.stream));
            // Time for the driver to start it (a stream's worker, on softcuda), so that the test's
            // next guest queues behind it rather than reaching the device first.
            std::thread::sleep(std::time::Duration::from_millis(100));
            println!("fill launched");
            r.note(kit.stream.synchronize());
            long_loop(&kit, &mut r, 1000);
        }
        "endless-burst" => {
            // A burst of short launches makes the stream collect its next burst into a graph
            // (gpuhost-wasm's burst/); a runaway kernel in that graph must be stopped as a
            // lone one is, with the burst's other kernels, and the stream must go on after.
            let short = kit.kernel("long_loop");
            let burst = |n: u32, r: &mut Report| {
                for _ in 0..n {
                    r.note(Launch::new(&short).scalar(10u32).arg(arg(&kit.out)).enqueue(&kit.stream));
                }
            };
            burst(8, &mut r);
            r.note(kit.stream.synchronize());
            burst(7, &mut r);
            let k = kit.kernel("endless");
            r.note(Launch::new(&k).arg(arg(&kit.out)).enqueue(&kit.stream));
            r.note(kit.stream.synchronize());
            long_loop(&kit, &mut r, 1000);
        }
        "calls" => {
            // Each is stopped at the time limit like `endless`; the guest goes on after both.
            for name in ["nested_calls", "fan_out_calls"] {
                let k = kit.kernel(name);
                kit.run(&mut r, Launch::new(&k).arg(arg(&kit.out)), 1, secret);
            }
            // Spinning threads beside threads at barrier 0, a whole warp and half of one: the
            // stop ends the spinners, and the waiting threads must not hold the GPU after them.
            let k = kit.kernel("spin_at_barrier");
            for split in [32u32, 16] {
                let l = Launch::new(&k).block1(64).scalar(split).arg(arg(&kit.out));
                kit.run(&mut r, l, 1, secret);
            }
            long_loop(&kit, &mut r, 1000);
        }
        "sync-masks" => {
            // Full-mask shfl.sync and bar.warp.sync while half the warp has left (ok), then
            // while it spins (stopped at the limit, the waiting half released).
            for name in ["shfl_after_exit", "shfl_beside_spin", "warpsync_beside_spin"] {
                let k = kit.kernel(name);
                let l = Launch::new(&k).block1(32).scalar(16u32).arg(arg(&kit.out));
                kit.run(&mut r, l, 2, secret);
            }
            long_loop(&kit, &mut r, 1000);
        }
        "mma" => {
            // Tensor-core mma in a warp half of which has left (ok: its answer is undefined
            // but the launch ends), then beside half a warp that spins (stopped at the limit).
            let tensor = must(Module::from_ptx(TENSOR), "load tensor.ptx");
            for name in ["mma_after_exit", "mma_divergent"] {
                let k = must(tensor.kernel(name), name);
                let l = Launch::new(&k).block1(32).scalar(16u32).arg(arg(&kit.out));
                kit.run(&mut r, l, 2, secret);
            }
            long_loop(&kit, &mut r, 1000);
        }
        // ~100 polls of the abort word per thread: long for the sandbox, short for the limit.
        "long" => long_loop(&kit, &mut r, 100_000),
        "deep" => {
            let compiled = must(Module::from_ptx(COMPILED), "load compiled.ptx");
            let c_deep = must(compiled.kernel("c_deep"), "c_deep");
            let l = Launch::new(&c_deep).block1(16).arg(arg(&kit.out)).scalar(5u32);
            if kit.run(&mut r, l, 16, secret).iter().any(|w| *w != 5 + 120) {
                r.note::<()>(Err(Error::Driver("c_deep computed a wrong value".into())));
            }
        }
        "globals" => {
            r.note(Module::from_ptx(HUGE_GLOBALS));
            let used_before = quotas().used_globals_bytes;
            let m = must(Module::from_ptx(GLOBALS), "load globals.ptx");
            let used = quotas().used_globals_bytes - used_before;
            if used < 65536 {
                r.note::<()>(Err(Error::Driver(format!("globals counted as {used} bytes"))));
            }
            let bump = must(m.kernel("bump"), "bump");
            for i in 1..=3u32 {
                kit.run(&mut r, Launch::new(&bump).arg(arg(&kit.out)), 2, secret);
                if words(&kit.out, 2) != [i, 22] {
                    r.note::<()>(Err(Error::Driver("bump computed a wrong value".into())));
                }
            }
            let big = must(m.kernel("big_local"), "big_local");
            // 64 KiB of local memory per thread: 8192 threads are over the harness's limit.
            let l = Launch::new(&big).grid1(8).block1(1024).scalar(3u32);
            r.note(l.arg(arg(&kit.out)).enqueue(&kit.stream));
            let l = Launch::new(&big).block1(4).scalar(65535u32).arg(arg(&kit.out));
            kit.run(&mut r, l, 1, secret);
            if words(&kit.out, 1)[0] != 5 {
                r.note::<()>(Err(Error::Driver("big_local computed a wrong value".into())));
            }
        }
        "skip-copy" => {
            // The rewriter's copy of a kernel without its entry check, named as the host
            // names it: a guest launching it for a big grid would skip the check unbounded.
            r.note(kit.module.kernel("long_loop__gpuhost_skip"));
            long_loop(&kit, &mut r, 1000);
        }
        "fatbin" => {
            // A structurally valid fatbin header around an empty body.
            let mut image = vec![0u8; 64];
            image[..4].copy_from_slice(&0xBA55_ED50u32.to_le_bytes());
            image[6..8].copy_from_slice(&16u16.to_le_bytes());
            image[8..16].copy_from_slice(&48u64.to_le_bytes());
            r.note(Module::from_cubin(&image));
        }
        "flood" => flood(&kit, &mut r),
        "drop-store" => {
            // Endless kernels on two streams, then exit without synchronizing.
            let k = kit.kernel("endless");
            let other = must(Stream::create(), "stream");
            for s in [&kit.stream, &other] {
                r.note(Launch::new(&k).arg(arg(&kit.out)).enqueue(s));
            }
            std::mem::forget(other);
        }
        other => fail(&format!("unknown mode {other}")),
    }
    r
}

/// One thread sums (i * 3 + 1) for i < n; checked here.
fn long_loop(kit: &Kit, r: &mut Report, n: u32) {
    let k = kit.kernel("long_loop");
    let got = kit.run(r, Launch::new(&k).scalar(n).arg(arg(&kit.out)), 1, SECRET_NEVER);
    let want = (0..n).fold(0u32, |s, i| s.wrapping_add(i.wrapping_mul(3).wrapping_add(1)));
    if got[0] != want {
        r.note::<()>(Err(Error::Driver("long_loop computed a wrong value".into())));
    }
}

/// Fills the launches-in-flight quota, drops the stream, and checks the launches stay counted
/// until they end (they do not stop because their stream is gone).
///
/// A closed gate kernel heads the flooded stream, so no flood launch can end before the extra one
/// is tried, whatever the device's speed or the CPU's load (with a fixed flood, the H200 under
/// parallel test threads sometimes finished it first, and nothing was refused). The gate opens
/// with a `buffer.write` of its flag. On NVIDIA a driver call that must wait for the device
/// (allocating page-locked staging did) would wait for the gate itself: so the flag's buffer and
/// the write path (the transfer stream, its staging) are used once before the gate is launched,
/// and gpuhost keeps page-locked staging made ahead (bench/h200-runs/2026-12-01-s4: the first
/// gate version deadlocked until the watchdog's budget).
fn flood(kit: &Kit, r: &mut Report) {
    let k = kit.kernel("long_loop");
    let max = quotas().max_launches_in_flight;
    let stream = must(Stream::create(), "stream");
    let flag = must(Buffer::create(4), "gate flag");
    must(flag.write(0, &0u32.to_le_bytes()), "close the gate");
    // The flood's kernel runs once first: with CUDA's lazy loading its first launch loads it,
    // which can wait for the device, i.e. for the gate below (stopped only by the time limit;
    // a trusted flood's never).
    must(
        Launch::new(&k).scalar(1u32).arg(arg(&kit.out)).enqueue(&stream),
        "warm-up launch",
    );
    must(stream.synchronize(), "warm-up synchronize");
    let gate = kit.kernel("gate");
    must(Launch::new(&gate).arg(arg(&flag)).enqueue(&stream), "gate launch");
    for _ in 1..max {
        let l = Launch::new(&k).scalar(50_000u32).arg(arg(&kit.out));
        must(l.enqueue(&stream), "flood launch");
    }
    r.note(Launch::new(&k).scalar(1u32).arg(arg(&kit.out)).enqueue(&stream));
    // Dropped while the gate still holds every launch: none can have ended, so the count must
    // stay whole (opening the gate first raced the kernels against the drop under load).
    let before_drop = quotas().launches_in_flight;
    drop(stream);
    let after_drop = quotas().launches_in_flight;
    if after_drop != before_drop {
        r.note::<()>(Err(Error::Driver(format!(
            "dropping the stream reset the count: {before_drop} launches in flight, {after_drop} after"
        ))));
    }
    eprintln!("flood: {after_drop} launches in flight after the drop; opening the gate");
    must(flag.write(0, &1u32.to_le_bytes()), "open the gate");
    // They retire as they finish; then launching works again. Bounded, so that launches never
    // retired fail the test with their count instead of hanging it: past the watchdog's worst
    // case for this flood (its first segment may run FENCE_EVERY × max_kernel_time, 80 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let left = quotas().launches_in_flight;
        if left == 0 {
            break;
        }
        if std::time::Instant::now() > deadline {
            r.note::<()>(Err(Error::Driver(format!(
                "{left} launches still counted in flight 120 s after the gate opened"
            ))));
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    long_loop(kit, r, 10);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let hex = |i: usize| {
        let s = args.get(i).map(String::as_str).unwrap_or("0");
        u64::from_str_radix(s.trim_start_matches("0x"), 16)
            .unwrap_or_else(|_| fail(&format!("argument {i} ({s}) is not hex")))
    };
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    if mode == "victim" {
        victim(hex(2) as u32, hex(3));
    }
    let secret = hex(3) as u32;
    let r = attack(mode, hex(2), secret);
    println!(
        "result {mode} outcome={} seen={}",
        r.outcomes.join("+"),
        r.seen
    );
}
