//! Runs one corpus case through the PTX sandbox (`ptxvm::sandbox`) on the selected driver, the
//! way a sandboxed guest runs it: the kernel rewritten, every buffer and the module's globals
//! carved out of one arena allocation, a host-mapped control block, and the five hidden
//! arguments appended. The answers must equal the CPU reference, exactly as unsandboxed
//! (`run::run_case`), and a correct kernel must make no fenced access.
//!
//! The arena here is one `cuMemAlloc` allocation, not gpuhost's virtual-memory arena: the
//! sandbox needs only that `[base, base + size)` is mapped, and this keeps the harness on the
//! same raw driver layer as the rest of conformance.

use std::sync::Arc;

use ptxvm::sandbox::{MIN_ARENA, Policy, Sandboxed, sandbox};

use crate::case::{ArgSpec, Case, Init, KernelCase};
use crate::context::Context;
use crate::corpus::{self, Flavour};
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::module::{Function, Module};
use crate::rng::Rng;
use crate::run::RunReport;
use crate::stream::{Event, KernelArg, LaunchShape, Stream};

/// Arena offsets are aligned like cuMemAlloc's smallest guarantee that kernels rely on.
const ALIGN: u64 = 256;
/// Bytes at the arena's start that no buffer uses: a fenced access lands at `base`, so this
/// keeps it off every buffer the case checks.
const GUARD: u64 = 256;
/// The launch tag the sandbox writes to `ctl + CTL_FAULT_TAG` when it fences an access.
const TAG: u64 = 0x5a;
/// Where the fault word lies in the control block.
const FAULT_AT: usize = ptxvm::sandbox::CTL_FAULT_TAG as usize;

/// How a prepared case runs its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The PTX as written, globals in the module (the benchmark's baseline).
    Native,
    /// Rewritten by the sandbox, globals in the arena, hidden arguments appended.
    Sandboxed,
}

/// A case loaded (native or through the sandbox) and laid out in one arena, ready to launch many
/// times: the benchmark times repeated launches of one of these, in both modes over the same
/// layout.
pub struct Prepared {
    /// The rewritten kernel.
    pub function: Function,
    /// The launch shape of the case.
    pub shape: LaunchShape,
    /// User arguments followed by the five hidden ones.
    pub args: Vec<KernelArg>,
    mode: Mode,
    case: Case,
    /// Shared with the cases prepared beside this one (see [`prepare_edited`]).
    arena: Arc<DeviceBuffer>,
    offsets: Vec<u64>,
    ctl: Arc<DeviceBuffer>,
}

/// Loads `kc`'s PTX from `flavour` (rewritten by the sandbox under `policy` in
/// [`Mode::Sandboxed`]) and lays the case built from `seed` out in a fresh arena (outputs
/// poisoned with `poison`).
pub fn prepare(
    ctx: &Arc<Context>,
    kc: &KernelCase,
    flavour: Flavour,
    seeds: (u64, u8),
    mode: Mode,
    policy: &Policy,
) -> Result<Prepared> {
    prepare_edited(
        ctx,
        kc,
        flavour,
        seeds,
        mode,
        policy,
        |ptx| ptx.to_owned(),
        None,
    )
}

/// [`prepare`], with the rewritten PTX passed through `edit` before it is loaded in
/// [`Mode::Sandboxed`] (sandbox_bench's ablations: which part of the rewrite costs GPU time),
/// and, with `beside`, laid out in `beside`'s arena and control block rather than new ones.
///
/// sandbox_bench prepares the columns it compares beside one another, so that every column's
/// kernel reads and writes the same device addresses: with an arena each, two byte-identical
/// rewrites of a ~1 µs kernel replayed up to 0.1 µs apart (bench/RESULTS.md, session 11), as
/// much as the sandbox's whole cost on such kernels. Cases prepared beside one another overwrite
/// each other's outputs, so only a case with an arena of its own is [`Prepared::check`]ed.
#[allow(clippy::too_many_arguments)]
pub fn prepare_edited(
    ctx: &Arc<Context>,
    kc: &KernelCase,
    flavour: Flavour,
    (seed, poison): (u64, u8),
    mode: Mode,
    policy: &Policy,
    edit: fn(&str) -> String,
    beside: Option<&Prepared>,
) -> Result<Prepared> {
    let ptx = corpus::read_ptx(kc.file, flavour)?;
    let sbx = sandbox(&ptx, policy).map_err(|e| Error::BadCase {
        case: kc.name.into(),
        detail: format!("the sandbox refused {} [{flavour}]: {e}", kc.file),
    })?;
    let module = match mode {
        Mode::Sandboxed => Module::load_ptx(ctx, &edit(&sbx.ptx))?,
        Mode::Native => Module::load_ptx(ctx, &ptx)?,
    };
    let case = (kc.build)(&mut Rng::new(seed));
    // A sandboxed launch that may skip the entry's epoch read runs the kernel's skip copy, as
    // gpuhost-wasm's do (confine.rs); the skip bit below is then moot.
    let shape = &case.shape;
    let threads = (shape.grid.iter().chain(&shape.block)).fold(1u64, |n, &d| n * u64::from(d));
    let sandboxed = sbx.kernels.iter().find(|k| k.name == kc.kernel);
    let span = sandboxed.map_or(u64::MAX, |k| k.first_poll_span);
    let skip = ptxvm::sandbox::skips_entry_read(span, threads);
    let name = match (mode, sandboxed.and_then(|k| k.skip_copy.as_deref())) {
        (Mode::Sandboxed, Some(copy)) if skip != 0 => copy,
        _ => kc.kernel,
    };
    let function = module.function(name)?;

    // Layout: guard, globals block, then each buffer.
    let globals_at = align_up(GUARD, sbx.globals.align.max(ALIGN));
    let mut next = align_up(globals_at + sbx.globals.size, ALIGN);
    let mut offsets = Vec::with_capacity(case.buffers.len());
    for spec in &case.buffers {
        offsets.push(next);
        next = align_up(next + spec.byte_len() as u64, ALIGN);
    }
    // The sandbox needs at least MIN_ARENA mapped (a fence may cover a run of accesses that
    // long); gpuhost's arenas map 2 MiB chunks, so only this harness has to ask for it.
    let next = next.max(MIN_ARENA);
    let (arena, ctl) = match beside {
        Some(b) if b.offsets == offsets && b.arena.len() == next as usize => {
            (b.arena.clone(), b.ctl.clone())
        }
        Some(_) => {
            return Err(Error::BadCase {
                case: kc.name.into(),
                detail: "prepared beside a case of another layout".into(),
            });
        }
        None => {
            let arena = DeviceBuffer::alloc(ctx, next as usize)?;
            arena.fill(0)?;
            // The control block in device memory, as gpuhost's ControlBlock: kernels poll it,
            // and polling host-mapped memory instead cost kernels 126x on the H200.
            let ctl = DeviceBuffer::alloc(ctx, ptxvm::sandbox::CTL_BYTES as usize)?;
            ctl.fill(0)?;
            (Arc::new(arena), Arc::new(ctl))
        }
    };
    let base = arena.ptr();

    arena.write_at(globals_at as usize, &sbx.globals.init)?;
    for (name, bytes) in &case.globals {
        match mode {
            Mode::Native => module.write_global(name, bytes)?,
            Mode::Sandboxed => {
                let at = global_offset(&sbx, kc, name, bytes.len())?;
                arena.write_at((globals_at + at) as usize, bytes)?;
            }
        }
    }
    for (spec, at) in case.buffers.iter().zip(&offsets) {
        match &spec.init {
            Init::Data(bytes) => arena.write_at(*at as usize, bytes)?,
            Init::Poison(n) => arena.write_at(*at as usize, &vec![poison; *n])?,
        }
    }

    let ctl_dev = ctl.ptr();
    let mut args = Vec::with_capacity(case.args.len() + 5);
    for arg in &case.args {
        args.push(match *arg {
            ArgSpec::Buffer(i) => KernelArg::Ptr(
                base + offsets.get(i).copied().ok_or_else(|| Error::BadCase {
                    case: kc.name.into(),
                    detail: format!("argument names buffer {i} of {}", offsets.len()),
                })?,
            ),
            ArgSpec::I32(v) => KernelArg::I32(v),
            ArgSpec::U32(v) => KernelArg::U32(v),
            ArgSpec::F32(v) => KernelArg::F32(v),
            ArgSpec::U64(v) => KernelArg::U64(v),
        });
    }
    let globals_ptr = if sbx.globals.size == 0 {
        0
    } else {
        base + globals_at
    };
    if mode == Mode::Sandboxed {
        // Epoch 0 (the control block starts zeroed), tag in the high half, and the entry's
        // epoch read skipped where gpuhost-wasm skips it (confine.rs).
        args.extend([base, next, globals_ptr, ctl_dev, skip | TAG << 32].map(KernelArg::U64));
    }
    Ok(Prepared {
        mode,
        function,
        shape: case.shape,
        args,
        case,
        arena,
        offsets,
        ctl,
    })
}

impl Prepared {
    /// The launch tag the kernel wrote for a fenced access, if any (0: none).
    pub fn fenced_tag(&self) -> Result<u32> {
        let mut word = [0u8; 4];
        self.ctl.read_at(FAULT_AT, &mut word)?;
        Ok(u32::from_le_bytes(word))
    }

    /// Checks every output of the case against its reference, and that no access was fenced.
    /// Refused for a case that shares its arena (its outputs may be another case's).
    pub fn check(&self, kc: &KernelCase, flavour: Flavour, seed: u64) -> Result<usize> {
        if Arc::strong_count(&self.arena) > 1 {
            return Err(Error::BadCase {
                case: kc.name.into(),
                detail: "a case prepared beside another cannot be checked: prepare it alone".into(),
            });
        }
        let mut failures = Vec::new();
        let mut checked = 0;
        for (spec, at) in self.case.buffers.iter().zip(&self.offsets) {
            let Some(expect) = &spec.expect else { continue };
            checked += 1;
            let mut out = vec![0u8; spec.byte_len()];
            self.arena.read_at(*at as usize, &mut out)?;
            if let Err(detail) = expect.check(&out) {
                failures.push(format!("{}: {detail}", spec.name));
            }
        }
        let tag = self.fenced_tag()?;
        if tag != 0 {
            failures.push(format!(
                "the sandbox fenced an access (tag {tag:#x}) of a kernel that stays in bounds"
            ));
        }
        if failures.is_empty() {
            return Ok(checked);
        }
        Err(Error::Mismatch {
            case: kc.name.into(),
            flavour: format!("{flavour}, {:?}", self.mode),
            buffer: "see detail".into(),
            detail: format!("{} (seed {seed})", failures.join("; ")),
        })
    }
}

/// [`prepare`], one launch timed with events, then [`Prepared::check`].
pub fn run_case_sandboxed(
    ctx: &Arc<Context>,
    kc: &KernelCase,
    flavour: Flavour,
    seed: u64,
    poison: u8,
) -> Result<RunReport> {
    let p = prepare(
        ctx,
        kc,
        flavour,
        (seed, poison),
        Mode::Sandboxed,
        &Policy::default(),
    )?;
    let stream = Stream::new(ctx)?;
    let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
    start.record(&stream)?;
    stream.launch(&p.function, p.shape, &p.args)?;
    end.record(&stream)?;
    stream.synchronize()?;
    let kernel_ms = end.elapsed_ms_since(&start)?;
    let outputs_checked = p.check(kc, flavour, seed)?;
    Ok(RunReport {
        kernel_ms,
        outputs_checked,
    })
}

/// Where the case's global `name` lives in the module's globals block.
fn global_offset(sbx: &Sandboxed, kc: &KernelCase, name: &str, len: usize) -> Result<u64> {
    let var = sbx
        .globals
        .vars
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| Error::BadCase {
            case: kc.name.into(),
            detail: format!("the sandboxed module has no global {name}"),
        })?;
    if var.size != len as u64 {
        return Err(Error::BadCase {
            case: kc.name.into(),
            detail: format!("global {name} is {} bytes, the case writes {len}", var.size),
        });
    }
    Ok(var.offset)
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}
