//! The store's side of the shared [`sqlite_db::Db`]: its writer thread with group commit and
//! its reader threads (see that crate), with their failures said as [`StoreError`]s.

use std::sync::Arc;
use store::StoreError;

pub(crate) use sqlite_db::Db as Shared;

/// The shared database, answering in the store's errors.
#[derive(Debug, Clone)]
pub(crate) struct Db(pub(crate) Arc<Shared>);

impl Db {
    /// Run `f` in the next group commit; its result once that commit survives power loss. The
    /// default for every write something outside the process may be told about.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.0.write_durable(f).await.map_err(failed)?
    }

    /// Run `f` in the next group commit; its result at that commit, and the WAL synced after it
    /// without waiting (`sqlite_db::Db::write_then_sync`). For the record of a reply that went
    /// out: it and everything after it survive power loss about one sync later.
    pub(crate) async fn write_then_sync<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.0.write_then_sync(f).await.map_err(failed)?
    }

    /// Run `f` in the next group commit; its result once that commit survives `kill -9`. For a
    /// turn's own progress (claim, lease, budget, transcript, receipts): the sync begun by the
    /// turn's reply record ([`Db::write_then_sync`]) makes it durable too; a power loss before
    /// that rolls it back with everything after it, the state a `kill -9` a moment earlier
    /// leaves, and the still-queued job resumes the turn.
    pub(crate) async fn write_resumable<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.0.write(f).await.map_err(failed)?
    }

    /// [`Db::write`] for a caller that is not async: blocks until durable.
    pub(crate) fn write_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.0.write_blocking(f).map_err(failed)?
    }

    /// Run `f` on a reading connection.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.0.read(f).await.map_err(failed)?
    }
}

fn failed(e: sqlite_db::Failure) -> StoreError {
    StoreError::Unavailable(Box::new(e))
}

/// Run `f`, a few reads that must agree with each other, inside one savepoint: they see one
/// snapshot of the database, whether on a reader's connection or inside the writer's batch.
pub(crate) fn snapshot<T>(
    conn: &rusqlite::Connection,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    sqlite_db::exec(conn, "SAVEPOINT snapshot").map_err(crate::error::unavailable)?;
    let out = f();
    let _ = sqlite_db::exec(conn, "RELEASE snapshot");
    out
}
