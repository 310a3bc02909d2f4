//! The report as text: a table for people, JSON and CSV for tools.

use super::{EVERYONE, Report};
use crate::Unit;
use crate::money::{format_usd, usd_exact};

/// An amount in its unit, for people: tokens and messages as numbers, money as dollars.
pub fn amount(unit: Unit, value: u64) -> String {
    match unit {
        Unit::Microdollars => format_usd(value),
        Unit::Tokens | Unit::Messages => value.to_string(),
    }
}

/// An amount for machines: money as exact decimal dollars.
fn plain(unit: Unit, value: u64) -> String {
    match unit {
        Unit::Microdollars => usd_exact(value),
        Unit::Tokens | Unit::Messages => value.to_string(),
    }
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Tokens => "tokens",
        Unit::Microdollars => "usd",
        Unit::Messages => "messages",
    }
}

fn percent(fill: f64) -> String {
    format!("{:.1}%", fill * 100.0)
}

/// Pad columns to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| (*h).to_owned()).collect());
    out += &line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        out += &line(row.clone());
    }
    out
}

/// One table of the report: an id (for HTML), its column names and its rows, cells formatted
/// for people. The plain-text table and the admin page both render these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub id: &'static str,
    pub header: &'static [&'static str],
    pub rows: Vec<Vec<String>>,
}

/// The report's four tables, in order: usage, top conversations, caps, prices.
pub fn sections(report: &Report) -> [Section; 4] {
    let usage = report
        .usage
        .iter()
        .map(|r| {
            vec![
                if r.subject == EVERYONE {
                    "(everyone)".to_owned()
                } else {
                    r.subject.clone()
                },
                r.bucket.name().to_owned(),
                amount(r.unit, r.used),
                r.cap.map_or("none".into(), |c| amount(r.unit, c)),
                if r.cap.is_some() {
                    percent(r.fill)
                } else {
                    "-".into()
                },
            ]
        })
        .collect();
    let conversations = report
        .top_conversations
        .iter()
        .map(|c| vec![c.conversation.clone(), format_usd(c.usd_micros)])
        .collect();
    let caps = report
        .caps
        .iter()
        .map(|c| {
            vec![
                c.bucket.name().to_owned(),
                c.cap.map_or("off".into(), |v| amount(c.unit, v)),
                c.source.to_string(),
            ]
        })
        .collect();
    let prices = report
        .prices
        .iter()
        .map(|p| {
            vec![
                if p.model == EVERYONE {
                    "(any other model)".into()
                } else {
                    p.model.clone()
                },
                usd_exact(p.input),
                usd_exact(p.output),
                usd_exact(p.cache_read),
                usd_exact(p.cache_write),
                p.source.to_string(),
            ]
        })
        .collect();
    [
        Section {
            id: "usage",
            header: &["user", "bucket", "used", "cap", "fill"],
            rows: usage,
        },
        Section {
            id: "conversations",
            header: &["conversation", "cost"],
            rows: conversations,
        },
        Section {
            id: "caps",
            header: &["bucket", "cap", "source"],
            rows: caps,
        },
        Section {
            id: "prices",
            header: &[
                "model",
                "input",
                "output",
                "cache read",
                "cache write",
                "source",
            ],
            rows: prices,
        },
    ]
}

/// The report as plain-text tables.
pub fn to_table(report: &Report) -> String {
    const TITLES: [&str; 4] = [
        "Usage (current windows)",
        "Top conversations by cost (current 30 days)",
        "Caps",
        "Prices (USD per million tokens)",
    ];
    let mut out = String::new();
    for (title, section) in TITLES.iter().zip(sections(report)) {
        if !out.is_empty() {
            out += "\n";
        }
        out += title;
        out += "\n";
        out += &table(section.header, &section.rows);
    }
    out
}

/// The report as pretty JSON (amounts in their raw unit: tokens, messages, micro-dollars).
pub fn to_json(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("a report always serialises")
}

/// The report as one CSV table: `section,subject,item,unit,value,cap,fill,source`, where
/// `section` is `usage`, `conversation`, `cap` or `price`, and money is in decimal dollars.
pub fn to_csv(report: &Report) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut put = |fields: [String; 8]| {
        w.write_record(&fields).expect("writing CSV to memory");
    };
    put([
        "section", "subject", "item", "unit", "value", "cap", "fill", "source",
    ]
    .map(String::from));
    for r in &report.usage {
        put([
            "usage".into(),
            r.subject.clone(),
            r.bucket.name().into(),
            unit_name(r.unit).into(),
            plain(r.unit, r.used),
            r.cap.map_or(String::new(), |c| plain(r.unit, c)),
            r.cap.map_or(String::new(), |_| format!("{:.4}", r.fill)),
            String::new(),
        ]);
    }
    for c in &report.top_conversations {
        put([
            "conversation".into(),
            c.conversation.clone(),
            "conversation_usd_30d".into(),
            "usd".into(),
            usd_exact(c.usd_micros),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    for c in &report.caps {
        put([
            "cap".into(),
            String::new(),
            c.bucket.name().into(),
            unit_name(c.unit).into(),
            c.cap.map_or("off".into(), |v| plain(c.unit, v)),
            String::new(),
            String::new(),
            c.source.to_string(),
        ]);
    }
    for p in &report.prices {
        for (item, v) in [
            ("input", p.input),
            ("output", p.output),
            ("cache_read", p.cache_read),
            ("cache_write", p.cache_write),
        ] {
            put([
                "price".into(),
                p.model.clone(),
                item.into(),
                "usd_per_million_tokens".into(),
                usd_exact(v),
                String::new(),
                String::new(),
                p.source.to_string(),
            ]);
        }
    }
    String::from_utf8(w.into_inner().expect("flushing CSV to memory"))
        .expect("CSV of UTF-8 is UTF-8")
}
