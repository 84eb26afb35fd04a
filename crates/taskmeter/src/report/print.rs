//! `taskmeter report DIR --figures FOLDER`: every figure of a report as SVG and, built with the
//! feature `print`, as a PNG at 300 dpi (8.5 cm wide: one column of a two-column paper), drawn
//! by resvg with the machine's fonts.

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
    use resvg::{tiny_skia, usvg};
    let chart = |why: String| ReportError::Chart(format!("cannot draw a PNG: {why}"));
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // plotters names the generic family: give it the first of the usual sans-serif faces here.
    let known: Vec<String> = fonts.faces().flat_map(|f| f.families.iter().map(|(name, _)| name.clone())).collect();
    let Some(sans) = ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica", "Noto Sans"]
        .into_iter()
        .find(|family| known.iter().any(|k| k == family))
    else {
        return Err(chart("no sans-serif font found (install fonts-dejavu-core or fonts-liberation)".into()));
    };
    fonts.set_sans_serif_family(sans);
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| chart(e.to_string()))?;
    let scale = print_width_px() as f32 / super::figure::WIDTH as f32;
    let size = tree.size();
    let (w, h) = ((size.width() * scale).round() as u32, (size.height() * scale).round() as u32);
    let mut pixmap = tiny_skia::Pixmap::new(w, h).ok_or_else(|| chart(format!("a {w} x {h} image")))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::from_scale(scale, scale), &mut pixmap.as_mut());
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, w, h);
        encoder.set_color(png::ColorType::Rgba);
        encoder.set_depth(png::BitDepth::Eight);
        // pHYs: 300 dpi in pixels per metre.
        let per_metre = (DPI / 0.0254).round() as u32;
        encoder.set_pixel_dims(Some(png::PixelDimensions { xppu: per_metre, yppu: per_metre, unit: png::Unit::Meter }));
        let mut writer = encoder.write_header().map_err(|e| chart(e.to_string()))?;
        // Opaque on white: premultiplied and straight alpha are the same bytes.
        writer.write_image_data(pixmap.data()).map_err(|e| chart(e.to_string()))?;
    }
    Ok(Some(out))
}
