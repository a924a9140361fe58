//! Fuzz target: `ptxvm::Module::load` on arbitrary UTF-8 must return Ok or a typed error —
//! never panic, hang or crash. Seed it with the corpus PTX (see crates/conformance/fuzz/README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ptxvm::Module::load(text);
    }
});
