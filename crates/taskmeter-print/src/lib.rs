//! An SVG drawn as a print-ready PNG: scaled to a width in pixels, on white, with its density
//! (dots per inch) in the PNG's pHYs chunk, and its text in the machine's fonts. taskmeter's
//! feature `print` writes every figure of `taskmeter report DIR --figures FOLDER` with it; it is a
//! crate of its own so that the suite builds and tests it once, beside the default build.

use resvg::{tiny_skia, usvg};

/// The sans-serif faces tried in turn for the generic family an SVG names (plotters names it).
const SANS_SERIF: [&str; 5] = ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica", "Noto Sans"];

/// Draws `svg` `width_px` pixels wide (its height in proportion) and encodes it as an RGBA PNG
/// whose pHYs chunk says `dpi`. The error is one plain sentence.
pub fn png(svg: &str, width_px: u32, dpi: f64) -> Result<Vec<u8>, String> {
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    let known: Vec<String> = fonts.faces().flat_map(|f| f.families.iter().map(|(name, _)| name.clone())).collect();
    let Some(sans) = SANS_SERIF.into_iter().find(|family| known.iter().any(|k| k == family)) else {
        return Err("no sans-serif font found (install fonts-dejavu-core or fonts-liberation)".into());
    };
    fonts.set_sans_serif_family(sans);
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| e.to_string())?;
    let size = tree.size();
    let scale = width_px as f32 / size.width();
    let (w, h) = (width_px, (size.height() * scale).round() as u32);
    let mut pixmap = tiny_skia::Pixmap::new(w, h).ok_or_else(|| format!("cannot make a {w} x {h} image"))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::from_scale(scale, scale), &mut pixmap.as_mut());
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let per_metre = (dpi / 0.0254).round() as u32;
    encoder.set_pixel_dims(Some(png::PixelDimensions { xppu: per_metre, yppu: per_metre, unit: png::Unit::Meter }));
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    // Opaque on white: premultiplied and straight alpha are the same bytes.
    writer.write_image_data(pixmap.data()).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::png;

    /// A 480 x 240 figure: its left half black, a line of sans-serif text on the right.
    const FIGURE: &str = r#"<svg xmlns="http://www.w3.org/2000/svg" width="480" height="240" viewBox="0 0 480 240">
<rect x="0" y="0" width="240" height="240" fill="black"/>
<text x="260" y="120" font-family="sans-serif" font-size="20">p99 lateness (µs)</text>
</svg>"#;

    fn decoded(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>, Option<png::PixelDimensions>) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        let density = reader.info().pixel_dims;
        (info, pixels, density)
    }

    #[test]
    fn a_figure_prints_at_its_width_and_density() {
        // 8.5 cm at 300 dpi: 1004 pixels wide, 11811 pixels a metre.
        let (info, pixels, density) = decoded(&png(FIGURE, 1004, 300.0).unwrap());
        assert_eq!((info.width, info.height), (1004, 502));
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgba, png::BitDepth::Eight));
        let density = density.expect("a pHYs chunk");
        assert_eq!((density.xppu, density.yppu, density.unit), (11811, 11811, png::Unit::Meter));
        let pixel = |x: usize, y: usize| &pixels[(y * 1004 + x) * 4..][..4];
        assert_eq!(pixel(10, 10), [0, 0, 0, 255], "the black half is black");
        assert_eq!(pixel(1000, 10), [255, 255, 255, 255], "the background is opaque white");
        // The text is drawn: some pixels of its line are dark.
        let text_row = (200..300).any(|y| (560..1000).any(|x| pixel(x, y)[0] < 128));
        assert!(text_row, "the text is drawn in a system font");
    }

    #[test]
    fn what_is_not_an_svg_is_a_plain_error() {
        let error = png("not an svg", 1004, 300.0).unwrap_err();
        assert!(!error.is_empty() && !error.contains('\n'), "{error}");
    }
}
