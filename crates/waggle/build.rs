//! Names the build the binary comes from, for `waggle --version` and the start-up log: the cargo
//! profile (read from the output directory, `<target>/[<triple>/]<profile>/build/<crate>/out`),
//! whether debug assertions are on, and whether it was optimised with a PGO profile; links the
//! binary with its functions in the order `WAGGLE_SYMBOL_ORDER` names, when given.

fn main() {
    let out_dir = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = std::path::Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .map(|n| if n == "debug" { "dev" } else { n })
        .unwrap_or("unknown")
        .to_string();
    let debug_assertions = std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some();
    let pgo = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default().contains("profile-use");
    let mut build = format!("{profile} build");
    if pgo {
        build.push_str(", profile-guided");
    }
    if std::env::var_os("WAGGLE_SYMBOL_ORDER").is_some() {
        build.push_str(", functions laid out");
    }
    if debug_assertions {
        build.push_str(", debug assertions");
    }
    println!("cargo:rustc-env=WAGGLE_BUILD={build}");
    // Relative relocations packed (DT_RELR, glibc >= 2.36, binutils >= 2.38): the dynamic loader
    // reads a few KB instead of the ~2.5 MB of `.rela.dyn` a position-independent binary of this
    // size carries, pages that otherwise stay resident (W6's idle RSS, docs/performance.md).
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        // The functions a node runs laid out together (scripts/build-pgo.sh records them): the
        // kernel maps code 64 KB around each page touched, so scattered functions kept ~16 MB of
        // the binary resident on an idle node, laid out together ~7 MB. An option of lld, the
        // linker Rust uses by default on x86-64 Linux.
        if let Ok(order) = std::env::var("WAGGLE_SYMBOL_ORDER") {
            println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
            println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
            println!("cargo:rerun-if-changed={order}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=WAGGLE_SYMBOL_ORDER");
}
