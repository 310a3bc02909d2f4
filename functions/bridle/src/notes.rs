//! A small demo domain for the local server: notes the assistant can add, list and delete.
//! It shows how tools plug in (thin handlers over a service, identity from `Ctx`, `_effects` to
//! refresh the page) until the planner example domain arrives.

use rusqlite::{Connection, params};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tools::{Ctx, Registry, RegistryError, ToolDef, ToolError, handler_fn};

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub id: i64,
    pub text: String,
    pub created_at_ms: i64,
}

/// Notes per user, in the server's SQLite file (table `demo_notes`).
#[derive(Debug)]
pub struct Notes {
    conn: Mutex<Connection>,
    /// The store's receipts are in the same file: a note added by a model's call commits the
    /// call's receipt with it (DESIGN invariant 10), so a resumed turn never adds it twice.
    receipts: bool,
}

const MAX_NOTE_CHARS: usize = 500;

impl Notes {
    pub fn open(path: &Path) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::init(conn)
    }

    pub fn open_in_memory() -> rusqlite::Result<Self> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> rusqlite::Result<Self> {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS demo_notes (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id TEXT NOT NULL,
                text TEXT NOT NULL,
                created_at_ms INTEGER NOT NULL
            );
            CREATE INDEX IF NOT EXISTS demo_notes_user ON demo_notes (user_id, id);",
        )?;
        Ok(Self {
            receipts: store_sqlite::receipts_here(&conn)?,
            conn: Mutex::new(conn),
        })
    }

    pub fn list(&self, user: &str) -> rusqlite::Result<Vec<Note>> {
        let conn = self.conn.lock().unwrap();
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
    }

    /// Add a note and, for a model's call (`call_key`), commit the call's receipt with it: the
    /// tool's output, built here from the new note. Crash story: both or neither are written,
    /// so a turn resumed after a crash answers the call from the receipt and adds nothing.
    pub fn add(
        &self,
        user: &str,
        text: &str,
        now_ms: i64,
        call_key: Option<&str>,
    ) -> Result<(Note, Value), ToolError> {
        let mut conn = self.conn.lock().unwrap();
        let tx = conn.transaction().map_err(internal)?;
        tx.execute(
            "INSERT INTO demo_notes (user_id, text, created_at_ms) VALUES (?1, ?2, ?3)",
            params![user, text, now_ms],
        )
        .map_err(internal)?;
        let note = Note {
            id: tx.last_insert_rowid(),
            text: text.to_owned(),
            created_at_ms: now_ms,
        };
        let output = json!({"note": note, "_effects": {"refresh": ["notes"]}});
        if let Some(call_key) = call_key.filter(|_| self.receipts) {
            let receipt = store::Receipt {
                call_key: call_key.to_owned(),
                output: output.clone(),
            };
            // A racing attempt recorded this call first: its note stands, this one is dropped
            // with the transaction, and the engine answers from the recorded receipt.
            store_sqlite::put_receipt(&tx, &receipt).map_err(ToolError::internal)?;
        }
        tx.commit().map_err(internal)?;
        Ok((note, output))
    }

    /// Delete the user's note and, for a model's call, commit the call's receipt with it (as
    /// [`Notes::add`]); `None` when the user has no such note (nothing written).
    pub fn delete(
        &self,
        user: &str,
        id: i64,
        call_key: Option<&str>,
    ) -> Result<Option<Value>, ToolError> {
        let mut conn = self.conn.lock().unwrap();
        let tx = conn.transaction().map_err(internal)?;
        let n = tx
            .execute(
                "DELETE FROM demo_notes WHERE id = ?1 AND user_id = ?2",
                params![id, user],
            )
            .map_err(internal)?;
        if n != 1 {
            return Ok(None);
        }
        let output = json!({"deleted": id, "_effects": {"refresh": ["notes"]}});
        if let Some(call_key) = call_key.filter(|_| self.receipts) {
            let receipt = store::Receipt {
                call_key: call_key.to_owned(),
                output: output.clone(),
            };
            store_sqlite::put_receipt(&tx, &receipt).map_err(ToolError::internal)?;
        }
        tx.commit().map_err(internal)?;
        Ok(Some(output))
    }
}

fn internal(e: rusqlite::Error) -> ToolError {
    ToolError::internal(e)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
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
                let notes = n.list(&ctx.user_id.0).map_err(internal)?;
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
                    n.add(&ctx.user_id.0, &text, now_ms(), ctx.call_key.as_deref())?;
                Ok(output)
            }
        }),
    )?;
    registry.register(
        ToolDef::new(
            "delete_note",
            "Delete one of the user's notes by id (ids come from list_notes).",
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
                n.delete(&ctx.user_id.0, id, ctx.call_key.as_deref())?
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
