//! The corpus table — the one source of truth for each kernel's parameters, launch shape,
//! random inputs, CPU reference and tolerance. Tolerances are stated beside each reference.

mod basic;
mod bits;
mod pipeline;
mod rows;
mod spaces;
mod tensor;
mod wide;

use crate::case::KernelCase;

/// Every corpus kernel with a conformance case.
pub const CASES: &[KernelCase] = &[
    KernelCase {
        name: "vector_add",
        file: "vector_add",
        kernel: "vector_add",
        build: basic::vector_add,
    },
    KernelCase {
        name: "saxpy",
        file: "saxpy",
        kernel: "saxpy",
        build: basic::saxpy,
    },
    KernelCase {
        name: "reduce_shared",
        file: "reduce_shared",
        kernel: "reduce_shared",
        build: basic::reduce_shared,
    },
    KernelCase {
        name: "reduce_warp",
        file: "reduce_warp",
        kernel: "reduce_warp",
        build: basic::reduce_warp,
    },
    KernelCase {
        name: "scan_block",
        file: "scan_block",
        kernel: "scan_block",
        build: basic::scan_block,
    },
    KernelCase {
        name: "matmul_tiled",
        file: "matmul_tiled",
        kernel: "matmul_tiled",
        build: basic::matmul_tiled,
    },
    KernelCase {
        name: "transpose",
        file: "transpose",
        kernel: "transpose",
        build: basic::transpose,
    },
    KernelCase {
        name: "softmax_rows",
        file: "softmax_rows",
        kernel: "softmax_rows",
        build: rows::softmax_rows,
    },
    KernelCase {
        name: "layer_norm",
        file: "layer_norm",
        kernel: "layer_norm",
        build: rows::layer_norm,
    },
    KernelCase {
        name: "histogram",
        file: "histogram",
        kernel: "histogram",
        build: rows::histogram,
    },
    KernelCase {
        name: "f16_convert",
        file: "f16_convert",
        kernel: "f16_convert",
        build: bits::f16_convert,
    },
    KernelCase {
        name: "f16_fma",
        file: "f16_convert",
        kernel: "f16_fma",
        build: bits::f16_fma,
    },
    KernelCase {
        name: "int_bits",
        file: "int_bits",
        kernel: "int_bits",
        build: bits::int_bits,
    },
    KernelCase {
        name: "device_call",
        file: "device_call",
        kernel: "device_call",
        build: bits::device_call,
    },
    KernelCase {
        name: "divergent",
        file: "divergent",
        kernel: "divergent",
        build: bits::divergent,
    },
    KernelCase {
        name: "oob_write_in_range",
        file: "oob_write",
        kernel: "oob_write",
        build: basic::oob_write_in_range,
    },
    KernelCase {
        name: "reduce_f64_dynamic",
        file: "reduce_f64_dynamic",
        kernel: "reduce_f64_dynamic",
        build: spaces::reduce_f64_dynamic,
    },
    KernelCase {
        name: "const_poly",
        file: "const_poly",
        kernel: "const_poly",
        build: spaces::const_poly,
    },
    KernelCase {
        name: "local_sort",
        file: "local_sort",
        kernel: "local_sort",
        build: spaces::local_sort,
    },
    KernelCase {
        name: "f64_math",
        file: "wide_math",
        kernel: "f64_math",
        build: wide::f64_math,
    },
    KernelCase {
        name: "u64_math",
        file: "wide_math",
        kernel: "u64_math",
        build: wide::u64_math,
    },
    KernelCase {
        name: "approx_f32",
        file: "wide_math",
        kernel: "approx_f32",
        build: wide::approx_f32,
    },
    KernelCase {
        name: "warp_vote",
        file: "warp_vote",
        kernel: "warp_vote",
        build: wide::warp_vote,
    },
    KernelCase {
        name: "mma_gemm_f16",
        file: "mma_gemm",
        kernel: "mma_gemm_f16",
        build: tensor::mma_gemm_f16,
    },
    KernelCase {
        name: "mma_gemm_f16_smem",
        file: "mma_gemm",
        kernel: "mma_gemm_f16_smem",
        build: tensor::mma_gemm_f16,
    },
    KernelCase {
        name: "mma_gemm_wmma",
        file: "mma_gemm",
        kernel: "mma_gemm_wmma",
        build: tensor::mma_gemm_wmma,
    },
    KernelCase {
        name: "mma_gemm_wmma_bf16",
        file: "mma_gemm",
        kernel: "mma_gemm_wmma_bf16",
        build: tensor::mma_gemm_wmma_bf16,
    },
    KernelCase {
        name: "mma_gemm_wmma_s8",
        file: "mma_gemm",
        kernel: "mma_gemm_wmma_s8",
        build: tensor::mma_gemm_wmma_s8,
    },
    KernelCase {
        name: "mma_gemm_wmma_tf32",
        file: "mma_gemm",
        kernel: "mma_gemm_wmma_tf32",
        build: tensor::mma_gemm_wmma_tf32,
    },
    KernelCase {
        name: "mma_gemm_wmma_f64",
        file: "mma_gemm",
        kernel: "mma_gemm_wmma_f64",
        build: tensor::mma_gemm_wmma_f64,
    },
    KernelCase {
        name: "mma_gemm_s8",
        file: "mma_gemm",
        kernel: "mma_gemm_s8",
        build: tensor::mma_gemm_s8,
    },
    KernelCase {
        name: "mbarrier_pipeline",
        file: "mbarrier_pipeline",
        kernel: "mbarrier_pipeline",
        build: pipeline::mbarrier_pipeline,
    },
];

/// The table entry named `name`.
pub fn find(name: &str) -> Option<&'static KernelCase> {
    CASES.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{ArgSpec, Init};
    use crate::rng::Rng;

    #[test]
    fn every_case_is_self_consistent() {
        for kc in CASES {
            let case = (kc.build)(&mut Rng::new(11));
            assert!(
                case.buffers.iter().any(|b| b.expect.is_some()),
                "{} checks nothing",
                kc.name
            );
            for arg in &case.args {
                if let ArgSpec::Buffer(i) = arg {
                    assert!(*i < case.buffers.len(), "{}: bad buffer index {i}", kc.name);
                }
            }
            for b in &case.buffers {
                if let (Init::Data(d), Some(e)) = (&b.init, &b.expect) {
                    assert_eq!(
                        d.len(),
                        e.byte_len(),
                        "{}: in/out `{}` sizes differ",
                        kc.name,
                        b.name
                    );
                }
            }
            let threads: u32 = case.shape.block.iter().product();
            assert!(
                (1..=1024).contains(&threads),
                "{}: {threads} threads per block",
                kc.name
            );
        }
    }

    #[test]
    fn case_names_are_unique() {
        for (i, a) in CASES.iter().enumerate() {
            assert!(
                CASES[i + 1..].iter().all(|b| b.name != a.name),
                "duplicate {}",
                a.name
            );
        }
    }

    #[test]
    fn references_change_with_the_seed() {
        for kc in CASES {
            let a = (kc.build)(&mut Rng::new(1));
            let b = (kc.build)(&mut Rng::new(2));
            assert_ne!(
                a.buffers, b.buffers,
                "{}: inputs do not depend on the seed",
                kc.name
            );
        }
    }
}
