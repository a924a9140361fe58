//! ptxvm end-to-end tests: PTX (hand-written and clang-generated from tests/fixtures) run on a
//! Vec-backed device memory and checked against CPU references on random inputs.

mod bounds;
mod breadth;
mod calls;
mod corpus;
mod countdown;
mod entry;
mod errors;
mod fastpath;
mod generated;
mod golden;
mod harness;
mod kernels;
mod launch;
mod lean;
mod matrix;
mod mbarrier;
mod mbarrier_sandbox;
mod progress;
mod redteam;
mod sandbox;
mod sass;
mod text;
mod versioned;
mod wmma;
mod wmma_types;
mod writes;
