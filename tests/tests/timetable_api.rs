//! `GET /api/timetable` on the real local server with sign-in (the test issuer): two people
//! each have an event whose program their assistant made by tool calls (a scripted model);
//! each reads exactly their own timetable — a grid per day, rooms as columns, sessions with
//! start, end, track and speakers, the break — and never the other's. Every planner change in
//! the turn's stream carries the `effects` the page refreshes on. On SQLite and on DynamoDB
//! (moto).

use backend::{Reply, ScriptedModel};
use bridle::auth::{Oidc, OidcSettings, Signup};
use bridle::{AppOptions, OtherStore, SignInOptions, build_app};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tests::fake_issuer::{FakeIssuer, Person};
use tests::program_script::{XSS_TITLE, build_program, create_event};
use tests::server::{TestServer, parse_sse};
use transcript::UserId;

const CLIENT: &str = "bridle-test";

struct Site {
    server: TestServer,
    issuer: FakeIssuer,
    model: Arc<ScriptedModel>,
    store: Arc<dyn Store>,
    http: reqwest::Client,
}

/// A signed-in person: their session cookie, CSRF token and user id.
struct Signed {
    cookie: String,
    csrf: String,
    user: UserId,
}

async fn site(store: Option<Arc<dyn Store>>) -> Site {
    let issuer = FakeIssuer::start(CLIENT).await;
    let (listener, base) = TestServer::bind().await;
    let oidc = Oidc::discover(OidcSettings {
        issuer: issuer.issuer.clone(),
        client_id: CLIENT.into(),
        client_secret: Some("client-secret".into()),
        redirect_url: format!("{base}/auth/callback"),
    })
    .await
    .unwrap();
    let options = AppOptions {
        sign_in: Some(SignInOptions {
            oidc: Arc::new(oidc),
            public_url: base,
            signup: Signup::Open,
            session_ttl: Duration::from_secs(3600),
        }),
        store: store.map(OtherStore),
        ..AppOptions::default()
    };
    let model = Arc::new(ScriptedModel::new([]));
    let app = build_app(model.clone(), options).unwrap();
    let store = app.store.clone();
    Site {
        server: TestServer::serve_on(listener, app).await,
        issuer,
        model,
        store,
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    }
}

fn cookie(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get_all(SET_COOKIE)
        .iter()
        .find_map(|v| {
            let line = v.to_str().ok()?;
            Some(
                line.strip_prefix(&format!("{name}="))?
                    .split(';')
                    .next()?
                    .to_owned(),
            )
        })
        .unwrap_or_else(|| panic!("no {name} cookie"))
}

fn location(res: &reqwest::Response) -> String {
    res.headers()[LOCATION].to_str().unwrap().to_owned()
}

impl Site {
    /// The code flow as a browser follows it.
    async fn sign_in(&self, person: Person) -> Signed {
        self.issuer.sign_in_as(person);
        let login = self
            .http
            .get(self.server.url("/auth/login"))
            .send()
            .await
            .unwrap();
        let state = cookie(&login, "bridle_login");
        let back = self.http.get(location(&login)).send().await.unwrap();
        let done = self
            .http
            .get(location(&back))
            .header(COOKIE, format!("bridle_login={state}"))
            .send()
            .await
            .unwrap();
        assert_eq!(done.status(), StatusCode::SEE_OTHER);
        let mut signed = Signed {
            cookie: cookie(&done, "bridle_session"),
            csrf: String::new(),
            user: UserId::from(""),
        };
        let session = self.get_json(&signed, "/api/session").await;
        signed.csrf = session["csrf"].as_str().unwrap().to_owned();
        signed.user = UserId::from(session["user"]["id"].as_str().unwrap());
        signed
    }

    async fn get(&self, who: &Signed, path: &str) -> reqwest::Response {
        self.http
            .get(self.server.url(path))
            .header(COOKIE, format!("bridle_session={}", who.cookie))
            .send()
            .await
            .unwrap()
    }

    async fn get_json(&self, who: &Signed, path: &str) -> Value {
        let res = self.get(who, path).await;
        assert_eq!(res.status(), StatusCode::OK, "GET {path}");
        res.json().await.unwrap()
    }

    /// One message in a new conversation of `who`'s, answered by `replies`; the stream's
    /// events.
    async fn turn(&self, who: &Signed, replies: Vec<Reply>) -> Vec<(String, Value)> {
        for reply in replies {
            self.model.push(reply);
        }
        let created = self
            .http
            .post(self.server.url("/api/conversations"))
            .header(COOKIE, format!("bridle_session={}", who.cookie))
            .header("X-CSRF-Token", &who.csrf)
            .send()
            .await
            .unwrap();
        let conv: Value = created.json().await.unwrap();
        let res = self
            .http
            .post(self.server.url(&format!(
                "/api/conversations/{}/messages",
                conv["id"].as_str().unwrap()
            )))
            .header(COOKIE, format!("bridle_session={}", who.cookie))
            .header("X-CSRF-Token", &who.csrf)
            .json(&json!({"text": "plan it"}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        parse_sse(&res.text().await.unwrap())
    }

    /// `who`'s event made by the assistant, with its program and timetable; its id.
    async fn planned_event(&self, who: &Signed, title: &str) -> String {
        self.turn(who, vec![create_event(title), Reply::text("Created.")])
            .await;
        let events = self
            .store
            .records_of(&who.user, planner::EVENT)
            .await
            .unwrap();
        assert_eq!(events.len(), 1, "one event of {title}'s owner");
        let event = events[0].id.clone();
        let streamed = self
            .turn(who, vec![build_program(&event), Reply::text("Built.")])
            .await;
        let effects: Vec<&Value> = streamed
            .iter()
            .filter(|(name, _)| name == "effects")
            .map(|(_, data)| &data["effects"])
            .collect();
        assert_eq!(
            effects,
            vec![&json!({"refresh": ["planner"], "event_id": event}); 6],
            "set_rooms, four add_session and build_schedule each say the planner changed"
        );
        event
    }
}

/// `(title, room, start, end)` of a day's sessions, as the API orders them.
fn sessions(day: &Value) -> Vec<(String, String, String, String)> {
    day["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap().to_owned();
            (text("title"), text("room"), text("start"), text("end"))
        })
        .collect()
}

fn row(title: &str, room: &str, start: &str, end: &str) -> (String, String, String, String) {
    (title.into(), room.into(), start.into(), end.into())
}

async fn each_reads_only_their_own_timetable(s: Site) {
    let alice = s
        .sign_in(Person::new("sub-alice", "alice@example.com"))
        .await;
    let bob = s.sign_in(Person::new("sub-bob", "bob@example.com")).await;
    let alices = s.planned_event(&alice, "Alice Summit").await;
    let bobs = s.planned_event(&bob, "Bob Private Retreat").await;

    let res = s.get(&alice, "/api/timetable").await;
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    assert!(
        !text.contains("Bob Private Retreat") && !text.contains(&bobs),
        "{text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    let events = body["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{body}");
    let event = &events[0];
    assert_eq!(event["event_id"], json!(alices));
    assert_eq!(event["title"], "Alice Summit");
    assert_eq!(event["status"], "draft");
    assert_eq!(event["built"], true);
    assert_eq!(event["unplaced"], 0);
    let days = event["days"].as_array().unwrap();
    assert_eq!(days.len(), 2, "a grid per day: {event}");
    let day1 = &days[0];
    assert_eq!(day1["day"], 1);
    assert_eq!(
        (&day1["start"], &day1["end"], &day1["start_minute"]),
        (&json!("09:00"), &json!("13:00"), &json!(540))
    );
    assert_eq!(day1["rooms"], json!(["Main Hall", "Room B"]));
    assert_eq!(
        sessions(day1),
        vec![
            row("Keynote", "Main Hall", "09:00", "10:00"),
            row(XSS_TITLE, "Room B", "09:00", "09:45"),
            row("Rust in Production", "Main Hall", "11:00", "12:00"),
        ]
    );
    let keynote = &day1["sessions"][0];
    assert_eq!(keynote["track"], "Plenary");
    assert_eq!(keynote["speakers"], json!(["Keynote speaker"]));
    assert_eq!(
        (&keynote["start_minute"], &keynote["end_minute"]),
        (&json!(540), &json!(600))
    );
    assert!(keynote["session_id"].as_str().unwrap().starts_with("ss-"));
    assert_eq!(
        day1["breaks"],
        json!([{"name": "Coffee", "start": "10:30", "end": "10:45", "start_minute": 630, "end_minute": 645}])
    );
    let day2 = &days[1];
    assert_eq!(
        sessions(day2),
        vec![row("Workshop", "Room B", "09:30", "11:00")]
    );
    assert_eq!(day2["breaks"], json!([]));

    let theirs = s.get_json(&bob, "/api/timetable").await;
    let listed: Vec<&Value> = theirs["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["event_id"])
        .collect();
    assert_eq!(
        listed,
        vec![&json!(bobs)],
        "bob sees only his own: {theirs}"
    );
    assert!(!theirs.to_string().contains("Alice Summit"));

    // Without a session: the gate answers, not the planner.
    let anonymous = s
        .http
        .get(s.server.url("/api/timetable"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn sqlite_each_person_reads_only_their_own_timetable() {
    each_reads_only_their_own_timetable(site(None).await).await;
}

#[tokio::test]
async fn dynamodb_each_person_reads_only_their_own_timetable() {
    let store: Arc<dyn Store> = tests::moto::dynamo_store("timetable").await;
    each_reads_only_their_own_timetable(site(Some(store)).await).await;
}
