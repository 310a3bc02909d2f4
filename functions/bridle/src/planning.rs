//! The local web chat's one user, when no sign-in is configured. The planner's tools, gate and
//! context are assembled with the engine in `assembly`, as on AWS.

use crate::server::LOCAL_USER;
use store::{Account, Accounts, StoreError};
use store_sqlite::SqliteStore;

/// The web chat's user gets an active account on first start; an existing one (perhaps paused
/// by the operator) is left as it is. The SQLite store never waits, so this runs inline.
pub fn ensure_local_account(store: &SqliteStore) -> Result<(), StoreError> {
    futures::executor::block_on(async {
        let user = LOCAL_USER.into();
        if store.account(&user).await?.is_none() {
            store.put_account(&Account::new(user, "You")).await?;
        }
        Ok(())
    })
}
