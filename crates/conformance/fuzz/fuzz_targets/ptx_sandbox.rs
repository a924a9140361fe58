//! Fuzz target: the PTX sandbox's rewrite (`ptxvm::sandbox::sandbox`) on arbitrary UTF-8 must
//! return Ok or a typed error, never panic, hang or crash; and what it accepts from a module
//! ptxvm loads must load too, since the rewritten text is what a sandboxed guest's module becomes
//! on both drivers. The first byte picks the policy (poll interval, loop versioning,
//! if-conversion, the entry's arena check), so every pass the policy can switch off is reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ptxvm::sandbox::{Policy, sandbox};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let policy = Policy {
        poll_interval: 1 << (pick & 0x0f).min(12),
        version_loops: pick & 0x10 == 0,
        if_convert: pick & 0x20 == 0,
        check_arena_at_entry: pick & 0x40 != 0,
        early_loop_free_check: pick & 0x80 == 0,
        ..Policy::default()
    };
    let Ok(out) = sandbox(text, &policy) else {
        return;
    };
    if ptxvm::Module::load(text).is_ok()
        && let Err(e) = ptxvm::Module::load(&out.ptx)
    {
        panic!("the sandbox's output of a module ptxvm loads does not load: {e}\n{}", out.ptx);
    }
});
