//! A small demo domain for the local server: notes the assistant can add, list and delete.
//! It shows how tools plug in (thin handlers over a service, identity from `Ctx`, `_effects` to
//! refresh the page, a risk policy of its own). Deleting is for good, so it needs the user's
//! yes ([`risk_policy`]) in the web chat and on messaging channels (the notes are not offered
//! over MCP).

use rusqlite::params;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use store_sqlite::Db;
use tools::{Ctx, Registry, RegistryError, ToolDef, ToolError, handler_fn};

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub id: i64,
    pub text: String,
    pub created_at_ms: i64,
}

/// Notes per user, in the server's SQLite file (table `demo_notes`), on the database the store
/// and the queue share: its writes join their group commits.
#[derive(Debug)]
pub struct Notes {
    db: Arc<Db>,
    /// The store's receipts are in the same file: a note added by a model's call commits the
    /// call's receipt with it (DESIGN invariant 10), so a resumed turn never adds it twice.
    receipts: bool,
}

const MAX_NOTE_CHARS: usize = 500;

/// The most notes one user may keep. Every `list_notes` call, and the web app's notes list,
/// reads them all; without a limit an MCP client or a manipulated model could add notes at its
/// request rate for as long as it liked (170,000 a day at MCP's 120 a minute), each list then
/// costing more. Counted in the add's own write, so two adds at once cannot both take the last.
pub const MAX_NOTES_PER_USER: i64 = 1_000;

impl Notes {
    /// The notes table on `db`, created if missing.
    pub fn on(db: Arc<Db>) -> rusqlite::Result<Self> {
        let receipts = db
            .exclusive(|conn| {
                conn.execute_batch(
                    "CREATE TABLE IF NOT EXISTS demo_notes (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        user_id TEXT NOT NULL,
                        text TEXT NOT NULL,
                        created_at_ms INTEGER NOT NULL
                    );
                    CREATE INDEX IF NOT EXISTS demo_notes_user ON demo_notes (user_id, id);",
                )?;
                store_sqlite::receipts_here(conn)
            })
            .map_err(stopped)??;
        Ok(Self { db, receipts })
    }

    pub async fn list(&self, user: &str) -> rusqlite::Result<Vec<Note>> {
        let user = user.to_owned();
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, text, created_at_ms FROM demo_notes WHERE user_id = ?1 ORDER BY id",
                )?;
                stmt.query_map([user], |r| {
                    Ok(Note {
                        id: r.get(0)?,
                        text: r.get(1)?,
                        created_at_ms: r.get(2)?,
                    })
                })?
                .collect()
            })
            .await
            .map_err(stopped)?
    }

    /// The user's note `id`, if they have it.
    pub async fn get(&self, user: &str, id: i64) -> rusqlite::Result<Option<Note>> {
        use rusqlite::OptionalExtension;
        let user = user.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT id, text, created_at_ms FROM demo_notes WHERE id = ?1 AND user_id = ?2",
                )?
                .query_row(params![id, user], |r| {
                    Ok(Note {
                        id: r.get(0)?,
                        text: r.get(1)?,
                        created_at_ms: r.get(2)?,
                    })
                })
                .optional()
            })
            .await
            .map_err(stopped)?
    }

    /// Add a note and, for a model's call (`call_key`), commit the call's receipt with it: the
    /// tool's output, built here from the new note. Crash story: both or neither are written,
    /// so a turn resumed after a crash answers the call from the receipt and adds nothing.
    pub async fn add(
        &self,
        user: &str,
        text: &str,
        now_ms: i64,
        call_key: Option<&str>,
    ) -> Result<(Note, Value), ToolError> {
        let (user, text) = (user.to_owned(), text.to_owned());
        let call_key = call_key.filter(|_| self.receipts).map(str::to_owned);
        // One write of the shared database (its own savepoint): both or neither; durable, as
        // an MCP client hears of it at once.
        self.db
            .write_durable(move |tx| {
                let kept: i64 = tx
                    .prepare_cached("SELECT count(*) FROM demo_notes WHERE user_id = ?1")
                    .and_then(|mut count| count.query_row([&user], |r| r.get(0)))
                    .map_err(internal)?;
                if kept >= MAX_NOTES_PER_USER {
                    return Err(ToolError::domain(
                        "too_many",
                        format!(
                            "The user has {kept} notes, the most one person may keep \
                             ({MAX_NOTES_PER_USER}). Nothing was saved: ask which notes to \
                             delete first."
                        ),
                    ));
                }
                tx.prepare_cached(
                    "INSERT INTO demo_notes (user_id, text, created_at_ms) VALUES (?1, ?2, ?3)",
                )
                .and_then(|mut insert| insert.execute(params![user, text, now_ms]))
                .map_err(internal)?;
                let note = Note {
                    id: tx.last_insert_rowid(),
                    text,
                    created_at_ms: now_ms,
                };
                let output = json!({"note": note, "_effects": {"refresh": ["notes"]}});
                if let Some(call_key) = call_key {
                    let receipt = store::Receipt {
                        call_key,
                        output: output.clone(),
                    };
                    // A racing attempt recorded this call first: its note stands, this one is rolled
                    // back with the write, and the engine answers from the recorded receipt.
                    store_sqlite::put_receipt(tx, &receipt).map_err(ToolError::internal)?;
                }
                Ok((note, output))
            })
            .await
            .map_err(ToolError::internal)?
    }

    /// Delete the user's note and, for a model's call, commit the call's receipt with it (as
    /// [`Notes::add`]); `None` when the user has no such note (nothing written).
    pub async fn delete(
        &self,
        user: &str,
        id: i64,
        call_key: Option<&str>,
    ) -> Result<Option<Value>, ToolError> {
        let user = user.to_owned();
        let call_key = call_key.filter(|_| self.receipts).map(str::to_owned);
        self.db
            .write_durable(move |tx| {
                let n = tx
                    .prepare_cached("DELETE FROM demo_notes WHERE id = ?1 AND user_id = ?2")
                    .and_then(|mut delete| delete.execute(params![id, user]))
                    .map_err(internal)?;
                if n != 1 {
                    return Ok(None);
                }
                let output = json!({"deleted": id, "_effects": {"refresh": ["notes"]}});
                if let Some(call_key) = call_key {
                    let receipt = store::Receipt {
                        call_key,
                        output: output.clone(),
                    };
                    store_sqlite::put_receipt(tx, &receipt).map_err(ToolError::internal)?;
                }
                Ok(Some(output))
            })
            .await
            .map_err(ToolError::internal)?
    }
}

fn internal(e: rusqlite::Error) -> ToolError {
    ToolError::internal(e)
}

/// The database's thread is gone: said as the error the callers already handle.
fn stopped(e: store_sqlite::DbFailure) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Which notes calls need the user's yes: deleting a note the user has, described by its
/// stored text (shown on one line, as the planner shows names). A note the user does not have
/// is not risky here: the call fails as not found when it runs. When the note cannot be read,
/// the call is held (fail closed).
pub fn risk_policy(notes: Arc<Notes>) -> Arc<dyn engine::RiskPolicy> {
    Arc::new(engine::risk_policy(
        move |ctx: Ctx, tool: String, args: Value| {
            let notes = notes.clone();
            async move {
                if tool != "delete_note" {
                    return None;
                }
                let id = args.get("id").and_then(Value::as_i64)?;
                match notes.get(&ctx.user_id.0, id).await {
                    Ok(note) => note.map(|n| {
                        format!(
                            "Delete the note \"{}\" for good",
                            planner::one_line(&n.text)
                        )
                    }),
                    Err(err) => {
                        tracing::warn!(error = %err, "the note to delete is unreadable; held");
                        Some(format!(
                            "Delete note {id} for good (it could not be read just now)"
                        ))
                    }
                }
            }
        },
    ))
}

/// Register the notes tools for the `chat` purpose.
pub fn register(registry: &mut Registry, notes: Arc<Notes>) -> Result<(), RegistryError> {
    let n = notes.clone();
    registry.register(
        ToolDef::new(
            "list_notes",
            "List the user's notes, oldest first. Returns items with id, text and created_at_ms.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
        .purposes(&["chat"])
        .read_only(),
        handler_fn(move |ctx: Ctx, _: Value| {
            let n = n.clone();
            async move {
                let notes = n.list(&ctx.user_id.0).await.map_err(internal)?;
                serde_json::to_value(notes).map_err(ToolError::internal)
            }
        }),
    )?;
    let n = notes.clone();
    registry.register(
        ToolDef::new(
            "add_note",
            "Save a short note for the user (at most 500 characters). Returns the saved note.",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_CHARS}},
                "required": ["text"],
                "additionalProperties": false
            }),
        )
        .purposes(&["chat"]),
        handler_fn(move |ctx: Ctx, input: Value| {
            let n = n.clone();
            async move {
                let text = input["text"].as_str().unwrap_or_default().trim().to_owned();
                if text.is_empty() {
                    return Err(ToolError::domain("empty", "A note needs some text."));
                }
                let (_, output) =
                    n.add(&ctx.user_id.0, &text, now_ms(), ctx.call_key.as_deref())
                        .await?;
                Ok(output)
            }
        }),
    )?;
    registry.register(
        ToolDef::new(
            "delete_note",
            "Delete one of the user's notes by id (ids come from list_notes). Deleting is for \
             good, so the user is asked to confirm first.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        )
        .purposes(&["chat"]),
        handler_fn(move |ctx: Ctx, input: Value| {
            let n = notes.clone();
            async move {
                let id = input["id"].as_i64().unwrap_or_default();
                n.delete(&ctx.user_id.0, id, ctx.call_key.as_deref())
                    .await?
                    .ok_or_else(|| {
                        ToolError::domain(
                            "not_found",
                            format!(
                                "There is no note with id {id}. Call list_notes to see the ids."
                            ),
                        )
                    })
            }
        }),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user keeps at most `MAX_NOTES_PER_USER` notes: with one place left, of five adds at
    /// once exactly one is saved and four are told why, in words the model can pass on;
    /// another user is not affected, and a delete makes room again.
    #[tokio::test]
    async fn a_user_keeps_at_most_the_most_notes_even_when_adds_race() {
        let notes = Arc::new(Notes::on(Arc::new(Db::open_in_memory().unwrap())).unwrap());
        for i in 1..MAX_NOTES_PER_USER {
            notes
                .add("ann", &format!("note {i}"), i, None)
                .await
                .unwrap();
        }
        let adds = (0..5).map(|i| {
            let notes = notes.clone();
            tokio::spawn(async move { notes.add("ann", &format!("racing {i}"), 0, None).await })
        });
        let mut refused = Vec::new();
        for add in futures::future::join_all(adds).await {
            if let Err(e) = add.unwrap() {
                refused.push(e.to_string());
            }
        }
        assert_eq!(refused.len(), 4, "{refused:?}");
        assert_eq!(
            refused[0],
            "The user has 1000 notes, the most one person may keep (1000). Nothing was saved: \
             ask which notes to delete first."
        );
        let kept = notes.list("ann").await.unwrap();
        assert_eq!(kept.len() as i64, MAX_NOTES_PER_USER);
        assert!(notes.add("bob", "mine", 0, None).await.is_ok());
        assert!(
            notes
                .delete("ann", kept[0].id, None)
                .await
                .unwrap()
                .is_some()
        );
        assert!(notes.add("ann", "room again", 0, None).await.is_ok());
    }
}
