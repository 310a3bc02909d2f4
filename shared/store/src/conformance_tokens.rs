//! The conformance checks of the [`Tokens`] port. `Tokens` is not part of [`crate::Store`]
//! (only the entrances that serve MCP need it), so adapters call [`check_tokens`] from a test
//! of their own.

use crate::{McpToken, StoreError, TokenScope, Tokens};

fn token(id: &str, user: &str, created_at_ms: i64) -> McpToken {
    McpToken {
        id: id.into(),
        hash: format!("{id:0>64}"),
        user: user.into(),
        name: format!("client {id}"),
        scope: TokenScope::Write,
        created_at_ms,
        expires_at_ms: None,
        last_used_ms: None,
        revoked_at_ms: None,
    }
}

/// Create, find by hash and by id, list per user (oldest first), refuse a taken id or hash,
/// revoke (first time kept), touch (never backwards).
pub async fn check_tokens(store: &dyn Tokens) {
    let t0 = 1_800_000_000_000;
    let mut first = token("t1", "alice", t0 + 10);
    first.scope = TokenScope::Read;
    first.expires_at_ms = Some(t0 + 90_000);
    let second = token("t2", "alice", t0 + 5);
    let bobs = McpToken {
        scope: TokenScope::Risky,
        ..token("t3", "bob", t0)
    };
    for t in [&first, &second, &bobs] {
        store.create_token(t).await.unwrap();
    }
    assert_eq!(
        store.token_by_hash(&first.hash).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.token("t3").await.unwrap(), Some(bobs.clone()));
    assert_eq!(store.token_by_hash(&"f".repeat(64)).await.unwrap(), None);
    assert_eq!(store.token("nope").await.unwrap(), None);

    // Oldest first; only the user's own.
    let alices = store.tokens_of(&"alice".into()).await.unwrap();
    assert_eq!(alices, vec![second.clone(), first.clone()]);
    assert_eq!(store.tokens_of(&"carol".into()).await.unwrap(), vec![]);

    // A taken id or a taken hash: conflict, nothing written.
    let same_id = McpToken {
        hash: "e".repeat(64),
        ..token("t1", "mallory", t0)
    };
    assert!(matches!(
        store.create_token(&same_id).await,
        Err(StoreError::Conflict { .. })
    ));
    let same_hash = McpToken {
        hash: first.hash.clone(),
        ..token("t9", "mallory", t0)
    };
    assert!(matches!(
        store.create_token(&same_hash).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.tokens_of(&"mallory".into()).await.unwrap(), vec![]);
    assert_eq!(store.token("t9").await.unwrap(), None);
    assert_eq!(
        store
            .token_by_hash(&first.hash)
            .await
            .unwrap()
            .unwrap()
            .user,
        "alice".into()
    );

    // Touch: moves forward only.
    store.touch_token("t1", t0 + 100).await.unwrap();
    store.touch_token("t1", t0 + 50).await.unwrap();
    store.touch_token("nope", t0 + 50).await.unwrap();
    let touched = store.token("t1").await.unwrap().unwrap();
    assert_eq!(touched.last_used_ms, Some(t0 + 100));

    // Revoke: the first time is kept; unknown is `false`.
    assert!(store.revoke_token("t2", t0 + 200).await.unwrap());
    assert!(store.revoke_token("t2", t0 + 300).await.unwrap());
    assert!(!store.revoke_token("nope", t0).await.unwrap());
    let revoked = store.token_by_hash(&second.hash).await.unwrap().unwrap();
    assert_eq!(revoked.revoked_at_ms, Some(t0 + 200));
    assert!(!revoked.is_live(t0 + 201));
    // Expiry is the caller's to judge, from the stored time.
    assert!(touched.is_live(t0 + 89_999));
    assert!(!touched.is_live(t0 + 90_000));
}
