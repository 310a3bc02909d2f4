//! Prompt-cache points: which fields of a Converse request a model accepts `cachePoint` blocks
//! in, and where this adapter puts them. Pure.
//!
//! Source: the Amazon Bedrock user guide, "Prompt caching for faster model inference"
//! (<https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html>), table
//! "Supported models, Regions, and limits": the Anthropic Claude models (3.5 Haiku, 3.7 Sonnet,
//! Sonnet 4 / 4.5, Opus 4 / 4.1 / 4.5, Haiku 4.5, ...) take checkpoints in `system`, `messages`
//! and `tools`; Amazon Nova Micro, Lite, Pro and Premier in `system` and `messages` only; at
//! most 4 checkpoints per request. Claude 3.5 Sonnet v2 had caching only as a closed preview
//! ("no additional customers will be granted access"), and the older Claude models (Instant,
//! 2.x, 3 Haiku/Sonnet/Opus, 3.5 Sonnet v1) never had it.
//!
//! Choices:
//! - A model id is read after dropping an ARN's resource type (the text up to the last `/`) and
//!   a cross-region inference-profile prefix (`us.`, `eu.`, `apac.`, `global.`, ...), so
//!   `arn:aws:bedrock:…:inference-profile/us.anthropic.claude-sonnet-4-…` reads as
//!   `anthropic.claude-sonnet-4-…`.
//! - Claude models not known to lack caching (so also newer ones) get all three points; Nova
//!   text models get `system` and `messages`; other known families (Llama, Mistral, Titan,
//!   Cohere, DeepSeek, ...) none.
//! - An id that names no known family (an application inference profile ARN, a prompt router,
//!   a custom model) gets all three: the attempt is cheap, and when Bedrock refuses, the error
//!   maps to `FeatureRejected { PromptCache }` and the engine turns caching off (lean mode).
//! - Points go after the system prompt, after the last tool, and at the end of the last
//!   message, which makes the whole history a cached prefix for the next call (the transcript
//!   is append-only). Never directly after a reasoning block: when the last message ends with
//!   one, that point is left out.

use aws_sdk_bedrockruntime::error::BuildError;
use aws_sdk_bedrockruntime::types::{CachePointBlock, CachePointType};

/// Bedrock's limit on `cachePoint` blocks in one request.
pub const MAX_CACHE_POINTS: usize = 4;

/// Where a model accepts prompt-cache points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CachePoints {
    /// After the system prompt.
    pub system: bool,
    /// After the last tool in `toolConfig.tools`.
    pub tools: bool,
    /// At the end of the last message.
    pub messages: bool,
}

impl CachePoints {
    const ALL: Self = Self {
        system: true,
        tools: true,
        messages: true,
    };
    const NONE: Self = Self {
        system: false,
        tools: false,
        messages: false,
    };
    const NO_TOOLS: Self = Self {
        system: true,
        tools: false,
        messages: true,
    };

    /// How many points this places at most.
    pub fn count(self) -> usize {
        [self.system, self.tools, self.messages]
            .into_iter()
            .filter(|&placed| placed)
            .count()
    }
}

// This adapter places at most one point per field; that must stay within Bedrock's limit.
const _: () = assert!(3 <= MAX_CACHE_POINTS);

/// Where `model_id` (a model id, inference profile id or ARN) accepts cache points.
pub fn cache_points_for(model_id: &str) -> CachePoints {
    let id = model_id.trim().to_ascii_lowercase();
    let id = if id.starts_with("arn:") {
        id.rsplit('/').next().unwrap_or_default().to_owned()
    } else {
        id
    };
    let id = strip_region_prefix(&id);
    let Some((provider, model)) = id.split_once('.') else {
        return CachePoints::ALL;
    };
    match provider {
        "anthropic" => {
            if CLAUDE_WITHOUT_CACHING
                .iter()
                .any(|old| model.starts_with(old))
            {
                CachePoints::NONE
            } else {
                CachePoints::ALL
            }
        }
        "amazon" => {
            let nova_text = model.starts_with("nova-")
                && !["sonic", "canvas", "reel"]
                    .iter()
                    .any(|m| model.contains(m));
            if nova_text {
                CachePoints::NO_TOOLS
            } else {
                CachePoints::NONE
            }
        }
        _ if OTHER_PROVIDERS.contains(&provider) => CachePoints::NONE,
        _ => CachePoints::ALL,
    }
}

/// Claude models Bedrock never offered prompt caching for (or only as a closed preview).
const CLAUDE_WITHOUT_CACHING: &[&str] = &[
    "claude-instant",
    "claude-v2",
    "claude-2",
    "claude-3-haiku",
    "claude-3-sonnet",
    "claude-3-opus",
    "claude-3-5-sonnet",
];

/// Model providers on Bedrock without explicit prompt caching.
const OTHER_PROVIDERS: &[&str] = &[
    "meta",
    "mistral",
    "cohere",
    "ai21",
    "deepseek",
    "writer",
    "qwen",
    "openai",
    "stability",
    "twelvelabs",
    "luma",
    "google",
    "minimax",
    "moonshot",
    "moonshotai",
    "nvidia",
];

/// Cross-region inference profile prefixes (`us.anthropic.…`).
const REGION_PREFIXES: &[&str] = &[
    "us.", "us-gov.", "eu.", "apac.", "global.", "jp.", "au.", "ca.",
];

fn strip_region_prefix(id: &str) -> &str {
    REGION_PREFIXES
        .iter()
        .find_map(|prefix| id.strip_prefix(prefix))
        .unwrap_or(id)
}

/// A `cachePoint {type: default}` block.
pub(crate) fn cache_point() -> Result<CachePointBlock, BuildError> {
    CachePointBlock::builder()
        .r#type(CachePointType::Default)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::into_bedrock;
    use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamInput;
    use aws_sdk_bedrockruntime::types::ContentBlock;
    use backend::{ChatMessage, ChatRequest, InferenceSettings};
    use transcript::{Part, Reasoning, Role};

    const CLAUDE: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

    fn user(text: &str) -> ChatMessage {
        ChatMessage {
            role: Role::User,
            parts: vec![Part::text(text)].into(),
        }
    }

    fn check(ids: &[&str], expected: CachePoints) {
        for id in ids {
            assert_eq!(cache_points_for(id), expected, "{id}");
        }
    }

    #[test]
    fn claude_models_with_caching_get_all_three() {
        check(
            &[
                "anthropic.claude-3-5-haiku-20241022-v1:0",
                "anthropic.claude-3-7-sonnet-20250219-v1:0",
                "anthropic.claude-sonnet-4-20250514-v1:0",
                "anthropic.claude-sonnet-4-5-20250929-v1:0",
                "anthropic.claude-opus-4-20250514-v1:0",
                "anthropic.claude-opus-4-1-20250805-v1:0",
                "anthropic.claude-haiku-4-5-20251001-v1:0",
                "us.anthropic.claude-sonnet-4-20250514-v1:0",
                "eu.anthropic.claude-3-7-sonnet-20250219-v1:0",
                "apac.anthropic.claude-sonnet-4-20250514-v1:0",
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "US.Anthropic.Claude-Sonnet-4-20250514-v1:0",
                "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-7-sonnet-20250219-v1:0",
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-sonnet-4-20250514-v1:0",
            ],
            CachePoints::ALL,
        );
    }

    #[test]
    fn older_claude_models_get_none() {
        check(
            &[
                "anthropic.claude-3-haiku-20240307-v1:0",
                "anthropic.claude-3-sonnet-20240229-v1:0",
                "anthropic.claude-3-opus-20240229-v1:0",
                "anthropic.claude-3-5-sonnet-20240620-v1:0",
                "anthropic.claude-3-5-sonnet-20241022-v2:0",
                "anthropic.claude-v2:1",
                "anthropic.claude-instant-v1",
                "us.anthropic.claude-3-haiku-20240307-v1:0",
                "arn:aws:bedrock:us-west-2::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
            ],
            CachePoints::NONE,
        );
    }

    #[test]
    fn nova_caches_system_and_messages_but_not_tools() {
        check(
            &[
                "amazon.nova-micro-v1:0",
                "amazon.nova-lite-v1:0",
                "amazon.nova-pro-v1:0",
                "amazon.nova-premier-v1:0",
                "us.amazon.nova-pro-v1:0",
            ],
            CachePoints::NO_TOOLS,
        );
        check(
            &["amazon.nova-sonic-v1:0", "amazon.nova-canvas-v1:0"],
            CachePoints::NONE,
        );
    }

    #[test]
    fn other_known_families_get_none() {
        check(
            &[
                "meta.llama3-3-70b-instruct-v1:0",
                "us.meta.llama4-maverick-17b-instruct-v1:0",
                "mistral.mistral-large-2407-v1:0",
                "amazon.titan-text-express-v1",
                "cohere.command-r-plus-v1:0",
                "us.deepseek.r1-v1:0",
                "ai21.jamba-1-5-large-v1:0",
                "openai.gpt-oss-120b-1:0",
            ],
            CachePoints::NONE,
        );
    }

    #[test]
    fn ids_naming_no_known_family_are_attempted() {
        check(
            &[
                "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3d4e5f6",
                "arn:aws:bedrock:us-east-1:123456789012:custom-model/my-model/abc123",
                "somenewlab.model-x-v1:0",
                "my-model",
            ],
            CachePoints::ALL,
        );
    }

    fn converted(request: &ChatRequest) -> ConverseStreamInput {
        into_bedrock(request, "unused", &crate::Media::links()).unwrap()
    }

    fn request(model: &str, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            system: String::new(),
            messages,
            tools: Default::default(),
            settings: InferenceSettings::default(),
        }
    }

    #[test]
    fn a_point_only_where_its_field_is_present() {
        // No system prompt, no tools, no messages: nothing to put a point after.
        let input = converted(&request(CLAUDE, vec![]));
        assert_eq!(input.system, None);
        assert_eq!(input.tool_config, None);
        assert_eq!(input.messages, Some(vec![]));
        // A blank system prompt is left out, and so is its point.
        let mut req = request(CLAUDE, vec![user("hi")]);
        req.system = "  ".into();
        let input = converted(&req);
        assert_eq!(input.system, None);
        assert!(matches!(
            input.messages.unwrap()[0].content[..],
            [ContentBlock::Text(_), ContentBlock::CachePoint(_)]
        ));
    }

    #[test]
    fn a_point_never_follows_a_reasoning_block() {
        let reasoning = Part::Reasoning(Reasoning::Redacted { data: vec![1] });
        let req = request(
            CLAUDE,
            vec![
                user("hi"),
                ChatMessage {
                    role: Role::Assistant,
                    parts: vec![Part::text("thinking aloud"), reasoning.clone()].into(),
                },
            ],
        );
        let input = converted(&req);
        let messages = input.messages.unwrap();
        assert!(
            !messages
                .iter()
                .flat_map(|m| &m.content)
                .any(ContentBlock::is_cache_point),
            "{messages:?}"
        );
        // Reasoning earlier in the message does not matter; what the point would follow does.
        let req = request(
            CLAUDE,
            vec![ChatMessage {
                role: Role::Assistant,
                parts: vec![reasoning, Part::text("answer")].into(),
            }],
        );
        let content = &converted(&req).messages.unwrap()[0].content;
        assert!(matches!(
            content[..],
            [
                ContentBlock::ReasoningContent(_),
                ContentBlock::Text(_),
                ContentBlock::CachePoint(_)
            ]
        ));
    }

    #[test]
    fn never_more_points_than_bedrock_allows() {
        assert_eq!(CachePoints::ALL.count(), 3);
        assert!(CachePoints::ALL.count() <= MAX_CACHE_POINTS);
        assert_eq!(CachePoints::NO_TOOLS.count(), 2);
        assert_eq!(CachePoints::NONE.count(), 0);
    }
}
