//! How many bytes of record values an action may write: the limits on one record, one audit
//! row and what one undo would hold, and the running total both adapters keep per action.
//!
//! One undo reverts a whole action in one atomic write, and writes its own audit row holding,
//! for every record the action changed, the value it leaves and the value it restores
//! ([`reverting_changes`](crate::reverting_changes)). DynamoDB keeps an item to 400 KB and a
//! transaction to 4 MB, so without a limit a model chaining calls (or one call writing a big
//! record) could make an action that no undo can take back, and on DynamoDB every such write
//! failed as "unavailable". So, on both stores alike:
//!
//! - a record's value is at most [`MAX_RECORD_BYTES`] (its canonical JSON);
//! - one commit's own audit row holds at most [`MAX_ROW_BYTES`];
//! - what the undo of the commit's action would hold stays within [`MAX_ROW_BYTES`] too. The
//!   adapter keeps it per action as a running total, [`ActionCommit::undo_bytes_after`]: a
//!   record first touched adds its value before and after, a record touched again only its
//!   growth (its value before is what the action's earlier change left, which the undo no
//!   longer holds). So editing one record many times in a message costs its size once, not
//!   once an edit. An undo moves the total of the action it reverts by what it restores
//!   ([`undone_bytes`]), never below what a later undo of that action could hold.
//!
//! Past any of them a commit is [`StoreError::TooLarge`] and writes nothing. With a row's
//! values within 350,000 bytes, an undo's write is at most about three times that, far inside
//! 4 MB.

use crate::{ActionCommit, Change, StoreError, canonical_json};
use serde_json::Value;

/// The most bytes one record's value may take (its canonical JSON). The largest record is an
/// event's program: 300 sessions of ordinary titles and speakers take about 70 KB.
pub const MAX_RECORD_BYTES: usize = 100_000;

/// The most bytes of changes one audit row may hold: a commit's own, or the one its action's
/// undo would write (each change its values and its kind, id and owner, as the row stores
/// them). Below DynamoDB's 400 KB item limit with room for the row's other attributes.
pub const MAX_ROW_BYTES: usize = 350_000;

/// A record's key in an action's set of touched records: kinds never contain `#`.
pub fn touched_key(kind: &str, id: &str) -> String {
    format!("{kind}#{id}")
}

/// The bytes a value takes in a row (`null` for none).
fn value_bytes(value: Option<&Value>) -> usize {
    value.map_or(4, |v| canonical_json(v).len())
}

/// The bytes a change takes in a row besides its two values: its kind, id and owner, quoted,
/// and the field names and punctuation around them (with the list's brackets, counted for
/// every change, so a row's sum is never short).
fn key_bytes(c: &Change) -> usize {
    const FRAME: usize = r#"[{"kind":,"id":,"owner":,"before":,"after":},]"#.len();
    let quoted = |s: &str| serde_json::to_string(s).map_or(s.len() + 2, |q| q.len());
    FRAME + quoted(&c.kind) + quoted(&c.id) + quoted(&c.owner.0)
}

/// The bytes one change takes in a row.
pub fn change_bytes(c: &Change) -> usize {
    key_bytes(c) + value_bytes(c.before.as_ref()) + value_bytes(c.after.as_ref())
}

impl ActionCommit {
    /// [`StoreError::TooLarge`] when a record would be bigger than [`MAX_RECORD_BYTES`] or this
    /// commit's own row bigger than [`MAX_ROW_BYTES`].
    pub fn check_bytes(&self) -> Result<(), StoreError> {
        for c in &self.changes {
            let bytes = value_bytes(c.after.as_ref());
            if c.after.is_some() && bytes > MAX_RECORD_BYTES {
                return Err(StoreError::TooLarge {
                    what: format!(
                        "record {}/{} would be {bytes} bytes, more than {MAX_RECORD_BYTES}",
                        c.kind, c.id
                    ),
                });
            }
        }
        let row: usize = self.changes.iter().map(change_bytes).sum();
        if row > MAX_ROW_BYTES {
            return Err(StoreError::TooLarge {
                what: format!(
                    "action {} would write a row of {row} bytes, more than {MAX_ROW_BYTES}",
                    self.action_id
                ),
            });
        }
        Ok(())
    }

    /// What the undo of this commit's action would hold once this commit is in, given what it
    /// held before (`earlier`) and which records the action had touched already (see the
    /// module docs). An upper bound, never less than the undo's row would be.
    pub fn undo_bytes_after(&self, earlier: usize, touched: impl Fn(&Change) -> bool) -> usize {
        self.changes.iter().fold(earlier, |total, c| {
            if touched(c) {
                // The undo holds the record's first value and its last: the last moves.
                (total + value_bytes(c.after.as_ref()))
                    .saturating_sub(value_bytes(c.before.as_ref()))
            } else {
                total + change_bytes(c)
            }
        })
    }

    /// [`StoreError::TooLarge`] when the undo of this commit's action would hold more than
    /// [`MAX_ROW_BYTES`] (`total`, from [`ActionCommit::undo_bytes_after`]).
    pub fn check_undo_bytes(&self, total: usize) -> Result<(), StoreError> {
        if total <= MAX_ROW_BYTES {
            return Ok(());
        }
        Err(StoreError::TooLarge {
            what: format!(
                "action {} would change more than one undo can take back ({total} bytes, more than {MAX_ROW_BYTES})",
                self.action_id
            ),
        })
    }

    /// The keys of the records this commit touches, for its action's set.
    pub fn touched_keys(&self) -> Vec<String> {
        self.changes
            .iter()
            .map(|c| touched_key(&c.kind, &c.id))
            .collect()
    }
}

/// How an undo writing the reverting `changes` moves its action's running total: each record
/// goes from the value it holds (a change's `before`) back to the one it had (its `after`).
/// Negative when the undo restores smaller values.
pub fn undone_bytes(changes: &[Change]) -> i64 {
    changes
        .iter()
        .map(|c| value_bytes(c.after.as_ref()) as i64 - value_bytes(c.before.as_ref()) as i64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ActorKind, AuditEntry, reverting_changes};
    use serde_json::json;

    fn change(id: &str, before: Option<Value>, after: Option<Value>) -> Change {
        Change {
            kind: "program".into(),
            id: id.into(),
            owner: "alice".into(),
            before,
            after,
        }
    }

    fn commit(changes: Vec<Change>) -> ActionCommit {
        ActionCommit {
            action_id: "a-1".into(),
            actor: ActorKind::Agent,
            user: "alice".into(),
            by_user: true,
            at_ms: 0,
            changes,
            receipt: None,
            conversation: None,
        }
    }

    fn text(n: usize) -> Value {
        json!({ "t": "x".repeat(n) })
    }

    /// The row an undo of these commits would write, measured as the DynamoDB adapter stores it.
    fn undo_row_bytes(commits: &[ActionCommit]) -> usize {
        let rows: Vec<AuditEntry> = commits
            .iter()
            .enumerate()
            .map(|(i, c)| AuditEntry {
                seq: i as u64 + 1,
                action_id: c.action_id.clone(),
                actor: c.actor,
                user: c.user.clone(),
                by_user: true,
                at_ms: 0,
                changes: c.changes.clone(),
                reverts: None,
                undone_by: None,
                conversation: None,
            })
            .collect();
        serde_json::to_string(&reverting_changes(&rows))
            .unwrap()
            .len()
    }

    #[test]
    fn a_change_is_measured_as_a_row_stores_it() {
        for c in [
            change("p\u{1}\"1", None, Some(text(10))),
            change("p-2", Some(text(3)), None),
            change("p-3", Some(text(7)), Some(json!([1, "ü", null]))),
        ] {
            let stored = serde_json::to_string(&vec![c.clone()]).unwrap().len();
            // A list's comma and brackets are counted for each change: one over for one alone.
            assert!(
                change_bytes(&c) == stored + 1,
                "{} against {stored}",
                change_bytes(&c)
            );
        }
    }

    #[test]
    fn editing_one_record_many_times_costs_its_size_once() {
        let mut total = 0;
        let mut commits = Vec::new();
        let mut value: Option<Value> = None;
        for n in 0..40 {
            let next = text(5_000 + n * 10);
            let c = commit(vec![change("p-1", value.clone(), Some(next.clone()))]);
            total = c.undo_bytes_after(total, |_| n > 0);
            commits.push(c);
            value = Some(next);
            assert!(total >= undo_row_bytes(&commits), "{n}: an upper bound");
        }
        // 40 edits of a 5 KB record: the undo holds it once (nothing before, the last after).
        assert!(total < 6_000, "{total}");
    }

    #[test]
    fn records_first_touched_add_both_values_and_a_second_touch_only_the_growth() {
        let first = commit(vec![
            change("p-1", Some(text(100)), Some(text(200))),
            change("p-2", None, Some(text(50))),
        ]);
        let after_first = first.undo_bytes_after(0, |_| false);
        assert_eq!(
            after_first,
            first.changes.iter().map(change_bytes).sum::<usize>()
        );
        let second = commit(vec![change("p-1", Some(text(200)), Some(text(50)))]);
        let after_second = second.undo_bytes_after(after_first, |c| c.id == "p-1");
        assert_eq!(after_second, after_first - 150, "p-1 shrank by 150 bytes");
        assert!(after_second >= undo_row_bytes(&[first, second]));
    }

    #[test]
    fn an_undo_moves_the_total_by_what_it_restores() {
        let c = commit(vec![change("p-1", Some(text(10)), Some(text(500)))]);
        let reverting = vec![change("p-1", Some(text(500)), Some(text(10)))];
        assert_eq!(undone_bytes(&reverting), -490);
        assert_eq!(undone_bytes(&[change("p-2", Some(text(1)), None)]), 4 - 9);
        assert!(c.undo_bytes_after(0, |_| false) as i64 + undone_bytes(&reverting) > 0);
    }

    #[test]
    fn a_record_or_a_row_past_its_limit_is_too_large() {
        let big = commit(vec![change("p-1", None, Some(text(MAX_RECORD_BYTES)))]);
        assert!(
            matches!(big.check_bytes(), Err(StoreError::TooLarge { what }) if what.contains("program/p-1"))
        );
        let fits = commit(vec![change("p-1", None, Some(text(MAX_RECORD_BYTES - 20)))]);
        fits.check_bytes().unwrap();
        // A record may shrink from anything: only the value written is limited.
        let shrink = commit(vec![change(
            "p-1",
            Some(text(MAX_RECORD_BYTES)),
            Some(text(1)),
        )]);
        shrink.check_bytes().unwrap();
        let wide = commit(
            (0..4)
                .map(|i| change(&format!("p-{i}"), Some(text(50_000)), Some(text(50_000))))
                .collect(),
        );
        assert!(
            matches!(wide.check_bytes(), Err(StoreError::TooLarge { what }) if what.contains("row"))
        );
        assert!(wide.check_undo_bytes(MAX_ROW_BYTES + 1).is_err());
        wide.check_undo_bytes(MAX_ROW_BYTES).unwrap();
    }
}
