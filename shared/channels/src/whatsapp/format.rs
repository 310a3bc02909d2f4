//! Markdown-ish model text → WhatsApp markup.
//!
//! WhatsApp has `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ```monospace``` ````,
//! `- ` / `1. ` lists and `> ` quotes, and shows bare URLs as links. So: `**b**` and `__b__` →
//! `*b*`; `*i*` → `_i_`; `***bi***` → `*_bi_*`; `~~s~~` → `~s~`; a heading → a bold line;
//! `* ` / `+ ` bullets → `- `; a code fence loses its language tag and its content is left
//! alone; `[text](url)` (and `![alt](url)`) keeps the text in place and puts the URL on its own
//! line after the line it was in; `<url>` → `url`. Anything that does not pair up (`2 * 3`) is
//! left as written.

/// How far ahead a closing marker is looked for, in characters: keeps a pathological line
/// (thousands of unpaired `*` or `[`) linear instead of quadratic.
const MAX_SPAN: usize = 2_000;

/// The end of the search window for a construct starting at `i`.
fn window(c: &[char], i: usize) -> usize {
    c.len().min(i.saturating_add(MAX_SPAN))
}

/// Rewrite `text` in WhatsApp markup.
pub fn format(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(after) = trimmed.strip_prefix("```") {
            if !in_code && after.contains("```") {
                out.push(line.to_owned()); // ```one-line monospace```
            } else {
                in_code = !in_code;
                out.push("```".to_owned());
            }
            continue;
        }
        if in_code {
            out.push(line.to_owned());
            continue;
        }
        let mut urls = Vec::new();
        let converted = if let Some(title) = heading(trimmed) {
            let title: String = inline(title, &mut urls)
                .chars()
                .filter(|&c| c != '*')
                .collect();
            if title.trim().is_empty() {
                String::new()
            } else {
                format!("*{}*", title.trim())
            }
        } else if let Some(item) = trimmed
            .strip_prefix("* ")
            .or_else(|| trimmed.strip_prefix("+ "))
        {
            let indent = &line[..line.len() - trimmed.len()];
            format!("{indent}- {}", inline(item, &mut urls))
        } else {
            inline(line, &mut urls)
        };
        out.push(converted);
        out.extend(urls);
    }
    out.join("\n")
}

/// The title of an ATX heading (`## Title ##`), if `line` is one.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None; // `#hashtag`
    }
    Some(rest.trim().trim_end_matches('#').trim_end())
}

/// The length of the run of `ch` starting at `i`.
fn run(c: &[char], i: usize, ch: char) -> usize {
    c[i..].iter().take_while(|&&x| x == ch).count()
}

/// Rewrite one line's inline markup; link URLs are pushed to `urls`.
fn inline(s: &str, urls: &mut Vec<String>) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let step = match ch {
            '`' => code_span(&c, i, &mut out),
            '[' => link(&c, i, &mut out, urls),
            '!' if c.get(i + 1) == Some(&'[') => link(&c, i + 1, &mut out, urls),
            '<' => autolink(&c, i, &mut out),
            '*' | '_' | '~' => emphasis(&c, i, &mut out, urls),
            _ => None,
        };
        match step {
            Some(next) => i = next,
            None => {
                out.push(ch);
                i += 1;
            }
        }
    }
    out
}

/// `` `code` `` is copied as it is (WhatsApp has inline code). Returns the index after it.
fn code_span(c: &[char], i: usize, out: &mut String) -> Option<usize> {
    let n = run(c, i, '`');
    let mut q = i + n;
    let end = window(c, i);
    while q < end {
        if c[q] == '`' {
            let r = run(c, q, '`');
            if r == n {
                out.extend(&c[i..q + n]);
                return Some(q + n);
            }
            q += r;
        } else {
            q += 1;
        }
    }
    out.extend(&c[i..i + n]);
    Some(i + n)
}

/// `[text](url)` with its `[` at `open` (after the `!` of an image): the text stays, the URL
/// goes to its own line.
fn link(c: &[char], open: usize, out: &mut String, urls: &mut Vec<String>) -> Option<usize> {
    let mut depth = 0usize;
    let close = (open..window(c, open)).find(|&j| {
        match c[j] {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        depth == 0
    })?;
    if c.get(close + 1) != Some(&'(') {
        return None;
    }
    let mut depth = 0usize;
    let end = (close + 1..window(c, close)).find(|&j| {
        match c[j] {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        depth == 0
    })?;
    let target: String = c[close + 2..end].iter().collect();
    let target = target.trim();
    let (url, title) = target
        .split_once(char::is_whitespace)
        .unwrap_or((target, ""));
    let url = url.trim_matches(['<', '>']);
    // After the URL only a quoted title may follow (it is dropped); anything else is not a link.
    let title = title.trim_start();
    if url.is_empty() || !(title.is_empty() || title.starts_with(['"', '\''])) {
        return None;
    }
    let text: String = c[open + 1..close].iter().collect();
    let shown = inline(text.trim(), urls);
    if shown.is_empty() || shown == url {
        out.push_str(url);
    } else {
        out.push_str(&shown);
        urls.push(url.to_owned());
    }
    Some(end + 1)
}

/// `<https://…>` → the bare URL.
fn autolink(c: &[char], i: usize, out: &mut String) -> Option<usize> {
    let end = (i + 1..window(c, i)).find(|&j| c[j] == '>')?;
    let inner: String = c[i + 1..end].iter().collect();
    let is_url = ["http://", "https://", "mailto:"]
        .iter()
        .any(|p| inner.starts_with(p));
    if !is_url || inner.contains(char::is_whitespace) {
        return None;
    }
    out.push_str(&inner);
    Some(end + 1)
}

/// `*i*`, `**b**`, `***bi***`, `__b__`, `___bi___`, `~~s~~`.
fn emphasis(c: &[char], i: usize, out: &mut String, urls: &mut Vec<String>) -> Option<usize> {
    let ch = c[i];
    let n = run(c, i, ch);
    let (open, close) = match (ch, n) {
        ('*', 1) => ("_", "_"),
        ('*', 2) | ('_', 2) => ("*", "*"),
        ('*', 3) | ('_', 3) => ("*_", "_*"),
        ('~', 2) => ("~", "~"),
        _ => {
            out.extend(&c[i..i + n]); // a run that means nothing special: keep it whole
            return Some(i + n);
        }
    };
    let body = i + n;
    let opens = c.get(body).is_some_and(|x| !x.is_whitespace())
        && !(ch == '_' && i > 0 && c[i - 1].is_alphanumeric());
    let closer = opens
        .then(|| {
            let mut q = body;
            let end = window(c, i);
            while q < end {
                if c[q] == ch {
                    let r = run(c, q, ch);
                    if r == n && q > body && !c[q - 1].is_whitespace() {
                        return Some(q);
                    }
                    q += r;
                } else {
                    q += 1;
                }
            }
            None
        })
        .flatten();
    let Some(q) = closer else {
        out.extend(&c[i..body]);
        return Some(body);
    };
    let inner: String = c[body..q].iter().collect();
    out.push_str(open);
    out.push_str(&inline(&inner, urls));
    out.push_str(close);
    Some(q + n)
}

#[cfg(test)]
mod tests {
    use super::format;

    fn check(input: &str, expected: &str) {
        assert_eq!(format(input), expected, "input: {input:?}");
    }

    #[test]
    fn emphasis_becomes_whatsapp_markup() {
        check("This is **bold**.", "This is *bold*.");
        check("This is __bold__ too.", "This is *bold* too.");
        check("An *italic* word.", "An _italic_ word.");
        check("Already _italic_.", "Already _italic_.");
        check("Both ***at once***.", "Both *_at once_*.");
        check("~~gone~~ and ~kept~", "~gone~ and ~kept~");
        check("*a **b** c*", "_a *b* c_");
    }

    #[test]
    fn unpaired_markers_are_left_alone() {
        check("2 * 3 = 6", "2 * 3 = 6");
        check("snake_case_name and __init", "snake_case_name and __init");
        check("** not bold**", "** not bold**");
        check("a ******* b", "a ******* b");
        check("trailing *", "trailing *");
    }

    #[test]
    fn headings_become_bold_lines() {
        check("# Title", "*Title*");
        check("### A **strong** heading ###", "*A strong heading*");
        check("#hashtag stays", "#hashtag stays");
        check("#", "");
    }

    #[test]
    fn links_keep_their_text_and_put_the_url_on_its_own_line() {
        check(
            "See [the docs](https://example.com/docs) for more.",
            "See the docs for more.\nhttps://example.com/docs",
        );
        check(
            "[a](https://a.example) and [b](https://b.example \"B\")",
            "a and b\nhttps://a.example\nhttps://b.example",
        );
        check(
            "[https://x.example](https://x.example)",
            "https://x.example",
        );
        check(
            "![a cat](https://img.example/cat.png)",
            "a cat\nhttps://img.example/cat.png",
        );
        check(
            "[wiki](https://en.wikipedia.org/wiki/Rust_(programming_language))",
            "wiki\nhttps://en.wikipedia.org/wiki/Rust_(programming_language)",
        );
        check("Go to <https://example.com>.", "Go to https://example.com.");
        check(
            "[not a link] (x) and [empty]()",
            "[not a link] (x) and [empty]()",
        );
    }

    #[test]
    fn code_is_left_alone() {
        check("Run `a **b** c` now", "Run `a **b** c` now");
        check(
            "```rust\nlet x = **y**;\n```\n**after**",
            "```\nlet x = **y**;\n```\n*after*",
        );
        check("```one line```", "```one line```");
        check("an `unclosed tick", "an `unclosed tick");
    }

    #[test]
    fn lists_and_quotes() {
        check("* one\n+ two\n- three", "- one\n- two\n- three");
        check("  * nested **b**", "  - nested *b*");
        check("1. first\n> quoted", "1. first\n> quoted");
    }

    #[test]
    fn a_long_line_of_unpaired_markers_is_unchanged() {
        // Also bounds the work: every opener looks at most `MAX_SPAN` characters ahead.
        let line = "*a [b <d _e ".repeat(5_000);
        assert_eq!(format(&line), line);
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_keeps_every_letter(text in "[a-zé*_~`#>\\[\\]()<>!+: \n-]{0,300}") {
            // Fence language tags are dropped on purpose; everything else keeps its letters
            // (link URLs move to the end of their line, so compare as multisets).
            proptest::prop_assume!(!text.contains("```"));
            let letters = |s: &str| {
                let mut l: Vec<char> = s.chars().filter(|c| c.is_alphabetic()).collect();
                l.sort_unstable();
                l
            };
            proptest::prop_assert_eq!(letters(&format(&text)), letters(&text));
        }
    }

    #[test]
    fn paragraphs_and_non_ascii_survive() {
        check("Héllo **wörld** 👋\n\nNext.", "Héllo *wörld* 👋\n\nNext.");
        check("", "");
    }
}
