//! Neutral [`ChatRequest`] → Converse input. Pure: no I/O, no configuration beyond the model to
//! use when the request names none.
//!
//! Choices:
//! - `system` is one text block, omitted when blank.
//! - Converse wants user and assistant turns to alternate. Neutral `tool` messages become
//!   user-role messages of `toolResult` blocks, and consecutive messages of the same Converse
//!   role are merged into one. In a merged user message the `toolResult` blocks come first, in
//!   order, then the rest (Anthropic models reject text before tool results).
//! - A tool result whose content is a JSON object or array is sent as a `json` document; a
//!   string as `text`; any other value as its JSON text. `status` is set to `error` only for
//!   errors (several non-Anthropic models reject the field, so success leaves it out).
//! - Reasoning is replayed unchanged: readable reasoning with its signature as `reasoningText`,
//!   redacted reasoning as the original bytes (`redactedContent`). Only assistant messages carry
//!   reasoning, tool uses; only user-side messages carry tool results; a part in the wrong place
//!   is dropped.
//! - Blank text parts are dropped (Bedrock rejects blank text blocks); a message left empty is
//!   dropped too.
//! - Media is held by reference. An attachment in a format Converse knows becomes an image or
//!   document block: with its bytes when they were read beforehand ([`Media::bytes`], by the
//!   client through a [`backend::MediaSource`]), else with its S3 location when the key is an S3
//!   URI (`s3://bucket/key`) and the model reads S3 locations ([`Media::s3_links`]: Amazon
//!   Nova's do; Anthropic's refuse the request, so a photo would break every later turn of the
//!   conversation). Anything else becomes a short text placeholder, `[image: key]` or
//!   `[document: key]`, as in the OpenAI adapter.
//!   Converse refuses a request with more than [`MAX_DOCUMENTS`] documents or [`MAX_IMAGES`]
//!   images, or two documents of one name; the request is the whole history, so one such
//!   request would fail every later turn of the conversation. The newest go as blocks, older
//!   ones as their placeholder, and a name met again gets a number (`0`, `0 (2)`, …).
//! - `toolConfig` is sent only when tools are offered (Bedrock then rejects tool blocks in the
//!   history, so callers keep offering tools once a conversation used them; the engine does).
//!   Its `toolChoice` is `{"any": {}}` for a required tool call, absent otherwise (auto).
//! - `inferenceConfig` carries `maxTokens`, and `temperature` and `stopSequences` when set.
//! - A reasoning budget becomes `additionalModelRequestFields`
//!   `{"thinking": {"type": "enabled", "budget_tokens": N}}` (Anthropic's form), only when set.
//! - With `settings.prompt_cache`, `cachePoint` blocks go where the model accepts them (see
//!   [`crate::cache`]): after the system prompt, after the last tool, at the end of the last
//!   message unless it ends with a reasoning block. Each point only where its field is present.

use crate::cache::{CachePoints, cache_point, cache_points_for};
use crate::document::to_document;
use aws_sdk_bedrockruntime::error::BuildError;
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamInput;
use aws_sdk_bedrockruntime::primitives::Blob;
use aws_sdk_bedrockruntime::types::{
    AnyToolChoice, ContentBlock, ConversationRole, DocumentBlock, DocumentFormat, DocumentSource,
    ImageBlock, ImageFormat, ImageSource, InferenceConfiguration, Message, ReasoningContentBlock,
    ReasoningTextBlock, S3Location, SystemContentBlock, Tool, ToolChoice, ToolConfiguration,
    ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolResultStatus, ToolSpecification,
    ToolUseBlock,
};
use backend::{BackendError, ChatRequest, ToolSpec};
use serde_json::{Value, json};
use std::collections::HashMap;
use transcript::{MediaRef, Part, Reasoning, Role};

/// How a request's attachments reach the model (see the module's docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Media {
    /// Attachments at S3 keys may go as S3 locations: the model reads them itself.
    pub s3_links: bool,
    /// Attachments' bytes read beforehand, by key: these go as bytes.
    pub bytes: HashMap<String, Vec<u8>>,
}

impl Media {
    /// S3 locations only (nothing read beforehand).
    pub fn links() -> Self {
        Self {
            s3_links: true,
            bytes: HashMap::new(),
        }
    }
}

/// Whether `model` (a model id or an inference profile's ARN naming one) reads attachments at
/// S3 locations: Amazon Nova's Premier, Pro and Lite do; Micro reads no media, and no other
/// model family takes them (Anthropic's among them). An ARN that names no model (an
/// application inference profile) counts as not.
pub fn reads_s3_links(model: &str) -> bool {
    let model = model.to_ascii_lowercase();
    model.contains("amazon.nova-") && !model.contains("nova-micro")
}

/// The most bytes an image may have as a block ([`Media::bytes`]): Converse refuses more.
pub const MAX_IMAGE_BYTES: usize = 3_750_000;
/// The most bytes a document may have as a block.
pub const MAX_DOCUMENT_BYTES: usize = 4_500_000;

/// The attachments of `request` whose bytes should be read before it is sent: the newest
/// [`MAX_DOCUMENTS`] documents and [`MAX_IMAGES`] images in a format Converse knows (the ones
/// that can go as blocks), newest first whatever their kind (so a budget spent in this order
/// goes to the newest); none at an S3 key when `model` reads S3 locations.
pub fn media_to_read(request: &ChatRequest, fallback_model: &str) -> Vec<MediaRef> {
    let model = if request.model.is_empty() {
        fallback_model
    } else {
        &request.model
    };
    let links = reads_s3_links(model);
    let (mut documents, mut images) = (0, 0);
    let mut wanted = Vec::new();
    let user_side = request
        .messages
        .iter()
        .rev()
        .filter(|m| m.role != Role::Assistant)
        .flat_map(|m| m.parts.iter().rev());
    for part in user_side {
        let (media, count, most) = match part {
            Part::Document(m) if document_format(&m.mime_type).is_some() => {
                (m, &mut documents, MAX_DOCUMENTS)
            }
            Part::Image(m) if image_format(&m.mime_type).is_some() => (m, &mut images, MAX_IMAGES),
            _ => continue,
        };
        if *count < most {
            *count += 1;
            if !(links && is_s3(media)) {
                wanted.push(media.clone());
            }
        }
    }
    wanted
}

/// The ConverseStream input for `request`, its attachments sent as `media` says.
/// `fallback_model` is used when `request.model` is empty (the adapter passes its configured
/// model id).
pub fn into_bedrock(
    request: &ChatRequest,
    fallback_model: &str,
    media: &Media,
) -> Result<ConverseStreamInput, BackendError> {
    build(request, fallback_model, media).map_err(|err| BackendError::InvalidRequest {
        message: format!("could not build the Converse request: {err}"),
    })
}

fn build(
    request: &ChatRequest,
    fallback_model: &str,
    media: &Media,
) -> Result<ConverseStreamInput, BuildError> {
    let model = if request.model.is_empty() {
        fallback_model
    } else {
        &request.model
    };
    let settings = &request.settings;
    let points = if settings.prompt_cache {
        cache_points_for(model)
    } else {
        CachePoints::default()
    };
    let system = if request.system.trim().is_empty() {
        None
    } else {
        let mut blocks = vec![SystemContentBlock::Text(request.system.clone())];
        if points.system {
            blocks.push(SystemContentBlock::CachePoint(cache_point()?));
        }
        Some(blocks)
    };
    let inference = InferenceConfiguration::builder()
        .max_tokens(i32::try_from(settings.max_tokens).unwrap_or(i32::MAX))
        .set_temperature(settings.temperature)
        .set_stop_sequences(
            (!settings.stop_sequences.is_empty()).then(|| settings.stop_sequences.clone()),
        )
        .build();
    let tool_config = if request.tools.is_empty() {
        None
    } else {
        let mut tools: Vec<Tool> = request.tools.iter().map(tool).collect::<Result<_, _>>()?;
        if points.tools {
            tools.push(Tool::CachePoint(cache_point()?));
        }
        Some(
            ToolConfiguration::builder()
                .set_tools(Some(tools))
                .set_tool_choice(tool_choice(settings.tool_choice))
                .build()?,
        )
    };
    let thinking = settings.reasoning_budget.map(|budget| {
        to_document(&json!({"thinking": {"type": "enabled", "budget_tokens": budget}}))
    });
    let mut messages = messages(request, media)?;
    if points.messages {
        mark_last_message(&mut messages)?;
    }
    ConverseStreamInput::builder()
        .model_id(model)
        .set_system(system)
        .set_messages(Some(messages))
        .inference_config(inference)
        .set_tool_config(tool_config)
        .set_additional_model_request_fields(thinking)
        .build()
}

/// Converse's `toolChoice`: `any` for required; nothing for auto (the default) and for none,
/// which Converse cannot say (the tools must stay offered while the history holds tool blocks;
/// the settings refuse `none` for Bedrock at start-up).
fn tool_choice(choice: backend::ToolChoice) -> Option<ToolChoice> {
    match choice {
        backend::ToolChoice::Required => Some(ToolChoice::Any(AnyToolChoice::builder().build())),
        backend::ToolChoice::Auto | backend::ToolChoice::None => None,
    }
}

/// A cache point at the end of the last message, unless that message ends with reasoning
/// (a cache point directly after a reasoning block is not accepted).
fn mark_last_message(messages: &mut [Message]) -> Result<(), BuildError> {
    let Some(last) = messages.last_mut() else {
        return Ok(());
    };
    if !matches!(
        last.content.last(),
        Some(ContentBlock::ReasoningContent(_)) | None
    ) {
        last.content.push(ContentBlock::CachePoint(cache_point()?));
    }
    Ok(())
}

/// One Converse message being assembled: tool results first, then everything else.
struct Turn {
    role: ConversationRole,
    results: Vec<ContentBlock>,
    content: Vec<ContentBlock>,
}

/// The most documents Converse takes in one request.
pub const MAX_DOCUMENTS: usize = 5;
/// The most images Converse takes in one request.
pub const MAX_IMAGES: usize = 20;

/// Which of a request's attachments go as blocks (the newest [`MAX_DOCUMENTS`] documents and
/// [`MAX_IMAGES`] images), and the document names given so far.
struct Attached<'a> {
    media: &'a Media,
    documents: Counted,
    images: Counted,
    names: std::collections::HashSet<String>,
}

/// Attachments of one kind that would go as blocks: how many are left out (the oldest), and
/// how many were met so far.
struct Counted {
    left_out: usize,
    met: usize,
}

impl Counted {
    fn new(total: usize, most: usize) -> Self {
        Self {
            left_out: total.saturating_sub(most),
            met: 0,
        }
    }

    /// Whether the next one goes as a block.
    fn next_goes(&mut self) -> bool {
        self.met += 1;
        self.met > self.left_out
    }
}

impl<'a> Attached<'a> {
    fn of(request: &ChatRequest, media: &'a Media) -> Self {
        let user_side = request
            .messages
            .iter()
            .filter(|m| m.role != Role::Assistant)
            .flat_map(|m| m.parts.iter());
        let (mut documents, mut images) = (0, 0);
        for part in user_side {
            match part {
                Part::Document(m) if document_format(&m.mime_type).is_some() && media.has(m) => {
                    documents += 1
                }
                Part::Image(m) if image_format(&m.mime_type).is_some() && media.has(m) => {
                    images += 1
                }
                _ => {}
            }
        }
        Self {
            media,
            documents: Counted::new(documents, MAX_DOCUMENTS),
            images: Counted::new(images, MAX_IMAGES),
            names: Default::default(),
        }
    }

    /// `name`, or, when a document of the request has it already, it with the first number
    /// that makes it new.
    fn unique(&mut self, name: String) -> String {
        let mut unique = name.clone();
        let mut n = 1;
        // Compared regardless of case, as a store of files would.
        while !self.names.insert(unique.to_lowercase()) {
            n += 1;
            unique = format!("{name} ({n})");
        }
        unique
    }
}

fn is_s3(media: &MediaRef) -> bool {
    media.key.starts_with("s3://")
}

impl Media {
    /// Whether `media` can go as a block: its bytes were read, or the model reads its S3
    /// location.
    fn has(&self, media: &MediaRef) -> bool {
        self.bytes.contains_key(&media.key) || (self.s3_links && is_s3(media))
    }

    /// Where `media`'s block takes its content from: its bytes, else its S3 location (only
    /// for one [`Media::has`]).
    fn source(&self, media: &MediaRef) -> Result<Source, BuildError> {
        Ok(match self.bytes.get(&media.key) {
            Some(bytes) => Source::Bytes(Blob::new(bytes.clone())),
            None => Source::S3(S3Location::builder().uri(&media.key).build()?),
        })
    }
}

/// An attachment block's content.
enum Source {
    Bytes(Blob),
    S3(S3Location),
}

fn messages(request: &ChatRequest, media: &Media) -> Result<Vec<Message>, BuildError> {
    let mut attached = Attached::of(request, media);
    let mut turns: Vec<Turn> = Vec::new();
    for message in &request.messages {
        let mut turn = match message.role {
            Role::Assistant => Turn {
                role: ConversationRole::Assistant,
                results: Vec::new(),
                content: assistant_blocks(&message.parts)?,
            },
            Role::User | Role::Tool => user_side_turn(&message.parts, &mut attached)?,
        };
        if turn.results.is_empty() && turn.content.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == turn.role => {
                last.results.append(&mut turn.results);
                last.content.append(&mut turn.content);
            }
            _ => turns.push(turn),
        }
    }
    turns
        .into_iter()
        .map(|turn| {
            let mut blocks = turn.results;
            blocks.extend(turn.content);
            Message::builder()
                .role(turn.role)
                .set_content(Some(blocks))
                .build()
        })
        .collect()
}

fn assistant_blocks(parts: &[Part]) -> Result<Vec<ContentBlock>, BuildError> {
    let mut blocks = Vec::new();
    for part in parts {
        let block = match part {
            Part::Text { text } => text_block(text),
            Part::Reasoning(reasoning) => Some(reasoning_block(reasoning)?),
            Part::ToolUse { id, name, input } => Some(ContentBlock::ToolUse(
                ToolUseBlock::builder()
                    .tool_use_id(id)
                    .name(name)
                    .input(to_document(input))
                    .build()?,
            )),
            // An assistant never carries tool results; nothing sensible to send.
            Part::ToolResult { .. } => None,
            Part::Image(media) => text_block(&placeholder("image", media)),
            Part::Document(media) => text_block(&placeholder("document", media)),
        };
        blocks.extend(block);
    }
    Ok(blocks)
}

fn user_side_turn(parts: &[Part], attached: &mut Attached) -> Result<Turn, BuildError> {
    let mut turn = Turn {
        role: ConversationRole::User,
        results: Vec::new(),
        content: Vec::new(),
    };
    for part in parts {
        let block = match part {
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                turn.results
                    .push(tool_result_block(tool_use_id, content, *is_error)?);
                continue;
            }
            Part::Text { text } => text_block(text),
            Part::Image(media) => Some(image_block(media, attached)?),
            Part::Document(media) => Some(document_block(media, attached)?),
            // A user never makes tool calls or reasons; nothing sensible to send.
            Part::ToolUse { .. } | Part::Reasoning(_) => None,
        };
        turn.content.extend(block);
    }
    Ok(turn)
}

fn text_block(text: &str) -> Option<ContentBlock> {
    (!text.trim().is_empty()).then(|| ContentBlock::Text(text.to_owned()))
}

fn reasoning_block(reasoning: &Reasoning) -> Result<ContentBlock, BuildError> {
    let block = match reasoning {
        Reasoning::Text { text, signature } => ReasoningContentBlock::ReasoningText(
            ReasoningTextBlock::builder()
                .text(text)
                .set_signature(signature.clone())
                .build()?,
        ),
        Reasoning::Redacted { data } => {
            ReasoningContentBlock::RedactedContent(Blob::new(data.clone()))
        }
    };
    Ok(ContentBlock::ReasoningContent(block))
}

fn tool_result_block(
    tool_use_id: &str,
    content: &Value,
    is_error: bool,
) -> Result<ContentBlock, BuildError> {
    let content = match content {
        Value::Object(_) | Value::Array(_) => ToolResultContentBlock::Json(to_document(content)),
        Value::String(text) => ToolResultContentBlock::Text(text.clone()),
        other => ToolResultContentBlock::Text(other.to_string()),
    };
    Ok(ContentBlock::ToolResult(
        ToolResultBlock::builder()
            .tool_use_id(tool_use_id)
            .content(content)
            .set_status(is_error.then_some(ToolResultStatus::Error))
            .build()?,
    ))
}

fn image_block(media: &MediaRef, attached: &mut Attached) -> Result<ContentBlock, BuildError> {
    let Some(format) = image_format(&media.mime_type).filter(|_| attached.media.has(media)) else {
        return Ok(ContentBlock::Text(placeholder("image", media)));
    };
    if !attached.images.next_goes() {
        return Ok(ContentBlock::Text(placeholder("image", media)));
    }
    let source = match attached.media.source(media)? {
        Source::Bytes(bytes) => ImageSource::Bytes(bytes),
        Source::S3(location) => ImageSource::S3Location(location),
    };
    Ok(ContentBlock::Image(
        ImageBlock::builder()
            .format(format)
            .source(source)
            .build()?,
    ))
}

fn document_block(media: &MediaRef, attached: &mut Attached) -> Result<ContentBlock, BuildError> {
    let Some(format) = document_format(&media.mime_type).filter(|_| attached.media.has(media))
    else {
        return Ok(ContentBlock::Text(placeholder("document", media)));
    };
    if !attached.documents.next_goes() {
        return Ok(ContentBlock::Text(placeholder("document", media)));
    }
    let source = match attached.media.source(media)? {
        Source::Bytes(bytes) => DocumentSource::Bytes(bytes),
        Source::S3(location) => DocumentSource::S3Location(location),
    };
    Ok(ContentBlock::Document(
        DocumentBlock::builder()
            .format(format)
            .name(attached.unique(document_name(&media.key)))
            .source(source)
            .build()?,
    ))
}

fn image_format(mime_type: &str) -> Option<ImageFormat> {
    Some(match mime_type.to_ascii_lowercase().as_str() {
        "image/png" => ImageFormat::Png,
        "image/jpeg" | "image/jpg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::Webp,
        _ => return None,
    })
}

fn document_format(mime_type: &str) -> Option<DocumentFormat> {
    Some(match mime_type.to_ascii_lowercase().as_str() {
        "application/pdf" => DocumentFormat::Pdf,
        "text/csv" => DocumentFormat::Csv,
        "text/html" => DocumentFormat::Html,
        "text/markdown" => DocumentFormat::Md,
        "text/plain" => DocumentFormat::Txt,
        "application/msword" => DocumentFormat::Doc,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => {
            DocumentFormat::Docx
        }
        "application/vnd.ms-excel" => DocumentFormat::Xls,
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => DocumentFormat::Xlsx,
        _ => return None,
    })
}

/// A document name Converse accepts (letters, digits, single spaces, hyphens, parentheses and
/// square brackets), from the key's file name without its extension.
fn document_name(key: &str) -> String {
    let file = key.rsplit('/').next().unwrap_or(key);
    let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '(' | ')' | '[' | ']' | ' ') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
    if name.is_empty() {
        "document".to_owned()
    } else {
        name
    }
}

fn placeholder(kind: &str, media: &MediaRef) -> String {
    format!("[{kind}: {}]", media.key)
}

fn tool(spec: &ToolSpec) -> Result<Tool, BuildError> {
    Ok(Tool::ToolSpec(
        ToolSpecification::builder()
            .name(&spec.name)
            .set_description((!spec.description.is_empty()).then(|| spec.description.clone()))
            .input_schema(ToolInputSchema::Json(to_document(&spec.input_schema)))
            .build()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::from_document;
    use backend::{ChatMessage, InferenceSettings};

    /// The documents a budget estimates by size are the ones sent as documents, and nothing
    /// else is (a voice note goes as a line naming it).
    #[test]
    fn the_documents_sent_are_the_ones_the_budget_counts() {
        let documents = backend::documents::TEXT_DOCUMENTS
            .iter()
            .chain(backend::documents::FILE_DOCUMENTS);
        for mime in documents {
            assert!(document_format(mime).is_some(), "{mime}");
        }
        for mime in [
            "audio/ogg",
            "video/mp4",
            "application/json",
            "application/zip",
        ] {
            assert!(document_format(mime).is_none(), "{mime}");
        }
    }

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: String::new(),
            system: String::new(),
            messages,
            tools: Default::default(),
            // Cache points are pinned in `cache.rs` and on the wire; here they would be noise.
            settings: InferenceSettings {
                max_tokens: 100,
                prompt_cache: false,
                ..InferenceSettings::default()
            },
        }
    }

    fn msg(role: Role, parts: Vec<Part>) -> ChatMessage {
        ChatMessage::new(role, parts)
    }

    fn result(id: &str, content: Value, is_error: bool) -> Part {
        Part::ToolResult {
            tool_use_id: id.into(),
            content,
            is_error,
        }
    }

    fn convert(request: &ChatRequest) -> ConverseStreamInput {
        into_bedrock(request, "fallback-model", &Media::links()).unwrap()
    }

    /// Each message as `(role, [block kinds])`, to pin shape without the SDK's verbosity.
    fn shape(input: &ConverseStreamInput) -> Vec<(&'static str, Vec<String>)> {
        input
            .messages
            .iter()
            .flatten()
            .map(|m| {
                let role = match m.role {
                    ConversationRole::User => "user",
                    _ => "assistant",
                };
                (role, m.content.iter().map(kind).collect())
            })
            .collect()
    }

    fn kind(block: &ContentBlock) -> String {
        match block {
            ContentBlock::Text(t) => format!("text:{t}"),
            ContentBlock::ToolUse(u) => format!("tool_use:{}", u.tool_use_id),
            ContentBlock::ToolResult(r) => format!("tool_result:{}", r.tool_use_id),
            ContentBlock::ReasoningContent(_) => "reasoning".into(),
            ContentBlock::Image(_) => "image".into(),
            ContentBlock::Document(d) => format!("document:{}", d.name),
            other => format!("{other:?}"),
        }
    }

    fn media(key: &str, mime_type: &str) -> MediaRef {
        MediaRef {
            key: key.into(),
            mime_type: mime_type.into(),
            size_bytes: 10,
        }
    }

    #[test]
    fn model_system_and_settings() {
        let mut req = request(vec![msg(Role::User, vec![Part::text("hi")])]);
        let input = convert(&req);
        assert_eq!(input.model_id.as_deref(), Some("fallback-model"));
        assert_eq!(input.system, None);
        assert_eq!(input.tool_config, None);
        assert_eq!(input.additional_model_request_fields, None);
        let inference = input.inference_config.unwrap();
        assert_eq!(inference.max_tokens, Some(100));
        assert_eq!(inference.temperature, None);
        assert_eq!(inference.stop_sequences, None);

        req.model = "anthropic.claude-sonnet-4".into();
        req.system = "You are Bridle.".into();
        req.settings = InferenceSettings {
            max_tokens: u32::MAX,
            temperature: Some(0.5),
            stop_sequences: vec!["\nUser:".into()],
            reasoning_budget: Some(2048),
            prompt_cache: false,
            ..InferenceSettings::default()
        };
        let input = convert(&req);
        assert_eq!(input.model_id.as_deref(), Some("anthropic.claude-sonnet-4"));
        assert_eq!(
            input.system,
            Some(vec![SystemContentBlock::Text("You are Bridle.".into())])
        );
        let inference = input.inference_config.unwrap();
        assert_eq!(inference.max_tokens, Some(i32::MAX));
        assert_eq!(inference.temperature, Some(0.5));
        assert_eq!(inference.stop_sequences, Some(vec!["\nUser:".to_owned()]));
        assert_eq!(
            from_document(&input.additional_model_request_fields.unwrap()),
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
        );
    }

    #[test]
    fn tools_are_specs_with_a_json_schema() {
        let mut req = request(vec![msg(Role::User, vec![Part::text("hi")])]);
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        req.tools = vec![
            ToolSpec {
                name: "weather".into(),
                description: "Current weather.".into(),
                input_schema: schema.clone(),
            },
            ToolSpec {
                name: "now".into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
            },
        ]
        .into();
        let tools = convert(&req).tool_config.unwrap().tools;
        let Tool::ToolSpec(weather) = &tools[0] else {
            panic!("{tools:?}")
        };
        assert_eq!(weather.name, "weather");
        assert_eq!(weather.description.as_deref(), Some("Current weather."));
        let Some(ToolInputSchema::Json(doc)) = &weather.input_schema else {
            panic!("{weather:?}")
        };
        assert_eq!(from_document(doc), schema);
        let Tool::ToolSpec(now) = &tools[1] else {
            panic!("{tools:?}")
        };
        assert_eq!(now.description, None, "an empty description is left out");
    }

    #[test]
    fn tool_results_fold_into_user_messages_and_come_first() {
        let req = request(vec![
            msg(Role::User, vec![Part::text("Weather?")]),
            msg(
                Role::Assistant,
                vec![
                    Part::text("Checking."),
                    Part::ToolUse {
                        id: "t1".into(),
                        name: "weather".into(),
                        input: json!({"city": "Oslo"}),
                    },
                ],
            ),
            msg(Role::Tool, vec![result("t1", json!({"temp_c": 3}), false)]),
            msg(Role::User, vec![Part::text("And Rome?")]),
            msg(Role::Tool, vec![result("t0", json!("late"), false)]),
        ]);
        assert_eq!(
            shape(&convert(&req)),
            vec![
                ("user", vec!["text:Weather?".to_owned()]),
                (
                    "assistant",
                    vec!["text:Checking.".to_owned(), "tool_use:t1".to_owned()]
                ),
                (
                    "user",
                    vec![
                        "tool_result:t1".to_owned(),
                        "tool_result:t0".to_owned(),
                        "text:And Rome?".to_owned()
                    ]
                ),
            ]
        );
    }

    #[test]
    fn tool_result_content_and_status() {
        let req = request(vec![msg(
            Role::Tool,
            vec![
                result("a", json!({"rows": 2}), false),
                result("b", json!([1, 2]), false),
                result("c", json!("no such table"), true),
                result("d", json!(42), false),
            ],
        )]);
        let input = convert(&req);
        let blocks = &input.messages.as_ref().unwrap()[0].content;
        let results: Vec<&ToolResultBlock> =
            blocks.iter().map(|b| b.as_tool_result().unwrap()).collect();
        let content = |i: usize| match &results[i].content[..] {
            [ToolResultContentBlock::Json(doc)] => from_document(doc),
            [ToolResultContentBlock::Text(text)] => Value::String(format!("text:{text}")),
            other => panic!("{other:?}"),
        };
        assert_eq!(content(0), json!({"rows": 2}));
        assert_eq!(content(1), json!([1, 2]));
        assert_eq!(content(2), json!("text:no such table"));
        assert_eq!(content(3), json!("text:42"));
        assert_eq!(results[0].status, None);
        assert_eq!(results[2].status, Some(ToolResultStatus::Error));
    }

    #[test]
    fn reasoning_is_replayed_with_its_signature_and_redacted_bytes() {
        let req = request(vec![msg(
            Role::Assistant,
            vec![
                Part::Reasoning(Reasoning::Text {
                    text: "two cities".into(),
                    signature: Some("sig==".into()),
                }),
                Part::Reasoning(Reasoning::Redacted {
                    data: vec![0, 159, 255],
                }),
                Part::Reasoning(Reasoning::Text {
                    text: "unsigned".into(),
                    signature: None,
                }),
            ],
        )]);
        let input = convert(&req);
        let blocks = &input.messages.as_ref().unwrap()[0].content;
        let reasoning: Vec<&ReasoningContentBlock> = blocks
            .iter()
            .map(|b| b.as_reasoning_content().unwrap())
            .collect();
        let text = reasoning[0].as_reasoning_text().unwrap();
        assert_eq!(text.text, "two cities");
        assert_eq!(text.signature.as_deref(), Some("sig=="));
        assert_eq!(
            reasoning[1].as_redacted_content().unwrap().as_ref(),
            &[0, 159, 255]
        );
        assert_eq!(reasoning[2].as_reasoning_text().unwrap().signature, None);
    }

    #[test]
    fn misplaced_blank_and_empty_content_is_dropped_and_neighbours_merge() {
        let req = request(vec![
            msg(Role::User, vec![Part::text("one")]),
            msg(
                Role::Assistant,
                vec![Part::text("  "), result("x", json!("stray"), false)],
            ),
            msg(
                Role::User,
                vec![
                    Part::text("two"),
                    Part::ToolUse {
                        id: "u".into(),
                        name: "n".into(),
                        input: json!({}),
                    },
                    Part::Reasoning(Reasoning::Redacted { data: vec![1] }),
                ],
            ),
        ]);
        assert_eq!(
            shape(&convert(&req)),
            vec![("user", vec!["text:one".to_owned(), "text:two".to_owned()])]
        );
    }

    #[test]
    fn s3_media_becomes_blocks_and_other_media_a_placeholder() {
        let req = request(vec![msg(
            Role::User,
            vec![
                Part::Image(media("s3://bucket/img/cat.png", "image/png")),
                Part::Image(media("blobs/img/1", "image/png")),
                Part::Image(media("s3://bucket/img/odd.tiff", "image/tiff")),
                Part::Document(media(
                    "s3://bucket/docs/Q3 report_v2.pdf",
                    "application/pdf",
                )),
                Part::Document(media("blobs/doc/2", "application/pdf")),
            ],
        )]);
        let input = convert(&req);
        assert_eq!(
            shape(&input),
            vec![(
                "user",
                vec![
                    "image".to_owned(),
                    "text:[image: blobs/img/1]".to_owned(),
                    "text:[image: s3://bucket/img/odd.tiff]".to_owned(),
                    "document:Q3 report-v2".to_owned(),
                    "text:[document: blobs/doc/2]".to_owned(),
                ]
            )]
        );
        let blocks = &input.messages.as_ref().unwrap()[0].content;
        let image = blocks[0].as_image().unwrap();
        assert_eq!(image.format, ImageFormat::Png);
        assert_eq!(
            image.source.as_ref().unwrap().as_s3_location().unwrap().uri,
            "s3://bucket/img/cat.png"
        );
        let document = blocks[3].as_document().unwrap();
        assert_eq!(document.format, DocumentFormat::Pdf);
        assert_eq!(
            document
                .source
                .as_ref()
                .unwrap()
                .as_s3_location()
                .unwrap()
                .uri,
            "s3://bucket/docs/Q3 report_v2.pdf"
        );
    }

    /// Which attachments' bytes are read before a request is sent: the newest that can go as
    /// blocks, and for a model that reads S3 locations only those not at an S3 key.
    #[test]
    fn the_newest_attachments_that_can_go_are_read_unless_the_model_reads_s3() {
        let mut parts: Vec<Part> = (0..7)
            .map(|n| Part::Document(media(&format!("s3://b/d{n}"), "application/pdf")))
            .collect();
        parts.push(Part::Image(media("s3://b/odd.tiff", "image/tiff")));
        parts.push(Part::Image(media("local/img/1", "image/png")));
        let req = request(vec![msg(Role::User, parts)]);
        let keys = |model: &str| -> Vec<String> {
            media_to_read(&req, model)
                .into_iter()
                .map(|m| m.key)
                .collect()
        };
        assert_eq!(
            keys("anthropic.claude-sonnet-4-5-20250929-v1:0"),
            [
                "local/img/1",
                "s3://b/d6",
                "s3://b/d5",
                "s3://b/d4",
                "s3://b/d3",
                "s3://b/d2"
            ],
            "newest first, whatever their kind"
        );
        assert_eq!(keys("us.amazon.nova-pro-v1:0"), ["local/img/1"]);
        assert!(reads_s3_links(
            "arn:aws:bedrock:us-east-1:1:inference-profile/us.amazon.nova-lite-v1:0"
        ));
        assert!(!reads_s3_links("amazon.nova-micro-v1:0"));
        assert!(!reads_s3_links(
            "arn:aws:bedrock:us-east-1:1:application-inference-profile/x"
        ));

        // Read bytes go as bytes; without bytes or links, a line.
        let read = Media {
            s3_links: false,
            bytes: HashMap::from([("s3://b/d6".to_owned(), b"%PDF".to_vec())]),
        };
        let input = into_bedrock(&req, "anthropic.claude-sonnet-4-5", &read).unwrap();
        let blocks = &input.messages.as_ref().unwrap()[0].content;
        assert_eq!(
            blocks[6]
                .as_document()
                .unwrap()
                .source
                .as_ref()
                .unwrap()
                .as_bytes()
                .unwrap()
                .as_ref(),
            b"%PDF"
        );
        assert_eq!(blocks[5].as_text().unwrap(), "[document: s3://b/d5]");
    }

    /// Documents sent in several messages are all in every later request: each keeps a name
    /// of its own (a media key ends in the attachment's number, so the first of every message
    /// is `0`), and only the newest five documents and twenty images go as blocks.
    #[test]
    fn a_request_never_has_two_documents_of_one_name_nor_too_many() {
        let pdf = |m: usize, n: usize| {
            Part::Document(media(
                &format!("s3://b/media/c1/m{m}/{n}"),
                "application/pdf",
            ))
        };
        let png = |m: usize, n: usize| {
            Part::Image(media(&format!("s3://b/media/c1/m{m}/{n}"), "image/png"))
        };
        let mut messages = Vec::new();
        for m in 0..4 {
            let mut parts = vec![pdf(m, 0), pdf(m, 1)];
            parts.extend((2..8).map(|n| png(m, n)));
            messages.push(msg(Role::User, parts));
            messages.push(msg(Role::Assistant, vec![Part::text("Read.")]));
        }
        let input = convert(&request(messages));
        let blocks: Vec<String> = shape(&input)
            .into_iter()
            .flat_map(|(_, blocks)| blocks)
            .collect();
        let documents: Vec<&String> = blocks
            .iter()
            .filter(|b| b.starts_with("document:"))
            .collect();
        assert_eq!(
            documents,
            [
                "document:1",
                "document:0",
                "document:1 (2)",
                "document:0 (2)",
                "document:1 (3)"
            ],
            "the newest five, each named once"
        );
        assert_eq!(blocks.iter().filter(|b| *b == "image").count(), MAX_IMAGES);
        let left: Vec<&String> = blocks.iter().filter(|b| b.starts_with("text:[")).collect();
        assert_eq!(
            left,
            [
                "text:[document: s3://b/media/c1/m0/0]",
                "text:[document: s3://b/media/c1/m0/1]",
                "text:[image: s3://b/media/c1/m0/2]",
                "text:[image: s3://b/media/c1/m0/3]",
                "text:[image: s3://b/media/c1/m0/4]",
                "text:[image: s3://b/media/c1/m0/5]",
                "text:[document: s3://b/media/c1/m1/0]",
            ],
            "the oldest are named in a line"
        );
        let mut names: Vec<String> = documents.iter().map(|d| d.to_lowercase()).collect();
        names.dedup();
        assert_eq!(names.len(), 5);
    }

    #[test]
    fn document_names_are_what_converse_accepts() {
        assert_eq!(
            document_name("s3://b/a/Report (final).pdf"),
            "Report (final)"
        );
        assert_eq!(document_name("s3://b/a/x__y..z.csv"), "x--y--z");
        assert_eq!(document_name("s3://b/a/   .txt"), "document");
        assert_eq!(document_name("s3://b/a/two  spaces"), "two spaces");
    }
}
