//! For tests: a throw-away PostgreSQL server from Debian's `postgresql` package
//! (`scripts/install-system-deps.sh` installs it), in a temporary folder, on a free loopback
//! port, with `fsync` on, stopped and deleted when dropped. No system service is used.
//!
//! Run as root (as CI is), `initdb` and the server run as the `postgres` system user the
//! package creates (PostgreSQL refuses to run as root). Without the binaries, [`TestCluster::start`]
//! panics with a message naming the install script: a test needing PostgreSQL fails, never skips.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where the binaries are looked for: `WAGGLE_PG_BINDIR`, else Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest), else the `PATH`.
fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("WAGGLE_PG_BINDIR") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists()))
}

fn is_root() -> bool {
    // the effective uid, without libc: /proc/self/status's "Uid: real effective ..."
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0")))
        .unwrap_or(false)
}

/// A running throw-away server.
pub struct TestCluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    as_postgres: bool,
    pub port: u16,
}

impl TestCluster {
    /// Initialises and starts a server (user `waggle`, trust authentication on loopback).
    pub fn start() -> TestCluster {
        let bin = bin_dir().filter(|b| b.join("initdb").exists()).unwrap_or_else(|| {
            panic!(
                "PostgreSQL's binaries (initdb, pg_ctl) were not found: run scripts/install-system-deps.sh \
                 (it installs Debian's postgresql package), or set WAGGLE_PG_BINDIR"
            )
        });
        let dir = tempfile::Builder::new().prefix("waggle-pg-").tempdir().expect("a temporary folder");
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown").arg("postgres:").arg(dir.path()).status().expect("chown");
            assert!(
                status.success(),
                "chown postgres {}: is the postgresql package installed? run scripts/install-system-deps.sh",
                dir.path().display()
            );
        }
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
            listener.local_addr().expect("its address").port()
        };
        let cluster = TestCluster { bin, dir, as_postgres, port };
        cluster.run("initdb", &["-D", &cluster.data(), "-U", "waggle", "--auth=trust", "--encoding=UTF8", "--locale=C"]);
        cluster.resume();
        cluster
    }

    /// Starts the (stopped) server again, on the same port and data.
    pub fn resume(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=on -c max_connections=50",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        self.run("pg_ctl", &["-D", &self.data(), "-l", &log.display().to_string(), "-o", &options, "-w", "-t", "60", "start"]);
    }

    /// Stops the server (`fast`: open connections are closed).
    pub fn stop(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    /// Runs one of the binaries (as `postgres` when root); panics with its output on failure.
    fn run(&self, program: &str, args: &[&str]) -> Output {
        let path = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        command.args(args).current_dir(self.dir.path());
        let output = command.output().unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
        assert!(
            output.status.success(),
            "{program} {args:?} failed ({}):\n{}\n{}\nserver log:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
        );
        output
    }

    /// A new empty database on the server (the server's collation: bytewise); returns its URL.
    pub fn database(&self, name: &str) -> String {
        self.database_with(name, &[])
    }

    /// A new empty database with `createdb`'s `options` (e.g. a linguistic collation:
    /// `--template=template0 --locale-provider=icu --icu-locale=en-US`); returns its URL.
    pub fn database_with(&self, name: &str, options: &[&str]) -> String {
        let port = self.port.to_string();
        let mut args = vec!["-h", "127.0.0.1", "-p", &port, "-U", "waggle"];
        args.extend_from_slice(options);
        args.push(name);
        self.run("createdb", &args);
        self.url(name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://waggle@127.0.0.1:{}/{name}", self.port)
    }

    /// The server's folder (its log is `server.log` there).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let data = self.data();
        let path = self.bin.join("pg_ctl");
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let _ = command.args(["-D", &data, "-m", "fast", "-w", "stop"]).output();
    }
}
