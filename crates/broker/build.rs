fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/command_api.proto");
    tonic_build::configure().build_server(true).build_client(true).compile_protos(&["proto/command_api.proto"], &["proto"])?;
    Ok(())
}
