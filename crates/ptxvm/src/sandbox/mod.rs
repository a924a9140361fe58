//! The PTX sandbox: rewrites an untrusted module so that every kernel stays inside the memory
//! its launch is given, polls an abort word on loop back-edges and calls, and contains nothing outside an
//! allow-list (docs/ARCHITECTURE.md, "Isolation"; the contract is plan/isolation.md §1).
//!
//! Pipeline: ptxvm's lexer and parser build the AST; `version` gives loops bounded only at run
//! time a poll-free copy behind a check; `ifconvert` predicates short guarded blocks; `allow`
//! refuses what is not allowed and
//! builds the call graph; `globals` lays module `.global`/`.const` variables out in a per-Store
//! block; `rewrite` (with `fence` and `poll`) rewrites every function; `print` turns the AST
//! back into PTX text that NVIDIA's JIT and ptxvm both accept.
//!
//! ABI: every `.entry` gets five `.param .u64` after the user's parameters, named
//! `__gpuhost_sbx_{base,size,globals,ctl,launch}` (see [`HIDDEN_PARAMS`]). Device functions get
//! those five plus four internal ones (the caller's shared and local windows) that the host never
//! sees, unless they are lean: a device function that neither reads a hidden value once
//! rewritten (no fenced access, no poll, no relocated global) nor calls one that does keeps its
//! own signature and gets no prologue. The host must pass `size >= MIN_ARENA` (64 KiB) and a
//! `base` aligned to `MIN_ALIGN` (32 bytes): rewritten kernels rely on it and do not check it
//! (gpuhost-wasm checks its arenas once, when a guest gets one), unless
//! [`Policy::check_arena_at_entry`] asks for the check in every thread.
//!
//! `launch` holds the launch's epoch (bits 0–31), its tag (bits 32–47) and its start counter
//! (bits 48–55, [`launch_value`]); bit 63 ([`LAUNCH_SKIPS_ENTRY_READ`]) lets a launch small
//! enough for its kernel's [`SandboxedKernel::first_poll_span`] ([`skips_entry_read`]) skip the
//! entry's read of the abort epoch. Every launch counts its start in its counter
//! ([`CTL_STARTED`], [`CTL_STARTED_AT`]), so the host can tell a launch that runs from one still
//! queued, except a launch of a skip copy that never polls
//! ([`SandboxedKernel::copy_counts_start`]).

mod allow;
mod bounded;
mod cp_async;
mod defer;
mod fence;
mod forward;
mod globals;
mod group;
mod hash;
mod ifconvert;
mod jumps;
mod lean;
mod matrix;
mod mbarrier;
mod names;
mod params;
mod poll;
pub(crate) mod print;
mod put;
mod report;
mod rewrite;
pub use lean::LEAN_SPAN;
mod bounds;
mod minmax;
mod statics;
mod version;
mod window;

use crate::ast;
use crate::error::Error;

/// Smallest `size` a launch may pass: with less, a kernel sets the fault word and exits at
/// entry (the arena base is 64 KiB-aligned, so the host maps at least this much).
pub const MIN_ARENA: u64 = 64 << 10;

/// Alignment the arena base must have (the widest access): with a less aligned base, a kernel
/// sets the fault word and exits at entry (fences align addresses down, which must not take
/// them below the base).
pub const MIN_ALIGN: u64 = 32;

/// Where kernels read the abort epoch: `ctl` + this.
pub const CTL_EPOCH: i64 = 0;
/// Where a kernel that made a fenced access writes its launch's tag: `ctl` + this. The host
/// passes a `ctl` whose words kernels write lie this far from those they read, on other pages
/// (gpuhost's control block: its device window), so neither side's accesses move the other's.
pub const CTL_FAULT_TAG: i64 = 2 << 20;
/// Where a thread stopped by an epoch change in the middle of a loop writes its launch's tag,
/// if the word is 0 (the host clears it before it stops a guest): names the kernel that ran.
pub const CTL_STOPPED_TAG: i64 = CTL_FAULT_TAG + 4;

/// Where launches count their starts: `ctl` + this + 4 × the launch's start counter (bits
/// 48–55 of `launch`). Each thread with `%tid.x == 0` of each block with `%ctaid.x == 0` adds 1
/// there first thing, before the epoch check, so every launch that reaches the device counts
/// [`launch_starts`] (one for a launch whose grid and blocks are one-dimensional), stopped or
/// not: testing only `x` spares the other threads four special-register reads (worth 0.003 of
/// the graph-replayed geomean on the H100, session 44: the count's cost is a short kernel's
/// first access to the control block, hence `SandboxedKernel::copy_counts_start`). The host
/// gives each stream its own counter and knows how many launches it issued on it: a counter
/// that has not passed the launches before a stream's front one says that launch is still
/// queued (behind other work that holds the device), and its GPU time has not begun. In the
/// control block's host window page (kernels' atomics stay on the device), past the words the
/// host writes; the host reads a counter only before it stops a launch, since its read moves
/// the page to the host.
pub const CTL_STARTED: i64 = 2048;
/// Where the same thread stores `%globaltimer` as its launch starts: `ctl` + this + 8 × the
/// start counter, in the device window (host memory, which the host reads at no cost). Each
/// launch of a stream stores a new value, so a change tells the host, within its tick, that
/// the stream's next launch began; [`CTL_STARTED`] settles what a change cannot (whether a
/// launch began before the host first looked).
pub const CTL_STARTED_AT: i64 = CTL_FAULT_TAG + 2048;
/// Start counters per control block ([`CTL_STARTED`]).
pub const START_COUNTERS: u32 = 256;
/// Bytes from `ctl` that a launch may touch: the host must map at least this much there (the
/// last of them are the start counters' time words).
pub const CTL_BYTES: u64 = CTL_STARTED_AT as u64 + 8 * START_COUNTERS as u64;
/// How much a launch of `grid` blocks of `block` threads adds to its start counter
/// ([`CTL_STARTED`]): its threads with `%tid.x == 0` in blocks with `%ctaid.x == 0`, modulo
/// 2^32 as the counter wraps.
pub fn launch_starts(grid: [u32; 3], block: [u32; 3]) -> u32 {
    grid[1]
        .wrapping_mul(grid[2])
        .wrapping_mul(block[1])
        .wrapping_mul(block[2])
}

/// The largest launch tag (bits 32–47 of `launch`).
pub const MAX_TAG: u32 = 0xffff;

/// The hidden `launch` value of a launch under `epoch` of the kernel tagged `tag` (at most
/// [`MAX_TAG`]), counting its start in counter `counter` (below [`START_COUNTERS`]), with
/// `flags` ([`LAUNCH_SKIPS_ENTRY_READ`] or 0). Out-of-range fields are cut to their bits.
pub fn launch_value(epoch: u32, tag: u32, counter: u32, flags: u64) -> u64 {
    let tag = u64::from(tag & MAX_TAG);
    let counter = u64::from(counter % START_COUNTERS);
    u64::from(epoch) | tag << 32 | counter << 48 | (flags & LAUNCH_SKIPS_ENTRY_READ)
}

/// Bit of the hidden `launch` value that skips the entry's epoch read, in kernels whose
/// [`SandboxedKernel::first_poll_span`] is at most [`SKIP_ENTRY_READ_WORK`] (others read it
/// anyway). That read, compared before the first store, is most of what the sandbox costs a
/// short kernel on the H200 (graph-replayed geomean 1.052 with a uniform branch over it, 1.032
/// when skipping launches run the kernel's skip copy instead; bench/RESULTS.md session 18). It
/// lets a launch queued behind a stop do nothing; a launch that skips it runs each thread until
/// its first poll instead, so the host sets the bit only where that is cheap
/// ([`skips_entry_read`]).
pub const LAUNCH_SKIPS_ENTRY_READ: u64 = 1 << 63;

/// The most work, in instructions over all threads, that a launch which skips the entry read
/// may do when it runs after a stop: 2^28, about 8 µs of an H200 (3.3 * 10^13 lane-instructions
/// a second), so even a full quota of 1,024 such launches queued behind a stop ends within
/// about 10 ms. The bound is threads times [`SandboxedKernel::first_poll_span`].
pub const SKIP_ENTRY_READ_WORK: u64 = 1 << 28;

/// What an entry's skip copy adds to its name ([`SandboxedKernel::skip_copy`]).
pub const SKIP_COPY_SUFFIX: &str = "__gpuhost_skip";

/// [`LAUNCH_SKIPS_ENTRY_READ`] for a launch of `threads` threads of a kernel whose
/// [`SandboxedKernel::first_poll_span`] is `span`, when the launch's work before its threads
/// poll is within [`SKIP_ENTRY_READ_WORK`]; else 0 (the launch reads the epoch at entry).
pub fn skips_entry_read(span: u64, threads: u64) -> u64 {
    if threads.saturating_mul(span) <= SKIP_ENTRY_READ_WORK {
        LAUNCH_SKIPS_ENTRY_READ
    } else {
        0
    }
}

/// Names (after `__gpuhost_sbx_`) of the hidden kernel parameters, in order.
pub const HIDDEN_PARAMS: [&str; 5] = ["base", "size", "globals", "ctl", "launch"];

/// Tuning of the rewrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Back-edges taken between two polls of the abort word, per thread. Power of two.
    pub poll_interval: u32,
    /// Give loops bounded only at run time a poll-free copy, entered after a check that the loop
    /// is short (version.rs). On by default; off only to measure what it buys.
    pub version_loops: bool,
    /// Turn short guarded blocks into predicated instructions before the rewrite, so that ptxas
    /// still issues their loads back to back once they are fenced (ifconvert.rs). On by default;
    /// off only to measure what it buys.
    pub if_convert: bool,
    /// Every thread checks at entry that `base` is [`MIN_ALIGN`]-aligned and `size` at least
    /// [`MIN_ARENA`], and reports a fenced access and exits if not. Off by default: the host
    /// guarantees both (they are properties of the arena, checked once), and the check cost
    /// short kernels 3% on the H200 (session 16). On for hosts that cannot promise them.
    pub check_arena_at_entry: bool,
    /// Loop-free kernels compare the epoch right after reading it, at entry, rather than
    /// before their first effect: their launches that skip the read ([`LAUNCH_SKIPS_ENTRY_READ`])
    /// then carry only a compare that never waits, ahead of all their code. On by default;
    /// off only to measure what it buys.
    pub early_loop_free_check: bool,
    /// Largest rewritten module: the text the driver's JIT is handed, whose time grows with it.
    /// Checked as the text is put together, function by function; past it, the rest is only
    /// measured (one function's text at a time), and the module refused. A module's text grows
    /// 4-5 times in the corpus, and up to about 22 times for a hostile shape (a chain of 8,000
    /// calls: 1.3 MB in, 29 MB out). Default 64 MiB.
    pub max_output_bytes: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            poll_interval: 1024,
            version_loops: true,
            if_convert: true,
            check_arena_at_entry: false,
            early_loop_free_check: true,
            max_output_bytes: 64 << 20,
        }
    }
}

/// A rewritten module.
#[derive(Debug, Clone)]
pub struct Sandboxed {
    /// Rewritten PTX; NVIDIA's JIT (sm_90) and ptxvm accept it.
    pub ptx: String,
    /// One per `.entry`, in source order.
    pub kernels: Vec<SandboxedKernel>,
    /// The module's relocated `.global`/`.const` variables.
    pub globals: GlobalsLayout,
}

/// What the host needs to know about one rewritten kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxedKernel {
    /// Entry name.
    pub name: String,
    /// Count of the user's parameters (the hidden ones follow).
    pub user_params: usize,
    /// Declared `.local` bytes along the deepest call chain.
    pub local_bytes_per_thread: u64,
    /// Bytes of static `.shared` variables the kernel and its callees use.
    pub static_shared_bytes: u64,
    /// Neither the kernel nor any function it calls has a loop, and it may skip the entry read
    /// (its `first_poll_span` is within [`SKIP_ENTRY_READ_WORK`]): such a kernel compares the
    /// epoch at once, behind a uniform branch, instead of before its first store.
    pub loop_free: bool,
    /// An upper bound on the instructions one thread runs before it first polls or ends, when
    /// it skips the entry's epoch read ([`skips_entry_read`]); `u64::MAX` for a kernel that
    /// never skips it (one that sleeps, or whose bound is past [`SKIP_ENTRY_READ_WORK`]).
    pub first_poll_span: u64,
    /// The name of this kernel's skip copy in the rewritten module: the same kernel without the
    /// entry's epoch read and the compares before its stores, for the launches that may skip
    /// them ([`skips_entry_read`]), which then pay nothing for the entry check (about 0.02 of
    /// the graph-replayed geomean on the H200, session 18: a uniform branch over the read cost
    /// that much). None when no launch may skip, or the name is taken.
    pub skip_copy: Option<String>,
    /// Whether a launch of the skip copy counts its start ([`CTL_STARTED`]): not when neither
    /// the kernel nor anything it calls ever polls, so that a thread of it runs a bounded
    /// straight path and ends (such a launch counts nothing, [`launch_starts`] aside). The
    /// kernel itself always counts.
    pub copy_counts_start: bool,
}

/// The per-Store block holding a module's relocated `.global` and `.const` variables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GlobalsLayout {
    /// Bytes of the block (0: none). May be huge: the host checks it against its quota.
    pub size: u64,
    /// Alignment the block needs (>= 16).
    pub align: u64,
    /// Initial image: `init.len() <= size`; bytes past `init.len()` are zero.
    pub init: Vec<u8>,
    /// Where each relocated variable lives in the block, in source order (what
    /// `cuModuleGetGlobal` would give for an unrewritten module).
    pub vars: Vec<GlobalSlot>,
}

/// One relocated `.global`/`.const` variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalSlot {
    /// Name as declared.
    pub name: String,
    /// Byte offset in the globals block.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Rewrites PTX so that every kernel is confined. Refuses with `Error::Refused { line, what }`
/// anything outside the allow-list; malformed text gives the parser's errors.
pub fn sandbox(ptx: &str, policy: &Policy) -> Result<Sandboxed, Error> {
    if policy.poll_interval == 0 || !policy.poll_interval.is_power_of_two() {
        return Err(Error::Refused {
            line: 0,
            what: format!(
                "poll_interval {} is not a power of two; pick 1, 2, 4, … (default 1024)",
                policy.poll_interval
            ),
        });
    }
    let tokens = crate::lex::lex(ptx)?;
    let mut module = crate::parse::parse(&tokens)?;
    let out = rewrite_module(&mut module, ptx, policy);
    // The tree, through the parser's note of what in it owns memory (drop.rs).
    module.drop_lean();
    out
}

/// [`sandbox`] of the parsed `module`, whose text is `ptx`.
fn rewrite_module(
    module: &mut ast::Module<'_>,
    ptx: &str,
    policy: &Policy,
) -> Result<Sandboxed, Error> {
    let copies = if policy.version_loops {
        version::apply(module, ptx, policy.poll_interval)
    } else {
        Default::default()
    };
    if policy.if_convert {
        ifconvert::apply(module);
    }
    let module: &ast::Module<'_> = module;
    let (layout, offsets) = globals::layout(module)?;
    let mut info = allow::analyse(module, offsets, policy)?;
    info.copies = copies;
    // A device function can become lean once its callees are (its counted loops then need no
    // poll); the call graph is acyclic, so this settles within its depth.
    let mut known = hash::HashMap::default();
    loop {
        let (lean, spans) = lean::functions(&info, module, &mut known)?;
        if lean == info.lean {
            info.lean_spans = spans;
            break;
        }
        info.lean = lean;
    }
    info.settle_entries(module);
    let mut kernels = Vec::new();
    // Each function printed once rewritten, into the output itself (its skip copy repeats its
    // text from there), and its rewrite dropped before the next. Sized for the corpus's
    // growth (2-10 times; growing it copies all of it): hostile shapes grow it further, up to
    // the policy's limit. What is not written is address space, not memory.
    let mut text =
        String::with_capacity(ptx.len().saturating_mul(10).min(policy.max_output_bytes) + 4096);
    print::header(&mut text, module, |v| v.space == ast::Space::Shared);
    // Past the limit, the rest is still rewritten and printed, one function at a time into
    // `past`, for the same errors as within it and the size the refusal gives.
    let (mut past, mut over) = (String::new(), 0usize);
    // The module's function names, gathered once an entry asks for a skip copy's name.
    let mut taken = None;
    for f in &module.funcs {
        let mut copy = None;
        if f.is_entry && f.body.is_some() {
            copy = skip_copy_name(module, f, &info, &mut taken);
            kernels.push(SandboxedKernel {
                name: f.name.to_string(),
                user_params: f.params.len(),
                local_bytes_per_thread: info.local_bytes(&f.name),
                static_shared_bytes: info.static_shared(f),
                loop_free: info.loop_free(f),
                first_poll_span: info.first_poll_span(f),
                skip_copy: copy.clone(),
                copy_counts_start: true,
            });
        }
        let r = rewrite::func(&info, f, copy.as_deref())?;
        if let Some(k) = kernels
            .last_mut()
            .filter(|_| f.is_entry && f.body.is_some())
        {
            k.copy_counts_start = r.copy_counts_start;
        }
        let body = r.body.as_ref().map(|(s, b)| (s.as_slice(), b.as_slice()));
        let out = if text.len() > policy.max_output_bytes {
            &mut past
        } else {
            &mut text
        };
        // The kernel, then its skip copy right after it.
        out.push('\n');
        print::rewritten(out, ptx, (f, r.hidden), body, copy.as_deref())?;
        over += past.len();
        past.clear();
    }
    if text.len() > policy.max_output_bytes {
        let size = text.len() + over;
        return Err(Error::Refused {
            line: 0,
            what: format!(
                "the rewritten module would be about {} MiB, over the sandbox's {} MiB (its \
                 fences, polls and kernel copies grow a text 4-5 times, and some shapes, like \
                 long call chains, 20 times); split the module",
                size >> 20,
                policy.max_output_bytes >> 20
            ),
        });
    }
    Ok(Sandboxed {
        ptx: text,
        kernels,
        globals: layout,
    })
}

/// The name of `entry`'s skip copy, when its launches may skip the entry read at all and the
/// name is free in the module. `taken`: the module's function names, gathered at the first ask
/// (a walk over every function for each entry made a module of many entries quadratic).
fn skip_copy_name<'m>(
    module: &'m ast::Module<'m>,
    entry: &'m ast::Func<'m>,
    info: &allow::Info<'m>,
    taken: &mut Option<hash::HashSet<&'m str>>,
) -> Option<String> {
    if !info.may_skip_entry_read(entry) {
        return None;
    }
    // Pushed, not formatted: `format!` cost several times the rest of the name's look.
    let mut name = String::with_capacity(entry.name.len() + SKIP_COPY_SUFFIX.len());
    name.push_str(&entry.name);
    name.push_str(SKIP_COPY_SUFFIX);
    let taken = taken.get_or_insert_with(|| module.funcs.iter().map(|g| g.name.as_ref()).collect());
    (!taken.contains(name.as_str())).then_some(name)
}

/// Prints a parsed module unchanged (round-trip check of the printer).
pub fn reprint(ptx: &str) -> Result<String, Error> {
    let tokens = crate::lex::lex(ptx)?;
    let module = crate::parse::parse(&tokens)?;
    print::module(&module)
}

#[cfg(test)]
mod tests {
    /// The note of the statements that own memory (`Func::heap_stmts`, drop.rs) is what a look
    /// at every statement finds, as the parser makes it and as loop versioning and
    /// if-conversion keep it while they change a body, for every corpus module.
    #[test]
    fn the_passes_keep_each_bodys_note_of_what_owns_memory() {
        // Read at run time (the house rule for fixtures), not baked in by `env!`.
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        let root = std::path::Path::new(&dir).join("../../corpus");
        let check = |m: &crate::ast::Module<'_>, when: &str, name: &str| {
            for f in &m.funcs {
                let Some(body) = &f.body else { continue };
                let want = crate::drop::heap_stmts(body);
                assert_eq!(
                    f.heap_stmts.as_ref(),
                    Some(&want),
                    "{name} {} {when}",
                    f.name
                );
            }
        };
        let mut seen = 0;
        for dir in ["nvcc", "clang"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let path = e.path();
                if path.extension().is_none_or(|x| x != "ptx") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let name = path.display().to_string();
                let mut m = crate::parse::parse(&crate::lex::lex(&text).unwrap()).unwrap();
                check(&m, "as parsed", &name);
                super::version::apply(&mut m, &text, 1024);
                check(&m, "versioned", &name);
                super::ifconvert::apply(&mut m);
                check(&m, "if-converted", &name);
                seen += 1;
            }
        }
        assert!(seen >= 40, "{seen} corpus modules");
    }
}
