//! Generates the KEDA external scaler protocol's messages, server and (for the tests' KEDA
//! stand-in) client from `proto/externalscaler.proto`, parsed by protox: no `protoc` needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    const PROTO: &str = "proto/externalscaler.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    let descriptors = protox::compile([PROTO], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // A sorted map: the metadata hashes the same whatever order KEDA sent it in.
        .btree_map(".")
        .compile_fds(descriptors)?;
    Ok(())
}
