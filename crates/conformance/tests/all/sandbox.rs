//! Every corpus kernel, rewritten by the PTX sandbox and run the way a sandboxed guest runs it
//! (buffers and globals in one arena, hidden arguments appended), gives its reference answer on
//! the driver under test and makes no fenced access: on softcuda in CI, and on NVIDIA's JIT and
//! GPU on the H200, which also proves NVIDIA accepts the rewritten PTX.

use conformance::cases::CASES;
use conformance::context::Context;
use conformance::corpus::flavours_defining;
use conformance::driver::shared_device;
use conformance::rng::fresh_seed;
use conformance::run::POISONS;
use conformance::sandboxed::run_case_sandboxed;

use crate::support::env_or_skip;

#[test]
fn every_corpus_kernel_gives_its_reference_answer_through_the_sandbox() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain the primary context");
    let (mut ran, mut failures) = (0, Vec::new());
    for kc in CASES {
        for flavour in flavours_defining(kc.file, kc.kernel) {
            for poison in POISONS {
                let seed = fresh_seed();
                match run_case_sandboxed(&ctx, kc, flavour, seed, poison) {
                    Ok(r) => {
                        ran += 1;
                        println!(
                            "{} [{flavour}] sandboxed on {}: ok, {} output(s), {:.3} ms",
                            kc.name, env.choice.kind, r.outputs_checked, r.kernel_ms
                        );
                    }
                    Err(e) => failures.push(e.to_string()),
                }
            }
        }
    }
    assert!(ran > 0, "no corpus case ran");
    assert!(
        failures.is_empty(),
        "on {}, {} of {} sandboxed runs failed:\n{}",
        env.choice.kind,
        failures.len(),
        ran + failures.len(),
        failures.join("\n")
    );
}
