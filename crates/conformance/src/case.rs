//! One conformance case: the buffers, arguments and launch shape of a kernel run, and what each
//! output must hold afterwards. Built fresh from a seed for every run.

use crate::compare::Expect;
use crate::rng::Rng;
use crate::stream::LaunchShape;

/// How a device buffer starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    /// These bytes (an input, or an in/out buffer's starting contents).
    Data(Vec<u8>),
    /// This many bytes of the run's poison byte (an output the kernel must overwrite).
    Poison(usize),
}

/// One device buffer of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferSpec {
    /// The kernel parameter's name, for reports.
    pub name: &'static str,
    /// Starting contents.
    pub init: Init,
    /// What it must hold after the run (None: input only, not checked).
    pub expect: Option<Expect>,
}

impl BufferSpec {
    /// A read-only input.
    pub fn input(name: &'static str, bytes: Vec<u8>) -> BufferSpec {
        BufferSpec {
            name,
            init: Init::Data(bytes),
            expect: None,
        }
    }

    /// An output, poisoned before the run.
    pub fn output(name: &'static str, expect: Expect) -> BufferSpec {
        BufferSpec {
            name,
            init: Init::Poison(expect.byte_len()),
            expect: Some(expect),
        }
    }

    /// A buffer that starts with `bytes` and must end as `expect`.
    pub fn in_out(name: &'static str, bytes: Vec<u8>, expect: Expect) -> BufferSpec {
        BufferSpec {
            name,
            init: Init::Data(bytes),
            expect: Some(expect),
        }
    }

    /// Its size in bytes.
    pub fn byte_len(&self) -> usize {
        match &self.init {
            Init::Data(b) => b.len(),
            Init::Poison(n) => *n,
        }
    }
}

/// One kernel argument of a case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgSpec {
    /// The device address of `buffers[i]`.
    Buffer(usize),
    /// `int`.
    I32(i32),
    /// `unsigned`.
    U32(u32),
    /// `float`.
    F32(f32),
    /// `unsigned long long`.
    U64(u64),
}

/// A kernel run: shape, buffers and arguments in parameter order.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Launch shape.
    pub shape: LaunchShape,
    /// Device buffers.
    pub buffers: Vec<BufferSpec>,
    /// Kernel arguments, in the kernel's parameter order.
    pub args: Vec<ArgSpec>,
    /// Module variables (`__constant__` / `__device__`) written through cuModuleGetGlobal before
    /// the launch: name and exact contents.
    pub globals: Vec<(&'static str, Vec<u8>)>,
}

impl Case {
    /// The most common kernel signature in the corpus: every buffer as a pointer, in order, then
    /// the element count `n` as an `int`.
    pub fn buffers_then_n(shape: LaunchShape, buffers: Vec<BufferSpec>, n: usize) -> Case {
        let mut args: Vec<ArgSpec> = (0..buffers.len()).map(ArgSpec::Buffer).collect();
        args.push(ArgSpec::I32(n as i32));
        Case {
            shape,
            buffers,
            args,
            globals: Vec::new(),
        }
    }

    /// The elementwise two-input signature: buffers `a` and `b` in, `out` checked against
    /// `want`, then `n`; one thread per element in 128-thread blocks.
    pub fn a_b_to_out(n: usize, a: Vec<u8>, b: Vec<u8>, want: Expect) -> Case {
        Case::buffers_then_n(
            shape_1d(blocks_for(n, 128), 128),
            vec![
                BufferSpec::input("a", a),
                BufferSpec::input("b", b),
                BufferSpec::output("out", want),
            ],
            n,
        )
    }

    /// This case with module variable `name` set to `bytes` before the launch.
    pub fn with_global(mut self, name: &'static str, bytes: Vec<u8>) -> Case {
        self.globals.push((name, bytes));
        self
    }
}

/// An entry of the corpus table: which kernel, and how to build a case for it.
#[derive(Debug, Clone, Copy)]
pub struct KernelCase {
    /// The case name (also the test's subject).
    pub name: &'static str,
    /// The corpus file stem (`corpus/<file>.cu`, `corpus/<flavour>/<file>.ptx`).
    pub file: &'static str,
    /// The `extern "C"` kernel name.
    pub kernel: &'static str,
    /// Builds inputs, reference outputs and the launch from a seeded generator.
    pub build: fn(&mut Rng) -> Case,
}

/// Little-endian bytes of a slice of plain numbers.
pub trait LeBytes: Copy {
    /// Appends this value's little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
le_bytes!(u16, u32, i32, f32, u64, f64);

/// The little-endian bytes of `values`.
pub fn bytes_of<T: LeBytes>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(values));
    for v in values {
        v.put(&mut out);
    }
    out
}

/// Blocks needed to cover `n` items with `per_block` each.
pub fn blocks_for(n: usize, per_block: usize) -> u32 {
    n.div_ceil(per_block) as u32
}

/// A 1-D launch shape.
pub fn shape_1d(grid: u32, block: u32) -> LaunchShape {
    LaunchShape {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        shared_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_little_endian_and_sized_by_type() {
        assert_eq!(bytes_of(&[0x0102u16]), vec![2, 1]);
        assert_eq!(bytes_of(&[1.0f32]), 1.0f32.to_le_bytes().to_vec());
        assert_eq!(bytes_of(&[-1i32, 2]).len(), 8);
    }

    #[test]
    fn output_spec_is_poisoned_to_the_expected_length() {
        let b = BufferSpec::output("out", Expect::U16(vec![0; 5]));
        assert_eq!(b.init, Init::Poison(10));
        assert_eq!(b.byte_len(), 10);
    }

    #[test]
    fn blocks_cover_the_tail() {
        assert_eq!(blocks_for(257, 256), 2);
        assert_eq!(blocks_for(256, 256), 1);
    }
}
