//! The PTX sandbox on ptxvm: rewritten kernels give the same results as the originals, and
//! hostile kernels stay inside their arena (a separate victim allocation is never touched),
//! report fenced accesses in the control block, and stop when the abort epoch changes.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use ptxvm::sandbox::{Policy, Sandboxed, sandbox};
use ptxvm::{Fault, Launch, LaunchStats, Memory, Module};

use crate::launch::launch;

/// The kernel arguments of the sandbox tests: the harness's, packed the same way.
pub use super::harness::Arg;
use super::harness::pack;

/// Bytes of the guest's arena in these tests.
pub const ARENA: usize = 1 << 20;
/// Arena alignment the contract promises (64 KiB).
const ARENA_ALIGN: usize = 64 << 10;
const VICTIM: usize = 4096;
/// Launch tag (high half of the `launch` hidden parameter) these tests use.
const TAG: u32 = 0x7a9;
/// Offset of the fault word in the control block.
pub const FAULT: usize = ptxvm::sandbox::CTL_FAULT_TAG as usize;

struct Region {
    ptr: *mut u8,
    layout: Layout,
}

impl Region {
    fn new(len: usize, align: usize) -> Region {
        let layout = Layout::from_size_align(len, align).unwrap();
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Region { ptr, layout }
    }
    fn addr(&self) -> u64 {
        self.ptr as u64
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
    fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr()
            && addr
                .checked_add(len)
                .is_some_and(|e| e <= self.addr() + self.len() as u64)
    }
    fn bytes(&self) -> &[u8] {
        // SAFETY: the region is live and `len` bytes long; no launch runs while tests read it.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len()) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` excludes other users.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len()) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// Device memory of one guest: its arena, a victim allocation of another tenant, and the
/// guest's control block. Records whether the VM ever translated a victim address.
pub struct GuestMem {
    arena: Region,
    victim: Region,
    ctl: Region,
    victim_touched: AtomicBool,
    /// Next free arena offset.
    next: usize,
}

// SAFETY: the regions are only touched through `translate`'s pointers by the VM (with atomics
// for device memory) and by `&mut self` methods, never both at once.
unsafe impl Sync for GuestMem {}

// SAFETY: every pointer lies inside one `Region` (checked by `contains` for the whole range),
// a raw allocation freed only when `GuestMem` drops, which the launch's borrow of it prevents;
// its bytes are initialised at creation; the identity mapping is exposed provenance of the
// allocation. The tests take `bytes`/`bytes_mut` slices only between launches; during one they
// touch the control block only through `AtomicU32` references, which alias the VM's atomics
// soundly.
unsafe impl Memory for GuestMem {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        if self.victim.contains(addr, 1) {
            self.victim_touched.store(true, Ordering::SeqCst);
        }
        for r in [&self.arena, &self.victim, &self.ctl] {
            if r.contains(addr, len) {
                return Some(addr as *mut u8);
            }
        }
        None
    }

    // Whole regions, so the VM never probes neighbouring memory (which could be the victim).
    fn allocation(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        if self.victim.contains(addr, 1) {
            self.victim_touched.store(true, Ordering::SeqCst);
        }
        [&self.arena, &self.victim, &self.ctl]
            .into_iter()
            .find(|r| r.contains(addr, 1))
            .map(|r| (r.addr(), r.len() as u64, r.ptr))
    }
}

impl GuestMem {
    pub fn new() -> GuestMem {
        let mut victim = Region::new(VICTIM, 256);
        for (i, b) in victim.bytes_mut().iter_mut().enumerate() {
            *b = b"VICTIM-SECRET-42"[i % 16];
        }
        GuestMem {
            arena: Region::new(ARENA, ARENA_ALIGN),
            victim,
            ctl: Region::new(ptxvm::sandbox::CTL_BYTES as usize, 64),
            victim_touched: AtomicBool::new(false),
            next: 0,
        }
    }
    pub fn base(&self) -> u64 {
        self.arena.addr()
    }
    pub fn victim(&self) -> u64 {
        self.victim.addr()
    }
    pub fn ctl(&self) -> u64 {
        self.ctl.addr()
    }
    /// Allocates `bytes` (256-aligned) in the arena.
    pub fn alloc(&mut self, bytes: usize) -> u64 {
        let off = self.next.div_ceil(256) * 256;
        assert!(off + bytes <= ARENA, "test arena exhausted");
        self.next = off + bytes;
        self.base() + off as u64
    }
    pub fn write(&mut self, addr: u64, data: &[u8]) {
        let off = (addr - self.base()) as usize;
        self.arena.bytes_mut()[off..off + data.len()].copy_from_slice(data);
    }
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let off = (addr - self.base()) as usize;
        self.arena.bytes()[off..off + len].to_vec()
    }
    pub fn ctl_word(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= ptxvm::sandbox::CTL_BYTES as usize);
        // SAFETY: the control block is 64-aligned and CTL_BYTES long; AtomicU32 has
        // u32's layout.
        unsafe { &*(self.ctl.ptr.add(off) as *const AtomicU32) }
    }
    /// The arena's 4-byte word at `addr`, for reading while a launch runs.
    pub fn arena_word(&self, addr: u64) -> &AtomicU32 {
        let off = (addr - self.base()) as usize;
        assert!(off.is_multiple_of(4) && off + 4 <= ARENA);
        // SAFETY: inside the arena (checked), 4-aligned (the arena is 64 KiB-aligned); AtomicU32
        // has u32's layout, and the VM touches device memory with atomics.
        unsafe { &*(self.arena.ptr.add(off) as *const AtomicU32) }
    }
    /// Victim unchanged and never translated; the arena holds no victim bytes.
    pub fn assert_victim_safe(&self) {
        assert!(
            !self.victim_touched.load(Ordering::SeqCst),
            "the VM translated a victim address"
        );
        for (i, b) in self.victim.bytes().iter().enumerate() {
            assert_eq!(*b, b"VICTIM-SECRET-42"[i % 16], "victim byte {i} changed");
        }
        let arena = self.arena.bytes();
        assert!(
            !arena.windows(8).any(|w| w == b"VICTIM-S"),
            "victim data leaked into the arena"
        );
    }
}

/// Launch geometry.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dyn_shared: u32,
}

impl Shape {
    pub fn linear(grid: u32, block: u32) -> Shape {
        Shape {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            dyn_shared: 0,
        }
    }
}

/// Everything a sandboxed launch needs besides the user arguments.
pub struct Hidden {
    pub globals: u64,
    pub epoch: u32,
}

fn launch_raw(
    m: &Module,
    kernel: usize,
    shape: Shape,
    params: &[u8],
    globals: &[u64],
    mem: &GuestMem,
) -> Result<LaunchStats, Fault> {
    // A safety net, not a timing assertion: a broken abort poll fails the test with Timeout
    // instead of hanging it.
    let deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(120));
    let l = Launch {
        grid: shape.grid,
        block: shape.block,
        dynamic_shared_bytes: shape.dyn_shared,
        globals,
        deadline,
        ..launch(kernel, params)
    };
    ptxvm::launch(m, &l, mem)
}

/// Runs kernel `name` of a rewritten module with the five hidden arguments appended.
pub fn run_sandboxed(
    m: &Module,
    name: &str,
    shape: Shape,
    args: &[Arg],
    hidden: &Hidden,
    mem: &GuestMem,
) -> Result<LaunchStats, Fault> {
    let at = (mem.base(), ARENA as u64);
    run_sandboxed_flagged(m, name, shape, args, hidden, mem, at, 0)
}

/// `run_sandboxed` with the arena's `base` and `size` hidden arguments given, and `flags`
/// (`ptxvm::sandbox::LAUNCH_SKIPS_ENTRY_READ`) set in the hidden `launch` value.
#[allow(clippy::too_many_arguments)]
pub fn run_sandboxed_flagged(
    m: &Module,
    name: &str,
    shape: Shape,
    args: &[Arg],
    hidden: &Hidden,
    mem: &GuestMem,
    (base, size): (u64, u64),
    flags: u64,
) -> Result<LaunchStats, Fault> {
    let k = m
        .kernel_index(name)
        .unwrap_or_else(|| panic!("kernel {name}"));
    let mut all = args.to_vec();
    all.extend([
        Arg::U64(base),
        Arg::U64(size),
        Arg::U64(hidden.globals),
        Arg::U64(mem.ctl()),
        Arg::U64(flags | u64::from(TAG) << 32 | u64::from(hidden.epoch)),
    ]);
    let params = pack(&m.kernels()[k], &all);
    launch_raw(m, k, shape, &params, &[], mem)
}

/// Rewrites and loads `ptx`; the rewritten text must load in ptxvm.
pub fn load_sandboxed(ptx: &str) -> (Sandboxed, Module) {
    load_sandboxed_with(ptx, &Policy::default())
}

/// [`load_sandboxed`] under `policy`.
pub fn load_sandboxed_with(ptx: &str, policy: &Policy) -> (Sandboxed, Module) {
    let s = sandbox(ptx, policy).unwrap_or_else(|e| panic!("sandbox: {e}"));
    let m = Module::load(&s.ptx).unwrap_or_else(|e| panic!("rewritten PTX loads: {e}\n{}", s.ptx));
    (s, m)
}

fn manifest() -> std::path::PathBuf {
    std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap())
}

/// Every PTX module the differential test runs: the corpus, the example guests, the fixture.
pub fn all_modules() -> Vec<std::path::PathBuf> {
    let root = manifest().join("../..");
    let mut out = Vec::new();
    for dir in ["corpus/clang", "corpus/nvcc", "examples/guests/kernels"] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "ptx") {
                    out.push(e.path());
                }
            }
        }
    }
    out.push(manifest().join("tests/fixtures/kernels.ptx"));
    out.sort();
    out
}

/// Launch geometry for a corpus kernel (what its CUDA source assumes).
fn shape_for(kernel: &str) -> Shape {
    match kernel {
        "matmul_tiled" | "matmul" => Shape {
            grid: [2, 2, 1],
            block: [16, 16, 1],
            dyn_shared: 0,
        },
        "transpose" => Shape {
            grid: [2, 2, 1],
            block: [32, 8, 1],
            dyn_shared: 0,
        },
        "softmax_rows" | "layer_norm" => Shape::linear(4, 128),
        "reduce_f64_dynamic" => Shape {
            dyn_shared: 1024,
            ..Shape::linear(2, 128)
        },
        "reverse_dyn" => Shape {
            dyn_shared: 1024,
            ..Shape::linear(1, 256)
        },
        "reduce_warp" => Shape::linear(2, 192),
        "divergent" => Shape::linear(2, 160),
        _ => Shape::linear(2, 256),
    }
}

/// Bytes of each buffer argument in the differential test.
const BUF: usize = 64 << 10;

/// Runs one kernel unrewritten and rewritten on the same inputs; returns both outputs.
fn differential(orig: &Module, sbx: &Module, layout: &ptxvm::sandbox::GlobalsLayout, name: &str) {
    let mut mem = GuestMem::new();
    let ki = orig.kernel_index(name).unwrap();
    let info = &orig.kernels()[ki];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ name.len() as u64;
    let mut bufs = Vec::new();
    let args: Vec<Arg> = info
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| match (p.size, name, i) {
            (8, "oob_write", 1) => Arg::U64(3),
            (8, _, _) => {
                let a = mem.alloc(BUF);
                bufs.push(a);
                Arg::U64(a)
            }
            (4, _, _) => Arg::U32(64),
            (s, _, _) => panic!("{name}: unexpected {s}-byte parameter"),
        })
        .collect();
    let mut input = vec![0u8; BUF];
    let fill = |mem: &mut GuestMem, rng: &mut u64, input: &mut Vec<u8>| {
        for (k, &b) in bufs.iter().enumerate() {
            for (j, x) in input.iter_mut().enumerate() {
                *rng ^= *rng << 13;
                *rng ^= *rng >> 7;
                *rng ^= *rng << 17;
                // Small non-negative values keep data-dependent loops short.
                *x = if j % 4 == 3 {
                    0
                } else {
                    (*rng >> 32) as u8 & 0x3f
                };
            }
            let _ = k;
            mem.write(b, input);
        }
    };
    // Globals of the original module: one arena allocation each, from its initialiser.
    let gaddrs: Vec<u64> = orig
        .globals()
        .iter()
        .map(|g| {
            let a = mem.alloc(g.size as usize);
            if !g.init.is_empty() {
                mem.write(a, &g.init);
            }
            a
        })
        .collect();
    let seed = rng;
    fill(&mut mem, &mut rng, &mut input);
    let shape = shape_for(name);
    let params = pack(info, &args);
    launch_raw(orig, ki, shape, &params, &gaddrs, &mem)
        .unwrap_or_else(|f| panic!("original {name}: {f}"));
    let want: Vec<Vec<u8>> = bufs.iter().map(|&b| mem.read(b, BUF)).collect();

    rng = seed;
    fill(&mut mem, &mut rng, &mut input);
    let globals = if layout.size > 0 {
        let g = mem.alloc(layout.size as usize);
        mem.write(g, &layout.init);
        g
    } else {
        0
    };
    let hidden = Hidden { globals, epoch: 5 };
    mem.ctl_word(0).store(5, Ordering::SeqCst);
    run_sandboxed(sbx, name, shape, &args, &hidden, &mem)
        .unwrap_or_else(|f| panic!("rewritten {name}: {f}"));
    for (k, &b) in bufs.iter().enumerate() {
        assert!(
            mem.read(b, BUF) == want[k],
            "{name}: buffer {k} differs after the rewrite"
        );
    }
    assert_eq!(
        mem.ctl_word(FAULT).load(Ordering::SeqCst),
        0,
        "{name}: a legal kernel was fenced"
    );
    mem.assert_victim_safe();
}

#[test]
fn every_corpus_example_and_fixture_kernel_gives_the_same_results_rewritten() {
    let files = all_modules();
    assert!(files.len() >= 20, "found {} modules", files.len());
    let (mut kernels, mut refused) = (0, 0);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let orig = Module::load(&text).unwrap();
        // Device printf and assert call functions the module does not define (vprintf,
        // __assertfail): a sandboxed module may not, and the refusal names the function.
        let externs: Vec<&str> = ["vprintf", "__assertfail"]
            .into_iter()
            .filter(|n| {
                text.lines()
                    .any(|l| l.trim_start().starts_with(".extern .func") && l.contains(n))
            })
            .collect();
        if !externs.is_empty() {
            let e = sandbox(&text, &Policy::default()).expect_err("an extern call is refused");
            assert!(
                matches!(e, ptxvm::Error::Refused { .. })
                    && externs.iter().any(|n| e.to_string().contains(n)),
                "{}: {e}",
                f.display()
            );
            refused += 1;
            continue;
        }
        // The default policy, and one that polls on every back-edge (polls never change
        // results).
        for interval in [Policy::default().poll_interval, 1] {
            let policy = Policy {
                poll_interval: interval,
                ..Policy::default()
            };
            let s = sandbox(&text, &policy).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let sbx = Module::load(&s.ptx).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert_eq!(s.kernels.len(), orig.kernels().len(), "{}", f.display());
            for k in orig.kernels() {
                let sk = s.kernels.iter().find(|x| x.name == k.name).unwrap();
                assert_eq!(sk.user_params, k.params.len());
                differential(&orig, &sbx, &s.globals, &k.name);
                kernels += 1;
            }
        }
    }
    assert!(kernels >= 80, "ran {kernels} kernels");
    assert!(
        refused <= 2,
        "{refused} modules refused: only the device-io ones should be"
    );
}

#[test]
fn a_skip_copy_counts_its_start_unless_it_never_polls_in_any_corpus_module() {
    let (mut uncounted, mut counted) = (0, 0);
    for f in all_modules() {
        let text = std::fs::read_to_string(&f).unwrap();
        let Ok(s) = sandbox(&text, &Policy::default()) else {
            continue;
        };
        assert_uncounted_copies_never_poll(&s);
        for k in s.kernels.iter().filter(|k| k.skip_copy.is_some()) {
            *if k.copy_counts_start {
                &mut counted
            } else {
                &mut uncounted
            } += 1;
        }
    }
    // Both kinds occur, so the check above checked something of each.
    assert!(
        uncounted > 5 && counted > 5,
        "{uncounted} uncounted, {counted} counted"
    );
}

#[test]
fn printing_an_unmodified_module_round_trips() {
    for f in all_modules() {
        let text = std::fs::read_to_string(&f).unwrap();
        let printed = ptxvm::sandbox::reprint(&text).unwrap();
        let a = Module::load(&text).unwrap();
        let b = Module::load(&printed)
            .unwrap_or_else(|e| panic!("{}: reprinted text loads: {e}", f.display()));
        assert_eq!(a.kernels(), b.kernels(), "{}", f.display());
        assert_eq!(a.globals(), b.globals(), "{}", f.display());
        // Printing is a fixed point after one round.
        assert_eq!(ptxvm::sandbox::reprint(&printed).unwrap(), printed);
    }
}

/// The printed text of function `name` in rewritten PTX: from its header to its closing brace.
fn function_text<'a>(ptx: &'a str, name: &str) -> Option<&'a str> {
    let at = [".entry ", ".func "]
        .iter()
        .find_map(|k| ptx.find(&format!("{k}{name}(")))
        .or_else(|| ptx.find(&format!(" {name}(")))?;
    let end = ptx[at..].find("\n}\n").map_or(ptx.len(), |e| at + e + 3);
    Some(&ptx[at..end])
}

/// The functions `text` calls.
fn callees(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = if l.starts_with('@') {
                l.split_once(' ')?.1
            } else {
                l
            };
            let rest = l.strip_prefix("call")?;
            let rest = rest.trim_start_matches(".uni").trim_start();
            // `call (ret), f, (args);` or `call f, (args);` or `call f;`
            let rest = match rest.strip_prefix('(') {
                Some(r) => r
                    .split_once(')')?
                    .1
                    .trim_start()
                    .strip_prefix(',')?
                    .trim_start(),
                None => rest,
            };
            rest.split([',', ';', ' ']).next().filter(|n| !n.is_empty())
        })
        .collect()
}

/// A kernel whose skip copy counts no start (`SandboxedKernel::copy_counts_start`) must have a
/// copy that never reads the abort epoch, itself or in a function it calls: a launch of it
/// could otherwise run on unseen by the watchdog. And every other skip copy counts.
pub fn assert_uncounted_copies_never_poll(s: &Sandboxed) {
    const EPOCH_READ: &str = "%__sbx_e, [%__sbx_ctl]";
    const COUNT: &str = "red.global.add.u32 [%__sbx_a+";
    for k in &s.kernels {
        let Some(copy) = &k.skip_copy else { continue };
        let text = function_text(&s.ptx, copy).unwrap_or_else(|| panic!("no {copy} in\n{}", s.ptx));
        if k.copy_counts_start {
            assert!(text.contains(COUNT), "{copy} counts no start:\n{text}");
            continue;
        }
        assert!(!text.contains(COUNT), "{copy} counts a start");
        assert!(
            !text.contains(EPOCH_READ),
            "{copy} polls, yet counts no start:\n{text}"
        );
        for callee in callees(text) {
            let body = function_text(&s.ptx, callee).unwrap_or_else(|| panic!("no {callee}"));
            assert!(
                !body.contains(EPOCH_READ),
                "{copy} calls {callee}, which polls, yet counts no start"
            );
        }
    }
}
