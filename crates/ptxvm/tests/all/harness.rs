//! Test support: a heap-backed `Memory`, parameter packing, a xorshift generator and fixtures.

use ptxvm::{Fault, KernelInfo, Launch, LaunchStats, Memory, Module};

use crate::launch::launch;

/// Device memory made of leaked, 8-byte-aligned heap blocks, freed on drop.
pub struct DevMem {
    blocks: Vec<(*mut u64, usize)>,
}

// SAFETY: the blocks are only touched through `translate`'s pointers by the VM (which uses
// atomics for device memory) and by `&mut self` methods, never both at once.
unsafe impl Sync for DevMem {}

impl DevMem {
    pub fn new() -> Self {
        DevMem { blocks: Vec::new() }
    }

    /// Allocates `bytes` zeroed bytes; returns the device (= host) address.
    pub fn alloc(&mut self, bytes: usize) -> u64 {
        let words = bytes.div_ceil(8).max(1);
        let b: Box<[u64]> = vec![0u64; words].into_boxed_slice();
        let p = Box::into_raw(b).cast::<u64>();
        self.blocks.push((p, bytes));
        p as u64
    }

    fn block(&self, addr: u64) -> (*mut u8, usize) {
        let &(p, n) = self
            .blocks
            .iter()
            .find(|(p, _)| *p as u64 == addr)
            .expect("address of an allocation");
        (p.cast(), n)
    }

    pub fn upload<T: Copy>(&mut self, data: &[T]) -> u64 {
        let bytes = std::mem::size_of_val(data);
        let a = self.alloc(bytes);
        let (p, _) = self.block(a);
        // SAFETY: the block holds at least `bytes` bytes and T is plain data.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), p, bytes) };
        a
    }

    pub fn download<T: Copy + Default>(&self, addr: u64, n: usize) -> Vec<T> {
        let (p, len) = self.block(addr);
        assert!(n * std::mem::size_of::<T>() <= len);
        let mut out = vec![T::default(); n];
        // SAFETY: bounds checked above; T is plain data.
        unsafe {
            std::ptr::copy_nonoverlapping(p, out.as_mut_ptr().cast::<u8>(), n * size_of::<T>())
        };
        out
    }
}

impl Drop for DevMem {
    fn drop(&mut self) {
        for &(p, n) in &self.blocks {
            let words = n.div_ceil(8).max(1);
            // SAFETY: p came from Box::into_raw of a boxed slice of `words` u64s.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, words)) });
        }
    }
}

// SAFETY: each block comes from `Box::into_raw` (full provenance, exposed by the `as u64` casts
// that made its address) and stays allocated until `DevMem` drops, which the launch's borrow
// of it prevents; the range check keeps [addr, addr + len) inside one block; tests touch the
// bytes only through raw-pointer copies in `&mut self` methods, never during a launch.
unsafe impl Memory for DevMem {
    fn translate(&self, addr: u64, len: u64) -> Option<*mut u8> {
        self.blocks.iter().find_map(|&(p, n)| {
            let base = p as u64;
            (addr >= base && addr.checked_add(len)? <= base + n as u64).then_some(addr as *mut u8)
        })
    }
}

/// A kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Ptr(u64),
    I32(i32),
    F32(f32),
    U32(u32),
    U64(u64),
}

/// Packs arguments at the kernel's parameter offsets.
pub fn pack(k: &KernelInfo, args: &[Arg]) -> Vec<u8> {
    assert_eq!(k.params.len(), args.len(), "argument count for {}", k.name);
    let end = k
        .params
        .iter()
        .map(|p| p.offset + p.size)
        .max()
        .unwrap_or(0);
    let mut buf = vec![0u8; end as usize];
    for (p, a) in k.params.iter().zip(args) {
        let bytes: Vec<u8> = match *a {
            Arg::Ptr(v) => v.to_le_bytes().to_vec(),
            Arg::I32(v) => v.to_le_bytes().to_vec(),
            Arg::F32(v) => v.to_le_bytes().to_vec(),
            Arg::U32(v) => v.to_le_bytes().to_vec(),
            Arg::U64(v) => v.to_le_bytes().to_vec(),
        };
        assert_eq!(bytes.len(), p.size as usize, "size of {}", p.name);
        buf[p.offset as usize..][..bytes.len()].copy_from_slice(&bytes);
    }
    buf
}

/// Launch shape and options.
pub struct Shape {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dyn_shared: u32,
    pub workers: usize,
}

impl Shape {
    pub fn linear(grid: u32, block: u32) -> Self {
        Shape {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            dyn_shared: 0,
            workers: 2,
        }
    }
}

/// Launches kernel `name` of `m`.
pub fn run(
    m: &Module,
    name: &str,
    shape: &Shape,
    args: &[Arg],
    mem: &DevMem,
) -> Result<LaunchStats, Fault> {
    let k = m
        .kernel_index(name)
        .unwrap_or_else(|| panic!("kernel {name}"));
    let params = pack(&m.kernels()[k], args);
    let l = Launch {
        grid: shape.grid,
        block: shape.block,
        dynamic_shared_bytes: shape.dyn_shared,
        workers: shape.workers,
        ..launch(k, &params)
    };
    ptxvm::launch(m, &l, mem)
}

/// Deterministic xorshift64* generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }
    pub fn vec_f32(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32() * scale).collect()
    }
}

/// The clang-generated fixture module.
pub fn fixture() -> Module {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{dir}/tests/fixtures/kernels.ptx"))
        .expect("tests/fixtures/kernels.ptx (regenerate with gen.sh)");
    Module::load(&text).unwrap_or_else(|e| panic!("fixture loads: {e}"))
}
