//! The user's message as the model sees it: the words (plus any note about attachments that
//! could not be read), then each attachment by reference — an image as [`Part::Image`],
//! anything else as [`Part::Document`]. The visible transcript keeps only the user's words.

use crate::TurnInput;
use transcript::{MediaRef, Part};

impl TurnInput {
    /// The text the model sees: the user's words, then the attachment notes, one per line.
    pub(crate) fn model_text(&self) -> String {
        if self.attachment_notes.is_empty() {
            return self.text.clone();
        }
        let notes = self.attachment_notes.join("\n");
        if self.text.trim().is_empty() {
            notes
        } else {
            format!("{}\n\n{notes}", self.text)
        }
    }

    /// The parts of the user's model message: `text` first, then the attachments in order.
    pub(crate) fn user_parts(&self, text: String) -> Vec<Part> {
        let mut parts = Vec::with_capacity(1 + self.attachments.len());
        parts.push(Part::text(text));
        parts.extend(self.attachments.iter().cloned().map(attachment_part));
        parts
    }
}

/// `image/*` is an image; everything else a document.
pub fn attachment_part(media: MediaRef) -> Part {
    if media
        .mime_type
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("image/"))
    {
        Part::Image(media)
    } else {
        Part::Document(media)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tools::ActionId;

    fn media(key: &str, mime: &str) -> MediaRef {
        MediaRef {
            key: key.into(),
            mime_type: mime.into(),
            size_bytes: 3,
        }
    }

    fn input(text: &str, attachments: Vec<MediaRef>, notes: &[&str]) -> TurnInput {
        TurnInput {
            sent_at_ms: None,
            typed_yes: crate::TypedYes::Confirms,
            conversation_id: "c".into(),
            text: text.into(),
            action_id: ActionId("a".into()),
            attachments,
            attachment_notes: notes.iter().map(|n| (*n).to_owned()).collect(),
            button_id: None,
        }
    }

    #[test]
    fn text_comes_first_then_images_and_documents_in_order() {
        let i = input(
            "look",
            vec![
                media("k/0", "image/jpeg"),
                media("k/1", "application/pdf"),
                media("k/2", "IMAGE/PNG"),
                media("k/3", "audio/ogg"),
            ],
            &[],
        );
        assert_eq!(
            i.user_parts(i.model_text()),
            vec![
                Part::text("look"),
                Part::Image(media("k/0", "image/jpeg")),
                Part::Document(media("k/1", "application/pdf")),
                Part::Image(media("k/2", "IMAGE/PNG")),
                Part::Document(media("k/3", "audio/ogg")),
            ]
        );
    }

    #[test]
    fn notes_follow_the_words_and_stand_alone_without_words() {
        let note = "[The user sent an image that could not be read: it is larger than 10 MB.]";
        assert_eq!(input("hi", vec![], &[]).model_text(), "hi");
        assert_eq!(
            input("what is this?", vec![], &[note]).model_text(),
            format!("what is this?\n\n{note}")
        );
        assert_eq!(
            input("  ", vec![], &[note, note]).model_text(),
            format!("{note}\n{note}")
        );
    }
}
