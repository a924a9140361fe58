//! Launch arguments and configuration, checked against the kernel's parameters and the device's
//! limits before anything reaches the driver; refusal.rs explains the driver's refusals that
//! come from the kernel's own, tighter limits.

mod refusal;
pub(crate) use refusal::kernel_limit;

use std::ffi::c_void;
use std::sync::Arc;

use crate::buffer::DeviceBuffer;
use crate::error::{Error, Result};
use crate::facts::DeviceFacts;
use crate::host::Host;
use crate::registry::Kernel;

/// One kernel parameter: where it sits in the parameter buffer and how big it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamInfo {
    /// Byte offset in the parameter buffer.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
}

/// A typed kernel argument.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// A device pointer: the buffer's address plus a byte offset (kept alive until the launch ends).
    Buffer(&'a DeviceBuffer, usize),
    /// .s8
    I8(i8),
    /// .s16
    I16(i16),
    /// .s32
    I32(i32),
    /// .s64
    I64(i64),
    /// .u8
    U8(u8),
    /// .u16
    U16(u16),
    /// .u32
    U32(u32),
    /// .u64
    U64(u64),
    /// .f32
    F32(f32),
    /// .f64
    F64(f64),
    /// A by-value aggregate (a `.b8 x[N]` parameter), passed as its raw bytes.
    Bytes(&'a [u8]),
}

impl Arg<'_> {
    /// Size in bytes as the kernel sees it.
    pub fn size(&self) -> usize {
        match self {
            Arg::Buffer(..) | Arg::I64(_) | Arg::U64(_) | Arg::F64(_) => 8,
            Arg::I32(_) | Arg::U32(_) | Arg::F32(_) => 4,
            Arg::I16(_) | Arg::U16(_) => 2,
            Arg::I8(_) | Arg::U8(_) => 1,
            Arg::Bytes(b) => b.len(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Arg::Buffer(..) => "Buffer",
            Arg::I8(_) => "I8",
            Arg::I16(_) => "I16",
            Arg::I32(_) => "I32",
            Arg::I64(_) => "I64",
            Arg::U8(_) => "U8",
            Arg::U16(_) => "U16",
            Arg::U32(_) => "U32",
            Arg::U64(_) => "U64",
            Arg::F32(_) => "F32",
            Arg::F64(_) => "F64",
            Arg::Bytes(_) => "Bytes",
        }
    }

    /// The scalar's bytes (little endian, as the device reads them); None for Bytes.
    pub(crate) fn scalar(&self) -> Option<u64> {
        Some(match *self {
            Arg::Buffer(b, off) => b.device_ptr() + off as u64,
            Arg::I8(v) => v as u8 as u64,
            Arg::I16(v) => v as u16 as u64,
            Arg::I32(v) => v as u32 as u64,
            Arg::I64(v) => v as u64,
            Arg::U8(v) => v as u64,
            Arg::U16(v) => v as u64,
            Arg::U32(v) => v as u64,
            Arg::U64(v) => v,
            Arg::F32(v) => v.to_bits() as u64,
            Arg::F64(v) => v.to_bits(),
            Arg::Bytes(_) => return None,
        })
    }
}

/// The device limits a launch is checked against: [`DeviceFacts`]' own, copied where the launch
/// path reads them (beside the context's identity, host.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    max_grid_dim: [u32; 3],
    max_block_dim: [u32; 3],
    max_threads_per_block: u32,
    max_shared_mem_per_block: u32,
}

impl Limits {
    /// The launch limits of `facts`.
    pub(crate) fn of(facts: &DeviceFacts) -> Self {
        Self {
            max_grid_dim: facts.max_grid_dim,
            max_block_dim: facts.max_block_dim,
            max_threads_per_block: facts.max_threads_per_block,
            max_shared_mem_per_block: facts.max_shared_mem_per_block,
        }
    }
}

/// Grid, block and dynamic shared memory of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks per grid (x, y, z).
    pub grid: [u32; 3],
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// Dynamic shared memory per block, bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch covering `n` threads with `block` threads per block.
    pub fn for_elements(n: u32, block: u32) -> Self {
        let block = block.max(1);
        Self {
            grid: [n.div_ceil(block).max(1), 1, 1],
            block: [block, 1, 1],
            shared_mem_bytes: 0,
        }
    }

    /// Check against the device's limits; each violation names the limit.
    pub fn check(&self, kernel: &str, facts: &DeviceFacts) -> Result<()> {
        if self.within(&Limits::of(facts)) {
            return Ok(());
        }
        self.explain(kernel, facts)
    }

    /// Every limit of [`LaunchConfig::check`] at once, without branches per axis: the launch
    /// path's test (the error, when it fails, comes from `explain`).
    #[inline]
    pub(crate) fn within(&self, facts: &Limits) -> bool {
        let mut ok = true;
        for i in 0..3 {
            // `d - 1 < max` is `1 <= d <= max` (0 wraps to u32::MAX, never below a limit).
            ok &= self.grid[i].wrapping_sub(1) < facts.max_grid_dim[i];
            ok &= self.block[i].wrapping_sub(1) < facts.max_block_dim[i];
        }
        let threads = self.block.iter().map(|&d| d as u64).product::<u64>();
        ok & (threads <= facts.max_threads_per_block as u64)
            & (self.shared_mem_bytes <= facts.max_shared_mem_per_block)
    }

    /// The first limit `self` breaks, as check reports it (Ok when none).
    #[cold]
    fn explain(&self, kernel: &str, facts: &DeviceFacts) -> Result<()> {
        let bad = |reason: String| {
            Err(Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason,
            })
        };
        let axes = ['x', 'y', 'z'];
        for (i, axis) in axes.iter().enumerate() {
            if self.grid[i] == 0 || self.block[i] == 0 {
                return bad(format!(
                    "grid {:?} / block {:?} has a zero dimension ({}); every dimension must be at least 1",
                    self.grid, self.block, axis
                ));
            }
            if self.grid[i] > facts.max_grid_dim[i] {
                return bad(format!(
                    "grid.{} = {} exceeds the device limit {}",
                    axis, self.grid[i], facts.max_grid_dim[i]
                ));
            }
            if self.block[i] > facts.max_block_dim[i] {
                return bad(format!(
                    "block.{} = {} exceeds the device limit {}",
                    axis, self.block[i], facts.max_block_dim[i]
                ));
            }
        }
        let threads = self.block.iter().map(|&d| d as u64).product::<u64>();
        if threads > facts.max_threads_per_block as u64 {
            return bad(format!(
                "block {:?} has {threads} threads, over the device limit of {} per block",
                self.block, facts.max_threads_per_block
            ));
        }
        if self.shared_mem_bytes > facts.max_shared_mem_per_block {
            return bad(format!(
                "{} bytes of dynamic shared memory exceed the device limit of {} per block",
                self.shared_mem_bytes, facts.max_shared_mem_per_block
            ));
        }
        Ok(())
    }
}

/// Arguments held inline (no allocation on the launch path) up to this many.
pub(crate) const INLINE_ARGS: usize = 8;

/// The launch path's checks and packing in one pass over `args`, building no error: true when
/// the launch passes every check of `Stream::prepare` (kernel and buffers of `host` and
/// `generation`, `cfg` within the device's limits, one argument per parameter of its size,
/// buffer offsets within their buffers), with each argument laid out for cuLaunchKernel:
/// `pointers[i]` points at `scalars[i]` holding a scalar (or a buffer's address plus offset), or
/// at an `Arg::Bytes`' own bytes. False says only that some check failed (and the slots are
/// then meaningless): `Stream::prepare`, the reference, finds which and says it.
///
/// Why a second form of the same checks: `prepare` returns its packed arguments through a
/// `Result` (copied out of the call) in slots it zeroes in full, and checks each buffer in a
/// pass of its own; per launch that was about a third of gpuhost's own instructions. Here the
/// slots are the caller's (on its stack, not moved until the driver has copied them), and
/// each check is a comparison folded into one flag. A test holds the two to the same answers.
/// Always inlined: a call of its own was ~40 instructions of saving and restoring registers.
#[inline(always)]
pub(crate) fn lay_out(
    host: &Arc<Host>,
    generation: u64,
    kernel: &Kernel,
    cfg: &LaunchConfig,
    args: &[Arg<'_>],
    scalars: &mut [u64],
    pointers: &mut [*mut c_void],
) -> bool {
    let params = kernel.params();
    let mut ok = Arc::ptr_eq(kernel.host(), host)
        & (args.len() == params.len())
        & (args.len() <= scalars.len())
        & (args.len() <= pointers.len())
        & cfg.within(host.limits());
    if !ok {
        return false;
    }
    let slots = scalars.iter_mut().zip(pointers.iter_mut());
    for ((a, p), (slot, ptr)) in args.iter().zip(params).zip(slots) {
        let value = match *a {
            Arg::Bytes(b) => {
                ok &= b.len() == p.size as usize;
                // Never null: an empty slice's pointer is dangling but non-null.
                *ptr = b.as_ptr() as *mut c_void;
                continue;
            }
            Arg::Buffer(b, off) => {
                let fits = Arc::ptr_eq(&b.inner.host, host)
                    & (b.generation() == generation)
                    & (off <= b.len());
                if fits {
                    // As `prepare` does: before the driver call (see arena.rs).
                    b.note_kernel();
                }
                ok &= fits & (p.size == 8);
                b.device_ptr().wrapping_add(off as u64)
            }
            Arg::I64(_) | Arg::U64(_) | Arg::F64(_) => {
                ok &= p.size == 8;
                a.scalar().unwrap_or(0)
            }
            Arg::I32(_) | Arg::U32(_) | Arg::F32(_) => {
                ok &= p.size == 4;
                a.scalar().unwrap_or(0)
            }
            Arg::I16(_) | Arg::U16(_) => {
                ok &= p.size == 2;
                a.scalar().unwrap_or(0)
            }
            Arg::I8(_) | Arg::U8(_) => {
                ok &= p.size == 1;
                a.scalar().unwrap_or(0)
            }
        };
        *slot = value;
        // The slot's own borrow, not re-derived from `scalars`: it stays valid while the
        // caller keeps `scalars` in place and unused until the driver call.
        *ptr = (slot as *mut u64).cast::<c_void>();
    }
    ok
}

/// Argument values laid out for cuLaunchKernel's `void** kernelParams`.
pub(crate) struct PackedArgs {
    len: usize,
    /// Scalar values (little-endian in the low bytes), one slot per argument.
    scalars: Slots<u64>,
    /// Per argument: the caller's bytes for `Arg::Bytes`, null for a scalar (pointed at its
    /// slot by `as_params`, once `self` no longer moves).
    pointers: Slots<*mut c_void>,
}

/// Inline storage for the common case, heap beyond it.
enum Slots<T> {
    Inline([T; INLINE_ARGS]),
    Heap(Vec<T>),
}

impl<T: Copy> Slots<T> {
    fn new(n: usize, fill: T) -> Self {
        if n <= INLINE_ARGS {
            Slots::Inline([fill; INLINE_ARGS])
        } else {
            Slots::Heap(vec![fill; n])
        }
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Slots::Inline(a) => a,
            Slots::Heap(v) => v,
        }
    }
}

impl PackedArgs {
    /// The `kernelParams` array, valid while `self` lives and is not moved.
    pub(crate) fn as_params(&mut self) -> *mut *mut c_void {
        let n = self.len;
        let scalars = self.scalars.as_mut_slice().as_mut_ptr();
        let pointers = &mut self.pointers.as_mut_slice()[..n];
        for (i, p) in pointers.iter_mut().enumerate() {
            if p.is_null() {
                // SAFETY: i < n, the length of the scalar slots.
                *p = unsafe { scalars.add(i) }.cast::<c_void>();
            }
        }
        pointers.as_mut_ptr()
    }

    /// Number of packed arguments.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Check `args` against `params` (count and per-argument size, buffer offsets) without packing
/// them: what [`crate::Kernel::check_launch`] needs, without laying out the parameter slots.
#[inline]
pub(crate) fn check_args(kernel: &str, params: &[ParamInfo], args: &[Arg<'_>]) -> Result<()> {
    check_count(kernel, params, args)?;
    for (i, (a, p)) in args.iter().zip(params).enumerate() {
        check_arg(kernel, i, a, p)?;
    }
    Ok(())
}

/// The argument count matches the parameter count.
#[inline]
pub(crate) fn check_count(kernel: &str, params: &[ParamInfo], args: &[Arg<'_>]) -> Result<()> {
    if args.len() != params.len() {
        return Err(Error::ArgMismatch {
            kernel: kernel.to_string(),
            reason: format!(
                "{} argument(s) given, the kernel takes {} (sizes {:?})",
                args.len(),
                params.len(),
                params.iter().map(|p| p.size).collect::<Vec<_>>()
            ),
        });
    }
    Ok(())
}

/// Argument `i` has its parameter's size, and a buffer argument's offset is within its buffer.
#[inline]
fn check_arg(kernel: &str, i: usize, a: &Arg<'_>, p: &ParamInfo) -> Result<()> {
    if a.size() != p.size as usize {
        return Err(Error::ArgMismatch {
            kernel: kernel.to_string(),
            reason: format!(
                "argument {i} is {} ({} bytes) but parameter {i} is {} bytes",
                a.kind(),
                a.size(),
                p.size
            ),
        });
    }
    if let Arg::Buffer(b, off) = a
        && *off > b.len()
    {
        return Err(Error::ArgMismatch {
            kernel: kernel.to_string(),
            reason: format!(
                "argument {i}: offset {off} is past the end of a {}-byte buffer",
                b.len()
            ),
        });
    }
    Ok(())
}

/// Check `args` against `params` (as [`check_args`]) and pack them. Inlined: the packed
/// arguments are then built where the launch keeps them, not copied out of a call.
#[inline]
pub(crate) fn pack(kernel: &str, params: &[ParamInfo], args: &[Arg<'_>]) -> Result<PackedArgs> {
    check_count(kernel, params, args)?;
    let n = args.len();
    let mut scalars = Slots::new(n, 0u64);
    let mut pointers = Slots::new(n, std::ptr::null_mut::<c_void>());
    let slots = scalars.as_mut_slice().iter_mut();
    let ptrs = pointers.as_mut_slice().iter_mut();
    // One pass: each argument checked, then packed (a failure drops what was packed).
    for (i, (((a, p), slot), ptr)) in args.iter().zip(params).zip(slots).zip(ptrs).enumerate() {
        check_arg(kernel, i, a, p)?;
        match a {
            // Never null: an empty slice's pointer is dangling but non-null.
            Arg::Bytes(b) => *ptr = b.as_ptr() as *mut c_void,
            _ => *slot = a.scalar().unwrap_or(0),
        }
    }
    Ok(PackedArgs {
        len: n,
        scalars,
        pointers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{ModuleImage, ModuleSource};
    use crate::registry::Registry;
    use std::ptr;

    fn facts() -> DeviceFacts {
        DeviceFacts {
            ordinal: 0,
            name: "test".into(),
            compute_capability: (9, 0),
            sm_count: 1,
            max_threads_per_block: 1024,
            max_block_dim: [1024, 1024, 64],
            max_grid_dim: [i32::MAX as u32, 65535, 65535],
            max_shared_mem_per_block: 48 * 1024,
            warp_size: 32,
            total_memory: 1 << 30,
            driver_version: 12080,
        }
    }

    fn cfg(grid: [u32; 3], block: [u32; 3], shared: u32) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            shared_mem_bytes: shared,
        }
    }

    #[test]
    fn launch_config_within_limits_passes() {
        assert!(
            cfg([4, 1, 1], [256, 4, 1], 1024)
                .check("k", &facts())
                .is_ok()
        );
        assert_eq!(
            LaunchConfig::for_elements(1000, 256).grid,
            [4, 1, 1],
            "1000 elements need 4 blocks of 256"
        );
    }

    #[test]
    fn launch_config_over_each_limit_is_invalid_launch_naming_it() {
        let f = facts();
        let cases = [
            (cfg([1, 1, 1], [2048, 1, 1], 0), "block.x"),
            (cfg([1, 1, 1], [64, 64, 1], 0), "4096 threads"),
            (cfg([1, 70000, 1], [1, 1, 1], 0), "grid.y"),
            (cfg([1, 1, 1], [1, 1, 128], 0), "block.z"),
            (cfg([0, 1, 1], [1, 1, 1], 0), "zero dimension"),
            (cfg([1, 1, 1], [1, 1, 1], 64 * 1024), "shared memory"),
        ];
        for (c, needle) in cases {
            match c.check("k", &f) {
                Err(Error::InvalidLaunch { reason, .. }) => {
                    assert!(reason.contains(needle), "{reason} lacks {needle}")
                }
                other => panic!("{c:?}: expected InvalidLaunch, got {other:?}"),
            }
        }
    }

    #[test]
    fn the_launch_paths_fast_check_accepts_exactly_what_the_explaining_check_accepts() {
        let f = facts();
        let mut tried = 0;
        let dims = |max: [u32; 3], i: usize| [0, 1, 2, max[i] - 1, max[i], max[i] + 1, u32::MAX];
        for axis in 0..3 {
            for g in dims(f.max_grid_dim, axis) {
                for b in dims(f.max_block_dim, axis) {
                    for shared in [
                        0,
                        f.max_shared_mem_per_block,
                        f.max_shared_mem_per_block + 1,
                    ] {
                        let mut c = cfg([1, 1, 1], [1, 1, 1], shared);
                        c.grid[axis] = g;
                        c.block[axis] = b;
                        assert_eq!(
                            c.within(&Limits::of(&f)),
                            c.explain("k", &f).is_ok(),
                            "{c:?}"
                        );
                        tried += 1;
                    }
                }
            }
        }
        // Threads per block: each axis within its limit, the product over the block limit.
        let c = cfg([1, 1, 1], [1024, 2, 1], 0);
        assert!(!c.within(&Limits::of(&f)) && c.check("k", &f).is_err());
        assert_eq!(tried, 3 * 7 * 7 * 3);
    }

    #[test]
    fn scalar_args_pack_little_endian_at_their_own_slot() {
        let params = [
            ParamInfo { offset: 0, size: 4 },
            ParamInfo { offset: 8, size: 8 },
            ParamInfo {
                offset: 16,
                size: 2,
            },
        ];
        let mut p = pack("k", &params, &[Arg::F32(1.5), Arg::I64(-2), Arg::U16(7)]).unwrap();
        assert_eq!(p.len(), 3);
        let ptrs = p.as_params();
        // SAFETY: three valid pointers into p's scalars, each 8 bytes, read while p lives.
        let (a, b, c) = unsafe {
            (
                *(*ptrs.add(0) as *const f32),
                *(*ptrs.add(1) as *const i64),
                *(*ptrs.add(2) as *const u16),
            )
        };
        assert_eq!((a, b, c), (1.5, -2, 7));
    }

    #[test]
    fn wrong_count_or_size_is_arg_mismatch() {
        let params = [ParamInfo { offset: 0, size: 8 }];
        match pack("k", &params, &[]) {
            Err(Error::ArgMismatch { reason, .. }) => assert!(reason.contains("0 argument(s)")),
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted a missing argument"),
        }
        match pack("k", &params, &[Arg::U32(1)]) {
            Err(Error::ArgMismatch { reason, .. }) => {
                assert!(reason.contains("argument 0 is U32 (4 bytes)"), "{reason}")
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted a 4-byte argument for an 8-byte parameter"),
        }
        let bytes = [1u8; 8];
        assert!(pack("k", &params, &[Arg::Bytes(&bytes)]).is_ok());
    }

    #[test]
    fn checking_without_packing_refuses_exactly_what_packing_refuses_with_its_words() {
        let params = [
            ParamInfo { offset: 0, size: 8 },
            ParamInfo { offset: 8, size: 4 },
        ];
        let cases: [&[Arg<'_>]; 6] = [
            &[],
            &[Arg::U64(1)],
            &[Arg::U64(1), Arg::U32(2)],
            &[Arg::U32(1), Arg::U32(2)],
            &[Arg::U64(1), Arg::Bytes(&[1, 2, 3, 4])],
            &[Arg::U64(1), Arg::U16(1)],
        ];
        for args in cases {
            let checked = check_args("k", &params, args).map_err(|e| e.to_string());
            let packed = pack("k", &params, args)
                .map(drop)
                .map_err(|e| e.to_string());
            assert_eq!(checked, packed, "{args:?}");
        }
    }

    #[test]
    fn more_arguments_than_fit_inline_still_point_at_their_values() {
        let n = INLINE_ARGS + 3;
        let params: Vec<_> = (0..n)
            .map(|i| ParamInfo {
                offset: 8 * i as u32,
                size: 8,
            })
            .collect();
        let bytes = 77u64.to_le_bytes();
        let args: Vec<_> = (0..n)
            .map(|i| {
                if i == 2 {
                    Arg::Bytes(&bytes)
                } else {
                    Arg::U64(i as u64 * 10)
                }
            })
            .collect();
        let mut p = pack("k", &params, &args).unwrap();
        let ptrs = p.as_params();
        for i in 0..n {
            // SAFETY: n valid pointers, each to 8 readable bytes, read while p lives.
            let v = unsafe { (*ptrs.add(i) as *const u64).read_unaligned() };
            assert_eq!(v, if i == 2 { 77 } else { i as u64 * 10 });
        }
    }

    // The launch path against its reference, on a real kernel (softcuda in CI).

    const PTX: &str = include_str!("../bundles/stamp-a/stamp.ptx");
    /// An aggregate parameter (`Arg::Bytes`), and more parameters than fit the inline slots.
    const PTX_MORE: &str = ".version 7.0
.target sm_80
.address_size 64
.visible .entry agg(.param .u32 agg_param_0, .param .align 4 .b8 agg_param_1[12])
{
\tret;
}
.visible .entry many(.param .u32 p0, .param .u32 p1, .param .u32 p2, .param .u32 p3,
\t.param .u32 p4, .param .u32 p5, .param .u32 p6, .param .u32 p7, .param .u32 p8,
\t.param .u64 p9)
{
\tret;
}
";

    /// Every argument list of `len` arguments drawn from `pool` (all of them: len ≤ 2), or for
    /// longer lists each pool entry at each position of an otherwise matching list.
    fn lists<'a>(pool: &[Arg<'a>], matching: &[Arg<'a>], len: usize) -> Vec<Vec<Arg<'a>>> {
        if len <= 2 {
            let mut out = vec![vec![]];
            for _ in 0..len {
                out = out
                    .into_iter()
                    .flat_map(|l| {
                        pool.iter().map(move |a| {
                            let mut l = l.clone();
                            l.push(*a);
                            l
                        })
                    })
                    .collect();
            }
            return out;
        }
        let mut out = vec![matching.to_vec()];
        for i in 0..len {
            for a in pool {
                let mut l = matching.to_vec();
                l[i] = *a;
                out.push(l);
            }
        }
        out
    }

    /// The value a packed argument's pointer points at: the parameter's `size` bytes.
    fn bytes_at(p: *mut c_void, size: u32) -> Vec<u8> {
        // SAFETY: p points at a packed argument of at least `size` readable bytes (a scalar
        // slot of 8, or an `Arg::Bytes` of exactly the parameter's size), alive for this call.
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size as usize).to_vec() }
    }

    #[test]
    fn the_one_pass_launch_check_accepts_exactly_what_prepare_accepts_and_packs_the_same_bytes() {
        let host = crate::host(0).expect("a driver (softcuda in CI)");
        let reg = Registry::from_sources(
            &host,
            "lay-out",
            vec![
                ModuleSource::new("stamp", ModuleImage::Ptx(PTX.into())),
                ModuleSource::new("more", ModuleImage::Ptx(PTX_MORE.into())),
            ],
        )
        .unwrap();
        let stream = host.stream().unwrap();
        let buf = host.alloc(64).unwrap();
        let arena = host.arena(1 << 21).unwrap();
        let in_arena = arena.alloc(256).unwrap();
        let bytes: Vec<Vec<u8>> = [0, 1, 2, 4, 8, 12].iter().map(|&n| vec![7; n]).collect();
        let mut pool = vec![
            Arg::I8(-1),
            Arg::U8(2),
            Arg::I16(-3),
            Arg::U16(4),
            Arg::I32(-5),
            Arg::U32(6),
            Arg::F32(1.5),
            Arg::I64(-7),
            Arg::U64(8),
            Arg::F64(2.5),
            Arg::Buffer(&buf, 0),
            Arg::Buffer(&buf, 64),
            Arg::Buffer(&buf, 65),
            Arg::Buffer(&in_arena, 16),
            Arg::Buffer(&in_arena, 257),
        ];
        pool.extend(bytes.iter().map(|b| Arg::Bytes(b)));
        let good = LaunchConfig::for_elements(64, 32);
        let cfgs = [
            good,
            LaunchConfig {
                block: [0, 1, 1],
                ..good
            },
            LaunchConfig {
                block: [4096, 1, 1],
                ..good
            },
            LaunchConfig {
                shared_mem_bytes: u32::MAX,
                ..good
            },
        ];
        let agg = [0u8; 12];
        let kernels: [(&str, Vec<Arg<'_>>); 5] = [
            ("noop", vec![Arg::U32(1)]),
            ("stamp", vec![Arg::Buffer(&buf, 0), Arg::U32(1)]),
            (
                "mixed",
                vec![Arg::U8(1), Arg::F64(2.0), Arg::U16(3), Arg::Buffer(&buf, 8)],
            ),
            ("agg", vec![Arg::U32(1), Arg::Bytes(&agg)]),
            (
                "many",
                (0..9)
                    .map(Arg::U32)
                    .chain([Arg::Buffer(&in_arena, 0)])
                    .collect(),
            ),
        ];
        let (mut accepted, mut refused) = (0, 0);
        for (name, matching) in &kernels {
            let k = reg.kernel(name).unwrap();
            let params: Vec<ParamInfo> = k.params().to_vec();
            let n = params.len();
            let mut cases = lists(&pool, matching, n);
            // One argument too few and one too many.
            cases.push(matching[..n - 1].to_vec());
            cases.push(matching.iter().chain(&matching[..1]).copied().collect());
            for cfg in &cfgs {
                for args in &cases {
                    let slots = args.len().max(INLINE_ARGS);
                    let mut scalars = vec![0u64; slots];
                    let mut pointers = vec![ptr::null_mut::<c_void>(); slots];
                    let fast = lay_out(
                        &host,
                        stream.generation(),
                        &k,
                        cfg,
                        args,
                        &mut scalars,
                        &mut pointers,
                    );
                    let reference = stream.prepare(&k, *cfg, args);
                    assert_eq!(
                        fast,
                        reference.is_ok(),
                        "{name} {cfg:?} {args:?}: {:?}",
                        reference.err()
                    );
                    let Ok(mut packed) = reference else {
                        refused += 1;
                        continue;
                    };
                    accepted += 1;
                    let reference = packed.as_params();
                    for (i, p) in params.iter().enumerate() {
                        // SAFETY: `reference` holds one pointer per parameter (n of them).
                        let want = bytes_at(unsafe { *reference.add(i) }, p.size);
                        assert_eq!(bytes_at(pointers[i], p.size), want, "{name} {args:?} #{i}");
                    }
                }
            }
        }
        assert!(accepted > 20 && refused > 1000, "{accepted} / {refused}");
        // Through `launch` itself: every slot kind, inline and (past INLINE_ARGS) on the heap.
        for (name, args) in &kernels {
            let k = reg.kernel(name).unwrap();
            stream.launch(&k, good, args).unwrap().wait().unwrap();
            let mut short = args.clone();
            short.pop();
            assert!(matches!(
                stream.launch(&k, good, &short),
                Err(crate::Error::ArgMismatch { .. })
            ));
        }
    }
}
