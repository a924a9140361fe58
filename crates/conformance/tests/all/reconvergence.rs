//! A warp reconverges after divergent code that calls a function: a `shfl.sync` with the full
//! mask after the region reads every lane's value as the region left it. The PTX requires it
//! (the lanes wait for each other at `.sync` collectives), and the H100 does it; ptxvm's
//! divergence policy ran the lanes that skipped the call on past it first, because the callee's
//! code comes after the caller's, so the collective ran once per arm (conformance's generated
//! seed 9074, session 38). Each kernel here writes, for every lane, what `shfl.sync.idx` read
//! from the next lane; the host knows what that lane computed.

use conformance::case::shape_1d;
use conformance::context::Context;
use conformance::driver::shared_device;
use conformance::memory::DeviceBuffer;
use conformance::module::Module;
use conformance::stream::{KernelArg, Stream};

use crate::support::env_or_skip;

/// `twice` (triples its argument and adds one, through a nested call when it is odd) comes
/// first in the text, as in the generated programs, and `tail` last.
const FUNCTIONS: [&str; 2] = [
    r#"
.func (.param .b32 r) tail(.param .b32 x)
;

.func (.param .b32 r) twice(.param .b32 x)
{
	.reg .b32 %a<4>;
	.reg .pred %q;
	ld.param.b32 %a0, [x];
	mad.lo.u32 %a1, %a0, 3, 1;
	and.b32 %a2, %a0, 1;
	setp.eq.u32 %q, %a2, 0;
	@%q bra DONE;
	{
	.param .b32 y;
	st.param.b32 [y], %a1;
	.param .b32 s;
	call (s), tail, (y);
	ld.param.b32 %a1, [s];
	}
DONE:
	st.param.b32 [r], %a1;
	ret;
}
"#,
    // Adds 7, after a loop of `x % 4` trips that only some lanes of a warp take.
    r#"
.func (.param .b32 r) tail(.param .b32 x)
{
	.reg .b32 %a<4>;
	.reg .pred %q;
	ld.param.b32 %a0, [x];
	and.b32 %a2, %a0, 3;
	mov.u32 %a1, %a0;
	setp.eq.u32 %q, %a2, 0;
	@%q bra DONE;
LOOP:
	add.u32 %a1, %a1, 1000;
	sub.u32 %a2, %a2, 1;
	setp.ne.u32 %q, %a2, 0;
	@%q bra LOOP;
DONE:
	add.u32 %a1, %a1, 7;
	st.param.b32 [r], %a1;
	ret;
}
"#,
];

/// Each kernel's divergent region: it leaves lane `%r1`'s value in `%r3`.
const REGIONS: [(&str, &str); 3] = [
    // Lanes of odd index call `twice`; the others add 100.
    (
        "call_in_one_arm",
        "	and.b32 %r2, %r1, 1;
	setp.eq.u32 %p, %r2, 0;
	@%p bra EVEN;
	CALL(twice)
	bra JOIN;
EVEN:
	add.u32 %r3, %r1, 100;",
    ),
    // Lanes whose index is a multiple of 3 call `twice` through a predicated call.
    (
        "predicated_call",
        "	add.u32 %r3, %r1, 100;
	rem.u32 %r2, %r1, 3;
	setp.eq.u32 %p, %r2, 0;
	@%p CALL(twice)",
    ),
    // Three arms by lane % 3 through `brx.idx`: 0 adds 100, 1 calls `twice`, 2 calls `tail`.
    (
        "three_arms",
        "	rem.u32 %r2, %r1, 3;
	ARMS: .branchtargets PLAIN, ONE, TWO;
	brx.idx %r2, ARMS;
PLAIN:
	add.u32 %r3, %r1, 100;
	bra JOIN;
ONE:
	CALL(twice)
	bra JOIN;
TWO:
	CALL(tail)",
    ),
];

/// The module: the functions around the kernels, each kernel its region, then every lane
/// reading lane + 1's `%r3` and writing it to `out`.
fn module_text() -> String {
    let kernels: String = REGIONS
        .iter()
        .map(|(name, region)| {
            let region = region
                .replace("@%p CALL(twice)", &call("@%p ", "twice"))
                .replace("CALL(twice)", &call("", "twice"))
                .replace("CALL(tail)", &call("", "tail"));
            format!(
                "
.visible .entry {name}(.param .u64 out)
{{
	.reg .b32 %r<6>;
	.reg .b64 %rd<4>;
	.reg .pred %p;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
{region}
JOIN:
	add.u32 %r4, %r1, 1;
	shfl.sync.idx.b32 %r5, %r3, %r4, 31, -1;
	mul.wide.u32 %rd2, %r1, 4;
	add.u64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r5;
	ret;
}}
"
            )
        })
        .collect();
    format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n{}{kernels}{}",
        FUNCTIONS[0], FUNCTIONS[1]
    )
}

/// `%r3 = f(%r1)` through the `.param` space, as nvcc calls, the call under `guard` (PTX
/// allows no guard on `ld.param`, so the result moves under it).
fn call(guard: &str, f: &str) -> String {
    format!(
        "{{
	.param .b32 a;
	st.param.b32 [a], %r1;
	.param .b32 v;
	{guard}call (v), {f}, (a);
	ld.param.b32 %r4, [v];
	{guard}mov.u32 %r3, %r4;
	}}"
    )
}

/// Threads of the launch: two warps.
const THREADS: u32 = 64;

fn tail(x: u32) -> u32 {
    x + 1000 * (x % 4) + 7
}

fn twice(x: u32) -> u32 {
    let y = 3 * x + 1;
    if x.is_multiple_of(2) { y } else { tail(y) }
}

/// Lane `l`'s value in each kernel, before the shuffle.
fn computed(kernel: &str, l: u32) -> u32 {
    match (kernel, l % 2, l % 3) {
        ("call_in_one_arm", 1, _) | ("predicated_call", _, 0) | ("three_arms", _, 1) => twice(l),
        ("three_arms", _, 2) => tail(l),
        _ => l + 100,
    }
}

#[test]
fn a_shuffle_after_divergent_calls_reads_every_lane_as_the_calls_left_it() {
    let _shared = shared_device();
    let Some(env) = env_or_skip() else { return };
    let ctx = Context::primary(env).expect("retain the primary context");
    let stream = Stream::new(&ctx).expect("a stream");
    let module = Module::load_ptx(&ctx, &module_text()).expect("the kernels load");
    let mut wrong = Vec::new();
    for kernel in ["call_in_one_arm", "predicated_call", "three_arms"] {
        let f = module.function(kernel).expect("the kernel's function");
        let out = DeviceBuffer::alloc(&ctx, THREADS as usize * 4).expect("an output buffer");
        stream
            .launch(&f, shape_1d(1, THREADS), &[KernelArg::Ptr(out.ptr())])
            .and_then(|()| stream.synchronize())
            .expect("the kernel runs");
        let got = out.to_vec().expect("the output");
        for (t, w) in got.chunks_exact(4).enumerate() {
            let t = t as u32;
            let from = t / 32 * 32 + (t + 1) % 32;
            let (got, want) = (
                u32::from_le_bytes([w[0], w[1], w[2], w[3]]),
                computed(kernel, from),
            );
            if got != want {
                wrong.push(format!(
                    "{kernel} thread {t}: {got} ({got:#x}), want lane {from}'s {want}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} lanes read wrong values:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
