//! Markdown-ish model text → Slack `mrkdwn`.
//!
//! - `&`, `<`, `>` are escaped everywhere (Slack's three control characters), so model text can
//!   never form a mention (`<!channel>`, `<@U…>`) or a disguised link;
//! - `**bold**` / `__bold__` → `*bold*`, `*italic*` → `_italic_` (`_italic_` stays),
//!   `~~strike~~` → `~strike~`; `` `code` `` and fenced blocks are kept verbatim (a fence's
//!   language tag is dropped: Slack has none);
//! - `# Heading` → a bold line; `- item` / `* item` / `+ item` → `• item`; `> quote` stays a
//!   quote;
//! - every URL goes on a line of its own, as `<url>`: a `[label](url)` keeps its label in the
//!   sentence and its URL follows on the next line; a bare URL splits its line where it stands
//!   (closing punctuation after it stays with the text before).

/// Rewrite model text as Slack `mrkdwn`.
pub fn format(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            // Opening fences lose their language tag; closing fences are bare anyway.
            let indent = &line[..line.len() - line.trim_start().len()];
            if in_fence {
                out.push(format!("{indent}```{}", escape(&line.trim_start()[3..])));
            } else {
                out.push(format!("{indent}```"));
            }
            in_fence = !in_fence;
        } else if in_fence {
            out.push(escape(line));
        } else {
            out.push(line_to_mrkdwn(line));
        }
    }
    out.join("\n")
}

/// Escape Slack's control characters.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        c => out.push(c),
    }
}

/// A URL as Slack's explicit link, on its own line.
fn url_line(prefix: &str, url: &str) -> String {
    format!("{prefix}<{}>", escape(url).replace('|', "%7C"))
}

fn line_to_mrkdwn(line: &str) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    if let Some(content) = heading(body) {
        let (text, lifted) = flatten(scan(&content.replace("**", "")));
        let mut lines = vec![if text.trim().is_empty() {
            String::new()
        } else {
            format!("*{}*", text.trim())
        }];
        lines.extend(lifted.iter().map(|u| url_line("", u)));
        return lines.join("\n");
    }
    let (prefix, rest, cont) =
        if let Some(rest) = ["- ", "* ", "+ "].iter().find_map(|b| body.strip_prefix(b)) {
            (format!("{indent}• "), rest, String::new())
        } else if let Some(rest) = body.strip_prefix('>') {
            (
                format!("{indent}> "),
                rest.trim_start(),
                format!("{indent}> "),
            )
        } else {
            (indent.to_owned(), body, String::new())
        };
    assemble(&prefix, &cont, scan(rest))
}

/// `# Title` … `###### Title` → `Title`.
fn heading(body: &str) -> Option<&str> {
    let hashes = body.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) {
        body[hashes..].strip_prefix(' ').map(str::trim)
    } else {
        None
    }
}

/// A line's pieces: converted text, and bare URLs where they stood.
enum Part {
    Text(String),
    Url(String),
}

/// A scanned span: its parts, and URLs to put after the line (from `[label](url)`).
struct Scanned {
    parts: Vec<Part>,
    lifted: Vec<String>,
}

/// Inner spans (emphasis, labels) cannot hold a line break: their bare URLs are lifted too.
fn flatten(s: Scanned) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut lifted = Vec::new();
    for part in s.parts {
        match part {
            Part::Text(t) => text.push_str(&t),
            Part::Url(u) => lifted.push(u),
        }
    }
    lifted.extend(s.lifted);
    // Tidy the gap a lifted URL leaves ("see  here" → "see here").
    let text = text
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>();
    (text.join(" "), lifted)
}

/// Lay a line out: text, bare URLs on lines of their own, then the lifted URLs.
fn assemble(prefix: &str, cont: &str, s: Scanned) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut current = prefix.to_owned();
    let mut after_url = false;
    for part in s.parts {
        match part {
            Part::Text(t) if after_url => {
                let t = t.trim();
                if t.is_empty() {
                    continue;
                }
                let closing = t.chars().all(|c| ".,;:!?)]}'\"".contains(c));
                match lines
                    .iter_mut()
                    .rev()
                    .find(|l| !l.trim_start().starts_with('<'))
                {
                    Some(text_line) if closing => text_line.push_str(t),
                    _ => {
                        current = format!("{cont}{t}");
                        after_url = false;
                    }
                }
            }
            Part::Text(t) => current.push_str(&t),
            Part::Url(u) => {
                if !after_url {
                    let before = current.trim_end();
                    if before.trim().is_empty() || before == prefix.trim_end() {
                        // Nothing but the bullet or quote mark: the URL takes its place.
                        lines.push(url_line(prefix, &u));
                        after_url = true;
                        current = String::new();
                        continue;
                    }
                    lines.push(before.to_owned());
                }
                lines.push(url_line(cont, &u));
                after_url = true;
                current = String::new();
            }
        }
    }
    if !after_url {
        lines.push(current.trim_end().to_owned());
    }
    lines.extend(s.lifted.iter().map(|u| url_line(cont, u)));
    lines.join("\n")
}

fn scan(s: &str) -> Scanned {
    let mut parts = Vec::new();
    let mut lifted = Vec::new();
    let mut buf = String::new();
    let mut i = 0;
    'outer: while i < s.len() {
        let rest = &s[i..];
        if let Some(end) = rest.strip_prefix('`').and_then(|r| r.find('`')) {
            // An inline code span, verbatim.
            buf.push_str(&escape(&rest[..end + 2]));
            i += end + 2;
            continue;
        }
        if let Some((label, url, len)) = markdown_link(rest) {
            if label.trim().is_empty() || label.trim() == url {
                parts.push(Part::Text(std::mem::take(&mut buf)));
                parts.push(Part::Url(url.to_owned()));
            } else {
                let (text, inner) = flatten(scan(label));
                buf.push_str(&text);
                lifted.extend(inner);
                lifted.push(url.to_owned());
            }
            i += len;
            continue;
        }
        if at_word_start(s, i)
            && let Some(len) = bare_url(rest)
        {
            parts.push(Part::Text(std::mem::take(&mut buf)));
            parts.push(Part::Url(rest[..len].to_owned()));
            i += len;
            continue;
        }
        for (marker, slack) in [("**", "*"), ("__", "*"), ("~~", "~"), ("*", "_")] {
            if let Some(inner) = emphasis(rest, marker) {
                let (text, inner_urls) = flatten(scan(inner));
                buf.push_str(slack);
                buf.push_str(&text);
                buf.push_str(slack);
                lifted.extend(inner_urls);
                i += inner.len() + 2 * marker.len();
                continue 'outer;
            }
        }
        let c = rest.chars().next().expect("i is inside s");
        push_escaped(&mut buf, c);
        i += c.len_utf8();
    }
    parts.push(Part::Text(buf));
    Scanned { parts, lifted }
}

/// `marker inner marker` at the start of `rest`, with `inner` neither empty nor padded with
/// spaces; a single `*` does not take part of a `**`.
fn emphasis<'a>(rest: &'a str, marker: &str) -> Option<&'a str> {
    let after = rest.strip_prefix(marker)?;
    if after.starts_with(char::is_whitespace) || after.starts_with(marker) {
        return None;
    }
    let mut from = 0;
    while let Some(j) = after[from..].find(marker).map(|j| j + from) {
        let inner = &after[..j];
        let doubled = marker.len() == 1 && after[j + 1..].starts_with(marker);
        if !inner.is_empty() && !inner.ends_with(char::is_whitespace) && !doubled {
            return Some(inner);
        }
        from = j + marker.len() + usize::from(doubled);
        if from >= after.len() {
            break;
        }
    }
    None
}

/// `[label](url)` at the start of `rest`: the label, the URL and the length consumed.
fn markdown_link(rest: &str) -> Option<(&str, &str, usize)> {
    let after = rest.strip_prefix('[')?;
    let close = after.find(']')?;
    let label = &after[..close];
    let target = after[close + 1..].strip_prefix('(')?;
    let mut depth = 0usize;
    let end = target.char_indices().find_map(|(k, c)| match c {
        '(' => {
            depth += 1;
            None
        }
        ')' if depth == 0 => Some(k),
        ')' => {
            depth -= 1;
            None
        }
        _ => None,
    })?;
    let url = target[..end].trim();
    let is_link = ["https://", "http://", "mailto:"]
        .iter()
        .any(|p| url.starts_with(p) && url.len() > p.len());
    if !is_link || url.contains(char::is_whitespace) || label.contains('[') {
        return None;
    }
    Some((label, url, 1 + close + 2 + end + 1))
}

fn at_word_start(s: &str, i: usize) -> bool {
    s[..i]
        .chars()
        .next_back()
        .is_none_or(|c| c.is_whitespace() || "([\"'".contains(c))
}

/// The length of a bare `http(s)://` URL at the start of `rest`, without closing punctuation.
fn bare_url(rest: &str) -> Option<usize> {
    let scheme = ["https://", "http://"]
        .iter()
        .find(|p| rest.starts_with(**p))?;
    let mut end = rest
        .find(|c: char| c.is_whitespace() || "<>`\"".contains(c))
        .unwrap_or(rest.len());
    loop {
        let url = &rest[..end];
        let last = url.chars().next_back()?;
        let unbalanced_paren = last == ')' && url.matches(')').count() > url.matches('(').count();
        if ".,;:!?'*_~]".contains(last) || unbalanced_paren {
            end -= last.len_utf8();
        } else {
            break;
        }
    }
    (end > scheme.len()).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::format;

    #[track_caller]
    fn check(input: &str, expect: &str) {
        assert_eq!(format(input), expect, "format({input:?})");
    }

    #[test]
    fn control_characters_are_escaped() {
        check("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d");
        check("<!channel> <@U123>", "&lt;!channel&gt; &lt;@U123&gt;");
    }

    #[test]
    fn emphasis_becomes_mrkdwn() {
        check("**bold** and __also__", "*bold* and *also*");
        check("*italic* and _this_", "_italic_ and _this_");
        check("~~gone~~", "~gone~");
        check(
            "**bold with *italic* inside**",
            "*bold with _italic_ inside*",
        );
        check("2 * 3 * 4 and a ** b", "2 * 3 * 4 and a ** b");
        check("**unclosed", "**unclosed");
        check("snake_case_name", "snake_case_name");
    }

    #[test]
    fn code_is_verbatim() {
        check("run `a **b** <c>`", "run `a **b** &lt;c&gt;`");
        check(
            "```rust\nlet x = **y** < 2;\n```\n**after**",
            "```\nlet x = **y** &lt; 2;\n```\n*after*",
        );
    }

    #[test]
    fn headings_lists_and_quotes() {
        check("# Title\n## **Sub** title", "*Title*\n*Sub title*");
        check("- one\n* two\n  + three", "• one\n• two\n  • three");
        check("1. first\n2. second", "1. first\n2. second");
        check("> quoted *text*", "> quoted _text_");
        check("#hashtag", "#hashtag");
    }

    #[test]
    fn markdown_links_keep_their_label_and_put_the_url_below() {
        check(
            "See [the docs](https://example.com/a?b=1&c=2) for more.",
            "See the docs for more.\n<https://example.com/a?b=1&amp;c=2>",
        );
        check(
            "[one](https://a.example) and [two](https://b.example)",
            "one and two\n<https://a.example>\n<https://b.example>",
        );
        check(
            "[Rust](https://en.wikipedia.org/wiki/Rust_(programming_language))",
            "Rust\n<https://en.wikipedia.org/wiki/Rust_(programming_language)>",
        );
        check(
            "[https://a.example](https://a.example)",
            "<https://a.example>",
        );
        check(
            "[not a link](javascript:alert(1))",
            "[not a link](javascript:alert(1))",
        );
    }

    #[test]
    fn bare_urls_split_their_line() {
        check("Docs: https://example.com", "Docs:\n<https://example.com>");
        check(
            "Go to https://example.com/x now",
            "Go to\n<https://example.com/x>\nnow",
        );
        check(
            "More at https://example.com.",
            "More at.\n<https://example.com>",
        );
        check("(see https://example.com)", "(see)\n<https://example.com>");
        check("https://example.com", "<https://example.com>");
        check("- https://example.com", "• <https://example.com>");
        check(
            "a|b https://x.example/a|b",
            "a|b\n<https://x.example/a%7Cb>",
        );
        check("not-a-urlhttps://x.example", "not-a-urlhttps://x.example");
    }

    #[test]
    fn urls_inside_emphasis_go_after_the_line() {
        check(
            "**see https://example.com** ok",
            "*see* ok\n<https://example.com>",
        );
        check(
            "# Read [this](https://example.com)",
            "*Read this*\n<https://example.com>",
        );
    }

    #[test]
    fn paragraphs_and_unicode_survive() {
        check("Héllo 👋\n\nSecond — para", "Héllo 👋\n\nSecond — para");
        check("", "");
    }
}
