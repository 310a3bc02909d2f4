//! Model text (markdown-ish) → Telegram MarkdownV2.
//!
//! MarkdownV2 refuses a whole message ("can't parse entities") when one special character is
//! left unescaped, so this converter is total: whatever the input, the output parses. Only a
//! few well-formed constructs become markup; everything else is escaped and shows literally.
//!
//! | model text | MarkdownV2 | shows as |
//! |---|---|---|
//! | `**bold**` | `*bold*` | bold |
//! | `*italic*` | `_italic_` | italic |
//! | `~~gone~~` | `~gone~` | struck through |
//! | `` `code` `` | `` `code` `` | inline code |
//! | a fenced block | a `pre` block (language kept) | code block |
//! | `# Heading` | `*Heading*` | bold line |
//! | `- item`, `* item`, `+ item` | `• item` | bullet |
//! | `[text](url)` | `text`, and the URL on its own line after the line | plain link |
//!
//! Links are not rendered as hyperlinks: the reader sees the real address, on its own line at
//! the end of the line that cited it (so the sentence stays readable and a bold or italic span
//! is never broken by a newline). Link previews are turned off by the sender.

/// The characters MarkdownV2 wants escaped in plain text.
const SPECIAL: &[char] = &[
    '_', '*', '[', ']', '(', ')', '~', '`', '>', '#', '+', '-', '=', '|', '{', '}', '.', '!', '\\',
];

/// Escape plain text for MarkdownV2: every special character gets a backslash.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        if SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Escape the inside of a `code` or `pre` entity: only `` ` `` and `\`.
fn escape_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '`' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Convert markdown-ish model text to MarkdownV2 (see the module docs for what is converted).
pub fn format(text: &str) -> String {
    format_piece(text, &mut None)
}

/// Format one piece of a reply that was split into several. `fence` carries an open code block
/// across pieces: `Some(language)` when the previous piece ended inside one (it was closed there
/// and is reopened here), and is updated for the next piece.
pub(crate) fn format_piece(text: &str, fence: &mut Option<String>) -> String {
    let mut out: Vec<String> = Vec::new();
    // The open code block: its language and its lines so far.
    let mut code: Option<(String, Vec<&str>)> = fence.take().map(|lang| (lang, Vec::new()));
    for line in text.split('\n') {
        let trimmed = line.trim_start();
        if let Some((lang, lines)) = &mut code {
            if let Some(rest) = trimmed.strip_prefix("```") {
                push_code_block(&mut out, lang, lines);
                code = None;
                if !rest.trim().is_empty() {
                    out.push(format_line(rest.trim()));
                }
            } else {
                lines.push(line);
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("```") {
            code = Some((language(rest), Vec::new()));
            continue;
        }
        out.push(format_line(line));
    }
    if let Some((lang, lines)) = code {
        push_code_block(&mut out, &lang, &lines);
        *fence = Some(lang);
    }
    out.join("\n")
}

/// A fence's language tag, reduced to characters that are safe in the `pre` header.
fn language(rest: &str) -> String {
    rest.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_'))
        .take(32)
        .collect()
}

fn push_code_block(out: &mut Vec<String>, lang: &str, lines: &[&str]) {
    // An empty `pre` entity is an error on Telegram's side; drop empty blocks.
    if lines.iter().all(|l| l.trim().is_empty()) {
        return;
    }
    out.push(format!(
        "```{lang}\n{}\n```",
        escape_code(&lines.join("\n"))
    ));
}

/// What inline markup may still open (an entity cannot contain itself; code holds no markup).
#[derive(Debug, Clone, Copy)]
struct Allow {
    bold: bool,
    italic: bool,
    strike: bool,
    code: bool,
    link: bool,
}

const ALL: Allow = Allow {
    bold: true,
    italic: true,
    strike: true,
    code: true,
    link: true,
};

fn format_line(line: &str) -> String {
    let indent_len = line.len() - line.trim_start().len();
    let (indent, rest) = line.split_at(indent_len);
    let mut urls = Vec::new();
    let mut out = String::new();
    if let Some(heading) = heading(rest) {
        let content = heading.replace("**", "");
        if !content.trim().is_empty() {
            out.push('*');
            out.push_str(&inline(
                content.trim(),
                Allow {
                    bold: false,
                    code: false,
                    ..ALL
                },
                &mut urls,
            ));
            out.push('*');
        }
    } else if let Some(item) = ["- ", "* ", "+ "]
        .iter()
        .find_map(|bullet| rest.strip_prefix(bullet))
    {
        out.push_str(indent);
        out.push_str("• ");
        out.push_str(&inline(item.trim_start(), ALL, &mut urls));
    } else {
        out.push_str(indent);
        out.push_str(&inline(rest, ALL, &mut urls));
    }
    for url in urls {
        out.push('\n');
        out.push_str(&escape(&url));
    }
    out
}

/// `# Title` .. `###### Title` → `Title`.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    line[hashes..].strip_prefix(' ')
}

/// Inline markup on one line. URLs of links are pushed to `urls` (to go on their own lines).
fn inline(text: &str, allow: Allow, urls: &mut Vec<String>) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 8);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '`' && allow.code {
            if let Some(end) = find_code_end(&s, i + 1) {
                let content: String = s[i + 1..end].iter().collect();
                out.push('`');
                out.push_str(&escape_code(&content));
                out.push('`');
                i = end + 1;
                continue;
            }
        } else if c == '*' && next == Some('*') && allow.bold {
            if let Some(end) = find_pair_end(&s, i + 2, '*') {
                let inner = Allow {
                    bold: false,
                    code: false,
                    ..allow
                };
                out.push('*');
                out.push_str(&inline(&collect(&s[i + 2..end]), inner, urls));
                out.push('*');
                i = end + 2;
                continue;
            }
        } else if c == '~' && next == Some('~') && allow.strike {
            if let Some(end) = find_pair_end(&s, i + 2, '~') {
                let inner = Allow {
                    strike: false,
                    code: false,
                    ..allow
                };
                out.push('~');
                out.push_str(&inline(&collect(&s[i + 2..end]), inner, urls));
                out.push('~');
                i = end + 2;
                continue;
            }
        } else if c == '*' && allow.italic && !(i > 0 && s[i - 1] == '*') {
            if let Some(end) = find_italic_end(&s, i + 1) {
                let inner = Allow {
                    italic: false,
                    code: false,
                    ..allow
                };
                out.push('_');
                out.push_str(&inline(&collect(&s[i + 1..end]), inner, urls));
                out.push('_');
                i = end + 1;
                continue;
            }
        } else if c == '['
            && allow.link
            && let Some((label_end, url_end)) = find_link(&s, i)
        {
            let label = collect(&s[i + 1..label_end]);
            let url = collect(&s[label_end + 2..url_end]);
            if label.trim().is_empty() || label.trim() == url {
                out.push_str(&escape(&url));
            } else {
                let inner = Allow {
                    link: false,
                    ..allow
                };
                out.push_str(&inline(&label, inner, urls));
                urls.push(url);
            }
            i = url_end + 1;
            continue;
        }
        if SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
        i += 1;
    }
    out
}

fn collect(chars: &[char]) -> String {
    chars.iter().collect()
}

/// The closing backtick of a code span opened before `from`, when the span is not blank.
fn find_code_end(s: &[char], from: usize) -> Option<usize> {
    let end = from + s.get(from..)?.iter().position(|&c| c == '`')?;
    s[from..end]
        .iter()
        .any(|c| !c.is_whitespace())
        .then_some(end)
}

/// The start of the closing double marker (`**`, `~~`) of a span whose content starts at
/// `from`: the content must be non-empty and neither start nor end with whitespace.
fn find_pair_end(s: &[char], from: usize, marker: char) -> Option<usize> {
    if s.get(from)
        .is_none_or(|c| c.is_whitespace() || *c == marker)
    {
        return None;
    }
    (from + 1..s.len().saturating_sub(1))
        .find(|&k| s[k] == marker && s[k + 1] == marker)
        .filter(|&k| !s[k - 1].is_whitespace())
}

/// The closing single `*` of an italic span whose content starts at `from`. Stars that are part
/// of a `**` pair never open or close an italic span.
fn find_italic_end(s: &[char], from: usize) -> Option<usize> {
    if s.get(from).is_none_or(|c| c.is_whitespace() || *c == '*') {
        return None;
    }
    (from + 1..s.len()).find(|&k| {
        s[k] == '*' && s[k - 1] != '*' && s.get(k + 1) != Some(&'*') && !s[k - 1].is_whitespace()
    })
}

/// `[label](url)` starting at `open`: the index of `]` and of the closing `)`. The URL has no
/// whitespace and may hold balanced parentheses (Wikipedia-style addresses).
fn find_link(s: &[char], open: usize) -> Option<(usize, usize)> {
    let label_end = open + 1 + s[open + 1..].iter().position(|&c| c == ']' || c == '[')?;
    if s[label_end] != ']' || s.get(label_end + 1) != Some(&'(') {
        return None;
    }
    let mut depth = 0usize;
    for (k, &c) in s.iter().enumerate().skip(label_end + 2) {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return (k > label_end + 2).then_some((label_end, k)),
            ')' => depth -= 1,
            c if c.is_whitespace() => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A strict MarkdownV2 reader for the subset `format` emits: every special character is
    /// escaped or a balanced entity marker (`*`, `_`, `~`, `` ` ``, ```` ``` ````), no entity is
    /// empty, no `__` (underline) appears. Returns the text a reader would see.
    pub(crate) fn read_markdown_v2(m: &str) -> Result<String, String> {
        let s: Vec<char> = m.chars().collect();
        let mut plain = String::new();
        let mut open: Vec<(char, usize)> = Vec::new();
        let mut i = 0;
        while i < s.len() {
            let c = s[i];
            match c {
                '\\' => {
                    let e = *s.get(i + 1).ok_or("dangling backslash")?;
                    if !SPECIAL.contains(&e) {
                        return Err(format!("needless escape of {e:?} at {i}"));
                    }
                    plain.push(e);
                    i += 2;
                }
                '`' => {
                    let fence = s[i..].starts_with(&['`', '`', '`']);
                    let start = if fence { i + 3 } else { i + 1 };
                    let mut k = start;
                    let mut content = String::new();
                    loop {
                        match s.get(k) {
                            None => return Err(format!("unclosed code at {i}")),
                            Some('\\') => {
                                let e = *s.get(k + 1).ok_or("dangling backslash in code")?;
                                if e != '`' && e != '\\' {
                                    return Err(format!("bad escape in code at {k}"));
                                }
                                content.push(e);
                                k += 2;
                            }
                            Some('`') => break,
                            Some(&x) => {
                                content.push(x);
                                k += 1;
                            }
                        }
                    }
                    if fence {
                        if !s[k..].starts_with(&['`', '`', '`']) {
                            return Err(format!("pre at {i} not closed by ```"));
                        }
                        let body = content.split_once('\n').map_or("", |(_, b)| b);
                        if body.trim().is_empty() {
                            return Err(format!("empty pre at {i}"));
                        }
                        plain.push_str(body);
                        i = k + 3;
                    } else {
                        if content.trim().is_empty() {
                            return Err(format!("empty code at {i}"));
                        }
                        plain.push_str(&content);
                        i = k + 1;
                    }
                }
                '*' | '_' | '~' => {
                    if c == '_' && s.get(i + 1) == Some(&'_') {
                        return Err(format!("`__` (underline) at {i}"));
                    }
                    if let Some(pos) = open.iter().position(|&(o, _)| o == c) {
                        if pos != open.len() - 1 {
                            return Err(format!("{c:?} at {i} closes out of order"));
                        }
                        let (_, start) = open.pop().unwrap();
                        if plain.len() == start {
                            return Err(format!("empty {c:?} entity at {i}"));
                        }
                    } else {
                        open.push((c, plain.len()));
                    }
                    i += 1;
                }
                c if SPECIAL.contains(&c) => return Err(format!("unescaped {c:?} at {i}")),
                c => {
                    plain.push(c);
                    i += 1;
                }
            }
        }
        if let Some((c, _)) = open.last() {
            return Err(format!("unclosed {c:?}"));
        }
        Ok(plain)
    }

    fn check(input: &str, expect: &str) {
        let got = format(input);
        assert_eq!(got, expect, "format({input:?})");
        read_markdown_v2(&got).unwrap_or_else(|e| panic!("{got:?} is not valid MarkdownV2: {e}"));
    }

    #[test]
    fn plain_text_is_escaped() {
        check("Hello.", "Hello\\.");
        check(
            "a_b*c[d]e(f)g~h`i>j#k+l-m=n|o{p}q.r!s\\t",
            "a\\_b\\*c\\[d\\]e\\(f\\)g\\~h\\`i\\>j\\#k\\+l\\-m\\=n\\|o\\{p\\}q\\.r\\!s\\\\t",
        );
        check("Ça coûte 3€ (environ).", "Ça coûte 3€ \\(environ\\)\\.");
        check("2 * 3 * 4 = 24", "2 \\* 3 \\* 4 \\= 24");
    }

    #[test]
    fn bold_italic_strike_and_code() {
        check("This is **very** important.", "This is *very* important\\.");
        check("An *aside* here", "An _aside_ here");
        check("~~old~~ new", "~old~ new");
        check("Run `cargo test -p x`.", "Run `cargo test -p x`\\.");
        check("`a\\b`", "`a\\\\b`");
        check("**bold *and italic* too**", "*bold _and italic_ too*");
        check("*italic **and bold** too*", "_italic *and bold* too_");
        check("**`code` in bold**", "*\\`code\\` in bold*");
    }

    #[test]
    fn unbalanced_markers_show_literally() {
        check("**not closed", "\\*\\*not closed");
        check("** spaced **", "\\*\\* spaced \\*\\*");
        check("*a**b*", "_a\\*\\*b_");
        check("a ` b", "a \\` b");
        check("``", "\\`\\`");
        check("snake_case_name", "snake\\_case\\_name");
        check("****", "\\*\\*\\*\\*");
    }

    #[test]
    fn links_keep_their_text_and_put_the_url_on_its_own_line() {
        check(
            "See [the docs](https://example.com/a_b) for more.",
            "See the docs for more\\.\nhttps://example\\.com/a\\_b",
        );
        check(
            "[Rust](https://en.wikipedia.org/wiki/Rust_(programming_language)) and [x](https://x.io).",
            "Rust and x\\.\nhttps://en\\.wikipedia\\.org/wiki/Rust\\_\\(programming\\_language\\)\nhttps://x\\.io",
        );
        check("**[Docs](https://d.io)** now", "*Docs* now\nhttps://d\\.io");
        check("[https://a.io](https://a.io)", "https://a\\.io");
        check("[](https://a.io)", "https://a\\.io");
        check("[not a link] (x)", "\\[not a link\\] \\(x\\)");
        check("[a](has space)", "\\[a\\]\\(has space\\)");
    }

    #[test]
    fn headings_bullets_and_code_blocks() {
        check(
            "## Plan\n- one\n* two\n  + three",
            "*Plan*\n• one\n• two\n  • three",
        );
        check("# **Bold** title", "*Bold title*");
        check("#hashtag", "\\#hashtag");
        check(
            "Try:\n```rust\nlet x = a * b; // `q`\n```\nDone.",
            "Try:\n```rust\nlet x = a * b; // \\`q\\`\n```\nDone\\.",
        );
        check("```\n\n```\nafter", "after");
        check("```py\nprint(1)", "```py\nprint(1)\n```");
    }

    #[test]
    fn an_open_code_block_carries_over_to_the_next_piece() {
        let mut fence = None;
        let first = format_piece("Code:\n```sh\necho 1", &mut fence);
        assert_eq!(first, "Code:\n```sh\necho 1\n```");
        assert_eq!(fence.as_deref(), Some("sh"));
        let second = format_piece("echo 2\n```\nBye.", &mut fence);
        assert_eq!(second, "```sh\necho 2\n```\nBye\\.");
        assert_eq!(fence, None);
        for m in [first, second] {
            read_markdown_v2(&m).unwrap();
        }
    }

    proptest! {
        #[test]
        fn any_text_becomes_valid_markdown_v2(text in "[a-z *_~`\\[\\]()#.!\\\\\n-]{0,200}") {
            let out = format(&text);
            prop_assert!(read_markdown_v2(&out).is_ok(), "{:?} -> {:?}: {:?}", text, out, read_markdown_v2(&out));
        }

        #[test]
        fn any_unicode_text_becomes_valid_markdown_v2(text in "\\PC{0,200}") {
            let out = format(&text);
            prop_assert!(read_markdown_v2(&out).is_ok(), "{:?} -> {:?}: {:?}", text, out, read_markdown_v2(&out));
        }

        #[test]
        fn plain_words_survive(words in "[a-zA-Z0-9 ]{0,100}") {
            prop_assert_eq!(read_markdown_v2(&format(&words)).unwrap(), words);
        }
    }
}
