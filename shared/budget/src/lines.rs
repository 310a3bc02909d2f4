//! Every sentence the budget and the cheap guards say to a user: one per bucket, calm, with
//! what to do. No numbers that reveal caps or other users.

use crate::Bucket;

pub const USER_TOKENS_MINUTE: &str =
    "You've sent a lot in the last minute — give me a moment and try again.";
pub const USER_TOKENS_HOUR: &str =
    "You've used a lot this hour — let's take a short break and pick this up again later.";
pub const USER_USD_30D: &str = "You've reached your usage allowance for this month, so I can't \
answer right now. It frees up again when the next 30-day period starts.";
pub const GLOBAL_USD_30D: &str = "I'm not able to answer anyone right now: the service has \
reached its overall usage limit for this period. Please try again later.";
pub const CONVERSATION_BUSY: &str = "This conversation has been very busy this hour — let's \
pause here and continue a bit later (or start a new conversation).";
pub const ACCOUNT_PAUSED: &str = "Your account is paused at the moment, so I can't answer. \
Please contact whoever runs this assistant for you.";
pub const ACCOUNT_CLOSED: &str = "This account is closed, so I can't help here any more. If you \
think that's a mistake, please contact whoever runs this assistant for you.";
pub const CANNOT_CHECK: &str = "I can't check your usage right now, so I'm holding off on answering. Please try again in a moment.";

/// The sentence for a tripped bucket.
pub fn tripped(bucket: Bucket) -> &'static str {
    match bucket {
        Bucket::UserTokensMinute => USER_TOKENS_MINUTE,
        Bucket::UserTokensHour => USER_TOKENS_HOUR,
        Bucket::UserUsd30d => USER_USD_30D,
        // Never a model call's: what replies to strangers cost.
        Bucket::GlobalUsd30d | Bucket::UnlinkedUsd30d => GLOBAL_USD_30D,
        Bucket::ConversationMessagesHour | Bucket::ConversationUsd30d => CONVERSATION_BUSY,
    }
}
