//! `taskmeter report DIR --figures FOLDER`: every figure of a report as SVG and, built with the
//! feature `print`, as a PNG at 300 dpi (8.5 cm wide: one column of a two-column paper), drawn
//! by resvg with the machine's fonts (crate `taskmeter-print`).

use super::figure::Chart;
use super::{write, ReportError};
use std::path::{Path, PathBuf};

/// The print resolution, and the width a figure prints at.
pub const DPI: f64 = 300.0;
pub const PRINT_WIDTH_CM: f64 = 8.5;

/// The PNG's width in pixels: 8.5 cm at 300 dpi.
pub fn print_width_px() -> u32 {
    (PRINT_WIDTH_CM / 2.54 * DPI).round() as u32
}

/// Writes `FOLDER/NAME.svg` (and `NAME.png` with the feature `print`) for every chart; returns
/// the files written.
pub fn write_figures(folder: &Path, charts: &[Chart]) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(folder).map_err(|source| ReportError::Write { path: folder.to_path_buf(), source })?;
    let mut written = Vec::new();
    for chart in charts {
        let svg = folder.join(&chart.file);
        write(&svg, &chart.svg)?;
        written.push(svg.clone());
        if let Some(png) = png(&chart.svg)? {
            let path = svg.with_extension("png");
            write(&path, png)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The SVG as a PNG at 300 dpi (None without the feature `print`).
#[cfg(not(feature = "print"))]
pub fn png(_svg: &str) -> Result<Option<Vec<u8>>, ReportError> {
    Ok(None)
}

#[cfg(feature = "print")]
pub fn png(svg: &str) -> Result<Option<Vec<u8>>, ReportError> {
    let png = taskmeter_print::png(svg, print_width_px(), DPI);
    png.map(Some).map_err(|why| ReportError::Chart(format!("cannot draw a PNG: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figure::{line_chart, styles, Axis, Chart, Series, Unit};

    /// A figure as a report draws it: SVG always, and with the feature `print` a PNG 8.5 cm wide
    /// at 300 dpi (the drawing itself is tested in taskmeter-print).
    #[test]
    fn figures_are_written_as_svg_and_with_print_as_png() {
        let names = vec!["thread".to_string(), "tokio".to_string()];
        let series: Vec<Series> = styles(&names)
            .into_iter()
            .zip(&names)
            .map(|(style, name)| Series::new(name.clone(), style, vec![(1.0, 2e3), (10.0, 5e3), (100.0, 9e3)]))
            .collect();
        let svg =
            line_chart("lateness", &Axis::new("units", Unit::Count), &Axis::new("p99", Unit::Nanos), &series, None);
        let chart =
            Chart { group: "g".into(), file: "lateness.svg".into(), title: "lateness".into(), svg: svg.unwrap() };
        let dir = tempfile::tempdir().unwrap();
        let written = write_figures(dir.path(), &[chart]).unwrap();
        let (svg, png) = (dir.path().join("lateness.svg"), dir.path().join("lateness.png"));
        assert!(svg.is_file());
        if cfg!(feature = "print") {
            assert_eq!(written, [svg, png.clone()]);
            let bytes = std::fs::read(&png).unwrap();
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
            // IHDR's width, then pHYs: 300 dpi in pixels a metre.
            assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 1004);
            let at = bytes.windows(4).position(|w| w == b"pHYs").expect("a pHYs chunk") + 4;
            assert_eq!(u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()), 11811);
        } else {
            assert_eq!(written, [svg]);
            assert!(!png.exists());
        }
    }
}
