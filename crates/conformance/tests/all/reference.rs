//! ptxvm's answer for a generated program as written, run in this process whatever the driver:
//! what `generated`'s legal cases hold a rewrite to when the driver's own answer for the
//! program as written is not the PTX's meaning (NVIDIA's JIT compiled seed 8100 wrong as
//! written, and its rewrite right; docs/ISOLATION.md, "Generated programs").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ptxvm::{Launch, Memory, Module};
use testkit::ptxgen::{self, BLOCKS, THREADS};

/// Where each buffer starts in the flat memory (256-aligned, as the driver aligns them).
const ALIGN: usize = 256;

/// One allocation of 64-bit words, addressed by its host addresses (an identity mapping).
struct Flat(Vec<AtomicU64>);

impl Flat {
    fn from_bytes(image: &[u8]) -> Flat {
        Flat(
            image
                .chunks(8)
                .map(|c| {
                    let mut w = [0u8; 8];
                    w[..c.len()].copy_from_slice(c);
                    AtomicU64::new(u64::from_le_bytes(w))
                })
                .collect(),
        )
    }
    fn base(&self) -> u64 {
        self.0.as_ptr() as u64
    }
    fn len(&self) -> u64 {
        self.0.len() as u64 * 8
    }
    /// `len` bytes from `at` (a multiple of 8: every buffer starts on [`ALIGN`]).
    fn bytes(&self, at: usize, len: usize) -> Vec<u8> {
        let mut out: Vec<u8> = self.0[at / 8..(at + len).div_ceil(8)]
            .iter()
            .flat_map(|w| w.load(Ordering::SeqCst).to_le_bytes())
            .collect();
        out.truncate(len);
        out
    }
}

// SAFETY: a `Some` covers bytes inside the one `Vec<AtomicU64>`, checked for the whole range;
// the vector is never resized and outlives the launch that borrows it; its bytes are
// initialised; atomics' interior mutability makes the VM's writes through the pointer sound
// while the test only reads the words after the launch.
unsafe impl Memory for Flat {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let off = addr.checked_sub(self.base())?;
        (off.checked_add(len)? <= self.len()).then(|| {
            self.0
                .as_ptr()
                .cast::<u8>()
                .cast_mut()
                .wrapping_add(off as usize)
        })
    }

    fn allocation(&self, addr: u64) -> Option<(u64, u64, *mut u8)> {
        self.translate(addr, 1)?;
        Some((
            self.base(),
            self.len(),
            self.0.as_ptr().cast::<u8>().cast_mut(),
        ))
    }
}

/// The program's `out` as ptxvm computes it as written: the case's input, its module
/// variables from their initialisers, `out` zeroed, `wild` 0 (a legal program's).
pub fn as_written_on_ptxvm(seed: u64, text: &str) -> Result<Vec<u8>, String> {
    let m = Module::load(text).map_err(|e| format!("ptxvm loads the program: {e}"))?;
    let (input, s) = ptxgen::inputs(seed);
    let place = |at: &mut usize, len: usize| {
        let here = *at;
        *at = (here + len).div_ceil(ALIGN) * ALIGN;
        here
    };
    let mut end = 0;
    let out_at = place(&mut end, ptxgen::out_bytes());
    let inp_at = place(&mut end, input.len());
    let globals_at: Vec<usize> = m
        .globals()
        .iter()
        .map(|g| place(&mut end, g.size as usize))
        .collect();
    let mut image = vec![0u8; end];
    image[inp_at..inp_at + input.len()].copy_from_slice(&input);
    for (g, &at) in m.globals().iter().zip(&globals_at) {
        image[at..at + g.init.len()].copy_from_slice(&g.init);
    }
    let mem = Flat::from_bytes(&image);
    let globals: Vec<u64> = globals_at
        .iter()
        .map(|&at| mem.base() + at as u64)
        .collect();

    let k = m
        .kernel_index("gen")
        .ok_or("the program has no kernel `gen`")?;
    let info = &m.kernels()[k];
    let args = [
        (mem.base() + out_at as u64).to_le_bytes().to_vec(),
        (mem.base() + inp_at as u64).to_le_bytes().to_vec(),
        0u64.to_le_bytes().to_vec(),
        s.to_le_bytes().to_vec(),
    ];
    if info.params.len() != args.len() {
        return Err(format!("`gen` takes {} parameters", info.params.len()));
    }
    let mut params = vec![
        0u8;
        info.params
            .iter()
            .map(|p| (p.offset + p.size) as usize)
            .max()
            .unwrap_or(0)
    ];
    for (p, a) in info.params.iter().zip(&args) {
        if p.size as usize != a.len() {
            return Err(format!("parameter {} is {} bytes", p.name, p.size));
        }
        params[p.offset as usize..][..a.len()].copy_from_slice(a);
    }
    let launch = Launch {
        kernel: k,
        grid: [BLOCKS, 1, 1],
        block: [THREADS, 1, 1],
        dynamic_shared_bytes: 0,
        params: &params,
        globals: &globals,
        workers: 1,
        cancel: None,
        deadline: Some(Instant::now() + Duration::from_secs(60)),
    };
    ptxvm::launch(&m, &launch, &mem).map_err(|f| format!("ptxvm runs the program: {f}"))?;
    Ok(mem.bytes(out_at, ptxgen::out_bytes()))
}
