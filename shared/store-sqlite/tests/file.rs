//! The database file across opens: data kept, schema versioned, newer files and bad rows refused.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use store::{
    ClaimWithLease, ClaimedWithLease, ConversationStore, MessageStore, StoreError, VisibleStore,
};
use store_sqlite::{SCHEMA_VERSION, SchemaTooNew, SqliteStore};
use transcript::{Conversation, Message, Part, Role};

/// A unique path in the temp dir; the file and its WAL companions go when it drops.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> Self {
        let file = format!("bridle-store-file-{}-{name}.sqlite", std::process::id());
        let path = Self(std::env::temp_dir().join(file));
        path.remove();
        path
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        self.remove();
    }
}

fn user_version(path: &Path) -> u32 {
    let conn = Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

fn hello(position: u64) -> Message {
    Message {
        conversation_id: "conv-a".into(),
        segment: 0,
        position,
        role: Role::User,
        parts: vec![Part::text("hello")],
        call: None,
        action_id: None,
        created_at_ms: 1,
    }
}

#[tokio::test]
async fn reopening_a_file_keeps_its_data_and_records_the_version() {
    let tmp = TempPath::new("reopen");
    let conv = Conversation::new("conv-a", "user-1", "web", "support");
    {
        let store = SqliteStore::open(&tmp.0).unwrap();
        store.create_conversation(&conv).await.unwrap();
        store.append_message(&hello(0)).await.unwrap();
    }
    const { assert!(SCHEMA_VERSION >= 1) };
    assert_eq!(user_version(&tmp.0), SCHEMA_VERSION);

    let store = SqliteStore::open(&tmp.0).unwrap();
    assert_eq!(
        store.conversation(&conv.id).await.unwrap(),
        Some(conv.clone())
    );
    assert_eq!(store.messages(&conv.id, 0).await.unwrap(), vec![hello(0)]);
    let err = store.append_message(&hello(0)).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err:?}");
    assert_eq!(user_version(&tmp.0), SCHEMA_VERSION);
}

#[test]
fn a_file_opens_in_wal_mode() {
    let tmp = TempPath::new("wal");
    let _store = SqliteStore::open(&tmp.0).unwrap();
    let conn = Connection::open(&tmp.0).unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_file_from_a_newer_build_is_refused_and_left_alone() {
    let tmp = TempPath::new("newer");
    drop(SqliteStore::open(&tmp.0).unwrap());
    let newer = SCHEMA_VERSION + 1;
    Connection::open(&tmp.0)
        .unwrap()
        .pragma_update(None, "user_version", newer)
        .unwrap();

    let err = SqliteStore::open(&tmp.0).unwrap_err();
    let StoreError::Unavailable(source) = &err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert_eq!(
        source.downcast_ref::<SchemaTooNew>(),
        Some(&SchemaTooNew {
            found: newer,
            known: SCHEMA_VERSION
        })
    );
    assert!(
        source.to_string().contains("newer than this build"),
        "{source}"
    );
    assert_eq!(user_version(&tmp.0), newer);
}

#[tokio::test]
async fn an_undecodable_row_is_corrupt() {
    let tmp = TempPath::new("corrupt");
    let store = SqliteStore::open(&tmp.0).unwrap();
    store.append_message(&hello(0)).await.unwrap();
    let conn = Connection::open(&tmp.0).unwrap();
    conn.execute(
        "INSERT INTO messages (conversation_id, position, segment, role, body)
         VALUES ('conv-a', 1, 0, 'user', '{not json')",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO visible (conversation_id, position, body) VALUES ('conv-a', 0, '[]')",
        [],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO conversations
             (id, user_id, channel, purpose, status, prompt_version, segment, turn, created_at_ms)
         VALUES ('conv-b', 'u', 'web', 'support', 'sleeping', '', 0, 0, 0)",
        [],
    )
    .unwrap();

    let err = store.messages(&"conv-a".into(), 0).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let err = store.visible(&"conv-a".into()).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let err = store.conversation(&"conv-b".into()).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

#[tokio::test]
async fn a_body_stored_under_the_wrong_key_is_corrupt() {
    let tmp = TempPath::new("wrong-key");
    let file = SqliteStore::open(&tmp.0).unwrap();
    file.append_message(&hello(3)).await.unwrap();
    let conn = Connection::open(&tmp.0).unwrap();
    conn.execute("UPDATE messages SET position = 4", [])
        .unwrap();
    let err = file.messages(&"conv-a".into(), 0).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

#[tokio::test]
async fn a_damaged_file_is_refused_at_open_with_one_sentence() {
    let tmp = TempPath::new("damaged");
    {
        let store = SqliteStore::open(&tmp.0).unwrap();
        store
            .create_conversation(&Conversation::new("conv-a", "user-1", "web", "support"))
            .await
            .unwrap();
        for p in 0..300 {
            store.append_message(&hello(p)).await.unwrap();
        }
    }
    // Fold the WAL into the file, then overwrite a page in the middle of the file.
    {
        let conn = Connection::open(&tmp.0).unwrap();
        conn.pragma_update(None, "journal_mode", "delete").unwrap();
    }
    let mut bytes = std::fs::read(&tmp.0).unwrap();
    let page = 4096;
    assert!(bytes.len() > 8 * page, "the file has pages to damage");
    for b in &mut bytes[5 * page..6 * page] {
        *b = 0xA5;
    }
    std::fs::write(&tmp.0, bytes).unwrap();
    let err = match SqliteStore::open(&tmp.0) {
        Ok(_) => panic!("a damaged file must not open"),
        Err(e) => e,
    };
    assert!(
        matches!(&err, StoreError::Corrupt { what, .. } if what == "the database file"),
        "{err:?}"
    );
    assert!(
        std::error::Error::source(&err)
            .unwrap()
            .to_string()
            .contains("quick_check"),
        "{err:?}"
    );
}

/// The claim with its lease reads the turn's start in its own write: what a reader would read
/// under the lease, for no round trip of its own.
#[tokio::test]
async fn a_claim_with_its_lease_reads_the_turns_start_in_the_same_write() {
    let tmp = TempPath::new("claim-reading");
    let store = SqliteStore::open(&tmp.0).unwrap();
    let conv = Conversation::new("conv-a", "user-1", "web", "support");
    store.create_conversation(&conv).await.unwrap();
    store.append_message(&hello(0)).await.unwrap();
    let writes = store.turn_writes().unwrap();
    let before = store.db().calls();
    let (claimed, read) = writes
        .claim_with_lease_reading(
            &ClaimWithLease {
                job_key: "web#m-1",
                now_ms: 1_000,
                claim_until_ms: 91_000,
                conversation: &conv.id,
                holder: "web#m-1",
                lease_until_ms: 61_000,
            },
            &conv.user_id,
        )
        .await
        .unwrap();
    let after = store.db().calls();
    assert_eq!(claimed, ClaimedWithLease::Both);
    let read = read.expect("read with the claim");
    assert_eq!(read.conversation, Some(conv.clone()));
    assert_eq!(read.messages, Some(vec![hello(0)]));
    assert_eq!(read.next_visible, Some(0));
    assert_eq!(
        (after.writes - before.writes, after.reads - before.reads),
        (1, 0),
        "one write, no read"
    );
    assert_eq!(
        writes
            .conversation_and_account(&conv.id, &conv.user_id)
            .await
            .unwrap(),
        read
    );
}
