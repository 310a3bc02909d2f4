//! `bridle serve` configuration: read once at start-up from the environment into a typed
//! struct; every problem is reported at once.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Which model the server talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendChoice {
    /// An OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, vLLM, llama.cpp, LiteLLM).
    OpenAi {
        base_url: String,
        model: String,
        api_key: Option<String>,
    },
    /// Amazon Bedrock ConverseStream.
    Bedrock { model_id: String },
    /// A script file played by the scripted model (no network).
    Scripted { script: PathBuf },
    /// No model: the assistant says how to plug one in.
    None,
}

impl BackendChoice {
    /// Which settings apply (some exist on one kind of provider only).
    pub fn provider(&self) -> assembly::Provider {
        match self {
            BackendChoice::OpenAi { .. } => assembly::Provider::OpenAiCompatible,
            BackendChoice::Bedrock { .. } => assembly::Provider::Bedrock,
            BackendChoice::Scripted { .. } | BackendChoice::None => assembly::Provider::Other,
        }
    }
}

/// Everything `bridle serve` needs, parsed and checked.
#[derive(Clone, PartialEq, Eq)]
pub struct ServeConfig {
    pub addr: SocketAddr,
    pub db: PathBuf,
    pub backend: BackendChoice,
    /// Longest user message accepted, in characters.
    pub max_message_chars: usize,
    /// Turns run at once (across conversations; one per conversation at a time).
    pub max_concurrent_turns: usize,
    /// `BRIDLE_SHUTDOWN_GRACE_S`: how long a stop (SIGTERM, SIGINT) may take.
    pub shutdown_grace: std::time::Duration,
    /// `BRIDLE_HTTP_HEADER_TIMEOUT_S`, `BRIDLE_HTTP_REQUEST_TIMEOUT_S`,
    /// `BRIDLE_HTTP_MAX_CONNECTIONS`, `BRIDLE_HTTP_MAX_CONNECTIONS_PER_CLIENT`,
    /// `BRIDLE_HTTP_WRITE_STALL_S`.
    pub http: crate::server::HttpLimits,
    /// Caps, prices and the reservation size (`BRIDLE_CAP_*`, `BRIDLE_PRICES_FILE`, …).
    pub budget: budget::BudgetConfig,
    /// `BRIDLE_ADMIN_TOKEN`: opens `/admin/budget`.
    pub admin_token: Option<String>,
    /// The frozen system prompt: `BRIDLE_SYSTEM_PROMPT_FILE`, or the built-in one.
    pub prompt: engine::SystemPrompt,
    /// `BRIDLE_CONFIRMATION_TTL_S`: how long a held risky call may be confirmed.
    pub confirmation: engine::ConfirmationOptions,
    /// Model-call timeouts and inference settings (`BRIDLE_MODEL_TIMEOUT_S`,
    /// `BRIDLE_MAX_OUTPUT_TOKENS`, `BRIDLE_TOOL_CHOICE`, …), checked for the chosen backend.
    pub model: assembly::ModelSettings,
    /// `BRIDLE_MCP_REQUESTS_PER_MINUTE`: each user's MCP requests per minute, all their access
    /// tokens together.
    pub mcp_rate: mcp::RateLimit,
    /// `BRIDLE_WEB_WRITES_PER_MINUTE`: each signed-in user's changes per minute through the
    /// web app.
    pub web_write_rate: budget::RequestRate,
    /// `BRIDLE_WEB_READS_PER_MINUTE`: each signed-in user's reads per minute through the web
    /// app.
    pub web_read_rate: budget::RequestRate,
    /// `BRIDLE_SIGN_INS_PER_MINUTE`: sign-ins that may come back from the identity provider to
    /// one client address a minute and not be verified by it.
    pub sign_in_rate: budget::RequestRate,
    /// `BRIDLE_TRUSTED_PROXIES`: comma-separated addresses of reverse proxies in front of the
    /// server, whose `X-Forwarded-For` names the client for what is counted per address.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// `BRIDLE_STREAMS_PER_USER`: reply streams one user may hold open at once (default 8).
    pub streams_per_user: usize,
    /// Sign-in with OpenID Connect (`BRIDLE_OIDC_*`); `None`: one local user, loopback only.
    pub sign_in: Option<SignInConfig>,
}

/// `BRIDLE_OIDC_ISSUER`, `BRIDLE_OIDC_CLIENT_ID`, `BRIDLE_OIDC_CLIENT_SECRET`,
/// `BRIDLE_PUBLIC_URL`, `BRIDLE_SIGNUP`, `BRIDLE_SESSION_HOURS`.
#[derive(Clone, PartialEq, Eq)]
pub struct SignInConfig {
    pub issuer: String,
    pub client_id: String,
    /// Optional: a public client signs in with PKCE alone.
    pub client_secret: Option<String>,
    /// Where people reach this server, without a trailing slash (the redirect base).
    pub public_url: String,
    pub signup: crate::auth::Signup,
    pub session_ttl: std::time::Duration,
}

// Hand-written so the client secret never reaches a log line.
impl fmt::Debug for SignInConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignInConfig")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "set"))
            .field("public_url", &self.public_url)
            .field("signup", &self.signup)
            .field("session_ttl", &self.session_ttl)
            .finish()
    }
}

// Hand-written so the API key never reaches a log line.
impl fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let backend = match &self.backend {
            BackendChoice::OpenAi {
                base_url,
                model,
                api_key,
            } => format!(
                "openai({base_url}, {model}, key: {})",
                if api_key.is_some() { "set" } else { "none" }
            ),
            BackendChoice::Bedrock { model_id } => format!("bedrock({model_id})"),
            BackendChoice::Scripted { script } => format!("scripted({})", script.display()),
            BackendChoice::None => "none".into(),
        };
        f.debug_struct("ServeConfig")
            .field("addr", &self.addr)
            .field("db", &self.db)
            .field("backend", &backend)
            .field("max_message_chars", &self.max_message_chars)
            .field("max_concurrent_turns", &self.max_concurrent_turns)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("http", &self.http)
            .field("budget", &self.budget)
            .field("prompt_version", &self.prompt.version)
            .field("model", &self.model)
            .field("sign_in", &self.sign_in)
            .field(
                "admin_token",
                &if self.admin_token.is_some() {
                    "set"
                } else {
                    "none"
                },
            )
            .finish()
    }
}

/// Every configuration problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bridle serve is not configured correctly:\n  - {}", .0.join("\n  - "))]
pub struct ConfigErrors(pub Vec<String>);

impl ServeConfig {
    /// Parse from a variable lookup (the process environment in `main`, a map in tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigErrors> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();

        let addr_text = var("BRIDLE_ADDR").unwrap_or_else(|| "127.0.0.1:8080".into());
        let addr = addr_text.parse().unwrap_or_else(|_| {
            problems.push(format!(
                "BRIDLE_ADDR={addr_text:?} is not a socket address like 127.0.0.1:8080"
            ));
            SocketAddr::from(([127, 0, 0, 1], 8080))
        });
        let db = PathBuf::from(var("BRIDLE_DB").unwrap_or_else(|| "./bridle.db".into()));
        let mut number = |name: &str, default: usize| match var(name) {
            None => default,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n > 0 => n,
                _ => {
                    problems.push(format!("{name}={v:?} must be a positive whole number"));
                    default
                }
            },
        };
        let max_message_chars = number("BRIDLE_MAX_MESSAGE_CHARS", 8_000);
        let streams_per_user = number(
            "BRIDLE_STREAMS_PER_USER",
            crate::server::streams::DEFAULT_PER_USER,
        );
        let max_concurrent_turns = number(
            "BRIDLE_MAX_CONCURRENT_TURNS",
            crate::DEFAULT_MAX_CONCURRENT_TURNS,
        );
        let shutdown_grace =
            std::time::Duration::from_secs(number("BRIDLE_SHUTDOWN_GRACE_S", 25) as u64);
        let secs = |n: usize| std::time::Duration::from_secs(n as u64);
        let http = crate::server::HttpLimits {
            header_read: secs(number("BRIDLE_HTTP_HEADER_TIMEOUT_S", 10)),
            request: secs(number("BRIDLE_HTTP_REQUEST_TIMEOUT_S", 30)),
            max_connections: number("BRIDLE_HTTP_MAX_CONNECTIONS", 1024),
            max_per_peer: number("BRIDLE_HTTP_MAX_CONNECTIONS_PER_CLIENT", 64),
            write_stall: secs(number("BRIDLE_HTTP_WRITE_STALL_S", 30)),
        };

        let openai = |problems: &mut Vec<String>| {
            let base_url = var("OPENAI_BASE_URL");
            let model = var("OPENAI_MODEL");
            match base_url.as_deref().map(url::Url::parse) {
                None => problems.push("the openai backend needs OPENAI_BASE_URL (e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1)".into()),
                Some(Ok(u)) if matches!(u.scheme(), "http" | "https") && u.has_host() => {}
                Some(_) => problems.push(format!(
                    "OPENAI_BASE_URL={:?} is not an http(s) URL like http://127.0.0.1:11434/v1",
                    base_url.as_deref().unwrap_or_default()
                )),
            }
            if model.is_none() {
                problems.push(
                    "the openai backend needs OPENAI_MODEL (e.g. gpt-4o-mini or llama3.2)".into(),
                );
            }
            BackendChoice::OpenAi {
                base_url: base_url.unwrap_or_default(),
                model: model.unwrap_or_default(),
                api_key: var("OPENAI_API_KEY"),
            }
        };
        let bedrock = |problems: &mut Vec<String>| {
            let model_id = var("BEDROCK_MODEL_ID");
            if model_id.is_none() {
                problems.push("the bedrock backend needs BEDROCK_MODEL_ID (a model id or inference-profile ARN)".into());
            }
            BackendChoice::Bedrock {
                model_id: model_id.unwrap_or_default(),
            }
        };
        let choice = var("BRIDLE_BACKEND").map(|v| v.trim().to_ascii_lowercase());
        let backend = match choice.as_deref() {
            None | Some("auto") => {
                if var("BEDROCK_MODEL_ID").is_some() {
                    bedrock(&mut problems)
                } else if var("OPENAI_BASE_URL").is_some() {
                    openai(&mut problems)
                } else {
                    BackendChoice::None
                }
            }
            Some("openai") => openai(&mut problems),
            Some("bedrock") => bedrock(&mut problems),
            Some("none") => BackendChoice::None,
            Some("scripted") => match var("BRIDLE_SCRIPT") {
                Some(path) => BackendChoice::Scripted {
                    script: PathBuf::from(path),
                },
                None => {
                    problems.push(
                        "the scripted backend needs BRIDLE_SCRIPT (the path of a script file)"
                            .into(),
                    );
                    BackendChoice::None
                }
            },
            Some(other) => {
                problems.push(format!(
                    "BRIDLE_BACKEND={other:?} is not one of openai, bedrock, scripted, none, auto"
                ));
                BackendChoice::None
            }
        };

        let budget = budget::BudgetConfig::from_vars(var).unwrap_or_else(|err| {
            problems.push(err.to_string());
            budget::BudgetConfig::default()
        });
        let admin_token = var("BRIDLE_ADMIN_TOKEN").map(|t| t.trim().to_owned());
        let prompt =
            engine::SystemPrompt::from_setting(var("BRIDLE_SYSTEM_PROMPT_FILE").as_deref())
                .unwrap_or_else(|problem| {
                    problems.push(problem);
                    engine::SystemPrompt::default()
                });

        let confirmation = engine::ConfirmationOptions::from_vars(var).unwrap_or_else(|problem| {
            problems.push(problem);
            engine::ConfirmationOptions::default()
        });

        let model = assembly::ModelSettings::from_vars(var, backend.provider()).unwrap_or_else(
            |mut more| {
                problems.append(&mut more);
                assembly::ModelSettings::default()
            },
        );

        let mcp_rate = mcp::RateLimit::from_vars(var).unwrap_or_else(|problem| {
            problems.push(problem);
            mcp::RateLimit::default()
        });
        let web_write_rate = crate::server::web_rates::WRITES.read(var, &mut problems);
        let web_read_rate = crate::server::web_rates::READS.read(var, &mut problems);
        let sign_in_rate = crate::server::web_rates::SIGN_INS.read(var, &mut problems);
        let trusted_proxies = var("BRIDLE_TRUSTED_PROXIES")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .filter_map(|a| match a.parse() {
                Ok(ip) => Some(ip),
                Err(_) => {
                    problems.push(format!(
                        "BRIDLE_TRUSTED_PROXIES holds {a:?}, which is not an IP address (list the \
                         proxies' addresses, comma-separated)"
                    ));
                    None
                }
            })
            .collect();

        let sign_in = sign_in_from(&var, &addr, &mut problems);

        if problems.is_empty() {
            Ok(Self {
                sign_in,
                addr,
                db,
                backend,
                max_message_chars,
                max_concurrent_turns,
                shutdown_grace,
                http,
                budget,
                admin_token,
                prompt,
                confirmation,
                mcp_rate,
                web_write_rate,
                web_read_rate,
                sign_in_rate,
                trusted_proxies,
                streams_per_user,
                model,
            })
        } else {
            Err(ConfigErrors(problems))
        }
    }
}

/// The sign-in settings, or none; and the rule that a server without sign-in listens on
/// loopback only.
fn sign_in_from(
    var: &impl Fn(&str) -> Option<String>,
    addr: &SocketAddr,
    problems: &mut Vec<String>,
) -> Option<SignInConfig> {
    let Some(issuer) = var("BRIDLE_OIDC_ISSUER") else {
        if !addr.ip().is_loopback() {
            problems.push(format!(
                "BRIDLE_ADDR={addr} is not a loopback address: without sign-in the server has one \
                 user and no password, so it listens only on 127.0.0.1 or [::1] — set \
                 BRIDLE_OIDC_ISSUER (and BRIDLE_OIDC_CLIENT_ID, BRIDLE_PUBLIC_URL) to serve others"
            ));
        }
        return None;
    };
    let client_id = var("BRIDLE_OIDC_CLIENT_ID").unwrap_or_else(|| {
        problems.push(
            "BRIDLE_OIDC_ISSUER is set but BRIDLE_OIDC_CLIENT_ID is not (the app client's id at \
             the identity provider)"
                .into(),
        );
        String::new()
    });
    let public_url = var("BRIDLE_PUBLIC_URL")
        .unwrap_or_else(|| format!("http://{addr}"))
        .trim_end_matches('/')
        .to_owned();
    match url::Url::parse(&public_url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => {}
        _ => problems.push(format!(
            "BRIDLE_PUBLIC_URL={public_url:?} is not an http(s) URL like https://bridle.example"
        )),
    }
    let signup = match var("BRIDLE_SIGNUP").as_deref().map(str::trim) {
        None | Some("open") => crate::auth::Signup::Open,
        Some("closed") => crate::auth::Signup::Closed,
        Some(other) => {
            problems.push(format!("BRIDLE_SIGNUP={other:?} is not open or closed"));
            crate::auth::Signup::Open
        }
    };
    let hours = match var("BRIDLE_SESSION_HOURS") {
        None => 24 * 7,
        Some(v) => match v.trim().parse::<u64>() {
            Ok(h) if (1..=24 * 90).contains(&h) => h,
            _ => {
                problems.push(format!(
                    "BRIDLE_SESSION_HOURS={v:?} must be a whole number of hours from 1 to 2160"
                ));
                24 * 7
            }
        },
    };
    Some(SignInConfig {
        issuer,
        client_id,
        client_secret: var("BRIDLE_OIDC_CLIENT_SECRET"),
        public_url,
        signup,
        session_ttl: std::time::Duration::from_secs(hours * 3600),
    })
}

/// The async runtime's worker threads on a machine with `cores` cores: `TOKIO_WORKER_THREADS`
/// (`set`) when it says, else one fewer than the cores, and at least one. SQLite's writer, syncer
/// and readers are threads of their own (`sqlite-db`) that the async threads hand work to many
/// times a turn; with a worker per core as well they compete for the cores and every hand-off
/// wakes a thread that was pushed aside. Measured on two cores under the load benchmark (README,
/// Measure): one worker gives 1.02–1.09× the turns/s at 8-way and 1.11–1.15× at 64-way, on
/// about a tenth less CPU a turn.
pub fn async_worker_threads(set: Option<&str>, cores: usize) -> Result<usize, String> {
    match set {
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "TOKIO_WORKER_THREADS={v:?} must be a whole number above 0"
            )),
        },
        None => Ok(cores.saturating_sub(1).max(1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_async_runtime_leaves_a_core_to_the_database_threads() {
        assert_eq!(async_worker_threads(None, 2), Ok(1));
        assert_eq!(async_worker_threads(None, 8), Ok(7));
        assert_eq!(async_worker_threads(None, 1), Ok(1));
        assert_eq!(async_worker_threads(Some("3"), 2), Ok(3));
        let refused = async_worker_threads(Some("0"), 2).unwrap_err();
        assert!(refused.contains("TOKIO_WORKER_THREADS"), "{refused}");
        assert!(async_worker_threads(Some("many"), 2).is_err());
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<ServeConfig, ConfigErrors> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ServeConfig::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn the_confirmation_ttl_is_a_setting_and_a_bad_one_stops_the_start() {
        let c = parse(&[("BRIDLE_CONFIRMATION_TTL_S", "900")]).unwrap();
        assert_eq!(c.confirmation.ttl, std::time::Duration::from_secs(900));
        assert_eq!(
            parse(&[]).unwrap().confirmation,
            engine::ConfirmationOptions::default()
        );
        let err = parse(&[("BRIDLE_CONFIRMATION_TTL_S", "soon")]).unwrap_err();
        assert!(
            err.0
                .iter()
                .any(|p| p.starts_with("BRIDLE_CONFIRMATION_TTL_S=\"soon\" must be")),
            "{:?}",
            err.0
        );
    }

    #[test]
    fn the_request_rates_the_write_stall_and_the_streams_are_settings_and_bad_ones_stop_the_start()
    {
        let c = parse(&[
            ("BRIDLE_WEB_WRITES_PER_MINUTE", "20"),
            ("BRIDLE_WEB_READS_PER_MINUTE", "90"),
            ("BRIDLE_MCP_REQUESTS_PER_MINUTE", "40"),
            ("BRIDLE_HTTP_WRITE_STALL_S", "5"),
            ("BRIDLE_STREAMS_PER_USER", "64"),
            ("BRIDLE_SIGN_INS_PER_MINUTE", "5"),
            ("BRIDLE_TRUSTED_PROXIES", "10.0.0.2, ::1"),
        ])
        .unwrap();
        assert_eq!(c.streams_per_user, 64);
        assert_eq!(c.web_write_rate.per_minute, 20);
        assert_eq!(c.web_read_rate.per_minute, 90);
        assert_eq!(c.sign_in_rate.per_minute, 5);
        assert_eq!(
            c.trusted_proxies,
            [
                "10.0.0.2".parse::<std::net::IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert_eq!(c.mcp_rate.per_minute, 40);
        assert_eq!(c.http.write_stall, std::time::Duration::from_secs(5));
        let d = parse(&[]).unwrap();
        assert_eq!(d.streams_per_user, 8);
        assert_eq!(d.web_write_rate.per_minute, 60);
        assert_eq!(d.web_read_rate.per_minute, 300);
        assert_eq!(d.sign_in_rate.per_minute, 20);
        assert_eq!(d.http.write_stall, std::time::Duration::from_secs(30));
        let err = parse(&[
            ("BRIDLE_WEB_WRITES_PER_MINUTE", "0"),
            ("BRIDLE_WEB_READS_PER_MINUTE", "lots"),
            ("BRIDLE_HTTP_WRITE_STALL_S", "never"),
            ("BRIDLE_STREAMS_PER_USER", "0"),
            ("BRIDLE_TRUSTED_PROXIES", "10.0.0.2, proxy.internal"),
        ])
        .unwrap_err();
        for var in [
            "BRIDLE_WEB_WRITES_PER_MINUTE=\"0\"",
            "BRIDLE_WEB_READS_PER_MINUTE=\"lots\"",
            "BRIDLE_HTTP_WRITE_STALL_S",
            "BRIDLE_STREAMS_PER_USER",
            "BRIDLE_TRUSTED_PROXIES holds \"proxy.internal\"",
        ] {
            assert!(
                err.0.iter().any(|p| p.starts_with(var)),
                "{var}: {:?}",
                err.0
            );
        }
    }

    #[test]
    fn defaults_run_locally_with_no_model() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.db, PathBuf::from("./bridle.db"));
        assert_eq!(c.backend, BackendChoice::None);
    }

    #[test]
    fn auto_picks_bedrock_then_openai() {
        let c = parse(&[
            ("BEDROCK_MODEL_ID", "anthropic.claude"),
            ("OPENAI_BASE_URL", "http://x"),
        ]);
        assert!(matches!(c.unwrap().backend, BackendChoice::Bedrock { .. }));
        let c = parse(&[("OPENAI_BASE_URL", "http://x/v1"), ("OPENAI_MODEL", "m")]).unwrap();
        assert_eq!(
            c.backend,
            BackendChoice::OpenAi {
                base_url: "http://x/v1".into(),
                model: "m".into(),
                api_key: None
            }
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = parse(&[
            ("BRIDLE_ADDR", "nowhere"),
            ("BRIDLE_BACKEND", "openai"),
            ("BRIDLE_MAX_MESSAGE_CHARS", "-3"),
        ])
        .unwrap_err();
        assert_eq!(err.0.len(), 4, "{err}");
        let text = err.to_string();
        assert!(text.contains("BRIDLE_ADDR") && text.contains("OPENAI_BASE_URL"));
        assert!(text.contains("OPENAI_MODEL") && text.contains("BRIDLE_MAX_MESSAGE_CHARS"));
    }

    #[test]
    fn unknown_backend_and_missing_script_are_errors() {
        assert!(
            parse(&[("BRIDLE_BACKEND", "gpt")])
                .unwrap_err()
                .to_string()
                .contains("not one of")
        );
        assert!(
            parse(&[("BRIDLE_BACKEND", "scripted")])
                .unwrap_err()
                .to_string()
                .contains("BRIDLE_SCRIPT")
        );
    }

    #[test]
    fn debug_output_never_shows_the_api_key() {
        let c = parse(&[
            ("OPENAI_BASE_URL", "http://x/v1"),
            ("OPENAI_MODEL", "m"),
            ("OPENAI_API_KEY", "sk-very-secret"),
        ])
        .unwrap();
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("sk-very-secret") && shown.contains("key: set"),
            "{shown}"
        );
    }

    #[test]
    fn the_system_prompt_comes_from_a_file_or_the_default() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.prompt.version, engine::PROMPT_VERSION);
        let file = crate::temp_file_with("bridle-prompt-cfg-", ".md", "Be a pirate.");
        let config =
            parse(&[("BRIDLE_SYSTEM_PROMPT_FILE", file.path().to_str().unwrap())]).unwrap();
        assert_eq!(config.prompt.text, "Be a pirate.");
        assert!(config.prompt.version.starts_with("file-"));
        let err = parse(&[("BRIDLE_SYSTEM_PROMPT_FILE", "/nonexistent/prompt.md")]).unwrap_err();
        assert!(
            err.0
                .iter()
                .any(|p| p.contains("BRIDLE_SYSTEM_PROMPT_FILE")),
            "{err:?}"
        );
    }

    #[test]
    fn without_sign_in_only_loopback() {
        let err = parse(&[("BRIDLE_ADDR", "0.0.0.0:8080")]).unwrap_err();
        assert_eq!(err.0.len(), 1, "{err:?}");
        assert!(err.0[0].contains("not a loopback address"), "{err:?}");
        assert!(err.0[0].contains("BRIDLE_OIDC_ISSUER"), "{err:?}");
        assert!(
            parse(&[("BRIDLE_ADDR", "[::1]:8080")])
                .unwrap()
                .sign_in
                .is_none()
        );
        let c = parse(&[
            ("BRIDLE_ADDR", "0.0.0.0:8080"),
            ("BRIDLE_OIDC_ISSUER", "https://id.example"),
            ("BRIDLE_OIDC_CLIENT_ID", "bridle"),
            ("BRIDLE_OIDC_CLIENT_SECRET", "s3cret-value"),
            ("BRIDLE_PUBLIC_URL", "https://bridle.example/"),
            ("BRIDLE_SIGNUP", "closed"),
        ])
        .unwrap();
        let s = c.sign_in.clone().unwrap();
        assert_eq!(s.public_url, "https://bridle.example");
        assert_eq!(s.signup, crate::auth::Signup::Closed);
        assert!(!format!("{c:?}").contains("s3cret-value"), "{c:?}");
    }

    #[test]
    fn sign_in_settings_are_checked() {
        let err = parse(&[
            ("BRIDLE_OIDC_ISSUER", "https://id.example"),
            ("BRIDLE_PUBLIC_URL", "ftp://x"),
            ("BRIDLE_SIGNUP", "maybe"),
            ("BRIDLE_SESSION_HOURS", "0"),
        ])
        .unwrap_err();
        assert_eq!(err.0.len(), 4, "{err:?}");
    }

    #[test]
    fn model_settings_are_read_for_the_chosen_backend() {
        let c = parse(&[
            ("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1"),
            ("OPENAI_MODEL", "qwen"),
            ("BRIDLE_MODEL_TIMEOUT_S", "300"),
            ("BRIDLE_MAX_OUTPUT_TOKENS", "1024"),
            ("BRIDLE_TOOL_CHOICE", "none"),
        ])
        .unwrap();
        assert_eq!(c.model.call_timeout, std::time::Duration::from_secs(300));
        assert_eq!(c.model.max_output_tokens, 1024);
        assert_eq!(c.model.tool_choice, backend::ToolChoice::None);
        // On Bedrock `none` cannot be said; with another problem, both are reported.
        let err = parse(&[
            ("BEDROCK_MODEL_ID", "anthropic.claude"),
            ("BRIDLE_TOOL_CHOICE", "none"),
            ("BRIDLE_TEMPERATURE", "hot"),
        ])
        .unwrap_err();
        assert_eq!(err.0.len(), 2, "{err:?}");
        assert!(
            err.to_string()
                .contains("BRIDLE_TOOL_CHOICE=none is not available on Bedrock")
        );
    }

    #[test]
    fn a_bad_openai_base_url_is_a_start_up_error() {
        for bad in ["127.0.0.1:11434/v1", "ftp://models.example", "http//x"] {
            let err = parse(&[
                ("BRIDLE_BACKEND", "openai"),
                ("OPENAI_BASE_URL", bad),
                ("OPENAI_MODEL", "m"),
            ])
            .unwrap_err();
            assert!(err.0[0].contains("OPENAI_BASE_URL"), "{bad}: {err:?}");
        }
    }
}
