//! Picks the model the server talks to, from configuration.

use crate::config::BackendChoice;
use async_trait::async_trait;
use backend::{
    BackendError, ChatModel, ChatRequest, EventStream, ModelEvent, ScriptedModel, StopReason, Usage,
};
use std::sync::Arc;
use std::time::Duration;

/// What the assistant says when no model is configured.
pub const UNPLUGGED: &str = "My brain isn't plugged in yet: no model is configured, so I can't answer properly. \
To connect one, restart Bridle with OPENAI_BASE_URL and OPENAI_MODEL set (for a local Ollama: \
OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=llama3.2; for a hosted API also set OPENAI_API_KEY), \
or with BEDROCK_MODEL_ID (and AWS credentials and region) for Amazon Bedrock. To try Bridle without any model, set \
BRIDLE_BACKEND=scripted and BRIDLE_SCRIPT to a script file (see examples/demo-script.json).";

/// Why the configured model could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BackendSetupError {
    #[error("cannot read the script file {path}")]
    ReadScript {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the script file {path} is not usable")]
    BadScript {
        path: String,
        #[source]
        source: backend::ScriptError,
    },
    #[error("cannot build the HTTP client")]
    Http(#[source] reqwest::Error),
}

/// The model for a backend choice. `model_id` is what the engine sends on each call.
pub async fn model_for(
    choice: &BackendChoice,
) -> Result<(Arc<dyn ChatModel>, String), BackendSetupError> {
    Ok(match choice {
        BackendChoice::None => (Arc::new(Unplugged(UNPLUGGED)), "none".into()),
        BackendChoice::Bedrock { model_id } => {
            // Region and credentials from the standard chain; AWS_ENDPOINT_URL_BEDROCK_RUNTIME
            // is honoured (and named in the log when it cannot be reached).
            let model = backend_bedrock::model_from_env(model_id.clone()).await;
            (Arc::new(model), model_id.clone())
        }
        BackendChoice::Scripted { script } => {
            let path = script.display().to_string();
            let text = std::fs::read_to_string(script).map_err(|source| {
                BackendSetupError::ReadScript {
                    path: path.clone(),
                    source,
                }
            })?;
            let model = ScriptedModel::from_script(&text)
                .map_err(|source| BackendSetupError::BadScript { path, source })?;
            (Arc::new(model), "scripted".into())
        }
        BackendChoice::OpenAi {
            base_url,
            model,
            api_key,
        } => {
            let client = reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(BackendSetupError::Http)?;
            let config = backend_openai::OpenAiConfig {
                base_url: base_url.clone(),
                api_key: api_key.clone(),
                model: model.clone(),
            };
            (
                Arc::new(backend_openai::OpenAiModel::new(config, client)),
                model.clone(),
            )
        }
    })
}

/// A stand-in model that explains how to connect a real one. Never an error: the user gets a
/// clear answer.
#[derive(Debug)]
pub struct Unplugged(pub &'static str);

#[async_trait]
impl ChatModel for Unplugged {
    fn name(&self) -> &str {
        "none"
    }

    async fn stream(&self, _request: ChatRequest) -> Result<EventStream, BackendError> {
        let events = vec![
            Ok(ModelEvent::text(self.0)),
            Ok(ModelEvent::Done {
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
            }),
        ];
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend::ModelEvent;
    use futures::TryStreamExt;

    fn request() -> ChatRequest {
        ChatRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![],
            tools: Default::default(),
            settings: Default::default(),
        }
    }

    #[tokio::test]
    async fn the_scripted_backend_plays_the_script_file() {
        let file = crate::temp_file_with(
            "bridle-script-",
            ".json",
            r#"{"replies": [{"steps": [{"say": "From the file."}, {"stop": "end_turn"}]}]}"#,
        );
        let (model, id) = model_for(&BackendChoice::Scripted {
            script: file.path().to_owned(),
        })
        .await
        .unwrap();
        assert_eq!((model.name(), id.as_str()), ("scripted", "scripted"));
        let events: Vec<ModelEvent> = model
            .stream(request())
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(events[0], ModelEvent::text("From "));
    }

    #[tokio::test]
    async fn a_missing_or_broken_script_is_a_start_up_error() {
        let missing = model_for(&BackendChoice::Scripted {
            script: "/nonexistent/script.json".into(),
        })
        .await;
        assert!(matches!(missing, Err(BackendSetupError::ReadScript { .. })));
        let file = crate::temp_file_with("bridle-bad-", ".json", "{\"replies\": 3}");
        let broken = model_for(&BackendChoice::Scripted {
            script: file.path().to_owned(),
        })
        .await;
        assert!(matches!(broken, Err(BackendSetupError::BadScript { .. })));
    }
}
