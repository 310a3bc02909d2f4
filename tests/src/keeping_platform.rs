//! A messaging platform that takes every reply whole and keeps the text of each, for tests
//! that count what reached the user.

use async_trait::async_trait;
use channels::{Delivered, Outgoing, SendError, Sender};
use std::sync::Mutex;

/// See the module docs.
#[derive(Debug, Default)]
pub struct KeepingPlatform(Mutex<Vec<String>>);

impl KeepingPlatform {
    /// The texts it was asked to send, in order.
    pub fn sent(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

#[async_trait]
impl Sender for KeepingPlatform {
    fn max_chars(&self) -> usize {
        4_000
    }

    fn has_reactions(&self) -> bool {
        false
    }

    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        self.0.lock().unwrap().push(reply.text.clone());
        sent.pieces.push(reply.text.clone());
        Ok(())
    }
}
