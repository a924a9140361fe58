//! Guests that misuse the interface get the error variant for their mistake (checked inside
//! the guest, which exits 1 otherwise), and the host keeps serving other guests meanwhile.

use gpuhost_wasm::{Error, Limits};

use crate::{assert_ok, device, guest, opts, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_buffer_accesses_get_out_of_bounds_and_the_buffer_keeps_working() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    assert_ok(&run(rt, "misbehave", &["oob"]).await.unwrap(), "oob ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_argument_lists_get_arg_mismatch() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    assert_ok(
        &run(rt, "misbehave", &["bad-args"]).await.unwrap(),
        "bad-args ok",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impossible_launch_dimensions_get_invalid_launch() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    assert_ok(
        &run(rt, "misbehave", &["bad-launch"]).await.unwrap(),
        "bad-launch ok",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_ptx_gets_invalid_ptx_and_missing_kernels_kernel_not_found() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    assert_ok(
        &run(rt, "misbehave", &["bad-ptx"]).await.unwrap(),
        "bad-ptx ok",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_quota_allocations_and_modules_get_quota_exceeded() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let limits = Limits {
        max_buffers: 8,
        max_buffer_bytes: 1 << 20,
        max_modules: 3,
        max_ptx_bytes: 64 << 10,
        ..Limits::default()
    };
    let g = guest("misbehave");
    let o = rt.run(
        &g,
        gpuhost_wasm::RunOptions {
            limits,
            ..opts("misbehave", &["over-quota"])
        },
    );
    assert_ok(&o.await.unwrap(), "over-quota ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_guest_runs_out_of_fuel_and_traps() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let limits = Limits {
        fuel: Some(50_000_000),
        ..Limits::default()
    };
    let g = guest("misbehave");
    let o = rt.run(
        &g,
        gpuhost_wasm::RunOptions {
            limits,
            ..opts("misbehave", &["spin"])
        },
    );
    match o.await {
        Err(Error::Trap {
            out_of_fuel: true, ..
        }) => {}
        other => panic!("expected an out-of-fuel trap, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misbehaving_guests_do_not_disturb_well_behaved_ones_beside_them() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let bad = ["oob", "bad-args", "bad-launch", "bad-ptx", "trap", "leak"];
    let mut tasks = Vec::new();
    for (i, mode) in bad.into_iter().enumerate() {
        tasks.push(tokio::spawn(async move {
            (
                format!("misbehave {mode}"),
                run(rt, "misbehave", &[mode]).await,
            )
        }));
        let n = (1000 + 100 * i).to_string();
        tasks.push(tokio::spawn(async move {
            (format!("saxpy {n}"), run(rt, "saxpy", &[&n]).await)
        }));
    }
    for t in tasks {
        let (what, r) = t.await.unwrap();
        match (what.as_str(), r) {
            (
                "misbehave trap",
                Err(Error::Trap {
                    out_of_fuel: false, ..
                }),
            ) => {}
            ("misbehave leak", Ok(o)) => assert_ok(&o, "leak ok"),
            (w, Ok(o)) if w.starts_with("saxpy") => assert_ok(&o, "saxpy ok"),
            (w, Ok(o)) => assert_ok(&o, &format!("{} ok", &w["misbehave ".len()..])),
            (w, Err(e)) => panic!("{w}: {e}"),
        }
    }
}

/// The host lifts `stream.launch`'s argument list itself (arg_list.rs), straight from the
/// guest's bytes: a list no binding would lower (an `arg` case that does not exist, a buffer
/// handle naming no resource, a list running past the guest's memory) traps that guest, as
/// wasmtime's generated lift does, with the cause in the trap, and the host serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_lists_no_binding_would_lower_trap_the_guest_and_the_host_serves_on() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    for (which, cause) in [
        ("case", "unexpected discriminant: 200"),
        ("handle", "unknown handle index"),
        ("bounds", "list pointer/length out of bounds of memory"),
    ] {
        match run(rt, "misbehave", &["raw-args", which]).await {
            Err(Error::Trap {
                reason,
                out_of_fuel: false,
            }) => assert!(reason.contains(cause), "raw-args {which}: {reason}"),
            other => panic!("raw-args {which}: not a trap: {other:?}"),
        }
    }
    assert_ok(&run(rt, "saxpy", &["1000"]).await.unwrap(), "saxpy ok");
}
