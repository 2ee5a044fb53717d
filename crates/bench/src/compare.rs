//! Compare mode: each workload on a fresh Waggle, then on each open-source peer (Flowable 7.2,
//! Camunda 7.24 CE), one server at a time, in one table with Waggle's ratio to the better peer.

use std::time::Duration;

use anyhow::Context;

use crate::args::CompareArgs;
use crate::peers::{self, Peer};
use crate::plot;
use crate::report::{self, RunReport};
use crate::runner::{self, Phases, ServerInfo};
use crate::server::Server;
use crate::workload::Workload;

/// Idle time after a fresh server is ready, before its idle memory is read.
const SETTLE: Duration = Duration::from_secs(2);

pub async fn compare(args: CompareArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.waggle_bin.is_some() || args.waggle_address.is_some(),
        "give --waggle-bin PATH (started fresh for each workload) or --waggle-address HOST:PORT (attached)"
    );
    let peers = peers::parse(&args.peers)?;
    if !peers.is_empty() {
        anyhow::ensure!(
            args.peers_script.is_file(),
            "{} not found: run from the repository's root, give --peers-script PATH, or --peers none",
            args.peers_script.display()
        );
    }
    let workloads: Vec<Workload> = args.workloads.iter().map(|n| args.overrides.apply(n.trim())).collect::<anyhow::Result<_>>()?;
    let mut labels = vec!["Waggle".to_string()];
    labels.extend(peers.iter().map(|p| p.label().to_string()));
    let mut groups = vec![];
    for w in &workloads {
        let phases = args.phases.for_workload(w);
        let waggle = run_on(&args, w, phases).await.with_context(|| format!("{} on Waggle", w.name))?;
        eprint!("{}", report::render_run(&waggle));
        let mut runs = vec![Some(waggle)];
        for &peer in &peers {
            let r = run_peer(&args, peer, w, phases).await.with_context(|| format!("{} on {}", w.name, peer.label()))?;
            eprint!("{}", report::render_run(&r));
            runs.push(Some(r));
        }
        groups.push(runs);
    }
    if let Some(dir) = &args.plots {
        for runs in &groups {
            let measured: Vec<&RunReport> = runs.iter().flatten().filter(|r| r.unsupported.is_none()).collect();
            if !measured.is_empty() {
                eprintln!("plot: {}", plot::write_workload(dir, &measured)?.display());
            }
        }
    }
    let rows = report::compare_rows(&groups);
    println!("{}", report::render_table(&labels, &rows));
    if let Some(path) = &args.json {
        let all: Vec<&RunReport> = groups.iter().flatten().flatten().collect();
        std::fs::write(path, serde_json::to_string_pretty(&serde_json::json!({ "servers": labels, "rows": rows, "runs": all }))?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.markdown {
        let existing = std::fs::read_to_string(path).ok();
        let settings: Vec<String> = groups.iter().flatten().flatten().filter_map(|r| r.server_settings.clone()).collect();
        let text = splice_markdown(existing.as_deref(), &markdown(&args, &workloads, &labels, &settings, &rows));
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Writes out what the previous server left in the page cache now, not while the next one runs:
/// the writeback of another server's data behind W3 once held Waggle's fsyncs in the W4 after it
/// (timer lateness p99 39.5 ms in that run, 6.3-6.8 ms in runs of W4 alone).
async fn flush_page_cache() -> anyhow::Result<()> {
    tokio::task::spawn_blocking(|| {
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() }
    })
    .await
    .context("flushing the page cache")
}

async fn run_peer(args: &CompareArgs, peer: Peer, w: &Workload, phases: Phases) -> anyhow::Result<RunReport> {
    flush_page_cache().await?;
    eprintln!("{}: running {} (embedded, on PostgreSQL)", peer.label(), w.name);
    peers::run(peer, &args.peers_script, w, phases).await
}

async fn run_on(args: &CompareArgs, w: &Workload, phases: Phases) -> anyhow::Result<RunReport> {
    flush_page_cache().await?;
    let server = match (&args.waggle_address, &args.waggle_bin) {
        (Some(a), _) => Server::attach(a, args.waggle_pid),
        (None, Some(bin)) => Server::start_waggle(bin).await?,
        (None, None) => unreachable!("checked above"),
    };
    if server.startup.is_some() {
        tokio::time::sleep(SETTLE).await;
    }
    let info = ServerInfo { label: "Waggle".into(), pid: server.pid, others: vec![], startup: server.startup };
    eprintln!("Waggle: running {} on {} (pid {:?})", w.name, server.address, server.pid);
    let result = runner::run(w, &server.address, &info, phases).await;
    let stopped = server.stop().await;
    let report = result?;
    stopped?;
    Ok(report)
}

/// Marks the part of a Markdown file that `--markdown` rewrites (docs/performance.md keeps its
/// findings around the figures).
const FIGURES_BEGIN: &str = "<!-- bench compare: begin -->";
const FIGURES_END: &str = "<!-- bench compare: end -->";

/// `existing` with the generated figures put between its markers, or the generated document
/// alone when there is no file or it has no markers. The generated part loses its title then.
fn splice_markdown(existing: Option<&str>, generated: &str) -> String {
    let found = existing.and_then(|e| {
        let begin = e.find(FIGURES_BEGIN)? + FIGURES_BEGIN.len();
        let end = begin + e[begin..].find(FIGURES_END)?;
        Some((e, begin, end))
    });
    match found {
        Some((e, begin, end)) => {
            let body = generated.split_once("\n\n").map_or(generated, |(_title, rest)| rest);
            format!("{}\n{}\n{}", &e[..begin], body.trim_end(), &e[end..])
        }
        None => generated.to_string(),
    }
}

fn markdown(args: &CompareArgs, workloads: &[Workload], labels: &[String], settings: &[String], rows: &[report::Row]) -> String {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let mut s = format!("# Performance: {}\n\n", labels.join(", "));
    let warmup = args.phases.warmup.map(|d| format!(" --warmup {}s", d.as_secs_f64())).unwrap_or_default();
    s += &format!(
        "Generated by `waggle bench compare --workloads {} --duration {}s{warmup} --peers {}` on one machine ({cores} cores), \
         one server at a time, each started fresh for each workload. Method: docs/bench.md.\n\n",
        args.workloads.join(","),
        args.phases.duration.as_secs_f64(),
        args.peers.join(","),
    );
    for w in workloads {
        let warmup = args.phases.for_workload(w).warmup.as_secs_f64();
        s += &format!("- {}: {} (model {}, payload {} B, warm-up {warmup} s)\n", w.name, w.description, w.model_name, w.payload_bytes);
    }
    let mut distinct: Vec<&String> = vec![];
    for x in settings {
        if !distinct.contains(&x) {
            distinct.push(x);
        }
    }
    for x in distinct {
        s += &format!("- {x}\n");
    }
    s += "\n";
    s += &report::render_markdown(labels, rows);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_goes_between_the_markers_or_makes_the_whole_file() {
        let generated = "# Title\n\nGenerated by ...\n\n| a | b |\n";
        assert_eq!(splice_markdown(None, generated), generated);
        assert_eq!(splice_markdown(Some("no markers here"), generated), generated);
        let doc = format!("# Ours\n\nintro\n{FIGURES_BEGIN}\nold figures\n{FIGURES_END}\n\n## Findings\nkept\n");
        let out = splice_markdown(Some(&doc), generated);
        assert_eq!(out, format!("# Ours\n\nintro\n{FIGURES_BEGIN}\nGenerated by ...\n\n| a | b |\n{FIGURES_END}\n\n## Findings\nkept\n"));
        // run again on its own output: the same
        assert_eq!(splice_markdown(Some(&out), generated), out);
    }
}
