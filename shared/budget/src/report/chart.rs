//! Spend against caps as an inline SVG (rendered on the server; no script, no CDN): one bar per
//! capped bucket, with the cap as a line at 100%.

use super::render::amount;
use super::{EVERYONE, Report};

const WIDTH: f64 = 820.0;
const LABEL: f64 = 260.0;
const BAR: f64 = 360.0;
const ROW: f64 = 28.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The chart. Bars are green below 80% of the cap, amber up to 100%, red past it; a bar past
/// the cap is drawn to at most 120%.
pub fn svg(report: &Report) -> String {
    let rows: Vec<_> = report.usage.iter().filter(|r| r.cap.is_some()).collect();
    let height = 40.0 + ROW * rows.len() as f64;
    let cap_x = LABEL + BAR / 1.2;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"spend-chart\" role=\"img\" \
         aria-label=\"Spend against caps\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"12\">\
         <title>Spend against caps</title>\
         <text x=\"{cap_x}\" y=\"14\" text-anchor=\"middle\" fill=\"#555\">cap</text>"
    );
    for (i, r) in rows.iter().enumerate() {
        let y = 24.0 + ROW * i as f64;
        let who = if r.subject == EVERYONE {
            "everyone".to_owned()
        } else {
            r.subject.clone()
        };
        let colour = if r.fill >= 1.0 {
            "#d64545"
        } else if r.fill >= 0.8 {
            "#e3a008"
        } else {
            "#2f9e44"
        };
        let w = (r.fill.min(1.2) / 1.2 * BAR).max(if r.used > 0 { 2.0 } else { 0.0 });
        let cap = r.cap.unwrap_or(0);
        out += &format!(
            "<g class=\"bar\" data-bucket=\"{bucket}\" data-subject=\"{subject}\">\
             <text x=\"0\" y=\"{ty}\">{label}</text>\
             <rect x=\"{LABEL}\" y=\"{y}\" width=\"{BAR}\" height=\"18\" fill=\"#eee\"/>\
             <rect class=\"fill\" x=\"{LABEL}\" y=\"{y}\" width=\"{w:.1}\" height=\"18\" fill=\"{colour}\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{used} / {capv} ({pct:.0}%)</text></g>",
            bucket = r.bucket.name(),
            subject = escape(&r.subject),
            ty = y + 13.0,
            label = escape(&format!("{who} · {}", r.bucket.name())),
            tx = LABEL + BAR + 8.0,
            used = escape(&amount(r.unit, r.used)),
            capv = escape(&amount(r.unit, cap)),
            pct = r.fill * 100.0,
        );
    }
    out += &format!(
        "<line x1=\"{cap_x}\" y1=\"20\" x2=\"{cap_x}\" y2=\"{y2}\" stroke=\"#333\" stroke-dasharray=\"4 3\"/></svg>",
        y2 = height - 6.0
    );
    out
}
