//! Conformance tests: every corpus kernel against its CPU reference, and the driver semantics
//! gpuhost depends on. The same code runs on softcuda (CI) and on NVIDIA's driver (the H200);
//! `GPUHOST_DRIVER` picks, and each run prints which driver it tested.

mod arrays;
mod calls;
mod context;
mod device;
mod device_io;
mod entry;
mod fatbin;
mod generated;
mod graph_edit;
mod graph_memory;
mod graph_nodes;
mod graphs;
mod kernels;
mod launch;
mod library;
mod library_calls;
mod link;
mod mbarrier_sandboxed;
mod mbarrier_words;
mod member_masks;
mod memops;
mod memory;
mod peers;
mod per_thread;
mod pools;
mod programs;
mod reconvergence;
mod reference;
mod sandbox;
mod stalls;
mod sticky;
mod streams;
mod support;
mod textures;
mod vmm;
