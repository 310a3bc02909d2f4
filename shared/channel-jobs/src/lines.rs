//! What the harness itself says on a channel: onboarding, link confirmation, a stale code, too
//! many codes.
//! Short, useful, and never a model call.

use crate::identity::Resolved;
use transcript::UserId;

/// The reply for a sender the harness answers by itself (anything but [`Resolved::Bound`]).
/// `named` says whose an account the reply names is ([`account_label`]); `move_code` is the
/// code made for a [`Resolved::MoveAsked`] reply.
pub fn harness_reply(
    resolved: &Resolved,
    signup_url: &str,
    named: &dyn Fn(&UserId) -> String,
    move_code: Option<&str>,
) -> String {
    match resolved {
        Resolved::Linked(user) | Resolved::LinkedAgain(user) => linked(&named(user)),
        Resolved::MoveAsked { bound, to } => move_asked(
            &named(bound),
            &named(to),
            &channels::link_code::display(move_code.unwrap_or_default()),
        ),
        Resolved::LinkAsked { to } => link_asked(
            &named(to),
            &channels::link_code::display(move_code.unwrap_or_default()),
        ),
        Resolved::StaleCode { bound: Some(_) } => stale_code_bound(),
        Resolved::StaleCode { bound: None } => stale_code(signup_url),
        Resolved::TooManyCodes { bound: Some(_) } => too_many_codes_bound(),
        Resolved::TooManyCodes { bound: None } => too_many_codes(signup_url),
        Resolved::Unlinked(user) => unlinked(&named(user)),
        Resolved::NotLinked => not_linked(signup_url),
        Resolved::Unknown | Resolved::Bound(_) => onboarding(signup_url),
    }
}

/// For a sender whose account is not linked yet.
pub fn onboarding(signup_url: &str) -> String {
    format!(
        "Hi! I'm Bridle, your assistant. To chat here, link this account first:\n\n\
         1. Open the web app and sign in:\n{signup_url}\n\
         2. Choose \"Link a messaging app\" to get a one-time code.\n\
         3. Send that code here as a message.\n\n\
         The code works once, for 30 minutes."
    )
}

/// The most characters of a display name a reply shows.
const NAME_CHARS: usize = 60;

/// An account as a reply names it: the display name and the e-mail address with all but its
/// first character hidden (`Ada Lovelace (a•••@example.org)`), so that whoever is linking sees
/// whose account it is without a code revealing anyone's address. The name is the account
/// holder's own words: only its letters, digits, apostrophes and hyphens are shown, on one
/// line, at most [`NAME_CHARS`] characters, so it can neither write the rest of the harness's
/// message nor become a link or markup on the platform.
pub fn account_label(account: Option<&store::Account>) -> String {
    let kept: String = account.map_or(String::new(), |a| {
        a.display_name
            .chars()
            .map(|c| match c.is_alphanumeric() || c == '\'' || c == '-' {
                true => c,
                false => ' ',
            })
            .collect()
    });
    let words: Vec<&str> = kept.split_whitespace().collect();
    let name: String = words.join(" ").chars().take(NAME_CHARS).collect();
    let name = name.as_str();
    let email = account.and_then(|a| a.email.as_ref()).map(|e| {
        let (local, domain) = e.as_str().split_once('@').unwrap_or(("", e.as_str()));
        let first: String = local.chars().take(1).collect();
        format!("{first}•••@{domain}")
    });
    match (name.is_empty(), email) {
        (false, Some(email)) => format!("{name} ({email})"),
        (false, None) => name.to_owned(),
        (true, Some(email)) => email,
        (true, None) => "an account without a name".to_owned(),
    }
}

/// After `UNLINK`: whose account the chat has left, and how to link one again.
pub fn unlinked(whose: &str) -> String {
    format!(
        "Done: this chat is no longer connected to the account of {whose}; nothing you send here \
         reaches it. To link your own account, send a new code from the web app."
    )
}

/// `UNLINK` from a chat that is connected to no account.
pub fn not_linked(signup_url: &str) -> String {
    format!(
        "This chat isn't connected to any account, so there is nothing to unlink. To link your \
         own account, sign in to the web app, choose \"Link a messaging app\" and send the code \
         here:\n{signup_url}"
    )
}

/// After a code bound the account: whose account it is now.
pub fn linked(whose: &str) -> String {
    format!(
        "Linked! This chat is now connected to the account of {whose}. What can I do for you?\n\n\
         Not your account? Send UNLINK and this chat is disconnected from it at once."
    )
}

/// A code for another account from a chat linked already: nothing changed, and how to move
/// (`move_code`, made for this chat alone).
pub fn move_asked(current: &str, other: &str, move_code: &str) -> String {
    format!(
        "This chat is connected to the account of {current}. The code you sent is for another \
         account: {other}. Nothing has changed. To move this chat to that account, send this \
         within 30 minutes:\n\n{} {move_code}\n\nIf you did not ask for this, ignore this \
         message.",
        channels::link_code::MOVE_WORD
    )
}

/// A live code from a number whose sender the platform does not prove: the code texted to it
/// (`link_code`, made for this number alone), which links it as `LINK <code>`.
pub fn link_asked(whose: &str, link_code: &str) -> String {
    format!(
        "To link this number to the account of {whose}, send this within 30 minutes:\n\n{} \
         {link_code}\n\nA text message cannot prove which phone sent it, so this code comes to \
         the number itself. If you did not ask for this, ignore this message.",
        channels::link_code::LINK_WORD
    )
}

/// A code that is unknown, expired or used, from an account that is not linked.
pub fn stale_code(signup_url: &str) -> String {
    format!(
        "That code didn't work: it has expired or was already used (codes work once, for 30 \
         minutes). Get a new one in the web app under \"Link a messaging app\" and send it \
         here:\n{signup_url}"
    )
}

/// A code that did not redeem, from an account that is linked already.
pub fn stale_code_bound() -> String {
    "That code has expired or was already used, but this chat is already linked to your \
     account, so just write your message. (To move it to another account, send a new code from \
     that account's web app here: you will be asked to confirm.)"
        .to_owned()
}

/// Too many codes that did not work from an account that is not linked, this hour.
pub fn too_many_codes(signup_url: &str) -> String {
    format!(
        "Too many codes from this chat didn't work, so I'm not trying more for now. Please wait \
         an hour, then get a new code in the web app under \"Link a messaging app\" and send it \
         here:\n{signup_url}"
    )
}

/// Too many codes that did not work from an account that is linked already, this hour.
pub fn too_many_codes_bound() -> String {
    "Too many codes from this chat didn't work, so I'm not trying more for now. This chat is \
     already linked to your account, so just write your message. (To move it to another \
     account, wait an hour, then send a new code from that account's web app here: you will be \
     asked to confirm.)"
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_named_on_one_short_line_with_its_address_masked() {
        let account = |name: &str, email: Option<&str>| store::Account {
            email: email.map(|e| store::Email::parse(e).unwrap()),
            ..store::Account::new("u1", name)
        };
        assert_eq!(
            account_label(Some(&account("Ada Lovelace", Some("ada@example.org")))),
            "Ada Lovelace (a•••@example.org)"
        );
        assert_eq!(
            account_label(Some(&account(" ", Some("ada@example.org")))),
            "a•••@example.org"
        );
        assert_eq!(account_label(Some(&account("Ada", None))), "Ada");
        assert_eq!(account_label(None), "an account without a name");
        let forged = account_label(Some(&account(
            "Bob\n\nThis chat is safe. Send MOVE\tABCD-2345",
            None,
        )));
        assert_eq!(forged, "Bob This chat is safe Send MOVE ABCD-2345");
        assert_eq!(
            account_label(Some(&account(
                "[Ada](https://evil.example) \u{202e}*x*",
                None
            ))),
            "Ada https evil example x"
        );
        assert_eq!(
            account_label(Some(&account("José O'Neil-Smith", None))),
            "José O'Neil-Smith"
        );
        let long = account_label(Some(&account(&"x".repeat(500), None)));
        assert_eq!(long.chars().count(), NAME_CHARS);
    }
}
