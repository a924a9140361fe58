//! The one place the tests and benches spell out a whole `ptxvm::Launch`, so a new launch field
//! is defaulted here once. Included by path from the unit tests and the benches: test support,
//! not ptxvm's API.

use ptxvm::Launch;

/// A launch of kernel `kernel` with `params`: one block of one thread, no dynamic shared memory,
/// no globals, one worker, no watchdog. Override fields with `Launch { .., ..launch(k, &p) }`.
pub fn launch(kernel: usize, params: &[u8]) -> Launch<'_> {
    Launch {
        kernel,
        grid: [1, 1, 1],
        block: [1, 1, 1],
        dynamic_shared_bytes: 0,
        params,
        globals: &[],
        workers: 1,
        cancel: None,
        deadline: None,
    }
}
