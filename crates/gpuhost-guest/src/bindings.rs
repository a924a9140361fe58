//! Bindings generated from `wit/` by wit-bindgen; never edited by hand.
#![allow(missing_docs)]

wit_bindgen::generate!({
    path: "../../wit",
    world: "gpuhost:cuda/imports",
    generate_all,
});
