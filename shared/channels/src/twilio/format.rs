//! Markdown-ish model text into plain SMS text.
//!
//! SMS has no markup, so markers are removed rather than translated: `**bold**`, `__bold__`,
//! `*italic*`, `_italic_`, `~~strike~~` and `` `code` `` keep their text; `# headings` lose their
//! hashes; code fences disappear (their lines stay); `* item` / `+ item` bullets become `- item`.
//! A link `[text](url)` keeps its text in the sentence and its URL goes on its own line after
//! that line (phones link a bare URL, and a URL alone on a line survives the split intact).
//! Bare URLs are left alone, `_` and `*` inside words too (`snake_case`, `2*3*4`).
//! Nothing outside GSM-7 is introduced (no `•`), so the formatter never pushes a message into
//! UCS-2, which would cut a segment from 160 to 70 characters.

/// Plain SMS text for `text`; see the module docs.
pub fn format(text: &str) -> String {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            out.push(line.to_owned());
            continue;
        }
        let mut urls = Vec::new();
        let formatted = inline(&block(line), &mut urls);
        out.push(formatted.trim_end().to_owned());
        out.extend(urls);
    }
    out.join("\n").trim_end().to_owned()
}

/// Line-level markers: heading hashes, bullets.
fn block(line: &str) -> String {
    let indent = &line[..line.len() - line.trim_start().len()];
    let body = line.trim_start();
    let hashes = body.bytes().take_while(|&b| b == b'#').count();
    if (1..=6).contains(&hashes) && body[hashes..].starts_with(' ') {
        return format!("{indent}{}", body[hashes..].trim_start());
    }
    for bullet in ["* ", "+ "] {
        if let Some(rest) = body.strip_prefix(bullet) {
            return format!("{indent}- {rest}");
        }
    }
    line.to_owned()
}

fn is_url_at(s: &[char], i: usize) -> bool {
    let starts = |p: &str| {
        p.chars()
            .enumerate()
            .all(|(k, c)| s.get(i + k).is_some_and(|&x| x.eq_ignore_ascii_case(&c)))
    };
    (i == 0 || !s[i - 1].is_alphanumeric()) && (starts("https://") || starts("http://"))
}

/// Emphasis, code spans and links within one line; link URLs are pushed to `urls`.
fn inline(line: &str, urls: &mut Vec<String>) -> String {
    let s: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if is_url_at(&s, i) {
            while i < s.len() && !s[i].is_whitespace() {
                out.push(s[i]);
                i += 1;
            }
            continue;
        }
        if c == '`'
            && let Some(end) = find(&s, i + 1, |j| s[j] == '`')
        {
            out.extend(&s[i + 1..end]);
            i = end + 1;
            continue;
        }
        if c == '['
            && let Some((text, url, next)) = link(&s, i)
        {
            let text = inline(&text, urls);
            if text.trim().is_empty() || text.trim() == url {
                out.push_str(&url);
            } else {
                out.push_str(&text);
                urls.push(url);
            }
            i = next;
            continue;
        }
        if matches!(c, '*' | '_' | '~')
            && let Some((inner, next)) = emphasis(&s, i)
        {
            out.push_str(&inline(&inner, urls));
            i = next;
            continue;
        }
        // Anything else, including an unmatched run of markers, stays as it is.
        let run = if matches!(c, '*' | '_' | '~') {
            s[i..].iter().take_while(|&&x| x == c).count()
        } else {
            1
        };
        out.extend(&s[i..i + run]);
        i += run;
    }
    out
}

fn find(s: &[char], from: usize, pred: impl Fn(usize) -> bool) -> Option<usize> {
    (from..s.len()).find(|&j| pred(j))
}

/// `[text](url)` at `i`: the text, the URL and the index after the `)`.
fn link(s: &[char], i: usize) -> Option<(String, String, usize)> {
    let close = find(s, i + 1, |j| s[j] == ']' || s[j] == '[')?;
    if s[close] != ']' || s.get(close + 1) != Some(&'(') {
        return None;
    }
    let end = find(s, close + 2, |j| s[j] == ')' || s[j].is_whitespace())?;
    if s[end] != ')' || end == close + 2 {
        return None;
    }
    let text = s[i + 1..close].iter().collect();
    let url = s[close + 2..end].iter().collect();
    Some((text, url, end + 1))
}

/// A delimited span at `i` (`*x*`, `**x**`, `***x***`, `_x_`, `__x__`, `~~x~~`): the inner text
/// and the index after the closing run. Runs must touch the text on the inside and must not touch
/// a word on the outside (so `snake_case_name` and `2*3*4` stay).
fn emphasis(s: &[char], i: usize) -> Option<(String, usize)> {
    let c = s[i];
    let n = s[i..].iter().take_while(|&&x| x == c).count();
    if (c == '~' && n != 2) || n > 3 {
        return None;
    }
    let word = |j: Option<&char>| j.is_some_and(|x| x.is_alphanumeric());
    let space = |j: Option<&char>| j.is_none_or(|x| x.is_whitespace());
    if space(s.get(i + n)) || (i > 0 && word(s.get(i - 1))) {
        return None;
    }
    let mut j = i + n;
    while j < s.len() {
        let run = s[j..].iter().take_while(|&&x| x == c).count();
        if run == 0 {
            j += 1;
            continue;
        }
        let closes = run == n && j > i + n && !space(s.get(j - 1)) && !word(s.get(j + n));
        if closes {
            return Some((s[i + n..j].iter().collect(), j + n));
        }
        j += run;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::format;

    #[test]
    fn emphasis_markers_are_stripped() {
        assert_eq!(
            format("This is **bold**, *it*, __b__, _i_, ***both*** and ~~gone~~."),
            "This is bold, it, b, i, both and gone."
        );
        assert_eq!(format("Run `cargo test` now"), "Run cargo test now");
        assert_eq!(format("**Nested _inner_ text**"), "Nested inner text");
    }

    #[test]
    fn markers_inside_words_and_urls_stay() {
        assert_eq!(format("use snake_case_name"), "use snake_case_name");
        assert_eq!(format("2*3*4 = 24"), "2*3*4 = 24");
        assert_eq!(
            format("see https://x.example/a_b_c?q=*x* ok"),
            "see https://x.example/a_b_c?q=*x* ok"
        );
        assert_eq!(format("a * b and c_"), "a * b and c_");
        assert_eq!(format("~single~ tilde"), "~single~ tilde");
    }

    #[test]
    fn links_keep_their_text_and_put_the_url_on_its_own_line() {
        assert_eq!(
            format("See [the docs](https://docs.example/x) for more."),
            "See the docs for more.\nhttps://docs.example/x"
        );
        assert_eq!(
            format("[a](https://a.example) and [**b**](https://b.example)\nnext"),
            "a and b\nhttps://a.example\nhttps://b.example\nnext"
        );
        assert_eq!(
            format("Go to [https://a.example](https://a.example)."),
            "Go to https://a.example."
        );
        assert_eq!(format("[not a link] (x)"), "[not a link] (x)");
    }

    #[test]
    fn headings_bullets_and_fences_become_plain_lines() {
        assert_eq!(
            format("# Plan\n\n* one\n+ two\n- three\n\n```rust\nlet x_y = *p;\n```\n#hashtag"),
            "Plan\n\n- one\n- two\n- three\n\nlet x_y = *p;\n#hashtag"
        );
    }

    #[test]
    fn plain_text_and_unicode_pass_through() {
        let text = "Hello, café!\n\nSecond paragraph: 50% off (really).";
        assert_eq!(format(text), text);
        assert_eq!(format(""), "");
    }
}
