//! The MCP server: `initialize`, `tools/list` and `tools/call` over rmcp's Streamable HTTP
//! service, stateless (no session in memory; every request stands alone), JSON responses.

use crate::MCP_PURPOSE;
use crate::auth::{Counted, Door, McpCaller, RateLimit, authenticate};
use crate::catalog::mcp_tool;
use crate::confirm::{Decision, RiskyCall, Round, can_open_url, decide};
use crate::one_at_a_time::{self, NoTurn};
use crate::result::{mcp_result, refusal};
use axum::Router;
use axum::http::request::Parts;
use engine::{Clock, RiskPolicy};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, RequestMetaObject, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use store::{Accounts, BudgetLedger, Confirmations, Leases, TokenScope, Tokens};
use tools::{ActionId, Actor, Ctx, Registry, ToolCall};

/// The MCP server's settings.
#[derive(Debug, Clone, Default)]
pub struct McpOptions {
    /// Tool calls and lists per minute per user, all their tokens together (a limit per token
    /// would be one a user multiplies at will).
    pub rate: RateLimit,
    /// Answer only loopback `Host` names (a server without sign-in: DNS rebinding).
    pub loopback_only: bool,
    /// Tools whose calls the confirmation policy may call risky: `destructiveHint`.
    pub may_be_risky: BTreeSet<String>,
    /// The web app's public address, where the owner approves a risky call (`/approve`);
    /// `None` (no sign-in): `http://` and the request's own (loopback) `Host`.
    pub public_url: Option<String>,
}

/// What the MCP server is built from.
pub struct McpParts {
    /// The one registry; its [`MCP_PURPOSE`] catalogue is what clients see.
    pub registry: Arc<Registry>,
    /// The confirmation policy: which calls need a person's yes.
    pub policy: Arc<dyn RiskPolicy>,
    pub tokens: Arc<dyn Tokens>,
    /// The token owners' accounts (a closed one's tokens open nothing).
    pub accounts: Arc<dyn Accounts>,
    /// Where the per-user request counts are kept.
    pub ledger: Arc<dyn BudgetLedger>,
    /// Where a question put to the human waits for its answer.
    pub pending: Arc<dyn Confirmations>,
    /// Where a token's changing calls take turns ([`one_at_a_time`]).
    pub leases: Arc<dyn Leases>,
    pub clock: Clock,
    pub options: McpOptions,
}

impl std::fmt::Debug for McpParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpParts")
            .field("registry", &self.registry)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

struct Shared {
    registry: Arc<Registry>,
    /// Read again once a changing call has its turn ([`BridleMcp::no_longer_live`]).
    tokens: Arc<dyn Tokens>,
    /// The token owners' accounts, read again then too.
    accounts: Arc<dyn Accounts>,
    policy: Arc<dyn RiskPolicy>,
    ledger: Arc<dyn BudgetLedger>,
    pending: Arc<dyn Confirmations>,
    leases: Arc<dyn Leases>,
    clock: Clock,
    options: McpOptions,
}

/// The rmcp server handler; one per request (cheap: an `Arc`).
#[derive(Clone)]
pub struct BridleMcp {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BridleMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BridleMcp")
    }
}

/// The JSON-RPC error code of a `tools/list` over the user's rate (one of the codes JSON-RPC
/// leaves to the server, -32000 to -32099; a `tools/call` over it gets a tool error the model
/// reads instead).
pub const RATE_LIMITED: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32029);

/// The largest JSON-RPC request body `/mcp` reads; a longer one gets 413 before it is parsed.
/// A tool call's arguments are a few ids and short texts (the schemas cap them), so this is
/// generous; rmcp's own default is 4 MiB.
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;

/// `/mcp`: the token door, then rmcp's Streamable HTTP service (stateless, JSON responses).
///
/// POST only: without sessions or an event store, rmcp answers GET (a client's server-to-client
/// stream) and DELETE (a session's end) with 405 and `Allow: POST` at once, as the Streamable
/// HTTP transport allows, so a client falls back to POST and no request — no Lambda invocation
/// — is held open. Every answer is one JSON body that ends.
pub fn router(parts: McpParts) -> Router {
    let door = Door {
        tokens: parts.tokens.clone(),
        accounts: parts.accounts.clone(),
        ledger: parts.ledger.clone(),
        every_request: parts.options.rate.every_request(),
        clock: parts.clock.clone(),
    };
    let loopback_only = parts.options.loopback_only;
    let handler = BridleMcp {
        shared: Arc::new(Shared {
            registry: parts.registry,
            tokens: parts.tokens,
            accounts: parts.accounts,
            policy: parts.policy,
            ledger: parts.ledger,
            pending: parts.pending,
            leases: parts.leases,
            clock: parts.clock,
            options: parts.options,
        }),
    };
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES);
    if !loopback_only {
        // Signed-in deployments answer their public name; a bearer token, which a browser
        // never attaches by itself, is what keeps a rebinding page out.
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(door, authenticate))
}

/// What a call came with, for its judgement.
#[derive(Clone, Copy)]
struct Asked<'a> {
    request: &'a CallToolRequestParams,
    meta: &'a RequestMetaObject,
    /// Where the approval page is ([`crate::confirm::approve_url`]).
    base_url: &'a str,
}

/// The caller the token door put on the request.
fn caller(context: &RequestContext<RoleServer>) -> Result<McpCaller, ErrorData> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<McpCaller>())
        .cloned()
        .ok_or_else(|| {
            tracing::error!("an MCP request reached the handler without a token's caller");
            ErrorData::internal_error("Internal error.", None)
        })
}

impl BridleMcp {
    async fn count(&self, caller: &McpCaller) -> Counted {
        let now = (self.shared.clock)();
        self.shared
            .options
            .rate
            .count(self.shared.ledger.as_ref(), &caller.user, now)
            .await
    }

    /// Where the approval page is: the public address, else this (loopback) server's own.
    fn base_url(&self, context: &RequestContext<RoleServer>) -> String {
        if let Some(url) = &self.shared.options.public_url {
            return url.clone();
        }
        let host = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.headers.get(axum::http::header::HOST))
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1:8080");
        format!("http://{host}")
    }

    /// One call: count it, validate it, check the token's scope and the confirmation policy
    /// (a risky call runs only with its owner's approval from Bridle's page), then run it
    /// through the runner as the token's user.
    async fn call(
        &self,
        caller: McpCaller,
        request: CallToolRequestParams,
        meta: &RequestMetaObject,
        base_url: &str,
    ) -> CallToolResponse {
        if let Counted::Refused(text) = self.count(&caller).await {
            return refusal(text).into();
        }
        let registry = &self.shared.registry;
        let action = uuid::Uuid::new_v4().simple().to_string();
        let mut input = Value::Object(request.arguments.clone().unwrap_or_default());
        // `250.0` for an integer is `250` to everything that reads the call.
        tools::whole_numbers(&mut input);
        let call = ToolCall {
            id: format!("mcp_{action}"),
            name: request.name.to_string(),
            input,
        };
        // Unknown tools and invalid arguments: the runner's own sentences.
        if let Some(invalid) = registry.check(MCP_PURPOSE, &call) {
            return mcp_result(&invalid).into();
        }
        let read_only = registry.get(&call.name).is_some_and(|d| d.read_only);
        if !read_only && caller.scope < TokenScope::Write {
            return refusal(format!(
                "This access token may only read, and {} changes things, so nothing was done. \
                 The account owner can create a token with the write scope in Bridle under \
                 \"Connect an AI client\".",
                call.name
            ))
            .into();
        }
        let ctx = Ctx {
            user_id: caller.user.clone(),
            actor: Actor::Mcp,
            action_id: ActionId(format!("mcp:{action}")),
            conversation_id: crate::confirm::token_conversation(&caller.token_id),
            call_key: None,
            grant: match caller.scope {
                TokenScope::Read => tools::Grant::Read,
                TokenScope::Write => tools::Grant::Write,
                TokenScope::Risky => tools::Grant::Risky,
            },
        };
        // A changing call waits for the earlier ones of its owner's tokens: judged and run in
        // its turn.
        let turn = if read_only {
            None
        } else {
            let taken = one_at_a_time::take(
                self.shared.leases.clone(),
                one_at_a_time::owner_turn(&caller.user),
                ctx.action_id.0.clone(),
                self.shared.clock.clone(),
            )
            .await;
            match taken {
                Ok(turn) => Some(turn),
                Err(NoTurn::Busy) => {
                    tracing::warn!(tool = %call.name, token_id = %caller.token_id, "an MCP call waited too long for the token's earlier calls");
                    return refusal(
                        "Earlier changes through your access tokens were still being made, so \
                         nothing was done. Try again in a moment.",
                    )
                    .into();
                }
                Err(NoTurn::Store(e)) => {
                    tracing::error!(tool = %call.name, error = %e, "could not take an MCP token's turn");
                    return refusal(
                        "Bridle could not make this change just now, so nothing was done. Try \
                         again in a moment.",
                    )
                    .into();
                }
            }
        };
        let refused = match &turn {
            Some(_) => self.no_longer_live(&caller).await,
            None => None,
        };
        let response = match refused {
            Some(sentence) => refusal(sentence).into(),
            None => {
                let asked = Asked {
                    request: &request,
                    meta,
                    base_url,
                };
                self.judged_and_run(&caller, &ctx, &call, asked, read_only)
                    .await
            }
        };
        // Given back on every way out: a refusal or a question too, so the human's answer (a
        // new request, perhaps on another instance) finds the turn free.
        if let Some(turn) = turn {
            turn.give_back().await;
        }
        response
    }

    /// Why the caller's token may no longer make its change, read again once the change has
    /// its turn: a token revoked (a lost laptop) or expired while its calls waited does no
    /// more, nor one the door would now refuse for its account (closed, or signed out
    /// everywhere since the token was made: a revocation that missed it is held to here too).
    /// Two reads per changing call; unreadable, the change is not made (fails closed).
    async fn no_longer_live(&self, caller: &McpCaller) -> Option<&'static str> {
        let now = (self.shared.clock)();
        match self.shared.tokens.token(&caller.token_id).await {
            Ok(Some(token)) if token.is_live(now) => {
                match self.shared.accounts.account(&token.user).await {
                    Ok(account) => {
                        let refused = crate::auth::account_refusal(account.as_ref(), &token);
                        if refused.is_some() {
                            tracing::info!(token_id = %caller.token_id, "an MCP token's account closed or signed out everywhere while its change waited; not made");
                        }
                        refused
                    }
                    Err(err) => {
                        tracing::error!(token_id = %caller.token_id, error = %err, "could not read an MCP token's account again; the change is not made");
                        Some(
                            "Bridle could not check the access token just now, so nothing was \
                             done. Try again in a moment.",
                        )
                    }
                }
            }
            Ok(_) => {
                tracing::info!(token_id = %caller.token_id, "an MCP token revoked or expired while its change waited; not made");
                Some(
                    "This access token was revoked, or has expired, while this change waited \
                     for its turn, so nothing was done.",
                )
            }
            Err(err) => {
                tracing::error!(token_id = %caller.token_id, error = %err, "could not read an MCP token again; the change is not made");
                Some(
                    "Bridle could not check the access token just now, so nothing was done. \
                     Try again in a moment.",
                )
            }
        }
    }

    /// The confirmation policy's judgement of a changing call (a risky one runs only once its
    /// owner approved it on Bridle's page), then the call through the runner as the token's
    /// user.
    async fn judged_and_run(
        &self,
        caller: &McpCaller,
        ctx: &Ctx,
        call: &ToolCall,
        asked: Asked<'_>,
        read_only: bool,
    ) -> CallToolResponse {
        let Asked {
            request,
            meta,
            base_url,
        } = asked;
        if !read_only
            && let Some(description) = self
                .shared
                .policy
                .assess(ctx, &call.name, &call.input)
                .await
        {
            if caller.scope < TokenScope::Risky {
                tracing::info!(tool = %call.name, action_id = %ctx.action_id, "risky MCP call outside the token's scope");
                return refusal(format!(
                    "“{description}” needs a person's yes, and this access token does not have \
                     the risky scope, so nothing was done. Ask in the Bridle chat instead, or \
                     create a token with the risky scope."
                ))
                .into();
            }
            let round = Round {
                responses: request.input_responses.as_ref(),
                state: request.request_state.as_deref(),
                can_open_url: can_open_url(meta),
            };
            let risky = RiskyCall {
                token_id: &caller.token_id,
                call,
                description: &description,
                base_url,
            };
            let now = (self.shared.clock)();
            match decide(self.shared.pending.as_ref(), ctx, risky, round, now).await {
                Decision::Run => {
                    tracing::info!(tool = %call.name, action_id = %ctx.action_id, "risky MCP call approved by its owner on the page");
                }
                Decision::Ask(question) => return question.into(),
                Decision::Refuse(text) => return refusal(text).into(),
            }
        }
        tracing::info!(tool = %call.name, action_id = %ctx.action_id, token_id = %caller.token_id, "MCP tool call");
        let outcome = self.shared.registry.run(ctx, MCP_PURPOSE, call).await;
        mcp_result(&outcome).into()
    }
}

impl ServerHandler for BridleMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bridle", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Bridle's tools act on the account that owns this access token. Changes are \
                 recorded and can be reverted with the undo tool.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = caller(&context)?;
        if let Counted::Refused(text) = self.count(&caller).await {
            // Not an internal error (-32603, which a client may take for a fault and retry at
            // once): the sentence says when to come back.
            return Err(ErrorData::new(RATE_LIMITED, text, None));
        }
        let risky = &self.shared.options.may_be_risky;
        let tools = self
            .shared
            .registry
            .catalog_for(MCP_PURPOSE)
            .into_iter()
            .map(|def| mcp_tool(def, risky))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&context)?;
        let base_url = self.base_url(&context);
        Ok(self.call(caller, request, &context.meta, &base_url).await)
    }
}
