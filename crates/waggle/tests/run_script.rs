//! The README's run command, `scripts/run.sh`, starts the optimised build: the PGO build where a
//! profile of the sources exists, else the release build (LTO); never the dev build the tests
//! use. Checked with `--print-build`, which builds nothing (CI does not compile RocksDB a second
//! time), in a target directory of the test's own. The binary names its build in `--version`.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{repo_root, run_with_timeout};

/// `scripts/run.sh --print-build` with `target` as the cargo target directory: its lines by key.
fn print_build(target: &Path) -> HashMap<String, String> {
    // a run.sh without the option would build (and then start) whatever it builds: not here
    let script = std::fs::read_to_string(repo_root().join("scripts/run.sh")).expect("scripts/run.sh");
    assert!(script.contains("--print-build"), "scripts/run.sh has no --print-build");
    let mut command = Command::new(repo_root().join("scripts/run.sh"));
    command.arg("--print-build").env("CARGO_TARGET_DIR", target);
    let output = run_with_timeout(&mut command, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "run.sh --print-build failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    stdout.lines().filter_map(|l| l.split_once(": ")).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The librocksdb-sys version Cargo.lock asks for.
fn locked_rocksdb_version() -> String {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let after = lock.split("name = \"librocksdb-sys\"\nversion = \"").nth(1).expect("librocksdb-sys in Cargo.lock");
    after.split('"').next().unwrap().to_owned()
}

/// A RocksDB library as the build of `profile_dir` leaves it: of Cargo.lock's version, or of
/// `version`, in the build folder `hash`.
fn fake_rocksdb_of(target: &Path, profile_dir: &str, hash: &str, version: &str) -> String {
    let build = target.join(profile_dir).join(format!("build/librocksdb-sys-{hash}"));
    std::fs::create_dir_all(build.join("out")).unwrap();
    std::fs::write(build.join("out/librocksdb.a"), b"").unwrap();
    // the build script's output names the crate's source folder, as cargo leaves it
    let manifest = format!("cargo:cargo_manifest_dir=/registry/src/librocksdb-sys-{version}\n");
    std::fs::write(build.join("output"), manifest).unwrap();
    build.join("out").display().to_string()
}

fn fake_rocksdb(target: &Path, profile_dir: &str) -> String {
    fake_rocksdb_of(target, profile_dir, "0123456789abcdef", &locked_rocksdb_version())
}

#[test]
fn run_script_starts_the_release_build_without_a_pgo_profile() {
    let target = tempfile::tempdir().unwrap();
    let build = print_build(target.path());
    assert!(build["build"].starts_with("release:"), "{build:?}");
    assert_eq!(build["command"], "cargo build --release -p waggle --bin waggle", "{build:?}");
    assert_eq!(build["binary"], target.path().join("release/waggle").display().to_string());
    assert_eq!(build["rocksdb"], "compiled by this build", "a fresh machine compiles RocksDB once, in the release build");

    // a library of another RocksDB version (another branch's build) is never linked
    fake_rocksdb_of(target.path(), "debug", "fedcba9876543210", "0.1.0+1.0.0");
    assert_eq!(print_build(target.path())["rocksdb"], "compiled by this build");
    // with the tests' dev build present, its RocksDB is linked, not compiled again
    let dev = fake_rocksdb(target.path(), "debug");
    assert_eq!(print_build(target.path())["rocksdb"], dev);
    // a release build that compiled RocksDB itself keeps its own
    fake_rocksdb(target.path(), "release");
    assert_eq!(print_build(target.path())["rocksdb"], "compiled by this build");
}

#[test]
fn run_script_starts_the_pgo_build_where_its_profile_exists() {
    let target = tempfile::tempdir().unwrap();
    let dev = fake_rocksdb(target.path(), "debug");
    let profile = print_build(target.path())["pgo profile"].clone();
    assert!(profile.starts_with(&target.path().join("pgo/waggle-").display().to_string()), "{profile}");
    std::fs::create_dir_all(Path::new(&profile).parent().unwrap()).unwrap();
    std::fs::write(&profile, b"").unwrap();

    let build = print_build(target.path());
    assert!(build["build"].starts_with("pgo:"), "{build:?}");
    assert!(build["command"].starts_with(&format!("RUSTFLAGS=-Cprofile-use={profile} cargo build --profile pgo ")), "{build:?}");
    assert!(build["binary"].starts_with(&target.path().join("pgo/use/").display().to_string()), "{build:?}");
    assert!(build["binary"].ends_with("/pgo/waggle"), "{build:?}");
    assert_eq!(build["rocksdb"], dev);
}

#[test]
fn version_names_the_build() {
    let output = run_with_timeout(Command::new(env!("CARGO_BIN_EXE_waggle")).arg("--version"), Duration::from_secs(20));
    let version = String::from_utf8_lossy(&output.stdout);
    // the binary is built with the tests' profile: `dev` (debug assertions) unless run otherwise
    let build = if cfg!(debug_assertions) { "dev build, debug assertions" } else { "release build" };
    assert_eq!(version.trim(), format!("waggle {} ({build})", env!("CARGO_PKG_VERSION")));
}
