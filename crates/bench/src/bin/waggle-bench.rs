//! `waggle-bench`: the bench on its own, for development (`waggle bench` is the same).

use clap::Parser;

#[derive(Parser)]
#[command(name = "waggle-bench", about = "Zeebe's benchmark against Waggle or the real Zeebe")]
struct Cli {
    #[command(flatten)]
    bench: waggle_bench::BenchArgs,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(waggle_bench::run(cli.bench))
}
