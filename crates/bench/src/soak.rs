//! `waggle bench soak`: one workload (W1 by default) against a fresh Waggle for a long time,
//! sampling every interval the server's RSS, its data folder's disk use and the execution time
//! of the instances that finished in that interval, into a CSV written as it goes, then plotted
//! over time as SVG (issue 30's soak: the three series should stay flat).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use crate::plot;
use crate::recorder::{Event, Recorder};
use crate::report;
use crate::runner::{self, Phases, ServerInfo};
use crate::server::{self, Server};
use crate::stats::Samples;
use crate::workload::parse_duration;

/// `waggle bench soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// The waggle binary to start fresh (temporary data folder, free loopback ports).
    #[arg(long)]
    pub waggle_bin: PathBuf,
    /// How long the load runs (e.g. 10m, 2h).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Duration,
    /// Time between samples.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub interval: Duration,
    /// The workload (as `waggle bench run`'s, with the same changes to its defaults).
    #[arg(long, default_value = "W1")]
    pub workload: String,
    #[command(flatten)]
    pub overrides: crate::args::Overrides,
    /// The samples as CSV, a row written as each is taken.
    #[arg(long, default_value = "soak.csv")]
    pub csv: PathBuf,
    /// The plot of RSS, disk use and p99 over time (SVG), drawn at the end.
    #[arg(long, default_value = "soak.svg")]
    pub plot: PathBuf,
}

/// One sample: the server at the end of an interval, and the instances finished in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the load began.
    pub elapsed_s: f64,
    pub rss_mb: Option<f64>,
    /// The data folder's allocated size (blocks, as `du`).
    pub disk_mb: Option<f64>,
    /// Execution time (creation due → finished) of the instances finished in the interval.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub finished: usize,
    /// Errors the bench counted since the start.
    pub errors: u64,
    /// The machine's 1-minute load average (the bench shares the machine with the server).
    pub load_1m: Option<f64>,
}

/// The CSV's first line.
pub const CSV_HEADER: &str = "elapsed_s,rss_mb,disk_mb,p50_ms,p99_ms,finished,errors,load_1m";

impl Sample {
    /// The sample as a CSV line (an empty field where a figure is missing).
    pub fn csv_line(&self) -> String {
        let f = |v: Option<f64>| v.map_or_else(String::new, |v| format!("{v:.2}"));
        format!(
            "{:.1},{},{},{},{},{},{},{}",
            self.elapsed_s,
            f(self.rss_mb),
            f(self.disk_mb),
            f(self.p50_ms),
            f(self.p99_ms),
            self.finished,
            self.errors,
            f(self.load_1m)
        )
    }
}

/// Joins the recorder's events per instance as they come, and closes an interval's figures.
#[derive(Debug, Default)]
pub struct Intervals {
    /// Events of the recorder read so far.
    read: usize,
    /// Instances created and not finished: creation due time.
    created: HashMap<i64, Instant>,
    /// Instances whose finish was read before their creation (the answer to a creation may
    /// come after its job was done): finish time.
    finished_first: HashMap<i64, Instant>,
    execution: Samples,
}

impl Intervals {
    /// Reads the events recorded since the last call.
    pub fn read(&mut self, recorder: &Recorder) {
        let events = recorder.events_from(self.read);
        self.read += events.len();
        self.take(&events);
    }

    fn take(&mut self, events: &[Event]) {
        for e in events {
            match *e {
                Event::Created { pi, sent } => match self.finished_first.remove(&pi) {
                    Some(at) => self.execution.push(at.saturating_duration_since(sent)),
                    None => {
                        self.created.insert(pi, sent);
                    }
                },
                Event::Finished { pi, at } => match self.created.remove(&pi) {
                    Some(sent) => self.execution.push(at.saturating_duration_since(sent)),
                    None => {
                        self.finished_first.insert(pi, at);
                    }
                },
                _ => {}
            }
        }
    }

    /// The execution times of the interval that ends now: (count, p50, p99); starts the next.
    pub fn close(&mut self) -> (usize, Option<f64>, Option<f64>) {
        let summary = std::mem::take(&mut self.execution).summary();
        (summary.as_ref().map_or(0, |s| s.count), summary.as_ref().map(|s| s.p50_ms), summary.map(|s| s.p99_ms))
    }
}

/// Allocated size of the files under `dir` (as `du`: blocks, not lengths), in bytes; files that
/// vanish while it looks (compaction) are skipped.
pub fn disk_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// Runs the soak: starts the server, runs the workload for the duration while sampling, stops
/// the server, writes the plot. Returns the samples.
pub async fn run(args: &SoakArgs) -> anyhow::Result<Vec<Sample>> {
    anyhow::ensure!(args.interval >= Duration::from_secs(1), "--interval must be at least 1s");
    let w = args.overrides.apply(&args.workload)?;
    let mut csv = std::fs::File::create(&args.csv).with_context(|| format!("creating {}", args.csv.display()))?;
    writeln!(csv, "{CSV_HEADER}")?;
    let server = Server::start_waggle(&args.waggle_bin).await?;
    let data_dir = server.data_dir();
    let info = ServerInfo { label: "Waggle".into(), pid: server.pid, others: vec![], startup: server.startup };
    eprintln!("soak: {} for {:?} on {} (pid {:?}), a sample every {:?}", w.name, args.duration, server.address, server.pid, args.interval);
    let started = Instant::now();
    let mut next = started + args.interval;
    let mut intervals = Intervals::default();
    let mut samples = Vec::new();
    let mut failed: Option<anyhow::Error> = None;
    let mut observe = |recorder: &Recorder| {
        intervals.read(recorder);
        let now = Instant::now();
        if now < next {
            return;
        }
        next += args.interval;
        let (finished, p50_ms, p99_ms) = intervals.close();
        let mb = |b: u64| b as f64 / 1e6;
        let sample = Sample {
            elapsed_s: now.duration_since(started).as_secs_f64(),
            rss_mb: info.pid.and_then(|p| server::sample(p).ok()).map(|s| mb(s.rss_bytes)),
            disk_mb: data_dir.as_deref().map(|d| mb(disk_bytes(d))),
            p50_ms,
            p99_ms,
            finished,
            errors: recorder.counts().errors,
            load_1m: server::load_average(),
        };
        eprintln!("soak: {}", sample.csv_line());
        if let Err(e) = writeln!(csv, "{}", sample.csv_line()).and_then(|()| csv.flush()) {
            failed.get_or_insert(anyhow::Error::new(e).context("writing the CSV"));
        }
        samples.push(sample);
    };
    let phases = Phases { warmup: Duration::ZERO, duration: args.duration, drain: Duration::from_secs(10) };
    let result = runner::run_observed(&w, &server.address, &info, phases, &mut observe).await;
    let stopped = server.stop().await;
    let report = result?;
    stopped?;
    if let Some(e) = failed {
        return Err(e);
    }
    print!("{}", report::render_run(&report));
    plot(&args.plot, &samples, &format!("{} soak, {} samples every {:?}", w.name, samples.len(), args.interval))?;
    eprintln!("soak: {} rows in {}, plot {}", samples.len(), args.csv.display(), args.plot.display());
    Ok(samples)
}

/// Draws RSS, disk use and p99 over time (minutes), one panel each, as SVG.
pub fn plot(path: &Path, samples: &[Sample], title: &str) -> anyhow::Result<()> {
    let panel = |label: &str, value: fn(&Sample) -> Option<f64>, color| plot::Chart {
        title: label.into(),
        x_label: "minutes".into(),
        series: vec![plot::Series {
            name: label.into(),
            color,
            points: samples.iter().filter_map(|s| Some((s.elapsed_s / 60.0, value(s)?))).collect(),
        }],
    };
    let charts = [
        panel("server RSS (MB)", |s| s.rss_mb, plot::BLUE),
        panel("data folder on disk (MB)", |s| s.disk_mb, plot::GREEN),
        panel("execution p99 of the interval (ms)", |s| s.p99_ms, plot::RED),
    ];
    plot::write_svg(path, Some(title), 1, (900, 250), &charts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_join_creations_and_finishes_in_either_order() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut i = Intervals::default();
        i.take(&[
            Event::Created { pi: 1, sent: t },
            Event::Finished { pi: 2, at: t + ms(30) },
            Event::Finished { pi: 1, at: t + ms(10) },
            Event::Created { pi: 2, sent: t },
            Event::Created { pi: 3, sent: t },
        ]);
        let (count, p50, p99) = i.close();
        assert_eq!(count, 2);
        assert_eq!(p50, Some(10.0));
        assert_eq!(p99, Some(30.0));
        // instance 3 finishes in the next interval
        i.take(&[Event::Finished { pi: 3, at: t + ms(50) }]);
        assert_eq!(i.close(), (1, Some(50.0), Some(50.0)));
        assert_eq!(i.close(), (0, None, None));
    }

    #[test]
    fn csv_lines_leave_missing_figures_empty() {
        let s = Sample {
            elapsed_s: 30.0,
            rss_mb: Some(21.5),
            disk_mb: None,
            p50_ms: Some(51.25),
            p99_ms: None,
            finished: 4500,
            errors: 0,
            load_1m: Some(3.5),
        };
        assert_eq!(s.csv_line(), "30.0,21.50,,51.25,,4500,0,3.50");
        assert_eq!(CSV_HEADER.split(',').count(), s.csv_line().split(',').count());
    }

    #[test]
    fn disk_use_counts_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/a"), vec![1u8; 100_000]).unwrap();
        assert!(disk_bytes(dir.path()) >= 100_000);
        assert_eq!(disk_bytes(&dir.path().join("missing")), 0);
    }

    #[test]
    fn plots_an_svg_with_the_three_panels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("soak.svg");
        let samples: Vec<Sample> = (1..=4)
            .map(|i| Sample {
                elapsed_s: 30.0 * i as f64,
                rss_mb: Some(20.0 + i as f64),
                disk_mb: Some(100.0),
                p50_ms: Some(51.0),
                p99_ms: if i == 2 { None } else { Some(55.0) },
                finished: 4500,
                errors: 0,
                load_1m: None,
            })
            .collect();
        plot(&path, &samples, "W1 soak").unwrap();
        let labels = ["server RSS (MB)", "data folder on disk (MB)", "execution p99 of the interval (ms)", "W1 soak"];
        crate::plot::tests::assert_svg_with(&path, &labels);
    }
}
