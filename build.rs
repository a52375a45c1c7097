//! With the `exporter` feature: KEDA's external scaler interface (proto/externalscaler.proto)
//! into Rust, with protox (a protobuf compiler in Rust), so no `protoc` is needed on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "exporter")]
    {
        println!("cargo:rerun-if-changed=proto/externalscaler.proto");
        let fds = protox::compile(["proto/externalscaler.proto"], ["proto"])?;
        tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    }
    Ok(())
}
