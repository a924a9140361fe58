//! Runs one corpus case on the selected driver: load the PTX, fill inputs, poison outputs,
//! launch, read back, compare with the CPU reference.

use std::sync::Arc;

use crate::case::{ArgSpec, Init, KernelCase};
use crate::context::Context;
use crate::corpus::{self, Flavour};
use crate::error::{Error, Result};
use crate::memory::DeviceBuffer;
use crate::module::Module;
use crate::rng::Rng;
use crate::stream::{Event, KernelArg, Stream};

/// The poison bytes successive runs use: 0xFF makes f32/f16 NaN and u32 all-ones, 0x7F makes
/// f32 ≈3.4e38 — no element left unwritten can match its reference in both runs.
pub const POISONS: [u8; 2] = [0xff, 0x7f];

/// What a passing run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// Milliseconds between events recorded around the launch.
    pub kernel_ms: f32,
    /// Output buffers checked.
    pub outputs_checked: usize,
}

/// Runs `kc` from `flavour`'s PTX with inputs from `seed` and outputs poisoned with `poison`.
pub fn run_case(
    ctx: &Arc<Context>,
    kc: &KernelCase,
    flavour: Flavour,
    seed: u64,
    poison: u8,
) -> Result<RunReport> {
    let ptx = corpus::read_ptx(kc.file, flavour)?;
    let module = Module::load_ptx(ctx, &ptx)?;
    let function = module.function(kc.kernel)?;
    let case = (kc.build)(&mut Rng::new(seed));
    for (name, bytes) in &case.globals {
        module.write_global(name, bytes)?;
    }

    let mut buffers = Vec::with_capacity(case.buffers.len());
    for spec in &case.buffers {
        let buf = DeviceBuffer::alloc(ctx, spec.byte_len())?;
        match &spec.init {
            Init::Data(bytes) => buf.write(bytes)?,
            Init::Poison(_) => buf.fill(poison)?,
        }
        buffers.push(buf);
    }
    let mut args = Vec::with_capacity(case.args.len());
    for arg in &case.args {
        args.push(match *arg {
            ArgSpec::Buffer(i) => KernelArg::Ptr(
                buffers
                    .get(i)
                    .ok_or_else(|| Error::BadCase {
                        case: kc.name.into(),
                        detail: format!("argument names buffer {i} of {}", buffers.len()),
                    })?
                    .ptr(),
            ),
            ArgSpec::I32(v) => KernelArg::I32(v),
            ArgSpec::U32(v) => KernelArg::U32(v),
            ArgSpec::F32(v) => KernelArg::F32(v),
            ArgSpec::U64(v) => KernelArg::U64(v),
        });
    }

    let stream = Stream::new(ctx)?;
    let (start, end) = (Event::new(ctx)?, Event::new(ctx)?);
    start.record(&stream)?;
    stream.launch(&function, case.shape, &args)?;
    end.record(&stream)?;
    stream.synchronize()?;
    let kernel_ms = end.elapsed_ms_since(&start)?;

    let mut failures = Vec::new();
    let mut outputs_checked = 0;
    for (spec, buf) in case.buffers.iter().zip(&buffers) {
        let Some(expect) = &spec.expect else { continue };
        outputs_checked += 1;
        if let Err(detail) = expect.check(&buf.to_vec()?) {
            failures.push((spec.name, detail));
        }
    }
    if failures.is_empty() {
        return Ok(RunReport {
            kernel_ms,
            outputs_checked,
        });
    }
    let buffer = failures
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ");
    let detail = failures
        .iter()
        .map(|(n, d)| format!("{n}: {d}"))
        .collect::<Vec<_>>()
        .join("; ");
    Err(Error::Mismatch {
        case: kc.name.into(),
        flavour: flavour.to_string(),
        buffer,
        detail: format!(
            "{detail} (seed {seed}, poison {poison:#04x}; replay with CONFORMANCE_SEED={seed})"
        ),
    })
}
