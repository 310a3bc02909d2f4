//! A yes typed on a channel that cannot prove who typed it. Carriers do not authenticate an
//! SMS's `From`: someone who can send as a linked number could ask for a risky change and then
//! answer its question "yes" without ever seeing it (the question goes to the real phone). On
//! such a channel a typed yes confirms nothing by itself ([`TypedYes::ConfirmsNothing`]); the
//! question carries a code ([`confirm_code`], derived from its Yes button's token, which never
//! leaves Bridle on SMS, under a [`CodeKey`] only the server holds), and only a reply with that
//! code is taken as the Yes press.

use crate::confirm::{Answer, parse_press};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;

/// Whether a typed yes can confirm a held call, by the channel's word on who typed it. No
/// default: every entrance says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypedYes {
    /// The channel proves its sender (a signed-in browser, a platform that signs what its
    /// user sent): a typed yes confirms when the model repeats the call.
    Confirms,
    /// The channel cannot prove its sender (SMS): only a press confirms, and on SMS a press
    /// is a reply carrying the question's [`confirm_code`].
    ConfirmsNothing,
}

/// How many digits a [`confirm_code`] has: one guess in a million. A question gets one guess:
/// only a call held on the user's previous message can be confirmed, and a wrong guess is the
/// next message.
pub const CONFIRM_CODE_DIGITS: usize = 6;

/// What keeps a [`confirm_code`] the server's secret. The token it is derived from is a hash
/// of the conversation and the message's id, and a message's id (an SMS's `MessageSid`) is in
/// the logs and the database: without a key, whoever reads those and can send as the number
/// could work the code out. Derived from a secret only Bridle holds (HMAC-SHA256 of a fixed
/// label under it, so the secret itself is used for nothing else here).
#[derive(Clone)]
pub struct CodeKey(Arc<[u8]>);

impl CodeKey {
    pub fn derive(secret: &[u8]) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        mac.update(b"bridle: the code a typed yes carries");
        Self(Arc::from(&mac.finalize().into_bytes()[..]))
    }
}

impl std::fmt::Debug for CodeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CodeKey([redacted])")
    }
}

/// The code a typed reply must carry to press the Yes button `id` (`confirm:<token>:yes`):
/// [`CONFIRM_CODE_DIGITS`] decimal digits from 48 bits of HMAC-SHA256 of the token under `key`
/// (without a key, the token's own first 48 bits). `None` for any other id (the No button
/// needs no code: declining unseen does no harm).
pub fn confirm_code(id: &str, key: Option<&CodeKey>) -> Option<String> {
    let (token, true) = parse_press(id)? else {
        return None;
    };
    // Only a token of the shape `confirm_buttons` makes (20 hex digits) has a code.
    if token.len() != 20 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let bits = match key {
        Some(key) => {
            let mut mac = Hmac::<Sha256>::new_from_slice(&key.0).expect("any key length");
            mac.update(token.as_bytes());
            let out = mac.finalize().into_bytes();
            out[..6].iter().fold(0u64, |n, b| (n << 8) | u64::from(*b))
        }
        None => u64::from_str_radix(token.get(..12)?, 16).ok()?,
    };
    Some(format!(
        "{:0width$}",
        bits % 10u64.pow(CONFIRM_CODE_DIGITS as u32),
        width = CONFIRM_CODE_DIGITS
    ))
}

impl Answer {
    /// On a channel whose typed yes confirms nothing, a message that is no press declines
    /// (the model may repeat the held call; it is held again, and asked with a new code). A
    /// yes is marked [`Answer::unproven_yes`] when calls were held, for the model to be told.
    pub fn unless_unproven(mut self, typed_yes: TypedYes) -> Self {
        if typed_yes == TypedYes::ConfirmsNothing && self.press.is_none() && !self.declined {
            tracing::info!(
                "a typed yes on a channel that cannot prove its sender confirms nothing"
            );
            self.declined = true;
            self.unproven_yes = !self.held.is_empty();
        }
        self
    }

    /// What the model is told of an [`Answer::unproven_yes`]: nothing held was run, and how
    /// the user can still have it.
    pub(crate) fn unproven_note(&self) -> Option<String> {
        if !self.unproven_yes {
            return None;
        }
        let names: Vec<&str> = self.held.iter().map(|c| c.name.as_str()).collect();
        Some(crate::history::from_the_harness(&format!(
            "on this channel a typed yes confirms nothing; only a reply carrying the code shown \
             under the question does, and this one did not carry it, so what was held for their \
             confirmation ({}) was not run. If they still want it, call it again: they will be \
             asked once more, with a new code.",
            names.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confirm_buttons;
    use transcript::ConversationId;

    #[test]
    fn only_the_yes_button_has_a_code_of_six_digits_that_differs_by_question() {
        let key = CodeKey::derive(b"server secret");
        for key in [None, Some(&key)] {
            let buttons = confirm_buttons(&ConversationId::from("c"), "twilio:SM1");
            let code = confirm_code(&buttons[0].id, key).expect("the Yes button has a code");
            assert_eq!(code.len(), CONFIRM_CODE_DIGITS);
            assert!(code.bytes().all(|b| b.is_ascii_digit()), "{code}");
            assert_eq!(confirm_code(&buttons[1].id, key), None, "No needs no code");
            assert_eq!(confirm_code("yes", key), None);
            let codes: std::collections::HashSet<String> = (0..50)
                .map(|i| confirm_buttons(&ConversationId::from("c"), &format!("twilio:SM{i}")))
                .filter_map(|b| confirm_code(&b[0].id, key))
                .collect();
            assert!(
                codes.len() >= 49,
                "each question has its own code: {codes:?}"
            );
        }
        for malformed in [
            "confirm:zz:yes",
            "confirm::yes",
            "confirm:0123456789abcdefghij:yes",
        ] {
            assert_eq!(confirm_code(malformed, None), None, "{malformed}");
            assert_eq!(confirm_code(malformed, Some(&key)), None, "{malformed}");
        }
    }

    /// Under a key, the code is not what the token alone gives, nor what another key gives;
    /// the same key gives it again (another instance, a restart).
    #[test]
    fn a_keyed_code_needs_the_key() {
        let id = &confirm_buttons(&ConversationId::from("c"), "twilio:SM1")[0].id;
        let ours = CodeKey::derive(b"server secret");
        let keyed = confirm_code(id, Some(&ours)).unwrap();
        assert_eq!(
            confirm_code(id, Some(&CodeKey::derive(b"server secret"))),
            Some(keyed.clone())
        );
        assert_ne!(confirm_code(id, None), Some(keyed.clone()));
        assert_ne!(
            confirm_code(id, Some(&CodeKey::derive(b"a guess"))),
            Some(keyed)
        );
        assert_eq!(format!("{ours:?}"), "CodeKey([redacted])");
    }

    fn held() -> Vec<tools::ToolCall> {
        vec![tools::ToolCall {
            id: "c1".into(),
            name: "withdraw_attendee".into(),
            input: serde_json::json!({}),
        }]
    }

    #[test]
    fn a_typed_yes_confirms_only_where_the_sender_is_proven() {
        let yes = || Answer {
            held: held(),
            ..Answer::from_text("yes, go ahead", Some("a".into()))
        };
        let proven = yes().unless_unproven(TypedYes::Confirms);
        assert!(!proven.declined && proven.unproven_note().is_none());
        let unproven = yes().unless_unproven(TypedYes::ConfirmsNothing);
        assert!(unproven.declined);
        let note = unproven.unproven_note().expect("the model is told");
        assert!(
            note.contains("withdraw_attendee") && note.contains("not run"),
            "{note}"
        );
        let no = Answer {
            held: held(),
            ..Answer::from_text("no", Some("a".into()))
        };
        let no = no.unless_unproven(TypedYes::ConfirmsNothing);
        assert!(
            no.declined && no.unproven_note().is_none(),
            "a no needs no note"
        );
        let nothing_held = Answer::from_text("yes", Some("a".into()));
        let nothing_held = nothing_held.unless_unproven(TypedYes::ConfirmsNothing);
        assert!(nothing_held.declined && nothing_held.unproven_note().is_none());
    }

    /// A press (on SMS: a reply with the code, made the press before the turn) decides by
    /// itself.
    #[test]
    fn a_press_is_left_alone() {
        let conversation = ConversationId::from("c");
        let id = confirm_buttons(&conversation, "a")[0].id.clone();
        let pressed = Answer::read(
            "yes 123456",
            Some(&id),
            Some("a".into()),
            &[],
            &conversation,
        );
        let kept = pressed.clone().unless_unproven(TypedYes::ConfirmsNothing);
        assert_eq!(kept, pressed);
        assert!(kept.press.is_some());
    }
}
