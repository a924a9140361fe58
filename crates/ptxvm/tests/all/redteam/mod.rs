//! Red-team kernels against the sandbox, in hand-written PTX: each tries to read or write
//! memory outside its arena (or to run forever, or to use a refused instruction). In every case
//! the victim allocation is unchanged and never even translated, the attacker's output holds no
//! victim data, the control block's fault word names the launch, and no `Fault` comes back.

use std::sync::atomic::Ordering;
use std::time::Duration;

use std::sync::OnceLock;

use ptxvm::sandbox::{Policy, Sandboxed, sandbox};
use ptxvm::{Error, FaultKind, Launch, Module};

use crate::fastpath::output_in;
use crate::launch::launch;

use super::sandbox::{Arg, FAULT, GuestMem, Hidden, Shape, load_sandboxed, run_sandboxed};

mod limits;
mod mbarrier;
mod memory;
mod refusals;
mod rows;
mod shapes;
mod stops;
mod uniform;

use refusals::refused;
use stops::abort_after;
pub use stops::{abort_in, abort_in_with};

const HEAD: &str = ".version 8.0\n.target sm_90\n.address_size 64\n";
const TAG: u32 = 0x7a9;
pub(crate) const EPOCH: u32 = 3;

pub fn ptx(body: &str) -> String {
    format!("{HEAD}{body}")
}

/// The red-team module (tests/fixtures/redteam.ptx) as written, and rewritten and loaded.
fn fixture() -> &'static (String, Sandboxed, Module) {
    static F: OnceLock<(String, Sandboxed, Module)> = OnceLock::new();
    F.get_or_init(|| {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
        let text = std::fs::read_to_string(format!("{dir}/tests/fixtures/redteam.ptx"))
            .expect("tests/fixtures/redteam.ptx");
        let (s, m) = load_sandboxed(&text);
        (text, s, m)
    })
}

/// Runs red-team `kernel` with `args` (built from the memory), and checks the outcome.
fn attack(
    kernel: &str,
    shape: Shape,
    args: impl FnOnce(&mut GuestMem) -> Vec<Arg>,
    expect_fenced: bool,
) -> GuestMem {
    attack_in(&fixture().2, kernel, shape, args, expect_fenced)
}

/// `attack` on a kernel of another rewritten module.
pub fn attack_in(
    m: &Module,
    kernel: &str,
    shape: Shape,
    args: impl FnOnce(&mut GuestMem) -> Vec<Arg>,
    expect_fenced: bool,
) -> GuestMem {
    let mut mem = GuestMem::new();
    let args = args(&mut mem);
    mem.ctl_word(0).store(EPOCH, Ordering::SeqCst);
    let hidden = Hidden {
        globals: 0,
        epoch: EPOCH,
    };
    run_sandboxed(m, kernel, shape, &args, &hidden, &mem)
        .unwrap_or_else(|f| panic!("{kernel}: the sandboxed kernel faulted: {f}"));
    mem.assert_victim_safe();
    let word = mem.ctl_word(FAULT).load(Ordering::SeqCst);
    if expect_fenced {
        assert_eq!(word, TAG, "{kernel}: the fault word names the launch");
    } else {
        assert_eq!(word, 0, "{kernel}: nothing was fenced");
    }
    mem
}
