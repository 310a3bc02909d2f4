//! Retention on SQLite: the shared checks (an expired lobby goes, with its words; nothing else
//! does), on an in-memory database.

store::retention_conformance_tests!(store_sqlite::SqliteStore::open_in_memory().unwrap());
