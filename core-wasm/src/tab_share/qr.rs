//! The QR code beside a tab share's link, as SVG (one path of dark modules,
//! a quiet zone of four): a phone's camera opens the link.

use qrcode::{Color, QrCode};
use wasm_bindgen::prelude::*;

/// `text` as a QR code in SVG, or an error if it is too long for one.
#[wasm_bindgen(js_name = qrSvg)]
pub fn qr_svg(text: &str) -> Result<String, JsError> {
    let code = QrCode::new(text.as_bytes())
        .map_err(|e| JsError::new(&format!("no QR code for this link: {e}")))?;
    Ok(svg(code.width(), &code.to_colors()))
}

fn svg(width: usize, colors: &[Color]) -> String {
    const QUIET: usize = 4;
    let size = width + 2 * QUIET;
    let mut path = String::new();
    for (i, c) in colors.iter().enumerate() {
        if *c == Color::Dark {
            let (x, y) = (i % width + QUIET, i / width + QUIET);
            path.push_str(&format!("M{x} {y}h1v1h-1z"));
        }
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {size} {size}\" \
         shape-rendering=\"crispEdges\"><rect width=\"{size}\" height=\"{size}\" fill=\"#fff\"/>\
         <path fill=\"#000\" d=\"{path}\"/></svg>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_becomes_a_square_of_modules_in_svg() {
        let out = qr_svg("http://192.168.1.20:8080/s/abc#k=secret").unwrap();
        assert!(out.starts_with("<svg"), "{out}");
        let code = QrCode::new(b"http://192.168.1.20:8080/s/abc#k=secret").unwrap();
        let dark = code
            .to_colors()
            .iter()
            .filter(|c| **c == Color::Dark)
            .count();
        assert_eq!(out.matches("h1v1h-1z").count(), dark);
        assert!(out.contains(&format!("viewBox=\"0 0 {0} {0}\"", code.width() + 8)));
    }
}
