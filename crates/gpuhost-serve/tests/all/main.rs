//! gpuhost-serve's integration tests: the deploy/ recipe checked against the server it deploys.
//! (The server as a process — swaps under load, faults, SIGTERM, metrics, the status page — is
//! tested through the `gpuhost` binary in crates/gpuhost-cli/tests/all/serve.)

mod deploy;
