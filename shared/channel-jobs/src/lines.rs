//! What the harness itself says on a channel: onboarding, link confirmation, a stale code, too
//! many codes.
//! Short, useful, and never a model call.

use crate::identity::Resolved;

/// The reply for a sender the harness answers by itself (anything but [`Resolved::Bound`]).
pub fn harness_reply(resolved: &Resolved, signup_url: &str) -> String {
    match resolved {
        Resolved::Linked(_) | Resolved::LinkedAgain(_) => linked(),
        Resolved::StaleCode { bound: Some(_) } => stale_code_bound(),
        Resolved::StaleCode { bound: None } => stale_code(signup_url),
        Resolved::TooManyCodes { bound: Some(_) } => too_many_codes_bound(),
        Resolved::TooManyCodes { bound: None } => too_many_codes(signup_url),
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

/// After a code bound the account.
pub fn linked() -> String {
    "Linked! This chat is now connected to your account. What can I do for you?".to_owned()
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
     account, so just write your message. (To link it to another account, get a new code in \
     the web app.)"
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
     already linked to your account, so just write your message. (To link it to another \
     account, wait an hour and send a new code from the web app.)"
        .to_owned()
}
