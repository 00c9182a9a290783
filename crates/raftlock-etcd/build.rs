//! Generates the gRPC server code for etcd's v3 services, and the client
//! stubs the Jepsen harness and the benchmark speak to etcd with, from the
//! `.proto` files under `proto/` (copied from etcd, README.md), with
//! protox: a pure-Rust protobuf compiler, so the build needs no system
//! `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/etcd/etcdserver/etcdserverpb/rpc.proto",
        "proto/etcd/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
        "proto/etcd/etcdserver/api/v3election/v3electionpb/v3election.proto",
    ];
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .generate_default_stubs(true)
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
