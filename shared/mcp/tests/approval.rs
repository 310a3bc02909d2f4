//! The page's side of a risky MCP call's approval, on the real embedded store: an answer is
//! taken once (of answers at once, one approves), only by the token's owner while the token
//! is live, and only for what the page showed.

use mcp::approval::{Answered, Asked, answer, question};
use mcp::confirm::{approval_key, token_conversation};
use std::sync::Arc;
use store::{Confirmations, McpToken, Pending, TokenScope, Tokens};
use store_sqlite::SqliteStore;
use transcript::UserId;

const NOW: i64 = 1_700_000_000_000;
/// Ids of the shapes Bridle makes (the page looks up no other).
const TOK_A: &str = "tok_aaaaaaaaaaaa";
const TOK_B: &str = "tok_bbbbbbbbbbbb";
const H1: &str = "1111111111111111111111111111111111111111111111111111111111111111";

fn token(id: &str, user: &str) -> McpToken {
    McpToken {
        id: id.into(),
        hash: format!("hash-of-{id}"),
        user: user.into(),
        name: "Claude at home".into(),
        scope: TokenScope::Risky,
        created_at_ms: NOW - 1_000,
        expires_at_ms: None,
        last_used_ms: None,
        revoked_at_ms: None,
    }
}

async fn asked_store() -> Arc<SqliteStore> {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store.create_token(&token(TOK_A, "ann")).await.unwrap();
    store.create_token(&token(TOK_B, "ben")).await.unwrap();
    for id in [TOK_A, TOK_B] {
        store
            .put_pending(&Pending {
                conversation: token_conversation(id),
                hash: H1.into(),
                created_on_action: "mcp:first".into(),
                description: "Cancel Spring Open".into(),
                expires_at_ms: NOW + 60_000,
            })
            .await
            .unwrap();
    }
    store
}

fn asked<'a>(user: &'a UserId, token_id: &'a str) -> Asked<'a> {
    Asked {
        user,
        token_id,
        hash: H1,
    }
}

#[tokio::test]
async fn of_answers_at_once_one_approves_and_the_approval_is_the_calls_to_take() {
    let store = asked_store().await;
    let ann = UserId::from("ann");
    let answers = (0..8).map(|i| {
        let store = store.clone();
        let ann = ann.clone();
        async move {
            let action = format!("web:{i}");
            answer(
                store.as_ref(),
                store.as_ref(),
                asked(&ann, TOK_A),
                "Cancel Spring Open",
                true,
                &action,
                NOW,
            )
            .await
            .unwrap()
        }
    });
    let answered = futures::future::join_all(answers).await;
    let approved = answered
        .iter()
        .filter(|a| **a == Answered::Approved)
        .count();
    assert_eq!(approved, 1, "{answered:?}");
    assert!(
        answered
            .iter()
            .all(|a| matches!(a, Answered::Approved | Answered::NotFound))
    );
    // The call made again takes the approval once.
    let taken = store
        .take_pending(&approval_key(TOK_A), H1, "mcp:again", NOW + 1)
        .await
        .unwrap()
        .expect("approved");
    assert_eq!(taken.description, "Cancel Spring Open");
    assert_eq!(
        store
            .take_pending(&approval_key(TOK_A), H1, "mcp:third", NOW + 2)
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn only_the_live_tokens_owner_answers_and_only_what_the_page_showed() {
    let store = asked_store().await;
    let (ann, ben) = (UserId::from("ann"), UserId::from("ben"));
    let answer_as = |user: &UserId, seen: &str| {
        let store = store.clone();
        let user = user.clone();
        let seen = seen.to_owned();
        async move {
            answer(
                store.as_ref(),
                store.as_ref(),
                asked(&user, TOK_A),
                &seen,
                true,
                "web:1",
                NOW,
            )
            .await
            .unwrap()
        }
    };
    // Ben cannot read or answer Ann's question; it is still hers to answer.
    let read_by = |user: UserId| {
        let store = store.clone();
        async move {
            question(store.as_ref(), store.as_ref(), asked(&user, TOK_A), NOW)
                .await
                .unwrap()
        }
    };
    assert_eq!(read_by(ben.clone()).await, None);
    assert_eq!(
        answer_as(&ben, "Cancel Spring Open").await,
        Answered::NotFound
    );
    let shown = read_by(ann.clone()).await.expect("Ann's question");
    assert_eq!(shown.client, "Claude at home");
    // An answer to another description changes nothing, and the question stays.
    assert_eq!(answer_as(&ann, "Rename it").await, Answered::Changed);
    assert_eq!(read_by(ann.clone()).await, Some(shown));
    // Revoked, the token's question is gone from the page.
    store.revoke_token(TOK_A, NOW - 1).await.unwrap();
    assert_eq!(read_by(ann.clone()).await, None);
    assert_eq!(
        answer_as(&ann, "Cancel Spring Open").await,
        Answered::NotFound
    );
    assert_eq!(
        store
            .take_pending(&approval_key(TOK_A), H1, "mcp:again", NOW)
            .await
            .unwrap(),
        None,
        "nothing was approved"
    );
}

/// Ids of other shapes are no question, and are not looked up.
#[tokio::test]
async fn ids_bridle_does_not_make_read_as_no_question() {
    let store = asked_store().await;
    let ann = UserId::from("ann");
    for (token_id, hash) in [("..", H1), (TOK_A, "conversations"), (TOK_A, "h1")] {
        let asked = Asked {
            user: &ann,
            token_id,
            hash,
        };
        assert_eq!(
            question(store.as_ref(), store.as_ref(), asked, NOW)
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            answer(
                store.as_ref(),
                store.as_ref(),
                asked,
                "Cancel Spring Open",
                true,
                "web:1",
                NOW
            )
            .await
            .unwrap(),
            Answered::NotFound
        );
    }
}
