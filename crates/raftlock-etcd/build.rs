//! Generates the gRPC server code for etcd's v3 services, and the client
//! stubs the Jepsen harness and the benchmark speak to etcd with, from the
//! `.proto` files under `third_party/proto/` (copied from etcd, README.md),
//! with protox: a pure-Rust protobuf compiler, so the build needs no system
//! `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "third_party/proto/etcd/etcdserver/etcdserverpb/rpc.proto",
        "third_party/proto/etcd/etcdserver/api/v3lock/v3lockpb/v3lock.proto",
        "third_party/proto/etcd/etcdserver/api/v3election/v3electionpb/v3election.proto",
    ];
    let descriptors = protox::compile(files, ["third_party/proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .generate_default_stubs(true)
        .compile_fds(descriptors)?;
    println!("cargo:rerun-if-changed=third_party/proto");
    Ok(())
}
