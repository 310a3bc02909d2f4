//! `bridle export` and `bridle eval` on the built binary: conversations made by real turns (the
//! engine `bridle serve` assembles, a scripted model, tools that really ran) on a SQLite file,
//! exported, and replayed — unchanged with the recorded answers, changed with a script that
//! calls a tool differently; and an export with the personal data redacted.

use backend::{Reply, ScriptedModel};
use bridle::{AppOptions, Db, OtherStore, build_app};
use engine::{NullSink, TurnInput};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use store::{Account, Email, Store};
use transcript::Conversation;

const PHONE: &str = "+491701234567";

/// The three turns' model answers (two of them call a tool first).
fn recorded_script() -> Vec<Reply> {
    vec![
        Reply::tool_call(
            "t1",
            "add_note",
            json!({"text": "call Bob at +1 555 010 9999 or bob@example.org"}),
        ),
        Reply::text("Saved it, Dana."),
        Reply::tool_call("t2", "list_notes", json!({})),
        Reply::text("You have one note: call Bob."),
        Reply::text("You're welcome!"),
    ]
}

const MESSAGES: [&str; 3] = [
    "Note: call Bob at +1 555 010 9999 or bob@example.org. My mail is dana@example.com",
    "What are my notes?",
    "Thanks! Text me at 491701234567 or on Telegram as tg-88231 if anything changes",
];

struct Recorded {
    db: PathBuf,
    /// Removed when dropped (pass or fail).
    dir: tempfile::TempDir,
    /// The requests the model got while the conversation was held.
    requests: Vec<backend::ChatRequest>,
}

/// A user with a name, an e-mail address and a linked WhatsApp number, and one conversation of
/// three turns held by the real engine on a SQLite file.
async fn a_recorded_conversation(name: &str) -> Recorded {
    recorded_on(name, None).await
}

/// As [`a_recorded_conversation`], with the conversations on `store` (DynamoDB) when given.
async fn recorded_on(name: &str, store: Option<Arc<dyn Store>>) -> Recorded {
    let dir = tempfile::Builder::new()
        .prefix(&format!("bridle-export-{name}-"))
        .tempdir()
        .unwrap();
    let db = dir.path().join("bridle.db");
    let model = Arc::new(ScriptedModel::new(recorded_script()));
    let app = build_app(
        model.clone(),
        AppOptions {
            db: Db::File(db.clone()),
            model_id: "scripted".into(),
            store: store.map(OtherStore),
            ..AppOptions::default()
        },
    )
    .unwrap();
    let store = app.store.clone();
    store
        .create_account(&Account {
            email: Some(Email::parse("dana@example.com").unwrap()),
            ..Account::new("u-dana", "Dana Lee")
        })
        .await
        .unwrap();
    store
        .bind_identity("whatsapp", PHONE, &"u-dana".into(), 1)
        .await
        .unwrap();
    store
        .bind_identity("telegram", "tg-88231", &"u-dana".into(), 1)
        .await
        .unwrap();
    store
        .create_conversation(&Conversation::new(
            "c-dana",
            "u-dana",
            "whatsapp",
            assembly::CHAT_PURPOSE,
        ))
        .await
        .unwrap();
    for (i, text) in MESSAGES.iter().enumerate() {
        let outcome = app
            .engine
            .run_turn(
                TurnInput {
                    sent_at_ms: None,
                    typed_yes: engine::TypedYes::Confirms,
                    conversation_id: "c-dana".into(),
                    text: (*text).into(),
                    action_id: tools::ActionId(format!("whatsapp#m{i}")),
                    attachments: vec![],
                    attachment_notes: vec![],
                    button_id: None,
                },
                &NullSink,
            )
            .await
            .unwrap();
        assert_eq!(outcome.end, engine::TurnEnd::Answered, "{outcome:?}");
    }
    assert_eq!(model.remaining(), 0, "every scripted answer was used");
    Recorded {
        db,
        dir,
        requests: model.requests(),
    }
}

fn bridle(args: &[&str], env: &[(&str, &str)]) -> Output {
    bridle_with(args, env.iter().map(|(k, v)| (*k, v.to_string())).collect())
}

fn bridle_with(args: &[&str], env: Vec<(&str, String)>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bridle"));
    cmd.args(args);
    for k in [
        "BRIDLE_DB",
        "TABLE_NAME",
        "BRIDLE_BACKEND",
        "BRIDLE_SCRIPT",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "BEDROCK_MODEL_ID",
        "BRIDLE_SYSTEM_PROMPT_FILE",
        "RUST_LOG",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(env);
    cmd.output().unwrap()
}

fn export(db: &Path, extra: &[&str]) -> String {
    let mut args = vec!["export", "--db", db.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = bridle(&args, &[]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn eval_json(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Option<i32>, Value) {
    let mut args = vec!["eval", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = bridle(&args, env);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    (out.status.code(), report)
}

#[tokio::test]
async fn an_export_replayed_with_its_own_answers_shows_no_change() {
    let rec = a_recorded_conversation("roundtrip").await;
    let lines = export(&rec.db, &[]);
    assert_eq!(lines.lines().count(), 1);
    let line: Value = serde_json::from_str(lines.trim()).unwrap();
    assert_eq!(line["format"], "bridle-export/1");
    assert_eq!(line["conversation"]["id"], "c-dana");
    assert_eq!(line["conversation"]["user_id"], "u-dana");
    let rows = line["segments"][0]["messages"].as_array().unwrap();
    // 3 user messages, 5 answers (each with its call record), 2 tool messages.
    assert_eq!(rows.len(), 10, "{rows:#?}");
    assert!(rows.iter().any(|m| m["role"] == "tool"));
    assert!(
        rows.iter()
            .filter(|m| m["role"] == "assistant")
            .all(|m| m["call"]["backend"] == "scripted")
    );
    // What the user saw (the engine records the user's words; a channel's sender the reply).
    assert_eq!(line["visible"].as_array().unwrap().len(), 3);

    let file = rec.dir.path().join("conversations.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let (code, report) = eval_json(&file, &[], &[("BRIDLE_BACKEND", "scripted")]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["changed_turns"], 0, "{report:#}");
    assert_eq!(report["turns"].as_array().unwrap().len(), 3);
    assert_eq!(report["replayed"]["tool_calls"], 2);
    let first = &report["turns"][0];
    assert_eq!(first["verdict"], "same");
    assert_eq!(first["replayed"]["tool_calls"][0]["name"], "add_note");
    assert_eq!(first["replayed"]["stop_reason"], "end_turn");
    assert_eq!(first["recorded"]["tokens"], first["replayed"]["tokens"]);
    assert_eq!(
        report["recorded"]["reply_chars"],
        report["replayed"]["reply_chars"]
    );

    // The table says the same.
    let table = bridle(
        &["eval", file.to_str().unwrap()],
        &[("BRIDLE_BACKEND", "scripted")],
    );
    assert!(table.status.success(), "{table:?}");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("0 of 3 turns changed") && text.contains("passed"),
        "{text}"
    );
}

/// A script that saves a different note in the first turn, and answers the rest as recorded.
fn changed_script(dir: &Path) -> PathBuf {
    let path = dir.join("changed.json");
    let script = json!({"replies": [
        {"steps": [{"call": {"id": "x1", "name": "add_note", "input": {"text": "call Bob"}}},
                   {"stop": "tool_use"}]},
        {"steps": [{"say": "Saved it, Dana."}, {"stop": "end_turn"}]},
        {"steps": [{"call": {"id": "x2", "name": "list_notes", "input": {}}}, {"stop": "tool_use"}]},
        {"steps": [{"say": "You have one note: call Bob."}, {"stop": "end_turn"}]},
        {"steps": [{"say": "You're welcome!"}, {"stop": "end_turn"}]}
    ]});
    std::fs::write(&path, script.to_string()).unwrap();
    path
}

#[tokio::test]
async fn a_changed_tool_call_is_reported_and_fails_the_run() {
    let rec = a_recorded_conversation("changed").await;
    let file = rec.dir.path().join("conversations.jsonl");
    std::fs::write(&file, export(&rec.db, &[])).unwrap();
    let script = changed_script(rec.dir.path());
    let env = [
        ("BRIDLE_BACKEND", "scripted"),
        ("BRIDLE_SCRIPT", script.to_str().unwrap()),
    ];
    let (code, report) = eval_json(&file, &[], &env);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["changed_turns"], 1, "{report:#}");
    assert_eq!(report["passed"], false);
    let first = &report["turns"][0];
    assert_eq!(first["verdict"], "changed");
    assert_eq!(
        first["replayed"]["tool_calls"][0]["arguments"]["text"],
        "call Bob"
    );
    assert_eq!(first["replayed"]["not_recorded"], 1);
    let changes = first["changes"].to_string();
    assert!(changes.contains("tool calls: add_note"), "{changes}");
    assert!(changes.contains("not recorded"), "{changes}");
    assert_eq!(report["turns"][1]["verdict"], "same");
    assert_eq!(report["turns"][2]["verdict"], "same");

    // The threshold is the CI's to choose.
    let (code, report) = eval_json(&file, &["--max-changed", "1"], &env);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["passed"], true);
}

#[tokio::test]
async fn the_replay_sends_the_request_the_engine_sent() {
    let rec = a_recorded_conversation("request").await;
    let conversations = bridle::eval::read_export(&export(&rec.db, &[])).unwrap();
    let model = Arc::new(ScriptedModel::new(recorded_script()));
    let app = build_app(
        model.clone(),
        AppOptions {
            model_id: "scripted".into(),
            ..AppOptions::default()
        },
    )
    .unwrap();
    let prices = budget::PriceTable::defaults();
    let report = bridle::eval::Evaluator {
        engine: &app.engine,
        answerer: bridle::eval::Answerer::Engine,
        prices: &prices,
    }
    .run(&conversations)
    .await;
    assert_eq!(report.changed_turns, 0, "{}", report.table());
    // Byte for byte: the same system prompt, tools, history and context blocks as recorded.
    assert_eq!(model.requests().len(), rec.requests.len());
    for (replayed, recorded) in model.requests().iter().zip(&rec.requests) {
        assert_eq!(
            serde_json::to_string(replayed).unwrap(),
            serde_json::to_string(recorded).unwrap()
        );
    }
    let first_user = rec.requests[0].messages[0].parts[0].as_text().unwrap();
    assert!(first_user.contains("<context>") && first_user.contains("Dana Lee"));
}

#[tokio::test]
async fn a_redacted_export_has_no_personal_data_and_still_replays() {
    let rec = a_recorded_conversation("redact").await;
    let plain = export(&rec.db, &[]);
    let redacted = export(&rec.db, &["--redact"]);
    for secret in [
        "Dana",
        // In any case: the account's id is u-dana.
        "dana",
        "Lee",
        "dana@example.com",
        "bob@example.org",
        "491701234567",
        "555 010 9999",
        "tg-88231",
    ] {
        assert!(plain.contains(secret), "the test data has {secret}");
        assert!(!redacted.contains(secret), "{secret} is left in {redacted}");
    }
    let line: Value = serde_json::from_str(redacted.trim()).unwrap();
    assert_eq!(line["redacted"], true);
    let rows = &line["segments"][0]["messages"];
    let user = rows[0]["parts"][0]["text"].as_str().unwrap();
    // The context block names the user by placeholder; the message's own data too.
    assert!(
        user.contains("<context>") && user.contains("<person-1>"),
        "{user}"
    );
    // Known values were numbered first (the account's e-mail, the linked number), then the
    // values found by their shape.
    assert!(
        user.contains("call Bob at <phone-2> or <email-2>. My mail is <email-1>"),
        "{user}"
    );
    // The same values are the same placeholders in the tool call the model made.
    let note = rows[1]["parts"][0]["input"]["text"].as_str().unwrap();
    assert_eq!(note, "call Bob at <phone-2> or <email-2>");
    assert_eq!(rows[1]["parts"][0]["name"], "add_note");
    // The answer named the user; Bob is no account of this deployment's, so he stays.
    assert!(redacted.contains("Saved it, <person-1>."));
    // The linked accounts' ids, phone-shaped or not, from the identity table.
    assert!(redacted.contains("Text me at <phone-1> or on Telegram as <handle-1>"));

    let file = rec.dir.path().join("redacted.jsonl");
    std::fs::write(&file, &redacted).unwrap();
    let (code, report) = eval_json(&file, &[], &[("BRIDLE_BACKEND", "scripted")]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["changed_turns"], 0);
}

#[tokio::test]
async fn filters_pick_conversations_and_bad_input_gets_one_sentence() {
    let rec = a_recorded_conversation("filters").await;
    assert_eq!(
        export(&rec.db, &["--user", "dana@example.com"])
            .lines()
            .count(),
        1
    );
    assert_eq!(
        export(&rec.db, &["--conversation", "c-dana"])
            .lines()
            .count(),
        1
    );
    assert_eq!(export(&rec.db, &["--since", "1d"]).lines().count(), 1);
    assert_eq!(
        export(&rec.db, &["--since", "2099-01-01"]).lines().count(),
        0
    );

    let db = rec.db.to_str().unwrap();
    let unknown = bridle(&["export", "--db", db, "--user", "nobody@example.com"], &[]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("No account has the e-mail"));
    let bad_since = bridle(&["export", "--db", db, "--since", "last week"], &[]);
    assert_eq!(bad_since.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad_since.stderr).contains("--since"));

    let not_an_export = rec.dir.path().join("notes.txt");
    std::fs::write(&not_an_export, "hello\n").unwrap();
    let out = bridle(
        &["eval", not_an_export.to_str().unwrap()],
        &[("BRIDLE_BACKEND", "scripted")],
    );
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 1 of the export"), "{err}");
    let no_model = bridle(&["eval", not_an_export.to_str().unwrap()], &[]);
    assert_eq!(no_model.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&no_model.stderr).contains("bridle eval needs a model"));
}

#[tokio::test]
async fn a_turn_that_now_fails_is_reported_as_failing() {
    let rec = a_recorded_conversation("fails").await;
    let file = rec.dir.path().join("conversations.jsonl");
    std::fs::write(&file, export(&rec.db, &[])).unwrap();
    // The recorded answers, but the last turn's model call is refused.
    let script = rec.dir.path().join("failing.json");
    let replies = json!({"replies": [
        {"steps": [{"call": {"id": "t1", "name": "add_note",
                             "input": {"text": "call Bob at +1 555 010 9999 or bob@example.org"}}},
                   {"stop": "tool_use"}]},
        {"steps": [{"say": "Saved it, Dana."}, {"stop": "end_turn"}]},
        {"steps": [{"call": {"id": "t2", "name": "list_notes", "input": {}}}, {"stop": "tool_use"}]},
        {"steps": [{"say": "You have one note: call Bob."}, {"stop": "end_turn"}]},
        {"error": "invalid_request"}
    ]});
    std::fs::write(&script, replies.to_string()).unwrap();
    let env = [
        ("BRIDLE_BACKEND", "scripted"),
        ("BRIDLE_SCRIPT", script.to_str().unwrap()),
    ];
    let (code, report) = eval_json(&file, &[], &env);
    assert_eq!(code, Some(1), "{report:#}");
    assert_eq!(report["changed_turns"], 1, "{report:#}");
    assert_eq!(report["newly_failing_turns"], 1);
    assert_eq!(report["turns"][0]["verdict"], "same");
    let last = &report["turns"][2];
    assert_eq!(last["verdict"], "fails");
    assert_eq!(
        last["replayed"]["failure"],
        "the model call failed (invalid_request)"
    );
    let table = bridle(&["eval", file.to_str().unwrap()], &env);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("now fails: the model call failed"), "{text}");
    assert!(
        text.contains("1 of 3 turns changed (1 now failing)"),
        "{text}"
    );
}

fn moto() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!("AWS_ENDPOINT_URL is not set: run these tests through scripts/test (moto)")
    })
}

#[tokio::test]
async fn conversations_on_dynamodb_export_and_replay_unchanged() {
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&aws);
    let table = format!("bridle-export-{}", uuid::Uuid::new_v4());
    store_dynamodb::create_table(&client, &table).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(store_dynamodb::DynamoStore::new(client, table.clone()));
    let rec = recorded_on("dynamodb", Some(store)).await;
    let env = vec![
        ("AWS_ENDPOINT_URL", moto()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ];
    let out = bridle_with(
        &[
            "export",
            "--dynamodb-table",
            &table,
            "--user",
            "dana@example.com",
            "--redact",
        ],
        env,
    );
    assert!(out.status.success(), "{out:?}");
    let lines = String::from_utf8(out.stdout).unwrap();
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert!(!lines.contains("Dana") && lines.contains("<person-1>"));
    let file = rec.dir.path().join("dynamodb.jsonl");
    std::fs::write(&file, &lines).unwrap();
    let (code, report) = eval_json(&file, &[], &[("BRIDLE_BACKEND", "scripted")]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["turns"].as_array().unwrap().len(), 3);
    assert_eq!(report["changed_turns"], 0);
}

#[tokio::test]
async fn a_turn_without_a_model_call_is_skipped_not_changed() {
    let rec = a_recorded_conversation("paused").await;
    let app = build_app(
        Arc::new(ScriptedModel::new([])),
        AppOptions {
            db: Db::File(rec.db.clone()),
            ..AppOptions::default()
        },
    )
    .unwrap();
    // An operator takes over: the next message is recorded and no model is called.
    let mut conv = app
        .store
        .conversation(&"c-dana".into())
        .await
        .unwrap()
        .unwrap();
    conv.status = transcript::ConversationStatus::Paused;
    app.store.update_conversation(&conv).await.unwrap();
    let outcome = app
        .engine
        .run_turn(
            TurnInput {
                sent_at_ms: None,
                typed_yes: engine::TypedYes::Confirms,
                conversation_id: "c-dana".into(),
                text: "Is anyone there?".into(),
                action_id: tools::ActionId("whatsapp#m9".into()),
                attachments: vec![],
                attachment_notes: vec![],
                button_id: None,
            },
            &NullSink,
        )
        .await
        .unwrap();
    assert_eq!(outcome.end, engine::TurnEnd::Paused);
    let file = rec.dir.path().join("conversations.jsonl");
    std::fs::write(&file, export(&rec.db, &[])).unwrap();
    let (code, report) = eval_json(&file, &[], &[("BRIDLE_BACKEND", "scripted")]);
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["turns"].as_array().unwrap().len(), 4);
    assert_eq!(report["turns"][3]["verdict"], "skipped");
    assert_eq!(report["changed_turns"], 0);
}
