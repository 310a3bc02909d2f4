//! The web function's configuration, read once per cold start; every problem reported at once.

use bridle::auth::Signup;
use bridle::config::SignInConfig;
use channels::open_chat::OpenChat;
use std::time::Duration;

/// Sessions last this long unless `BRIDLE_SESSION_HOURS` says otherwise (as `bridle serve`).
const DEFAULT_SESSION_HOURS: u64 = 24 * 7;

/// What the web function needs from its environment (and its secret).
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// The DynamoDB table (`TABLE_NAME`).
    pub table: String,
    /// `BEDROCK_MODEL_ID`: a model id or an inference-profile ARN.
    pub model_id: String,
    /// Required: `BRIDLE_OIDC_ISSUER`, `BRIDLE_OIDC_CLIENT_ID`, `BRIDLE_PUBLIC_URL` (the Function
    /// URL); `BRIDLE_OIDC_CLIENT_SECRET` (a public client has none), `BRIDLE_SIGNUP`,
    /// `BRIDLE_SESSION_HOURS`. Its `Debug` never shows the client secret.
    pub sign_in: SignInConfig,
    /// Caps and prices (`BRIDLE_CAP_*`, `BRIDLE_PRICES_FILE`), as the worker reads them.
    pub budget: budget::BudgetConfig,
    /// `BRIDLE_SYSTEM_PROMPT_FILE`, or the built-in prompt.
    pub prompt: engine::SystemPrompt,
    /// Model-call timeouts and inference settings (`BRIDLE_MODEL_TIMEOUT_S`,
    /// `BRIDLE_MAX_OUTPUT_TOKENS`, `BRIDLE_TOOL_CHOICE`, …), as `bridle serve` reads them.
    pub model: assembly::ModelSettings,
    /// `BRIDLE_CONFIRMATION_TTL_S`, as the worker reads it.
    pub confirmation: engine::ConfirmationOptions,
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
    /// one client address a minute.
    pub sign_in_rate: budget::RequestRate,
    /// `WHATSAPP_DISPLAY_NUMBER`, `TELEGRAM_BOT_USERNAME`: the link code's "open the chat" links.
    pub open_chat: OpenChat,
    /// `BRIDLE_LINKABLE_CHANNELS`: the channels people can link from the web app.
    pub linkable: Vec<&'static str>,
}

impl WebConfig {
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, Vec<String>> {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();
        let mut need = |k: &str, what: &str| {
            var(k).map(|v| v.trim().to_owned()).unwrap_or_else(|| {
                problems.push(format!("{k} is not set ({what})"));
                String::new()
            })
        };
        let table = need("TABLE_NAME", "the DynamoDB table");
        let model_id = need(
            "BEDROCK_MODEL_ID",
            "a Bedrock model id or inference-profile ARN",
        );
        let issuer = need(
            "BRIDLE_OIDC_ISSUER",
            "the OpenID Connect issuer, e.g. the Cognito user pool's; the web app requires sign-in",
        );
        let client_id = need(
            "BRIDLE_OIDC_CLIENT_ID",
            "the app client's id at the identity provider",
        );
        let public_url = need(
            "BRIDLE_PUBLIC_URL",
            "the web app's public URL (the Function URL), the base of the sign-in redirect",
        )
        .trim_end_matches('/')
        .to_owned();
        if !public_url.is_empty() {
            match url::Url::parse(&public_url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                _ => problems.push(format!(
                    "BRIDLE_PUBLIC_URL={public_url:?} is not an http(s) URL like https://abc.lambda-url.us-east-1.on.aws"
                )),
            }
        }
        let signup = match var("BRIDLE_SIGNUP").as_deref().map(str::trim) {
            None | Some("open") => Signup::Open,
            Some("closed") => Signup::Closed,
            Some(other) => {
                problems.push(format!("BRIDLE_SIGNUP={other:?} is not open or closed"));
                Signup::Open
            }
        };
        let hours = match var("BRIDLE_SESSION_HOURS") {
            None => DEFAULT_SESSION_HOURS,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(h) if (1..=24 * 90).contains(&h) => h,
                _ => {
                    problems.push(format!(
                        "BRIDLE_SESSION_HOURS={v:?} must be a whole number of hours from 1 to 2160"
                    ));
                    DEFAULT_SESSION_HOURS
                }
            },
        };
        let budget = budget::BudgetConfig::from_vars(var).unwrap_or_else(|e| {
            problems.push(e.to_string());
            budget::BudgetConfig::default()
        });
        let prompt =
            engine::SystemPrompt::from_setting(var("BRIDLE_SYSTEM_PROMPT_FILE").as_deref())
                .unwrap_or_else(|problem| {
                    problems.push(problem);
                    engine::SystemPrompt::default()
                });
        let model = assembly::ModelSettings::from_vars(var, assembly::Provider::Bedrock)
            .unwrap_or_else(|more| {
                problems.extend(more);
                assembly::ModelSettings::default()
            });
        let confirmation = engine::ConfirmationOptions::from_vars(var).unwrap_or_else(|problem| {
            problems.push(problem);
            engine::ConfirmationOptions::default()
        });
        let mcp_rate = mcp::RateLimit::from_vars(var).unwrap_or_else(|problem| {
            problems.push(problem);
            mcp::RateLimit::default()
        });
        let web_write_rate = bridle::server::web_rates::WRITES.read(var, &mut problems);
        let web_read_rate = bridle::server::web_rates::READS.read(var, &mut problems);
        let sign_in_rate = bridle::server::web_rates::SIGN_INS.read(var, &mut problems);
        let open_chat = OpenChat::from_vars(&var).unwrap_or_else(|p| {
            problems.extend(p);
            OpenChat::default()
        });
        let linkable =
            bridle::channel_setup::linkable_channels(var("BRIDLE_LINKABLE_CHANNELS").as_deref())
                .unwrap_or_else(|problem| {
                    problems.push(problem);
                    Vec::new()
                });
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Self {
            table,
            model_id,
            sign_in: SignInConfig {
                issuer,
                client_id,
                client_secret: var("BRIDLE_OIDC_CLIENT_SECRET"),
                public_url,
                signup,
                session_ttl: Duration::from_secs(hours * 3600),
            },
            budget,
            prompt,
            model,
            confirmation,
            mcp_rate,
            web_write_rate,
            web_read_rate,
            sign_in_rate,
            open_chat,
            linkable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    const COMPLETE: [(&str, &str); 7] = [
        ("TABLE_NAME", "bridle"),
        ("BEDROCK_MODEL_ID", "anthropic.claude"),
        (
            "BRIDLE_OIDC_ISSUER",
            "https://cognito-idp.us-east-1.amazonaws.com/pool",
        ),
        ("BRIDLE_OIDC_CLIENT_ID", "client"),
        ("BRIDLE_OIDC_CLIENT_SECRET", "s3cret-value"),
        (
            "BRIDLE_PUBLIC_URL",
            "https://abc.lambda-url.us-east-1.on.aws/",
        ),
        ("BRIDLE_LINKABLE_CHANNELS", "whatsapp,telegram"),
    ];

    #[test]
    fn sign_in_is_required_and_every_problem_is_named_at_once() {
        let err = WebConfig::from_vars(|_| None).unwrap_err();
        assert_eq!(err.len(), 5, "{err:?}");
        for name in [
            "TABLE_NAME",
            "BEDROCK_MODEL_ID",
            "BRIDLE_OIDC_ISSUER",
            "BRIDLE_OIDC_CLIENT_ID",
            "BRIDLE_PUBLIC_URL",
        ] {
            assert!(err.iter().any(|p| p.starts_with(name)), "{name}: {err:?}");
        }
        let bad = WebConfig::from_vars(vars(&[
            ("BRIDLE_PUBLIC_URL", "ftp://x"),
            ("BRIDLE_SIGNUP", "maybe"),
            ("BRIDLE_LINKABLE_CHANNELS", "whatsapp,fax"),
            ("BRIDLE_SESSION_HOURS", "0"),
        ]))
        .unwrap_err();
        assert_eq!(bad.len(), 8, "{bad:?}");
    }

    #[test]
    fn model_settings_are_read_as_serve_reads_them_and_bad_ones_refused() {
        let with = |more: &[(&str, &str)]| {
            let mut pairs = COMPLETE.to_vec();
            pairs.extend_from_slice(more);
            WebConfig::from_vars(vars(&pairs))
        };
        let c = with(&[
            ("BRIDLE_MODEL_IDLE_TIMEOUT_S", "30"),
            ("BRIDLE_TEMPERATURE", "0.3"),
        ])
        .unwrap();
        assert_eq!(c.model.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.model.temperature, Some(0.3));
        let bad = with(&[("BRIDLE_REASONING_EFFORT", "high")]).unwrap_err();
        assert!(bad[0].contains("BRIDLE_REASONING_BUDGET_TOKENS"), "{bad:?}");
    }

    #[test]
    fn a_complete_configuration_reads_and_never_shows_the_client_secret() {
        let c = WebConfig::from_vars(vars(&COMPLETE)).unwrap();
        assert_eq!(c.table, "bridle");
        assert_eq!(
            c.sign_in.public_url,
            "https://abc.lambda-url.us-east-1.on.aws"
        );
        assert_eq!(c.sign_in.signup, Signup::Open);
        assert_eq!(c.sign_in.client_secret.as_deref(), Some("s3cret-value"));
        assert_eq!(c.linkable, ["whatsapp", "telegram"]);
        assert_eq!(c.prompt.version, engine::PROMPT_VERSION);
        assert!(!format!("{c:?}").contains("s3cret-value"));
        let closed = vars(&[("BRIDLE_SIGNUP", "closed")]);
        let both = |k: &str| closed(k).or_else(|| vars(&COMPLETE)(k));
        assert_eq!(
            WebConfig::from_vars(both).unwrap().sign_in.signup,
            Signup::Closed
        );
    }
}
