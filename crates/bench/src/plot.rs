//! The bench's plots, drawn with `plotters` as SVG (text is left to the viewer: no font or system
//! library needed). One shape serves every plot: a grid of [`Chart`]s, each a titled panel of
//! named [`Series`] against a common x axis. Users: `bench run/compare --plots` (throughput and
//! execution latency over a run, a column per server: [`write_workload`]), `bench
//! variable-scaling --plot` and the soak's plot.

use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

use crate::report::RunReport;

pub use plotters::style::RGBColor;

pub const BLUE: RGBColor = RGBColor(31, 119, 180);
pub const GREEN: RGBColor = RGBColor(0, 130, 0);
pub const ORANGE: RGBColor = RGBColor(230, 120, 20);
pub const RED: RGBColor = RGBColor(200, 30, 30);

/// One line of a chart: its name (in the legend) and its points (x, y).
pub struct Series {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// A panel: its title, its x axis' label, its lines.
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub series: Vec<Series>,
}

/// An SVG image of `charts` in a grid of `columns` columns (rows as needed), each panel
/// `panel` pixels (width, height), under an optional overall `title`. Errors if the file
/// cannot be written.
pub fn write_svg(path: &Path, title: Option<&str>, columns: usize, panel: (u32, u32), charts: &[Chart]) -> anyhow::Result<()> {
    let columns = columns.max(1);
    let rows = charts.len().div_ceil(columns).max(1);
    let title_h = if title.is_some() { 30 } else { 0 };
    let size = (panel.0 * columns as u32, panel.1 * rows as u32 + title_h);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let root = match title {
        Some(t) => root.titled(t, ("sans-serif", 20))?,
        None => root,
    };
    for (area, chart) in root.split_evenly((rows, columns)).iter().zip(charts) {
        draw(area, chart)?;
    }
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Draws one chart in `area`: axes from zero to a little above the largest point, a line per
/// series (a dot per point, so a lone point shows), and a legend.
fn draw(area: &DrawingArea<SVGBackend, plotters::coord::Shift>, chart: &Chart) -> anyhow::Result<()> {
    let points = || chart.series.iter().flat_map(|s| s.points.iter());
    let x_max = points().map(|p| p.0).fold(1.0, f64::max);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.15;
    let mut c = ChartBuilder::on(area)
        .caption(&chart.title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    c.configure_mesh().x_desc(chart.x_label.as_str()).light_line_style(WHITE).draw()?;
    for s in &chart.series {
        let colour = s.color;
        c.draw_series(LineSeries::new(s.points.iter().copied(), colour.stroke_width(2)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(3)));
        c.draw_series(s.points.iter().map(|&p| Circle::new(p, 2, colour.filled())))?;
    }
    c.configure_series_labels().position(SeriesLabelPosition::UpperLeft).background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    Ok(())
}

/// The workload's charts: for each run (a column), completed instances per second above the
/// execution time's p50 and p99 per second of creation.
pub fn workload_charts(runs: &[&RunReport]) -> Vec<Chart> {
    let throughput = |r: &RunReport| Chart {
        title: format!("{} {}: completed per second", r.workload.name, r.server_label),
        x_label: "second".into(),
        series: vec![Series {
            name: "PI/s".into(),
            color: BLUE,
            points: r.series.iter().map(|s| (s.second as f64, s.completed as f64)).collect(),
        }],
    };
    let latencies = |r: &RunReport| {
        let latency = |pick: fn(&crate::report::Second) -> Option<f64>| -> Vec<(f64, f64)> {
            r.series.iter().filter_map(|s| pick(s).map(|v| (s.second as f64, v))).collect()
        };
        Chart {
            title: format!("{} {}: execution time (ms)", r.workload.name, r.server_label),
            x_label: "second created".into(),
            series: vec![
                Series { name: "p50".into(), color: ORANGE, points: latency(|s| s.execution_p50_ms) },
                Series { name: "p99".into(), color: RED, points: latency(|s| s.execution_p99_ms) },
            ],
        }
    };
    // row by row: the throughputs, then the latencies
    runs.iter().map(|r| throughput(r)).chain(runs.iter().map(|r| latencies(r))).collect()
}

/// Writes `<dir>/<workload>.svg` for runs of one workload (a column per run); returns its path.
pub fn write_workload(dir: &Path, runs: &[&RunReport]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = runs.first().map_or("run".to_string(), |r| r.workload.name.clone());
    let path = dir.join(format!("{name}.svg"));
    write_svg(&path, None, runs.len(), (640, 360), &workload_charts(runs))?;
    Ok(path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The file is an SVG document holding each of `texts`.
    pub(crate) fn assert_svg_with(path: &Path, texts: &[&str]) {
        let svg = std::fs::read_to_string(path).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{}", &svg[..80.min(svg.len())]);
        for t in texts {
            assert!(svg.contains(t), "{t} missing from {}", path.display());
        }
    }

    #[test]
    fn a_workload_plot_has_a_column_per_server() {
        let w = crate::workload::named("W2").unwrap();
        let mut waggle = RunReport::new(&w, "Waggle", "127.0.0.1:26500");
        waggle.series = (1..=3)
            .map(|s| crate::report::Second {
                second: s,
                created: 100,
                completed: 90 + s as u64,
                rejected: 0,
                execution_p50_ms: Some(10.0),
                execution_p99_ms: (s != 2).then_some(30.0),
            })
            .collect();
        let zeebe = RunReport::new(&w, "Zeebe", "127.0.0.1:26501");
        let charts = workload_charts(&[&waggle, &zeebe]);
        let titles: Vec<&str> = charts.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "W2 Waggle: completed per second",
                "W2 Zeebe: completed per second",
                "W2 Waggle: execution time (ms)",
                "W2 Zeebe: execution time (ms)"
            ]
        );
        assert_eq!(charts[0].series[0].points, [(1.0, 91.0), (2.0, 92.0), (3.0, 93.0)]);
        assert_eq!(charts[2].series[1].points, [(1.0, 30.0), (3.0, 30.0)], "a second without a p99 is left out");
        let dir = tempfile::tempdir().unwrap();
        let path = write_workload(&dir.path().join("plots"), &[&waggle, &zeebe]).unwrap();
        assert_eq!(path.file_name().unwrap(), "W2.svg");
        assert_svg_with(&path, &["W2 Waggle: completed per second", "W2 Zeebe: execution time (ms)", "p99", "second created"]);
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains(r#"width="1280" height="720""#), "{}", &svg[..120.min(svg.len())]);
    }

    #[test]
    fn a_chart_without_points_is_still_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.svg");
        let chart = Chart { title: "nothing yet".into(), x_label: "second".into(), series: vec![] };
        write_svg(&path, Some("a title"), 1, (320, 200), &[chart]).unwrap();
        assert_svg_with(&path, &["nothing yet", "a title"]);
    }

    #[test]
    fn an_unwritable_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing-folder/plot.svg");
        let chart = Chart { title: "t".into(), x_label: "x".into(), series: vec![] };
        assert!(write_svg(&path, None, 1, (320, 200), &[chart]).is_err());
    }
}
