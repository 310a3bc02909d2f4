//! The key layout (see the crate docs): attribute names and the strings keys are made of. Pure.

use transcript::{ConversationId, UserId};

pub(crate) const PK: &str = "pk";
pub(crate) const SK: &str = "sk";
pub(crate) const TTL: &str = "ttl";
pub(crate) const GSI1: &str = "gsi1";
pub(crate) const GSI1PK: &str = "gsi1pk";
pub(crate) const GSI1SK: &str = "gsi1sk";
pub(crate) const LSI1: &str = "lsi1";
pub(crate) const LSI1SK: &str = "lsi1sk";

/// The sort key of a conversation's own record.
pub(crate) const META: &str = "META";
/// The sort key of a job's claim record.
pub(crate) const CLAIM: &str = "CLAIM";
/// The sort key of a conversation's lease.
pub(crate) const LEASE: &str = "LEASE";
/// The sort key of a link code's record.
pub(crate) const LINK: &str = "LINK";
/// The sort key of a bound channel account's record.
pub(crate) const IDENT: &str = "IDENT";
/// Sort-key prefix of messages (table key and `lsi1` key alike).
pub(crate) const MSG: &str = "MSG#";
/// Sort-key prefix of visible entries.
pub(crate) const SEEN: &str = "SEEN#";

pub(crate) fn conversation_pk(id: &ConversationId) -> String {
    format!("CONV#{id}")
}

pub(crate) fn user_gsi1pk(user: &UserId) -> String {
    format!("USER#{user}")
}

/// Newest-first order when read backwards: creation time, then id.
pub(crate) fn created_gsi1sk(created_at_ms: i64, id: &ConversationId) -> String {
    format!("{:020}#{id}", order_preserving(created_at_ms))
}

/// `i64` → `u64` keeping the order, negatives included: flip the sign bit.
pub(crate) fn order_preserving(value: i64) -> u64 {
    (value as u64) ^ (1 << 63)
}

pub(crate) fn message_sk(position: u64) -> String {
    format!("{MSG}{position:020}")
}

pub(crate) fn message_lsi1sk(segment: u32, position: u64) -> String {
    format!("{}{position:020}", segment_prefix(segment))
}

/// The `lsi1sk` prefix shared by one segment's messages.
pub(crate) fn segment_prefix(segment: u32) -> String {
    format!("{MSG}{segment:010}#")
}

pub(crate) fn visible_sk(position: u64) -> String {
    format!("{SEEN}{position:020}")
}

/// The key suffix of a body's continuation item `chunk` (1-based; the head is chunk 0).
pub(crate) fn part_suffix(chunk: usize) -> String {
    format!("#PART#{chunk:03}")
}

pub(crate) fn job_pk(job_key: &str) -> String {
    format!("JOB#{job_key}")
}

pub(crate) fn link_code_pk(code: &str) -> String {
    format!("{LINK}#{code}")
}

/// `IDENT#<channel>#<external id>`. Unambiguous because channel names never contain `#`
/// (the `Identities` port says so); the external id may.
pub(crate) fn identity_pk(channel: &str, external_id: &str) -> String {
    format!("{IDENT}#{channel}#{external_id}")
}

/// The sort key of a tool call's receipt (its partition is [`receipt_pk`]).
pub(crate) const RECEIPT: &str = "RECEIPT";

/// `CALL#<call key>`: a tool call's receipt, written with the call's effect.
pub(crate) fn receipt_pk(call_key: &str) -> String {
    format!("CALL#{call_key}")
}

/// The sort key of a record's item.
pub(crate) const REC: &str = "REC";
/// The sort key of a user's audit head (the last sequence number used).
pub(crate) const HEAD: &str = "HEAD";
/// Sort-key prefix of audit rows.
pub(crate) const ACT: &str = "ACT#";
/// Sort-key prefix of pending confirmations.
pub(crate) const PENDING: &str = "PENDING#";
/// Sort-key prefix of a conversation's active records.
pub(crate) const ACTIVE: &str = "ACTIVE#";
/// The sort key of an account.
pub(crate) const ACCOUNT: &str = "ACCOUNT";
/// The sort key of an e-mail address's guard item (which account has it).
pub(crate) const EMAIL: &str = "EMAIL";
/// The `gsi1` partition listing every account.
pub(crate) const ACCOUNTS: &str = "ACCOUNTS";
/// The `gsi1` partition listing every bound channel account.
pub(crate) const IDENTS: &str = "IDENTS";

/// `REC#<kind>#<id>`. Unambiguous because record kinds never contain `#`; the id may.
pub(crate) fn record_pk(kind: &str, id: &str) -> String {
    format!("{REC}#{kind}#{id}")
}

/// The `gsi1` partition listing one owner's records of one kind.
/// The partition of an owner's listing of one kind of record. Unambiguous because kinds never
/// contain `#`.
pub(crate) fn owner_pk(owner: &UserId, kind: &str) -> String {
    format!("OWNER#{owner}#{kind}")
}

/// A record's entry in its owner's listing: in id order.
pub(crate) fn listing_sk(id: &str) -> String {
    format!("{REC}#{id}")
}

pub(crate) fn audit_pk(user: &UserId) -> String {
    format!("AUDIT#{user}")
}

pub(crate) fn audit_sk(seq: u64) -> String {
    format!("{ACT}{seq:020}")
}

/// Sort-key prefix of a user's undo stack entries, in their audit partition: one small item
/// per audit row on the stack, by conversation, so the top of a conversation's stack is one
/// item away however long the log.
pub(crate) const STACK: &str = "STACK#";
/// Sort-key prefix of an action's index item, in the audit partition: the seqs of its rows.
pub(crate) const ACTION: &str = "AIDX#";

/// `STACK#<length>:<conversation>#`, or `STACK#-#` for rows outside any conversation. The
/// length makes no conversation's prefix the prefix of another's (`a` and `a#b`).
pub(crate) fn stack_prefix(conversation: Option<&ConversationId>) -> String {
    match conversation {
        Some(c) => format!("{STACK}{}:{}#", c.0.len(), c.0),
        None => format!("{STACK}-#"),
    }
}

/// A stack entry's sort key: its conversation's prefix and the row's seq, in order.
pub(crate) fn stack_sk(conversation: Option<&ConversationId>, seq: u64) -> String {
    format!("{}{seq:020}", stack_prefix(conversation))
}

pub(crate) fn action_sk(action_id: &str) -> String {
    format!("{ACTION}{action_id}")
}

pub(crate) fn pending_sk(hash: &str) -> String {
    format!("{PENDING}{hash}")
}

pub(crate) fn active_sk(kind: &str) -> String {
    format!("{ACTIVE}{kind}")
}

pub(crate) fn account_pk(user: &UserId) -> String {
    format!("USER#{user}")
}

/// `EMAIL#<address>` (normalised, so one mailbox is one key).
pub(crate) fn email_pk(email: &str) -> String {
    format!("{EMAIL}#{email}")
}

/// An account's place in the `ACCOUNTS` listing: creation time, then user id.
pub(crate) fn account_gsi1sk(created_at_ms: i64, user: &UserId) -> String {
    format!("{:020}#{user}", order_preserving(created_at_ms))
}

/// The start of a user's entries in the `IDENTS` listing. User ids may hold `#`, so another
/// user's entries can share the prefix; readers also compare `user_id`.
pub(crate) fn identity_gsi1_prefix(user: &UserId) -> String {
    format!("{user}#")
}

/// A bound account's place in the `IDENTS` listing: user, channel, external id.
pub(crate) fn identity_gsi1sk(user: &UserId, channel: &str, external_id: &str) -> String {
    format!("{}{channel}#{external_id}", identity_gsi1_prefix(user))
}

/// The position in a `<prefix><20 digits>…` sort key.
pub(crate) fn position_in(sk: &str, prefix: &str) -> Option<u64> {
    sk.strip_prefix(prefix)?.get(..20)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_their_numbers() {
        assert!(message_sk(9) < message_sk(10));
        assert!(message_sk(10) < message_sk(u64::MAX));
        assert!(message_lsi1sk(1, 5) < message_lsi1sk(2, 0));
        let a = ConversationId::from("a");
        let ab = ConversationId::from("a#b");
        assert!(!stack_sk(Some(&ab), 1).starts_with(&stack_prefix(Some(&a))));
        assert!(!stack_sk(Some(&a), 1).starts_with(&stack_prefix(Some(&ab))));
        assert!(!stack_sk(None, 1).starts_with(&stack_prefix(Some(&a))));
        assert!(stack_sk(Some(&a), 9) < stack_sk(Some(&a), 10));
        for sk in [stack_sk(Some(&a), 1), action_sk("x")] {
            assert!(!sk.starts_with(ACT) && sk != HEAD, "{sk}");
        }
        // A continuation sorts right after its head, before the next position.
        let part = message_sk(5) + &part_suffix(1);
        assert!(message_sk(5) < part && part < message_sk(6));
        let times = [i64::MIN, -1_000, -1, 0, 1, 1_700_000_000_000, i64::MAX];
        let keys: Vec<String> = times
            .iter()
            .map(|t| created_gsi1sk(*t, &"c".into()))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        let accounts = [
            account_gsi1sk(-1, &"zoe".into()),
            account_gsi1sk(0, &"ada".into()),
            account_gsi1sk(0, &"ada#2".into()),
            account_gsi1sk(0, &"adb".into()),
            account_gsi1sk(1, &"a".into()),
        ];
        assert!(accounts.windows(2).all(|w| w[0] < w[1]), "{accounts:?}");
    }

    #[test]
    fn positions_parse_back() {
        assert_eq!(position_in(&message_sk(42), MSG), Some(42));
        assert_eq!(
            position_in(&(message_sk(7) + &part_suffix(3)), MSG),
            Some(7)
        );
        assert_eq!(position_in(&visible_sk(u64::MAX), SEEN), Some(u64::MAX));
        assert_eq!(position_in("MSG#12", MSG), None);
        assert_eq!(position_in(&visible_sk(1), MSG), None);
    }
}
