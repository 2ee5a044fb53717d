//! Plots as PNG: throughput and execution latency over a run's measurement window, one image per
//! workload with a column per server. Drawn on a small raster of our own and encoded as a plain
//! PNG (zlib through `flate2`, chunk checksums through `crc32fast`): no plotting library, no
//! fonts from the system.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::report::RunReport;

type Rgb = [u8; 3];

const BLACK: Rgb = [0, 0, 0];
const GRID: Rgb = [225, 225, 225];
const BLUE: Rgb = [31, 119, 180];
const ORANGE: Rgb = [230, 120, 20];
const RED: Rgb = [200, 30, 30];

/// An RGB image, white to start with.
pub struct Canvas {
    width: usize,
    height: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    pub fn new(width: usize, height: usize) -> Self {
        Canvas { width, height, pixels: vec![255; width * height * 3] }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn height(&self) -> usize {
        self.height
    }

    /// The colour at (x, y); `None` outside the image.
    pub fn pixel(&self, x: usize, y: usize) -> Option<Rgb> {
        (x < self.width && y < self.height).then(|| {
            let i = (y * self.width + x) * 3;
            [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
        })
    }

    fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            let i = (y as usize * self.width + x as usize) * 3;
            self.pixels[i..i + 3].copy_from_slice(&c);
        }
    }

    fn rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        for y in y0.min(y1)..=y0.max(y1) {
            for x in x0.min(x1)..=x0.max(x1) {
                self.set(x, y, c);
            }
        }
    }

    /// A line two pixels wide (Bresenham).
    fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        loop {
            self.rect(x, y, x + 1, y + 1, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// `text` in the built-in 5×7 font (upper case), `scale` pixels per dot, from its top left.
    fn text(&mut self, x: i64, y: i64, text: &str, scale: i64, c: Rgb) {
        for (i, ch) in text.chars().enumerate() {
            let rows = glyph(ch.to_ascii_uppercase());
            let left = x + i as i64 * 6 * scale;
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..5 {
                    if bits & (0b10000 >> col) != 0 {
                        let (px, py) = (left + col * scale, y + r as i64 * scale);
                        self.rect(px, py, px + scale - 1, py + scale - 1, c);
                    }
                }
            }
        }
    }

    /// The image as a PNG file (8-bit RGB, no interlace).
    pub fn to_png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity(self.height * (1 + self.width * 3));
        for row in self.pixels.chunks(self.width * 3) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&raw).expect("writing to memory");
        let idat = z.finish().expect("writing to memory");
        let mut ihdr = Vec::with_capacity(13);
        ihdr.extend_from_slice(&(self.width as u32).to_be_bytes());
        ihdr.extend_from_slice(&(self.height as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8 bits, RGB, deflate, no filter set, no interlace
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        for (kind, data) in [(b"IHDR", &ihdr), (b"IDAT", &idat), (b"IEND", &Vec::new())] {
            png.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut crc = crc32fast::Hasher::new();
            crc.update(kind);
            crc.update(data);
            png.extend_from_slice(kind);
            png.extend_from_slice(data);
            png.extend_from_slice(&crc.finalize().to_be_bytes());
        }
        png
    }
}

/// One line of a chart: its name (in the legend) and its points (x, y).
pub struct Series {
    pub name: String,
    pub color: Rgb,
    pub points: Vec<(f64, f64)>,
}

/// A chart in a rectangle of the canvas.
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub series: Vec<Series>,
}

/// The smallest "round" bound (1, 2 or 5 times a power of ten) at or above `max`, and its tick
/// step (a fifth of it).
pub fn nice_bound(max: f64) -> (f64, f64) {
    if max.is_nan() || max <= 0.0 || max.is_infinite() {
        return (1.0, 0.2);
    }
    let power = 10f64.powf(max.log10().floor());
    let bound = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|b| *b >= max * (1.0 - 1e-9)).unwrap_or(10.0 * power);
    (bound, bound / 5.0)
}

/// A tick's label: no more digits than it needs.
pub fn tick_label(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl Chart {
    /// Draws the chart with its plot area's top left at (x, y), `w` × `h` pixels in all.
    pub fn draw(&self, canvas: &mut Canvas, x: i64, y: i64, w: i64, h: i64) {
        canvas.text(x + 10, y + 6, &self.title, 2, BLACK);
        let (left, top, right, bottom) = (x + 80, y + 34, x + w - 16, y + h - 44);
        let x_max = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).fold(1.0, f64::max);
        let y_max = self.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
        let (y_bound, y_step) = nice_bound(y_max);
        let (x_bound, x_step) = nice_bound(x_max);
        let px = |v: f64| left + ((v / x_bound) * (right - left) as f64).round() as i64;
        let py = |v: f64| bottom - ((v / y_bound) * (bottom - top) as f64).round() as i64;
        for i in 0..=5 {
            let (yv, xv) = (y_step * i as f64, x_step * i as f64);
            canvas.rect(left, py(yv), right, py(yv), GRID);
            canvas.rect(px(xv), top, px(xv), bottom, GRID);
            let label = tick_label(yv);
            canvas.text(left - 8 - label.len() as i64 * 12, py(yv) - 7, &label, 2, BLACK);
            let label = tick_label(xv);
            canvas.text(px(xv) - label.len() as i64 * 6, bottom + 8, &label, 2, BLACK);
        }
        canvas.rect(left, top, left, bottom, BLACK);
        canvas.rect(left, bottom, right, bottom, BLACK);
        canvas.text(right - self.x_label.len() as i64 * 12, bottom + 26, &self.x_label, 2, BLACK);
        let mut legend_x = left + 10;
        for s in &self.series {
            for pair in s.points.windows(2) {
                canvas.line((px(pair[0].0), py(pair[0].1)), (px(pair[1].0), py(pair[1].1)), s.color);
            }
            if let [(x0, y0)] = s.points[..] {
                canvas.rect(px(x0) - 2, py(y0) - 2, px(x0) + 2, py(y0) + 2, s.color);
            }
            canvas.rect(legend_x, top + 6, legend_x + 16, top + 9, s.color);
            canvas.text(legend_x + 22, top + 1, &s.name, 2, s.color);
            legend_x += 40 + s.name.len() as i64 * 12;
        }
    }
}

/// The workload's image: for each run (a column), completed instances per second above the
/// execution time's p50 and p99 per second of creation.
pub fn workload_image(runs: &[&RunReport]) -> Canvas {
    let (col_w, row_h) = (640i64, 360i64);
    let mut canvas = Canvas::new((col_w * runs.len().max(1) as i64) as usize, (row_h * 2) as usize);
    for (i, r) in runs.iter().enumerate() {
        let x = col_w * i as i64;
        let second = |s: usize| s as f64;
        let throughput = Chart {
            title: format!("{} {}: completed per second", r.workload.name, r.server_label),
            x_label: "second".into(),
            series: vec![Series {
                name: "PI/s".into(),
                color: BLUE,
                points: r.series.iter().map(|s| (second(s.second), s.completed as f64)).collect(),
            }],
        };
        let latency = |pick: fn(&crate::report::Second) -> Option<f64>| -> Vec<(f64, f64)> {
            r.series.iter().filter_map(|s| pick(s).map(|v| (second(s.second), v))).collect()
        };
        let latencies = Chart {
            title: format!("{} {}: execution time (ms)", r.workload.name, r.server_label),
            x_label: "second created".into(),
            series: vec![
                Series { name: "p50".into(), color: ORANGE, points: latency(|s| s.execution_p50_ms) },
                Series { name: "p99".into(), color: RED, points: latency(|s| s.execution_p99_ms) },
            ],
        };
        throughput.draw(&mut canvas, x, 0, col_w, row_h);
        latencies.draw(&mut canvas, x, row_h, col_w, row_h);
    }
    canvas
}

/// Writes `<dir>/<workload>.png` for runs of one workload; returns its path.
pub fn write_workload(dir: &Path, runs: &[&RunReport]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = runs.first().map_or("run".to_string(), |r| r.workload.name.clone());
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, workload_image(runs).to_png()).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The 5×7 dots of a character (a row per byte, the low five bits, left to right).
fn glyph(c: char) -> [u8; 7] {
    match c {
        '0' => [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110],
        '1' => [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110],
        '2' => [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111],
        '3' => [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110],
        '4' => [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010],
        '5' => [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110],
        '6' => [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110],
        '7' => [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000],
        '8' => [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110],
        '9' => [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100],
        'A' => [0b01110, 0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001],
        'B' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110],
        'C' => [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110],
        'D' => [0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100],
        'E' => [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111],
        'F' => [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000],
        'G' => [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111],
        'H' => [0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001],
        'I' => [0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110],
        'J' => [0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100],
        'K' => [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001],
        'L' => [0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111],
        'M' => [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001],
        'N' => [0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001],
        'O' => [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110],
        'P' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000],
        'Q' => [0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101],
        'R' => [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001],
        'S' => [0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110],
        'T' => [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100],
        'U' => [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110],
        'V' => [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100],
        'W' => [0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010],
        'X' => [0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001],
        'Y' => [0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100],
        'Z' => [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111],
        '.' => [0, 0, 0, 0, 0, 0b01100, 0b01100],
        ',' => [0, 0, 0, 0, 0b01100, 0b00100, 0b01000],
        '-' => [0, 0, 0, 0b11111, 0, 0, 0],
        ':' => [0, 0b01100, 0b01100, 0, 0b01100, 0b01100, 0],
        '/' => [0, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0],
        '%' => [0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011],
        '(' => [0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010],
        ')' => [0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000],
        '=' => [0, 0, 0b11111, 0, 0b11111, 0, 0],
        ' ' => [0; 7],
        _ => [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0, 0b00100],
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// The chunks of a PNG file, each checked against its CRC.
    fn chunks(png: &[u8]) -> Vec<(String, Vec<u8>)> {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let mut out = vec![];
        let mut rest = &png[8..];
        while !rest.is_empty() {
            let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            let (kind, data) = (&rest[4..8], &rest[8..8 + len]);
            let crc = u32::from_be_bytes(rest[8 + len..12 + len].try_into().unwrap());
            let mut h = crc32fast::Hasher::new();
            h.update(kind);
            h.update(data);
            assert_eq!(h.finalize(), crc, "CRC of {}", String::from_utf8_lossy(kind));
            out.push((String::from_utf8_lossy(kind).into_owned(), data.to_vec()));
            rest = &rest[12 + len..];
        }
        out
    }

    #[test]
    fn png_holds_the_pixels_it_was_given() {
        let mut c = Canvas::new(3, 2);
        c.set(1, 0, [10, 20, 30]);
        c.set(2, 1, BLACK);
        let parts = chunks(&c.to_png());
        let kinds: Vec<&str> = parts.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
        assert_eq!(parts[0].1, [0, 0, 0, 3, 0, 0, 0, 2, 8, 2, 0, 0, 0]);
        let mut raw = vec![];
        flate2::read::ZlibDecoder::new(&parts[1].1[..]).read_to_end(&mut raw).unwrap();
        let expected: Vec<u8> =
            [&[0u8][..], &[255, 255, 255, 10, 20, 30, 255, 255, 255], &[0], &[255, 255, 255, 255, 255, 255, 0, 0, 0]].concat();
        assert_eq!(raw, expected);
    }

    #[test]
    fn bounds_are_round_and_cover_the_maximum() {
        assert_eq!(nice_bound(21_307.0), (50_000.0, 10_000.0));
        assert_eq!(nice_bound(150.0), (200.0, 40.0));
        assert_eq!(nice_bound(100.0), (100.0, 20.0));
        assert_eq!(nice_bound(0.7), (1.0, 0.2));
        assert_eq!(nice_bound(0.0), (1.0, 0.2));
        assert_eq!(nice_bound(f64::NAN), (1.0, 0.2));
        assert_eq!(tick_label(40.0), "40");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(0.2), "0.20");
    }

    #[test]
    fn a_workload_image_has_a_column_per_server() {
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
        let image = workload_image(&[&waggle, &zeebe]);
        assert_eq!((image.width(), image.height()), (1280, 720));
        let has = |color: Rgb, columns: std::ops::Range<usize>| (0..720).any(|y| columns.clone().any(|x| image.pixel(x, y) == Some(color)));
        // Waggle's column has its throughput and both latency lines; Zeebe's run has no seconds
        assert!(has(BLUE, 0..640) && has(ORANGE, 0..640) && has(RED, 0..640));
        assert!(has(BLUE, 640..1280), "the legend is drawn without points");
        let dir = tempfile::tempdir().unwrap();
        let path = write_workload(dir.path(), &[&waggle, &zeebe]).unwrap();
        assert_eq!(path.file_name().unwrap(), "W2.png");
        assert_eq!(chunks(&std::fs::read(path).unwrap())[0].1[..8], [0, 0, 5, 0, 0, 0, 2, 208]);
    }

    #[test]
    fn a_chart_draws_its_lines_inside_its_axes() {
        let mut c = Canvas::new(640, 360);
        let chart = Chart {
            title: "W2 Waggle".into(),
            x_label: "second".into(),
            series: vec![Series { name: "PI/s".into(), color: BLUE, points: vec![(1.0, 10.0), (2.0, 20.0), (3.0, 5.0)] }],
        };
        chart.draw(&mut c, 0, 0, 640, 360);
        let blue: Vec<(usize, usize)> =
            (0..360).flat_map(|y| (0..640).map(move |x| (x, y))).filter(|&(x, y)| c.pixel(x, y) == Some(BLUE)).collect();
        assert!(!blue.is_empty());
        // the plot area is left 80 .. right 624, top 34 .. bottom 316; the legend sits in it too
        assert!(blue.iter().all(|&(x, y)| (80..=625).contains(&x) && (34..=317).contains(&y)), "{:?}", blue.first());
        // the axes are black
        assert_eq!(c.pixel(80, 200), Some(BLACK));
        assert_eq!(c.pixel(300, 316), Some(BLACK));
    }
}
