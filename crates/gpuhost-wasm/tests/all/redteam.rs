//! The red-team suite of issue #9: a hostile guest (tests/guests/redteam) attacks while a victim
//! guest holds a secret in device memory and 8 bystander guests do correct work. In every case
//! the victim's bytes stay unchanged and unseen, the attacker gets its typed error, every
//! bystander finishes with a correct result, and the device is never poisoned.
//!
//! The attacker is handed the victim's device address (the strongest form of each attack; it
//! also aims at addresses guessed from its own buffers). Attacks that would fault an unconfined
//! device run in a child process, so a sandbox bug fails that test alone.

use gpuhost_wasm::{Limits, RunOutcome};

use crate::{device, guest, opts, stdout};

/// The attacker's verdict line: its outcomes (in order of first appearance) and secret words seen.
fn verdict(o: &RunOutcome, attack: &str) -> (Vec<String>, u32) {
    let out = stdout(o);
    let err = String::from_utf8_lossy(&o.stderr);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("result {attack} ")))
        .unwrap_or_else(|| panic!("{attack}: no verdict; stdout {out:?} stderr {err:?}"));
    let field = |k: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .unwrap_or_else(|| panic!("{attack}: {k} missing in {line:?}"))
    };
    let outcomes = field("outcome=").split('+').map(str::to_string).collect();
    (outcomes, field("seen=").parse().expect("seen count"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_guest_dropping_a_flooded_stream_still_has_its_launches_counted() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let mut o = opts("redteam", &["flood", "0", "0"]);
    o.limits = Limits {
        sandbox: false,
        max_launches_in_flight: 16,
        ..Limits::default()
    };
    let out = rt.run(&guest("redteam"), o).await.unwrap();
    assert_eq!(
        verdict(&out, "flood").0,
        ["quota-exceeded", "ok"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
