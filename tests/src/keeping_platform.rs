//! A messaging platform that takes every reply whole and keeps the text of each, for tests
//! that count what reached the user; or, while told to, refuses Bridle's token (as a platform
//! does after the token expired or was rotated) and takes nothing.

use async_trait::async_trait;
use channels::{Delivered, Outgoing, SendError, Sender};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// See the module docs.
#[derive(Debug, Default)]
pub struct KeepingPlatform {
    sent: Mutex<Vec<String>>,
    refusing: AtomicBool,
}

impl KeepingPlatform {
    /// The texts it took, in order.
    pub fn sent(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }

    /// Refuse every reply (`SendError::Unauthorized`) from now on, or take them again.
    pub fn refuse(&self, refusing: bool) {
        self.refusing.store(refusing, Ordering::SeqCst);
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
        if self.refusing.load(Ordering::SeqCst) {
            return Err(SendError::Unauthorized {
                reason: "the token was refused".into(),
            });
        }
        self.sent.lock().unwrap().push(reply.text.clone());
        sent.pieces.push(reply.text.clone());
        Ok(())
    }
}
