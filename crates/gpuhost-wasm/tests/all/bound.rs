//! Bound launches (`bound-launch` in wit/stream.wit): checked when bound and at each change, and
//! they own what they launch, in the guest's quotas. Also the guest SDK's prepared `Launch`,
//! the argument-list launch a guest keeps and enqueues again.

use gpuhost_wasm::Limits;

use crate::{assert_ok, device, guest, opts, run};

/// Runs the misbehave guest's `mode`, which checks itself, and expects `<mode> ok`.
async fn misbehave_ok(mode: &str) {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let o = run(rt, "misbehave", &[mode]).await.unwrap();
    assert_ok(&o, &format!("{mode} ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_launches_refuse_bad_binds_and_changes_rerun_with_new_scalars_and_keep_their_buffers_counted()
 {
    misbehave_ok("bound").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_launch_enqueues_on_the_stream_set_for_it_and_refuses_one_the_guest_dropped() {
    misbehave_ok("bound-stream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_guest_launch_reruns_with_changed_arguments_and_refuses_an_index_or_width_it_lacks()
 {
    misbehave_ok("prepared").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_handles_and_bound_launches_count_against_their_quota() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    // The bound mode holds one kernel handle and then binds a launch: with room for one, the
    // bind must be refused, naming the quota.
    let o = rt
        .run(
            &guest("misbehave"),
            gpuhost_wasm::RunOptions {
                limits: Limits {
                    max_kernels: 1,
                    ..Limits::default()
                },
                ..opts("misbehave", &["bound"])
            },
        )
        .await
        .unwrap();
    assert_ne!(o.exit_code, 0, "a second kernel handle was not refused");
    let refusal = o.last_refusal.as_deref().unwrap_or_default();
    assert!(
        refusal.contains("kernel handles and bound launches"),
        "{refusal:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_argument_width_reaches_the_kernel_as_given_lowered_on_the_guests_stack_heap_or_bound()
 {
    misbehave_ok("widths").await;
}
