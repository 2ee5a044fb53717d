//! `waggle-bench`: the bench on its own, for development (`waggle bench` is the same).

use clap::Parser;

#[derive(Parser)]
#[command(name = "waggle-bench", about = "Zeebe's benchmark against Waggle")]
struct Cli {
    #[command(flatten)]
    bench: waggle_bench::BenchArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = waggle_bench::runtime().map_err(anyhow::Error::from).and_then(|rt| rt.block_on(waggle_bench::run(cli.bench)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
