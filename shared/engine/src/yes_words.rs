//! The words of a typed yes: whether a user's message reads as a yes to the question they
//! were asked, and which of the held calls it names. A model may have been manipulated, so
//! what a yes is, is decided here, from the user's own words and the held calls' descriptions,
//! never from what the model makes of them.

/// The words a yes starts with ("Yes please", "ok, go ahead", "sure"…).
const YES_WORDS: &[&str] = &[
    "yes",
    "yeah",
    "yea",
    "yep",
    "yup",
    "ya",
    "y",
    "ok",
    "okay",
    "okey",
    "k",
    "kk",
    "sure",
    "confirm",
    "confirmed",
    "go",
    "proceed",
    "absolutely",
    "definitely",
    "certainly",
    "correct",
    "affirmative",
    "alright",
    "fine",
    "oui",
    "si",
    "sí",
    "ja",
    "da",
    "sim",
];

/// Words that, anywhere in the message, make it no yes ("yes, but not Dana", "ok wait").
const NOT_WORDS: &[&str] = &[
    "no", "not", "nope", "nah", "nein", "non", "cancel", "stop", "don't", "dont", "never", "wait",
    "hold", "but", "except", "instead",
];

/// Words a yes may go on with: thanks, "go ahead and do it", "that's fine", pronouns.
const ASSENT_WORDS: &[&str] = &[
    "please", "do", "it", "go", "ahead", "and", "thanks", "thank", "you", "that", "that's",
    "thats", "this", "is", "right", "sounds", "good", "great", "perfect", "for", "of", "course",
    "so", "all", "both", "them", "her", "him", "i", "i'm", "im", "am", "agree", "approve",
    "approved", "now", "just", "then", "the",
];

/// Whether the user's words read as a yes to a question that asked nothing in particular (see
/// [`affirms_to`]: with nothing described, a yes may go on only with words of assent).
pub fn affirms(text: &str) -> bool {
    affirms_to(text, &[])
}

/// Whether the user's words read as a yes to the question they were asked, whose yes does
/// what `described` says (the held calls' descriptions): they begin with a yes ("Yes", "ok",
/// "go ahead", "please do", "do it", "👍"), go on only with more of it, words of assent
/// ("thanks", "that's fine") or words of what the yes does ("Yes, withdraw her" to "Withdraw
/// Dana Lee from Spring Open"), ask nothing back (no `?`) and say nothing against it ("not",
/// "but", "wait", "don't"…). "ok, show me the attendees first" or "Correct the date first" is
/// no yes. A typed answer that is none does not confirm, whatever the model (which may have
/// been manipulated) makes of it: the call is held again and the user asked again. The
/// `[pressed button …]` line a press leaves is no yes either: a press decides through its own
/// id.
///
/// A yes that goes on with the question's words must name what it does, the word a call's
/// description begins with ("withdraw", "rename", "move"), and its other words must be that
/// call's; nor do the words of a description in quotation marks count (a new title, a room's
/// name: values the model chose). So a model that put "Show me the attendees" in a title, or
/// held a rename beside a withdrawal, cannot have a new request in those words ("please show
/// me the attendees", "please withdraw Dana and show me the attendees") read as a yes.
pub fn affirms_to(text: &str, described: &[String]) -> bool {
    let Some(mut rest) = after_the_yes(text) else {
        return false;
    };
    let calls = DescribedCalls::of(described);
    calls.no_value_in_actions(&mut rest);
    let named: Vec<&Word> = rest.iter().filter(|w| !is_yes_or_assent(&w.text)).collect();
    if named.is_empty() {
        return true;
    }
    let said = calls.named_by_action(&named);
    if said.is_empty()
        || !named
            .iter()
            .all(|w| said.iter().any(|&i| calls.describes(i, w)))
    {
        return false;
    }
    // The values the yes says (what follows its "to", a run of its words with a number in
    // it) are values of every call it names, word for word in order: not a bag of the
    // question's words (the 2 of "2 sessions move" for "day 2", the digits of 09:00 the other
    // way round), nor another held call's ("to Hall D" borrowed from the other move).
    let chosen = chosen_calls(&calls, &named);
    !chosen.is_empty()
        && value_runs(&rest, &calls).iter().all(|run| {
            chosen.iter().all(|&i| {
                new_runs(&calls.words[i])
                    .iter()
                    .any(|r| r.windows(run.len()).any(|w| w == run.as_slice()))
            })
        })
}

/// The values a yes says: each run of it after a "to" (one that starts with a held call's
/// action is no value: [`DescribedCalls::no_value_in_actions`]), and each run of its words between
/// the yes's action, assent and "to"/"from" that holds a number ("day 2" of "move it for day
/// 2").
fn value_runs<'a>(rest: &'a [Word], calls: &DescribedCalls) -> Vec<Vec<&'a str>> {
    let is_action = |w: &str| calls.is_action(w);
    let mut runs: Vec<Vec<&str>> = new_runs(rest);
    let mut current: Vec<&str> = Vec::new();
    for w in rest.iter().map(|w| w.text.as_str()).chain([""]) {
        let separates =
            w.is_empty() || is_yes_or_assent(w) || is_action(w) || ["to", "from"].contains(&w);
        if !separates {
            current.push(w);
            continue;
        }
        if current
            .iter()
            .any(|w| w.chars().any(|c| c.is_ascii_digit()))
        {
            runs.push(std::mem::take(&mut current));
        }
        current.clear();
    }
    runs
}

/// The runs of [`Mark::New`] words of `words` (what something changes to), without words of
/// yes or assent ("to the Hall B" says what "to Hall B" does).
fn new_runs(words: &[Word]) -> Vec<Vec<&str>> {
    let mut runs: Vec<Vec<&str>> = Vec::new();
    let mut open = false;
    for w in words {
        match w.mark {
            Mark::New if is_yes_or_assent(&w.text) => {}
            Mark::New if open => runs.last_mut().expect("a run is open").push(&w.text),
            Mark::New => {
                runs.push(vec![&w.text]);
                open = true;
            }
            _ => open = false,
        }
    }
    runs
}

/// A word of a yes or of a description, and what it names.
#[derive(Debug, PartialEq)]
struct Word {
    text: String,
    mark: Mark,
}

/// What a [`Word`] names, by where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// A value something changes from: "Hall A" of "from Hall A to Hall B", "150" of "(from
    /// 150)".
    Old,
    /// The value it changes to: "Hall B" of "from Hall A to Hall B", "day 1" of "to day 1".
    New,
    /// Any other word.
    Other,
}

/// The held calls' descriptions as a yes may name them: each one's action (its first word),
/// its words outside quotation marks, and which of those name old and new values.
struct DescribedCalls {
    actions: Vec<Option<String>>,
    words: Vec<Vec<Word>>,
}

impl DescribedCalls {
    fn of(described: &[String]) -> Self {
        Self {
            actions: described
                .iter()
                .map(|d| lower_words(d).into_iter().next())
                .collect(),
            words: described
                .iter()
                .map(|d| marked_words(&unquoted(d).to_lowercase()))
                .collect(),
        }
    }

    /// Whether `word` is a held call's action.
    fn is_action(&self, word: &str) -> bool {
        self.actions.iter().flatten().any(|a| a == word)
    }

    /// A yes's words after a "to" that begin with a held call's action are how it goes on
    /// ("ok, proceed to move it"), not a value it says: marked as other words.
    fn no_value_in_actions(&self, words: &mut [Word]) {
        let mut in_action = false;
        for w in words.iter_mut() {
            match w.mark {
                Mark::New if in_action => w.mark = Mark::Other,
                Mark::New if self.is_action(&w.text) => {
                    w.mark = Mark::Other;
                    in_action = true;
                }
                Mark::New => {}
                _ => in_action = false,
            }
        }
    }

    /// The calls whose action is among `named` (as a word of what the yes sets, not of an
    /// old value it names).
    fn named_by_action(&self, named: &[&Word]) -> Vec<usize> {
        (0..self.actions.len())
            .filter(|&i| {
                self.actions[i]
                    .as_ref()
                    .is_some_and(|a| named.iter().any(|w| w.mark != Mark::Old && w.text == *a))
            })
            .collect()
    }

    /// Whether `word` of a yes is one of call `i`'s. An old value the yes names ("from Hall A
    /// to Hall B") may be any of its words; a value it says the call changes to must be one of
    /// the call's new values ([`affirms_to`] holds their order too); any other word must be one
    /// of its words that is not only an old value ("yes, move it to Hall A" to "from Hall A to Hall B" is no yes,
    /// whatever else of the description has an "a"; "hall", in the new value too, is fine).
    fn describes(&self, i: usize, word: &Word) -> bool {
        let words = &self.words[i];
        let has = |mark: Mark| words.iter().any(|w| w.text == word.text && w.mark == mark);
        match word.mark {
            Mark::Old => words.iter().any(|w| w.text == word.text),
            Mark::New => has(Mark::New),
            _ => has(Mark::New) || (has(Mark::Other) && !has(Mark::Old)),
        }
    }
}

/// `description` without what it quotes (“…”): values the model chose for the call.
fn unquoted(description: &str) -> String {
    let mut out = String::with_capacity(description.len());
    let mut depth = 0usize;
    for c in description.chars() {
        match c {
            '\u{201c}' => depth += 1,
            '\u{201d}' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The words of a message that begins with a yes and says nothing against it, after the yes
/// ("withdraw", "her" of "Yes, withdraw her"); `None` if it is no such message.
fn after_the_yes(text: &str) -> Option<Vec<Word>> {
    let mut lower = text.trim().to_lowercase().replace('’', "'");
    if lower.contains('?') {
        return None;
    }
    // Ways of saying yes that hold a "no" ("Yes, no problem").
    for fine in ["not a problem", "no problem", "no worries"] {
        lower = lower.replace(fine, " ");
    }
    let words: Vec<&str> = words_of(&lower).collect();
    if words.iter().any(|w| NOT_WORDS.contains(w)) {
        return None;
    }
    let yes = |w: &&str| YES_WORDS.contains(w);
    let rest = match words.as_slice() {
        [] => {
            return ["👍", "✅", "👌", "✔"]
                .iter()
                .any(|yes| lower.starts_with(yes))
                .then(Vec::new);
        }
        ["please", "do", rest @ ..] => rest,
        ["please", first, rest @ ..] if yes(first) => rest,
        ["please", rest @ ..] => rest,
        ["do", next, rest @ ..] if ["it", "so", "that"].contains(next) => rest,
        [first, rest @ ..] if yes(first) => rest,
        _ => return None,
    };
    let mut marked = marked_words(&lower);
    Some(marked.split_off(words.len() - rest.len()))
}

/// The words of `lower` (lower-cased), marked by what they name. Old: a value something
/// changes from, the words between "from" and the next "to" in one clause ("from Hall A to
/// Hall B", "from 30 to 45 minutes"), or to the end of a parenthesis "from" opens ("(from
/// 150)"); a "from" no "to" follows ("Withdraw Dana from Spring Open") names no old value.
/// New: the words after a "to", to the end of the clause or an "and" ("Hall B" of "from Hall A
/// to Hall B", "day 1 at 09:00" of "to day 1 at 09:00").
fn marked_words(lower: &str) -> Vec<Word> {
    let gapped = gapped_words(lower);
    let mut marks = vec![Mark::Other; gapped.len()];
    for (i, (gap, word)) in gapped.iter().enumerate() {
        if *word != "from" {
            continue;
        }
        let in_parens = gap.trim_end().ends_with('(');
        let ends = |(gap, word): &(&str, &str)| {
            (*word == "to" && !breaks_clause(gap)) || (in_parens && gap.contains(')'))
        };
        let Some(end) = gapped[i + 1..]
            .iter()
            .position(|item| ends(item) || breaks_clause(item.0))
            .map(|at| i + 1 + at)
            .filter(|&end| ends(&gapped[end]))
        else {
            continue;
        };
        marks[i + 1..end].fill(Mark::Old);
    }
    for (k, (_, word)) in gapped.iter().enumerate() {
        if *word != "to" {
            continue;
        }
        let new = gapped[k + 1..]
            .iter()
            .take_while(|(gap, word)| {
                !word.is_empty() && !breaks_clause(gap) && !["and", "from", "to"].contains(word)
            })
            .count();
        marks[k + 1..k + 1 + new]
            .iter_mut()
            .filter(|m| **m == Mark::Other)
            .for_each(|m| *m = Mark::New);
    }
    gapped
        .into_iter()
        .zip(marks)
        .filter(|((_, word), _)| !word.is_empty())
        .map(|((_, word), mark)| Word {
            text: word.to_owned(),
            mark,
        })
        .collect()
}

/// The words of `text` (as [`words_of`] finds them), each with the gap before it, and last
/// the gap after the last word (with an empty word).
fn gapped_words(text: &str) -> Vec<(&str, &str)> {
    let is_word = |c: char| c.is_alphanumeric() || c == '\'';
    let mut out = Vec::new();
    let mut gap_from = 0;
    let mut word_from = None;
    for (at, c) in text.char_indices() {
        match (is_word(c), word_from) {
            (true, None) => word_from = Some(at),
            (false, Some(from)) => {
                out.push((&text[gap_from..from], &text[from..at]));
                word_from = None;
                gap_from = at;
            }
            _ => {}
        }
    }
    if let Some(from) = word_from {
        out.push((&text[gap_from..from], &text[from..]));
        gap_from = text.len();
    }
    out.push((&text[gap_from..], ""));
    out
}

/// Whether a gap between words ends a clause: a comma, semicolon, parenthesis or line break,
/// or a colon or stop followed by a space (not the colon of "10:00" or the dot of an email).
fn breaks_clause(gap: &str) -> bool {
    gap.contains([',', ';', '(', ')', '\n'])
        || (gap.contains([':', '.', '!']) && gap.contains(char::is_whitespace))
}

fn is_yes_or_assent(word: &str) -> bool {
    YES_WORDS.contains(&word) || ASSENT_WORDS.contains(&word)
}

/// The lower-cased words of `text`.
fn lower_words(text: &str) -> Vec<String> {
    words_of(&text.to_lowercase()).map(str::to_owned).collect()
}

/// The held calls a yes names, by their descriptions, when its words name any ("Yes, withdraw
/// Dana" with "Withdraw Dana Lee (…) from Spring Open" and "Cancel Spring Open (…)" held:
/// only the first). A call is named by a word of the yes that describes it and no other held
/// call; where no word tells the calls apart ("yes, withdraw" with two withdrawals held), by
/// having every word the yes names. `None`: the yes names nothing (a plain "yes"), so every
/// held call.
pub(crate) fn named_calls(text: &str, described: &[String]) -> Option<Vec<String>> {
    let mut rest = after_the_yes(text)?;
    let calls = DescribedCalls::of(described);
    calls.no_value_in_actions(&mut rest);
    let named: Vec<Word> = rest
        .into_iter()
        .filter(|w| !is_yes_or_assent(&w.text))
        .collect();
    if named.is_empty() {
        return None;
    }
    let chosen = chosen_calls(&calls, &named.iter().collect::<Vec<_>>());
    Some(chosen.into_iter().map(|i| described[i].clone()).collect())
}

/// The held calls a yes's `named` words name (see [`named_calls`]), by index. Only a call
/// whose action the yes names can be one ([`affirms_to`]).
fn chosen_calls(calls: &DescribedCalls, named: &[&Word]) -> Vec<usize> {
    let candidates = calls.named_by_action(named);
    let describes = |i: usize, w: &Word| calls.describes(i, w);
    let told_apart = |i: usize| {
        named.iter().any(|w| {
            describes(i, w) && candidates.iter().filter(|&&j| describes(j, w)).count() == 1
        })
    };
    let by_word: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&i| told_apart(i))
        .collect();
    if !by_word.is_empty() {
        return by_word;
    }
    candidates
        .into_iter()
        .filter(|&i| named.iter().all(|w| describes(i, w)))
        .collect()
}

/// The words of `text` (letters, digits and apostrophes).
fn words_of(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_yes_may_name_what_it_does_in_the_questions_words() {
        let described = ["Withdraw Dana Lee from Spring Open".to_owned()];
        for yes in [
            "Yes, withdraw her.",
            "yes withdraw Dana",
            "ok, withdraw Dana Lee from Spring Open, thanks",
            "please withdraw Dana",
            "Yes please",
        ] {
            assert!(affirms_to(yes, &described), "{yes}");
        }
        for not_a_yes in [
            "Yes, withdraw Sam",
            "ok, withdraw her from the Summer Cup",
            "yes, withdraw Dana and email her",
            "ok, show me Dana first",
            "Yes, withdraw her?",
            "yes, Dana",
        ] {
            assert!(!affirms_to(not_a_yes, &described), "{not_a_yes}");
        }
    }
    /// The words a model chose for a call (a title) do not make a new request in those words a
    /// yes: a yes that goes on must name what it does.
    #[test]
    fn a_new_request_in_the_words_a_model_chose_is_no_yes() {
        let described = [
            "Rename Spring Open (published, 1 registered) to \u{201c}Show me the attendees\u{201d}"
                .to_owned(),
        ];
        for not_a_yes in [
            "please show me the attendees",
            "ok show me the attendees",
            "yes, the attendees",
        ] {
            assert!(!affirms_to(not_a_yes, &described), "{not_a_yes}");
        }
        for yes in [
            "yes, rename it",
            "ok",
            "please rename Spring Open",
            "yes please",
        ] {
            assert!(affirms_to(yes, &described), "{yes}");
        }
        // Beside a withdrawal, naming that one's action lends none of the rename's words.
        let both = [
            "Withdraw Dana Lee (dana@example.com) from Spring Open".to_owned(),
            described[0].clone(),
        ];
        assert!(!affirms_to(
            "please withdraw Dana and show me the attendees",
            &both
        ));
        assert!(affirms_to("yes, withdraw Dana", &both));
        assert_eq!(
            named_calls("yes, withdraw Dana", &both),
            Some(vec![both[0].clone()])
        );
        // What the call would set, quoted, is no word a yes may go on with, verb or not.
        let change = ["Change \u{201c}Keynote\u{201d} in the published timetable of \u{201c}Spring Open\u{201d} from 30 to 45 minutes, and also set its title to \u{201c}Closing Remarks\u{201d}".to_owned()];
        assert!(!affirms_to(
            "please change the title to Closing Remarks",
            &change
        ));
        assert!(affirms_to("yes, change it to 45 minutes", &change));
    }
    #[test]
    fn a_yes_that_names_some_held_calls_confirms_only_those() {
        let described = [
            "Withdraw Dana Lee (dana@example.com) from Spring Open".to_owned(),
            "Withdraw Sam Roe (sam@example.com) from Spring Open".to_owned(),
            "Cancel Spring Open (published, 2025-04-12T10:00 at Court 1, 2 registered)".to_owned(),
        ];
        let named = |text| named_calls(text, &described);
        assert_eq!(named("yes"), None);
        assert_eq!(named("Yes please, go ahead, all of them"), None);
        assert_eq!(
            named("yes, withdraw Dana"),
            Some(vec![described[0].clone()])
        );
        assert_eq!(
            named("ok withdraw Dana and Sam"),
            Some(vec![described[0].clone(), described[1].clone()])
        );
        assert_eq!(
            named("yes, withdraw"),
            Some(vec![described[0].clone(), described[1].clone()]),
            "no word tells the withdrawals apart: every call with all the words"
        );
        // Naming no call's action names none of them (nor is it a yes: `affirms_to`).
        assert_eq!(named("yes, Spring Open"), Some(vec![]));
        assert_eq!(named("yes, Court 1"), Some(vec![]));
        assert_eq!(named("no"), None, "no yes names nothing");
    }

    /// The value a call changes from is no value a yes may say it changes to: asked to move
    /// an event from Hall A to Hall B, "yes, move it to Hall A" wants something else.
    #[test]
    fn a_yes_naming_the_old_value_as_the_new_one_is_no_yes() {
        let venue = ["Move Spring Open (published, 3 registered) from Hall A to Hall B".to_owned()];
        for yes in [
            "yes, move it to Hall B",
            "ok, move it from Hall A to Hall B",
            "yes, move it",
            "yes please",
        ] {
            assert!(affirms_to(yes, &venue), "{yes}");
        }
        for not_a_yes in [
            "yes, move it to Hall A",
            "yes, move it from Hall B to Hall A",
            "ok move it from the attendee list to Hall B",
        ] {
            assert!(!affirms_to(not_a_yes, &venue), "{not_a_yes}");
        }
        // An old value's word found elsewhere in the question (1 registered) is still the old
        // value's.
        let court =
            ["Move Spring Open (published, 1 registered) from Court 1 to Court 2".to_owned()];
        assert!(!affirms_to("yes, move it to Court 1", &court));
        assert!(affirms_to("yes, move it to Court 2", &court));
        // A session's move says where it goes with no "from": the yes's "to" is held to it,
        // word for word, not to the question's other numbers.
        let session = ["Move \u{201c}Keynote\u{201d} to day 1 at 09:00, re-planning the published program of \u{201c}Spring Open\u{201d}: 2 sessions move (\u{201c}Keynote\u{201d}, \u{201c}Panel\u{201d})".to_owned()];
        assert!(affirms_to("yes, move it", &session));
        assert!(affirms_to("yes, move it to day 1", &session));
        assert!(affirms_to("ok move it to day 1 at 09:00", &session));
        assert!(!affirms_to("yes, move it to day 2", &session));
        assert!(!affirms_to("yes, move it to day 1 at 00:09", &session));
        // Said without "to", or split by a comma: still the values, in order.
        for not_a_yes in [
            "yes, move it for day 2",
            "yes move it, day 2",
            "yes, move it at 00:09",
            "yes, move it to day 1, at 00:09",
        ] {
            assert!(!affirms_to(not_a_yes, &session), "{not_a_yes}");
        }
        // "to" before the action is how a yes goes on, not a value.
        assert!(affirms_to("ok, proceed to move it", &session));
        let time = [
            "Move Spring Open (published, 3 registered) from 2026-05-01T09:00 to 2026-05-02T09:00"
                .to_owned(),
        ];
        assert!(affirms_to("yes, move it to 2026-05-02T09:00", &time));
        assert!(!affirms_to("yes, move it to 2026-05-01T09:00", &time));
        let capacity = [
            "Lower the capacity of Spring Open (published, 3 registered) from 100 to 50".to_owned(),
            "Move Summer Cup (published, 0 registered) from Hall A to Hall B, and also set its capacity to 200 (from 150)".to_owned(),
        ];
        assert!(affirms_to("yes, lower it to 50", &capacity));
        assert!(!affirms_to("yes, lower it to 100", &capacity));
        assert!(affirms_to(
            "yes, move it and set its capacity to 200",
            &capacity
        ));
        assert!(!affirms_to(
            "yes, move it and set its capacity to 150",
            &capacity
        ));
        // A "from" no "to" follows names where, not an old value.
        let withdraw = ["Withdraw Dana Lee (dana@example.com) from Spring Open".to_owned()];
        assert!(affirms_to("yes, withdraw Dana from Spring Open", &withdraw));
        // Which call a yes names goes by the new values too.
        let both = [venue[0].clone(), capacity[1].clone()];
        assert_eq!(
            named_calls("yes, move it to Hall B", &both),
            Some(both.to_vec()),
            "both move to Hall B"
        );
        assert_eq!(
            named_calls("yes, move Summer Cup", &both),
            Some(vec![both[1].clone()])
        );
        // A value borrowed from another held call names no call to it.
        let two = [
            venue[0].clone(),
            "Move Summer Cup (published, 0 registered) from Hall C to Hall D".to_owned(),
        ];
        assert!(!affirms_to("yes, move Spring Open to Hall D", &two));
        assert!(affirms_to("yes, move Spring Open to Hall B", &two));
    }

    #[test]
    fn old_values_are_the_words_between_from_and_to_in_one_clause() {
        let marked = |text: &str, mark: Mark| -> Vec<String> {
            marked_words(&text.to_lowercase())
                .into_iter()
                .filter(|w| w.mark == mark)
                .map(|w| w.text)
                .collect()
        };
        let old = |text: &str| marked(text, Mark::Old);
        let new = |text: &str| marked(text, Mark::New);
        assert_eq!(old("move it from Hall A to Hall B"), ["hall", "a"]);
        assert_eq!(
            new("move it from Hall A to Hall B (published)"),
            ["hall", "b"]
        );
        assert_eq!(
            new("from 9 to 10 and from 30 to 45 minutes, and more"),
            ["10", "45", "minutes"]
        );
        assert_eq!(new("its capacity to 200 (from 150)"), ["200"]);
        assert_eq!(
            new("Move it to day 1 at 09:00, re-planning"),
            ["day", "1", "at", "09", "00"]
        );
        assert_eq!(
            old("from 09:00 to 10:00 and from 30 to 45"),
            ["09", "00", "30"]
        );
        assert_eq!(old("its capacity to 200 (from 150), its title"), ["150"]);
        assert_eq!(old("(from 150 to 200)"), ["150"]);
        assert!(old("withdraw Dana from Spring Open").is_empty());
        assert!(old("from Spring Open, to be sure").is_empty());
        assert!(old("from Spring Open. To be sure").is_empty());
        assert!(old("to Hall B from Hall A").is_empty());
    }
}
