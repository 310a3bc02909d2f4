use crate::{Ctx, ToolError};
use async_trait::async_trait;
use serde_json::Value;
use std::future::Future;

/// The code behind a tool: a thin adapter over a service.
#[async_trait]
pub trait ToolHandler: Send + Sync {
    /// `input` has already been validated against the tool's schema.
    async fn call(&self, ctx: &Ctx, input: Value) -> Result<Value, ToolError>;
}

/// A handler from an async closure.
pub fn handler_fn<F, Fut>(f: F) -> impl ToolHandler
where
    F: Fn(Ctx, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    FnHandler(f)
}

struct FnHandler<F>(F);

#[async_trait]
impl<F, Fut> ToolHandler for FnHandler<F>
where
    F: Fn(Ctx, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    async fn call(&self, ctx: &Ctx, input: Value) -> Result<Value, ToolError> {
        (self.0)(ctx.clone(), input).await
    }
}
