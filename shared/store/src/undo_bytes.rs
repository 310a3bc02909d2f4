//! How many bytes of record values an action may write: the limits on one record, one audit
//! row and what one undo would hold, and the running count both adapters keep per action.
//!
//! One undo reverts a whole action in one atomic write, and writes its own audit row holding,
//! for every record the action changed, the value it leaves and the value it restores
//! ([`reverting_changes`]). DynamoDB keeps an item to 400 KB and a transaction to 4 MB, so
//! without a limit a model chaining calls (or one call writing a big record) could make an
//! action that no undo can take back, and on DynamoDB every such write failed as
//! "unavailable". So, on both stores alike:
//!
//! - a record's value is at most [`MAX_RECORD_BYTES`] (its canonical JSON);
//! - one commit's own audit row holds at most [`MAX_ROW_BYTES`];
//! - what the undo of the commit's action would hold stays within [`MAX_ROW_BYTES`] too. The
//!   adapter keeps it per action as an [`UndoSize`]: for each record the action touched, its
//!   value before the action (counted once, at the first touch) and the value the action last
//!   wrote (replaced at each touch). So editing one record many times in a message costs its
//!   size once, not once an edit, and an edit by someone else in between changes nothing (an
//!   undo then finds the record changed, and reverts nothing). An undo drops the count of the
//!   action it reverts, and the action's next commit counts afresh from its rows still on the
//!   stack ([`UndoSize::of_rows`]), as for an action an older version began;
//! - one undo's write stays within [`MAX_UNDO_WRITE_BYTES`]: it marks each of the action's
//!   rows undone, and restores and records about three times what its row holds. Whether
//!   DynamoDB counts an updated item whole towards a transaction's 4 MB is not documented (its
//!   write units are counted whole), so it is assumed.
//!
//! The limits are decided from what a commit says it changes, before its `before`s are
//! checked. Past any of them a commit is [`StoreError::TooLarge`] and writes nothing.

use crate::{ActionCommit, AuditEntry, Change, StoreError, canonical_json, reverting_changes};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The most bytes one record's value may take (its canonical JSON). The largest record is an
/// event's program: 300 sessions of ordinary titles and speakers take about 70 KB, with 20
/// short speaker names each over 125 KB. A move writes the program with its timetable in one
/// row, both before and after: past [`MAX_ROW_BYTES`] together (a program near this limit
/// with a timetable over 25 KB), it is refused.
pub const MAX_RECORD_BYTES: usize = 150_000;

/// The most bytes of changes one audit row may hold: a commit's own, or the one its action's
/// undo would write (each change its values and its kind, id and owner, as the row stores
/// them). Below DynamoDB's 400 KB item limit with room for the row's other attributes.
pub const MAX_ROW_BYTES: usize = 350_000;

/// The most one undo's write may carry: the action's rows, which it marks undone (each commit's
/// own row, as [`MAX_ROW_BYTES`] measures it), and three times what its row holds (its own
/// row once; the records put back with their listing copies and the conditions on what they
/// hold now, together at most twice).
/// Inside DynamoDB's 4 MB a transaction. An ordinary 300-session program (70 KB) can be added
/// to 24 times in one message; one at the record limit 9 times.
pub const MAX_UNDO_WRITE_BYTES: usize = 3_800_000;

/// A record's key in an [`UndoSize`]: kinds never contain `#`.
fn touched_key(kind: &str, id: &str) -> String {
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
fn change_bytes(c: &Change) -> usize {
    key_bytes(c) + value_bytes(c.before.as_ref()) + value_bytes(c.after.as_ref())
}

/// What the undo of one action would hold: `bytes` in all, and for each record the action
/// touched (`kind#id`), the bytes of the value it last wrote (an upper bound, never less than
/// the undo's row would be); and `row_bytes`, what the action's rows hold together. Stored by
/// each adapter beside the action (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoSize {
    pub bytes: usize,
    pub last: BTreeMap<String, usize>,
    pub row_bytes: usize,
}

impl UndoSize {
    /// What the undo's write would carry (see [`MAX_UNDO_WRITE_BYTES`]).
    pub fn undo_write(&self) -> usize {
        self.row_bytes + 3 * self.bytes
    }

    /// Counted afresh from the action's rows (for an action whose count an older version did
    /// not keep): those still on the undo stack, as their undo would revert them.
    pub fn of_rows(action_id: &str, rows: &[AuditEntry]) -> Self {
        let mut rows: Vec<AuditEntry> = rows
            .iter()
            .filter(|r| r.action_id == action_id && r.on_undo_stack())
            .cloned()
            .collect();
        rows.sort_by_key(|r| r.seq);
        let reverting = reverting_changes(&rows);
        UndoSize {
            row_bytes: rows.iter().flat_map(|r| &r.changes).map(change_bytes).sum(),
            bytes: reverting.iter().map(change_bytes).sum(),
            last: reverting
                .iter()
                .map(|c| (touched_key(&c.kind, &c.id), value_bytes(c.before.as_ref())))
                .collect(),
        }
    }

    /// The count once `commit` is in: a record first touched adds its change (kind, id and
    /// owner, the value before and after); one touched again only replaces the value it last
    /// wrote with the new one.
    pub fn after(&self, commit: &ActionCommit) -> Self {
        let mut next = self.clone();
        for c in &commit.changes {
            next.row_bytes += change_bytes(c);
            let after = value_bytes(c.after.as_ref());
            match next.last.insert(touched_key(&c.kind, &c.id), after) {
                Some(last) => next.bytes = (next.bytes + after).saturating_sub(last),
                None => next.bytes += change_bytes(c),
            }
        }
        next
    }
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

    /// The action's count with this commit in (`earlier` without it), or
    /// [`StoreError::TooLarge`] when its undo's row would then hold more than [`MAX_ROW_BYTES`]
    /// or its write carry more than [`MAX_UNDO_WRITE_BYTES`].
    pub fn undo_size(&self, earlier: &UndoSize) -> Result<UndoSize, StoreError> {
        let next = earlier.after(self);
        let past = if next.bytes > MAX_ROW_BYTES {
            format!("a row of {} bytes, at most {MAX_ROW_BYTES}", next.bytes)
        } else if next.undo_write() > MAX_UNDO_WRITE_BYTES {
            let write = next.undo_write();
            format!("a write of {write} bytes, at most {MAX_UNDO_WRITE_BYTES}")
        } else {
            return Ok(next);
        };
        Err(StoreError::TooLarge {
            what: format!(
                "action {} would change more than one undo can take back ({past})",
                self.action_id
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ActorKind;
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

    fn rows(commits: &[ActionCommit]) -> Vec<AuditEntry> {
        commits
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
            .collect()
    }

    /// The row an undo of these commits would write, measured as the DynamoDB adapter stores it.
    fn undo_row_bytes(commits: &[ActionCommit]) -> usize {
        serde_json::to_string(&reverting_changes(&rows(commits)))
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
            assert_eq!(change_bytes(&c), stored + 1);
        }
    }

    #[test]
    fn editing_one_record_many_times_costs_its_size_once() {
        let mut size = UndoSize::default();
        let mut commits = Vec::new();
        let mut value: Option<Value> = None;
        for n in 0..40 {
            let next = text(5_000 + n * 10);
            let c = commit(vec![change("p-1", value.clone(), Some(next.clone()))]);
            size = c.undo_size(&size).unwrap();
            commits.push(c);
            value = Some(next);
            assert!(
                size.bytes >= undo_row_bytes(&commits),
                "{n}: an upper bound"
            );
        }
        // 40 edits of a 5 KB record: the undo holds it once (nothing before, the last after);
        // the rows hold every edit.
        assert!(size.bytes < 6_000, "{size:?}");
        assert!(size.row_bytes > 40 * 2 * 5_000, "{size:?}");
        assert_eq!(
            size,
            UndoSize::of_rows("a-1", &rows(&commits)),
            "counted afresh alike"
        );
    }

    #[test]
    fn an_edit_by_someone_else_in_between_changes_nothing() {
        // The action makes p-1 small; someone else grows it to 90 KB; the action edits it again.
        let first = commit(vec![change("p-1", None, Some(text(10)))]);
        let size = first.undo_size(&UndoSize::default()).unwrap();
        let again = commit(vec![change("p-1", Some(text(90_000)), Some(text(90_000)))]);
        let size = again.undo_size(&size).unwrap();
        // Its undo holds nothing before and the 90 KB after: what the count says, not less.
        assert!(size.bytes >= undo_row_bytes(&[first, again]), "{size:?}");
        assert!(size.bytes > 90_000);
    }

    #[test]
    fn records_first_touched_add_both_values_and_a_second_touch_only_the_growth() {
        let first = commit(vec![
            change("p-1", Some(text(100)), Some(text(200))),
            change("p-2", None, Some(text(50))),
        ]);
        let after_first = first.undo_size(&UndoSize::default()).unwrap();
        assert_eq!(
            after_first.bytes,
            first.changes.iter().map(change_bytes).sum::<usize>()
        );
        let second = commit(vec![change("p-1", Some(text(200)), Some(text(50)))]);
        let after_second = second.undo_size(&after_first).unwrap();
        assert_eq!(
            after_second.bytes,
            after_first.bytes - 150,
            "p-1 shrank by 150 bytes"
        );
        assert!(after_second.bytes >= undo_row_bytes(&[first, second]));
    }

    #[test]
    fn counted_afresh_only_the_rows_still_on_the_stack_count() {
        let c1 = commit(vec![change("p-1", None, Some(text(500)))]);
        let c2 = commit(vec![change("p-2", None, Some(text(700)))]);
        let mut rows = rows(&[c1.clone(), c2]);
        rows[1].undone_by = Some("u-1".into());
        rows.push(AuditEntry {
            action_id: "other".into(),
            seq: 9,
            ..rows[0].clone()
        });
        let size = UndoSize::of_rows("a-1", &rows);
        assert_eq!(size, c1.undo_size(&UndoSize::default()).unwrap());
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
        let full = UndoSize {
            bytes: MAX_ROW_BYTES - 10,
            ..UndoSize::default()
        };
        assert!(fits.undo_size(&full).is_err());
        let many_rows = UndoSize {
            row_bytes: MAX_UNDO_WRITE_BYTES - 10,
            ..UndoSize::default()
        };
        assert!(fits.undo_size(&many_rows).is_err());
        let small = commit(vec![change("p-9", None, Some(json!({})))]);
        small
            .undo_size(&UndoSize {
                row_bytes: MAX_UNDO_WRITE_BYTES - 1_000,
                ..UndoSize::default()
            })
            .unwrap();
    }
}
