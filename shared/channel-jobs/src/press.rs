//! What a message answers: the button it pressed, and its words. A press of the server's
//! confirmation buttons reaches the engine as the button's id, which decides a held call
//! without the model. SMS has no buttons (they go out as numbered lines): there a reply of the
//! option's number, its title, or a plain "yes" / "no" to a reply that offered the
//! confirmation buttons counts as that press.

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
            None if job.channel == channels::twilio::NAME => {
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
    /// "yes" sent before the question reached the phone answers nothing (it is read as words,
    /// which confirm nothing either).
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
        let said = text
            .trim()
            .trim_end_matches(['.', '!'])
            .trim()
            .to_lowercase();
        let chosen = last.buttons.iter().enumerate().find(|(i, b)| {
            let yes = b.id.ends_with(":yes");
            said == (i + 1).to_string()
                || said == b.title.to_lowercase()
                || (yes && matches!(said.as_str(), "yes" | "y"))
                || (!yes && matches!(said.as_str(), "no" | "n"))
        })?;
        Some(chosen.1.id.clone())
    }
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
