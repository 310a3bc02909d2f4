//! What a message answers: the button it pressed, and its words. A press of the server's
//! confirmation buttons reaches the engine as the button's id, which decides a held call
//! without the model. SMS has no buttons, and carriers do not authenticate its sender: a
//! question there ends with how to answer it ([`typed_answer`]: "Reply YES 123456 to go ahead,
//! or NO"), and a reply to it that carries the Yes button's code ([`engine::confirm_code`],
//! keyed by [`crate::confirm_code_key`]), or a plain "no", counts as that press. A typed yes
//! without the code confirms nothing there ([`engine::TypedYes`]): whoever can send as the
//! number has not seen the question.

use crate::ChannelJobs;
use queue::TurnJob;
use store::VisibleRole;
use transcript::ConversationId;

/// A message's words and the button it pressed, as the turn takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Said {
    pub text: String,
    pub button_id: Option<String>,
}

/// How many entries before the newest one a typed answer looks through for the reply it
/// answers (its own entry, written by an attempt that did not finish, may be the newest).
const LOOK_BACK: u64 = 3;

impl ChannelJobs {
    /// The newest assistant entry near the end of the transcript: the newest entry when it is
    /// the assistant's, else the newest of the few before it. At most two bounded reads,
    /// however long the conversation (an SMS conversation lasts as long as the number).
    async fn last_reply(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<store::VisibleEntry>, store::StoreError> {
        let Some(newest) = self.store.last_visible(conversation).await? else {
            return Ok(None);
        };
        if newest.role == VisibleRole::Assistant {
            return Ok(Some(newest));
        }
        let before = self
            .store
            .visible_range(
                conversation,
                newest.position.saturating_sub(LOOK_BACK),
                newest.position,
            )
            .await?;
        Ok(before
            .into_iter()
            .rev()
            .find(|e| e.role == VisibleRole::Assistant))
    }

    /// The words and the pressed button of `job` in `conversation`.
    pub(crate) async fn said(&self, job: &TurnJob, conversation: &ConversationId) -> Said {
        let button_id = match &job.button_id {
            Some(id) => Some(id.clone()),
            None if typed_yes(&job.channel) == engine::TypedYes::ConfirmsNothing => {
                self.typed_press(conversation, &job.text, job.received_at_ms)
                    .await
            }
            None => None,
        };
        // A press that came without its title (or with its id as the words, as Telegram gives
        // when the keyboard is gone) reads as the title.
        let text = match &button_id {
            Some(id) if job.text.trim().is_empty() || job.text == *id => title_of(id),
            _ => job.text.clone(),
        };
        Said { text, button_id }
    }

    /// The confirmation button a typed SMS reply chooses, if the last reply offered them and
    /// the reply was received (`received_at_ms`; 0: not said) after that reply was recorded: a
    /// reply sent before the question reached the phone answers nothing (it is read as words,
    /// which confirm nothing either). Yes takes the question's code ([`chosen`]).
    async fn typed_press(
        &self,
        conversation: &ConversationId,
        text: &str,
        received_at_ms: i64,
    ) -> Option<String> {
        let last = match self.last_reply(conversation).await {
            Ok(last) => last?,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the last reply's buttons; the reply is read as words");
                return None;
            }
        };
        if received_at_ms > 0 && received_at_ms < last.created_at_ms {
            tracing::info!(
                received_at_ms,
                asked_at_ms = last.created_at_ms,
                "an SMS reply sent before the question was recorded is no press"
            );
            return None;
        }
        if last.buttons.is_empty()
            || !last
                .buttons
                .iter()
                .all(|b| engine::is_confirm_button(&b.id))
        {
            return None;
        }
        chosen(&last.buttons, text, self.options.confirm_code_key.as_ref()).map(|b| b.id.clone())
    }
}

/// The confirmation button `text` chooses among `buttons`: Yes when its words include the Yes
/// button's code and the rest, if any, reads as a yes ([`engine::affirms`]: "YES 123456",
/// "123456 please"; not "don't 123456", "123456 but wait", "123456?"); No when it says "no"
/// (or No's title) and nothing else. A bare "yes", "1" or the Yes title chooses nothing:
/// anyone able to send as the number could type those, and only the phone that got the
/// question has its code.
fn chosen<'a>(
    buttons: &'a [store::Button],
    text: &str,
    key: Option<&engine::CodeKey>,
) -> Option<&'a store::Button> {
    let said = text.trim().to_lowercase();
    buttons.iter().find(|b| {
        if let Some(code) = engine::confirm_code(&b.id, key) {
            let mut words = said.split(|c: char| !c.is_alphanumeric());
            if !words.any(|w| w == code) {
                return false;
            }
            let rest = said.replacen(code.as_str(), " ", 1);
            let rest =
                rest.trim_matches(|c: char| c.is_whitespace() || matches!(c, '.' | '!' | ','));
            return rest.is_empty() || engine::affirms(rest);
        }
        let plain = said.trim_end_matches(['.', '!']).trim();
        b.id.ends_with(":no")
            && engine::is_confirm_button(&b.id)
            && (matches!(plain, "no" | "n") || plain == b.title.to_lowercase())
    })
}

/// Whether a typed yes can confirm on `channel`: where the platform proves who typed it (it
/// signs what its user sent, or the user signed in). Not on SMS, and not on a channel not named
/// here: a new channel must say so to have typed answers trusted.
pub(crate) fn typed_yes(channel: &str) -> engine::TypedYes {
    use channels::{generic, slack, telegram, whatsapp};
    match channel {
        crate::web::WEB_CHANNEL | whatsapp::NAME | telegram::NAME | slack::NAME | generic::NAME => {
            engine::TypedYes::Confirms
        }
        _ => engine::TypedYes::ConfirmsNothing,
    }
}

/// How to answer a question that offers the confirmation buttons on `channel`, where a typed
/// yes confirms nothing: with the Yes button's code. `None` elsewhere, and for other buttons.
pub(crate) fn typed_answer(
    channel: &str,
    buttons: &[channels::Button],
    key: Option<&engine::CodeKey>,
) -> Option<String> {
    if typed_yes(channel) == engine::TypedYes::Confirms
        || !buttons.iter().all(|b| engine::is_confirm_button(&b.id))
    {
        return None;
    }
    let code = buttons
        .iter()
        .find_map(|b| engine::confirm_code(&b.id, key))?;
    Some(format!("Reply YES {code} to go ahead, or NO."))
}

/// The words of a press that came without any: the confirmation button's title, else a
/// bracketed note naming the button.
fn title_of(id: &str) -> String {
    if engine::is_confirm_button(id) {
        let title = if id.ends_with(":yes") {
            engine::YES_TITLE
        } else {
            engine::NO_TITLE
        };
        return title.to_owned();
    }
    format!("[pressed button {id}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> engine::CodeKey {
        engine::CodeKey::derive(b"twilio auth token")
    }

    fn asked() -> (Vec<store::Button>, String) {
        let buttons: Vec<store::Button> =
            engine::confirm_buttons(&ConversationId::from("twilio:+1555:+1999@local"), "a")
                .into_iter()
                .map(|b| store::Button {
                    id: b.id,
                    title: b.title,
                })
                .collect();
        let code = engine::confirm_code(&buttons[0].id, Some(&key())).unwrap();
        (buttons, code)
    }

    #[test]
    fn yes_takes_the_questions_code() {
        let (buttons, code) = asked();
        let yes = Some(&buttons[0]);
        for said in [
            format!("YES {code}"),
            format!("yes {code}."),
            code.clone(),
            format!("{code} please"),
            format!("Yes, {code}!"),
        ] {
            assert_eq!(chosen(&buttons, &said, Some(&key())), yes, "{said}");
        }
        let wrong = if code == "000000" { "000001" } else { "000000" };
        for said in [
            "yes",
            "Y",
            "1",
            "Yes, do it",
            "ok go ahead",
            &format!("yes {wrong}"),
            &format!("no {code}"),
            &format!("yes {code}0"),
            &format!("don't {code}"),
            &format!("nope, {code}"),
            &format!("{code} but not Sam"),
            &format!("wait, {code}?"),
            &format!("stop {code}"),
        ] {
            assert_eq!(chosen(&buttons, said, Some(&key())), None, "{said}");
        }
    }

    /// The token a code comes from is a hash of the conversation and the message's id, both in
    /// the logs and the database: under the key, the code they give chooses nothing.
    #[test]
    fn under_the_key_the_code_a_log_reader_could_work_out_chooses_nothing() {
        let (buttons, code) = asked();
        let unkeyed = engine::confirm_code(&buttons[0].id, None).unwrap();
        assert_ne!(unkeyed, code);
        let said = format!("YES {unkeyed}");
        assert_eq!(chosen(&buttons, &said, Some(&key())), None);
        let said = format!("YES {code}");
        assert_eq!(chosen(&buttons, &said, Some(&key())), Some(&buttons[0]));
    }

    #[test]
    fn no_needs_no_code() {
        let (buttons, _) = asked();
        for said in ["no", "No.", "N", "no!"] {
            assert_eq!(
                chosen(&buttons, said, Some(&key())),
                Some(&buttons[1]),
                "{said}"
            );
        }
        for said in ["2", "no thanks, but tell me more", "not now"] {
            assert_eq!(chosen(&buttons, said, Some(&key())), None, "{said}");
        }
        // Only the No button is chosen by a no (a malformed Yes has no code either).
        let odd = [store::Button {
            id: "confirm:zz:yes".into(),
            title: "No".into(),
        }];
        assert_eq!(chosen(&odd, "no", Some(&key())), None);
    }

    #[test]
    fn only_an_sms_question_with_confirmation_buttons_says_how_to_answer() {
        let (buttons, code) = asked();
        let sent: Vec<channels::Button> = buttons
            .iter()
            .map(|b| channels::Button {
                id: b.id.clone(),
                title: b.title.clone(),
            })
            .collect();
        let line = typed_answer(channels::twilio::NAME, &sent, Some(&key())).unwrap();
        assert!(line.contains(&format!("YES {code}")), "{line}");
        assert_eq!(typed_answer("whatsapp", &sent, Some(&key())), None);
        assert_eq!(
            typed_answer(crate::web::WEB_CHANNEL, &sent, Some(&key())),
            None
        );
        assert!(
            typed_answer("a-channel-added-later", &sent, Some(&key())).is_some(),
            "a channel not known to prove its sender is asked for the code"
        );
        let other = [channels::Button {
            id: "slot:1".into(),
            title: "Monday".into(),
        }];
        assert_eq!(
            typed_answer(channels::twilio::NAME, &other, Some(&key())),
            None
        );
        assert_eq!(
            typed_answer(channels::twilio::NAME, &[], Some(&key())),
            None
        );
    }
}
