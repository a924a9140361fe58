//! Every corpus kernel, in every PTX flavour present, on fresh random inputs twice (with two
//! different output poisons), compared with its CPU reference.

use conformance::cases;
use conformance::context::Context;
use conformance::corpus::flavours_defining;
use conformance::driver::shared_device;
use conformance::rng::fresh_seed;
use conformance::run::{POISONS, run_case};

use crate::support::env_or_skip;

fn run_everywhere(name: &str) {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let kc = cases::find(name).unwrap_or_else(|| panic!("no corpus case named {name}"));
    let flavours = flavours_defining(kc.file, kc.kernel);
    assert!(
        !flavours.is_empty(),
        "no PTX for {}: run corpus/gen-clang.sh",
        kc.file
    );
    let ctx = Context::primary(env).expect("retain the primary context");
    let mut failures = Vec::new();
    for flavour in flavours {
        for poison in POISONS {
            let seed = fresh_seed();
            match run_case(&ctx, kc, flavour, seed, poison) {
                Ok(r) => println!(
                    "{name} [{flavour}] on {}: ok, {} output(s), {:.3} ms (seed {seed})",
                    env.choice.kind, r.outputs_checked, r.kernel_ms
                ),
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "on {}:\n{}",
        env.choice.kind,
        failures.join("\n")
    );
}

macro_rules! kernel_tests {
    ($($test:ident => $case:literal,)*) => {
        $(
            #[test]
            fn $test() {
                run_everywhere($case);
            }
        )*
        const TESTED: &[&str] = &[$($case),*];
    };
}

kernel_tests! {
    vector_add_matches_cpu_reference => "vector_add",
    saxpy_grid_stride_matches_cpu_reference => "saxpy",
    reduce_shared_block_sums_match_cpu_reference => "reduce_shared",
    reduce_warp_shuffle_sums_match_cpu_reference => "reduce_warp",
    scan_block_prefix_sums_are_exact => "scan_block",
    matmul_tiled_matches_cpu_reference => "matmul_tiled",
    transpose_through_padded_tile_is_exact => "transpose",
    softmax_rows_matches_cpu_reference => "softmax_rows",
    layer_norm_matches_cpu_reference => "layer_norm",
    histogram_shared_and_global_atomics_count_exactly => "histogram",
    f16_and_bf16_conversions_round_to_nearest_even => "f16_convert",
    f16_fma_is_correctly_rounded => "f16_fma",
    integer_bit_ops_follow_ptx_semantics => "int_bits",
    device_function_calls_return_correct_values => "device_call",
    divergent_lanes_reconverge_for_ballot => "divergent",
    in_range_store_writes_exactly_one_element => "oob_write_in_range",
    f64_sums_in_dynamic_shared_memory_are_exact => "reduce_f64_dynamic",
    constant_and_initialised_globals_reach_the_kernel => "const_poly",
    local_arrays_sort_correctly => "local_sort",
    f64_arithmetic_is_correctly_rounded => "f64_math",
    u64_arithmetic_is_exact => "u64_math",
    approximate_math_is_within_ptx_documented_error => "approx_f32",
    warp_votes_shuffle_up_and_cas_max_are_exact => "warp_vote",
    tensor_core_f16_products_match_cpu_reference => "mma_gemm_f16",
    tensor_core_s8_products_are_exact => "mma_gemm_s8",
    tensor_core_f16_through_ldmatrix_matches_cpu_reference => "mma_gemm_f16_smem",
    tensor_core_f16_through_wmma_matches_cpu_reference => "mma_gemm_wmma",
    tensor_core_bf16_through_wmma_matches_cpu_reference => "mma_gemm_wmma_bf16",
    tensor_core_s8_through_wmma_is_exact => "mma_gemm_wmma_s8",
    tensor_core_tf32_through_wmma_matches_cpu_reference => "mma_gemm_wmma_tf32",
    tensor_core_f64_through_wmma_matches_cpu_reference => "mma_gemm_wmma_f64",
    cp_async_tiles_handed_over_by_mbarriers_match_cpu_reference => "mbarrier_pipeline",
}

#[test]
fn every_corpus_case_has_a_kernel_test() {
    for kc in cases::CASES {
        assert!(
            TESTED.contains(&kc.name),
            "corpus case {} has no test in kernels.rs",
            kc.name
        );
    }
}
