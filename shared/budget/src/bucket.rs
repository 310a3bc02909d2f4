//! The budget buckets: what each counts, its window, and the ledger key of the current one.
//!
//! Windows are **fixed, aligned to the Unix epoch**: the minute bucket is the calendar minute
//! (UTC), the hour bucket the clock hour, the 30-day bucket one of the consecutive 30-day spans
//! counted from 1970-01-01. A window's usage starts again from zero when the next one begins,
//! so "the last hour" means "this clock hour": a user can spend up to one cap at the end of one
//! window and another at the start of the next. That is the documented price of one atomic
//! conditional add per bucket.

use serde::Serialize;
use store::BucketKey;
use transcript::{ConversationId, UserId};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAYS_30_MS: i64 = 30 * 24 * HOUR_MS;

/// One kind of counter. Serialised as its [`name`](Bucket::name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// A user's tokens (input, output, cache read and write) in the current minute.
    UserTokensMinute,
    /// A user's tokens in the current hour.
    UserTokensHour,
    /// A user's estimated micro-dollars in the current 30-day window.
    UserUsd30d,
    /// Everyone's estimated micro-dollars in the current 30-day window.
    GlobalUsd30d,
    /// User messages in one conversation in the current hour.
    ConversationMessagesHour,
    /// One conversation's micro-dollars in the current 30-day window (no cap; for reports).
    ConversationUsd30d,
    /// What replies to senders not linked to an account cost (the onboarding reply to an SMS
    /// number, billed per segment), in micro-dollars, in the current 30-day window: the most a
    /// crowd of unknown numbers may spend, short of everyone's cap.
    UnlinkedUsd30d,
}

impl Serialize for Bucket {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What a bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Tokens,
    Microdollars,
    Messages,
}

impl Bucket {
    /// The four buckets a model call is reserved against, in the order they are checked.
    pub const SPEND: [Bucket; 4] = [
        Bucket::UserTokensMinute,
        Bucket::UserTokensHour,
        Bucket::UserUsd30d,
        Bucket::GlobalUsd30d,
    ];

    /// Stable name, used in logs (`budget:<name>`), the meter and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::UserTokensMinute => "user_tokens_minute",
            Self::UserTokensHour => "user_tokens_hour",
            Self::UserUsd30d => "user_usd_30d",
            Self::GlobalUsd30d => "global_usd_30d",
            Self::ConversationMessagesHour => "conversation_messages_hour",
            Self::ConversationUsd30d => "conversation_usd_30d",
            Self::UnlinkedUsd30d => "unlinked_usd_30d",
        }
    }

    /// The window kind as stored in the ledger.
    pub fn window(self) -> &'static str {
        match self {
            Self::UserTokensMinute => "tokens_1m",
            Self::UserTokensHour => "tokens_1h",
            Self::UserUsd30d
            | Self::GlobalUsd30d
            | Self::ConversationUsd30d
            | Self::UnlinkedUsd30d => "usd_30d",
            Self::ConversationMessagesHour => "messages_1h",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Self::UserTokensMinute | Self::UserTokensHour => Unit::Tokens,
            Self::UserUsd30d
            | Self::GlobalUsd30d
            | Self::ConversationUsd30d
            | Self::UnlinkedUsd30d => Unit::Microdollars,
            Self::ConversationMessagesHour => Unit::Messages,
        }
    }

    pub fn length_ms(self) -> i64 {
        match self {
            Self::UserTokensMinute => MINUTE_MS,
            Self::UserTokensHour | Self::ConversationMessagesHour => HOUR_MS,
            Self::UserUsd30d
            | Self::GlobalUsd30d
            | Self::ConversationUsd30d
            | Self::UnlinkedUsd30d => DAYS_30_MS,
        }
    }

    /// Where the window holding `now_ms` starts.
    pub fn start(self, now_ms: i64) -> i64 {
        now_ms - now_ms.rem_euclid(self.length_ms())
    }

    /// The ledger scope of this bucket for a user and conversation.
    pub fn scope(self, user: &UserId, conversation: &ConversationId) -> String {
        match self {
            Self::UserTokensMinute | Self::UserTokensHour | Self::UserUsd30d => user_scope(user),
            Self::GlobalUsd30d => GLOBAL_SCOPE.to_owned(),
            Self::UnlinkedUsd30d => UNLINKED_SCOPE.to_owned(),
            Self::ConversationMessagesHour | Self::ConversationUsd30d => {
                format!("{CONVERSATION_PREFIX}{conversation}")
            }
        }
    }

    /// The ledger key of the current window.
    pub fn key(self, user: &UserId, conversation: &ConversationId, now_ms: i64) -> BucketKey {
        BucketKey {
            scope: self.scope(user, conversation),
            window: self.window().to_owned(),
            start_ms: self.start(now_ms),
        }
    }
}

/// The scope of everyone's spend.
pub const GLOBAL_SCOPE: &str = "global";
/// The scope of what replies to senders not linked to an account cost.
pub const UNLINKED_SCOPE: &str = "unlinked";
/// Scopes of users start with this, followed by the user id.
pub const USER_PREFIX: &str = "user:";
/// Scopes of conversations start with this, followed by the conversation id.
pub const CONVERSATION_PREFIX: &str = "conv:";

pub fn user_scope(user: &UserId) -> String {
    format!("{USER_PREFIX}{user}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_aligned_to_the_epoch() {
        let t = 1_800_000_123_456; // 2027-01-15T08:00:00.123456Z + change
        assert_eq!(Bucket::UserTokensMinute.start(t) % MINUTE_MS, 0);
        assert!(t - Bucket::UserTokensMinute.start(t) < MINUTE_MS);
        assert_eq!(Bucket::UserTokensHour.start(t) % HOUR_MS, 0);
        assert_eq!(Bucket::GlobalUsd30d.start(t), t - t % DAYS_30_MS);
        let next = Bucket::UserTokensMinute.start(t) + MINUTE_MS;
        assert_ne!(
            Bucket::UserTokensMinute.start(next),
            Bucket::UserTokensMinute.start(t),
            "a new minute is a new bucket"
        );
    }

    #[test]
    fn scopes_separate_users_conversations_and_everyone() {
        let (u, c) = (UserId::from("ana"), ConversationId::from("c1"));
        assert_eq!(Bucket::UserUsd30d.scope(&u, &c), "user:ana");
        assert_eq!(Bucket::GlobalUsd30d.scope(&u, &c), "global");
        assert_eq!(Bucket::ConversationUsd30d.scope(&u, &c), "conv:c1");
        assert_eq!(
            Bucket::UserUsd30d.key(&u, &c, 5).window,
            Bucket::GlobalUsd30d.key(&u, &c, 5).window
        );
    }
}
