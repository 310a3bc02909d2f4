//! The same request, the same bytes: an SDK interceptor that rewrites the serialized
//! `ConverseStream` body with every JSON object's keys in sorted order, before signing.
//!
//! Why: the SDK carries free-form JSON (tool input schemas, tool call inputs, tool results,
//! `additionalModelRequestFields`) as Smithy documents, whose objects are `HashMap`s with a
//! random hash seed per map, and it writes their keys in hash order. Two requests holding the
//! same schema would differ in bytes, and a prompt cache keys on the exact prefix: the tools'
//! and the history's cache points would miss on every call. Sorting makes the body a function
//! of the request alone (the neutral JSON values are sorted maps already, so what is sent is
//! the order they were written in). JSON object order carries no meaning for Bedrock.
//!
//! A body that is not in memory or not JSON is left alone. `Content-Length` is set to the new
//! length; signing happens after, over the new bytes.

use aws_sdk_bedrockruntime::config::interceptors::BeforeTransmitInterceptorContextMut;
use aws_sdk_bedrockruntime::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_types::body::SdkBody;
use serde_json::Value;

/// Rewrites the JSON request body with sorted object keys (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SortedJsonBody;

impl Intercept for SortedJsonBody {
    fn name(&self) -> &'static str {
        "SortedJsonBody"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let request = context.request_mut();
        let Some(sorted) = request.body().bytes().and_then(sorted_json) else {
            return Ok(());
        };
        request
            .headers_mut()
            .insert("content-length", sorted.len().to_string());
        *request.body_mut() = SdkBody::from(sorted);
        Ok(())
    }
}

/// `json` with every object's keys sorted, or `None` when it is not JSON.
pub(crate) fn sorted_json(json: &[u8]) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(json).ok()?;
    // Sorted even if some crate turns on serde_json's `preserve_order`.
    value.sort_all_objects();
    serde_json::to_vec(&value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_at_every_depth_and_nothing_else_changes() {
        let body = br#"{"toolConfig":{"tools":[{"toolSpec":{"name":"w","inputSchema":{"json":{"type":"object","required":["b","a"],"properties":{"b":{"type":"number"},"a":{"type":"string"}}}}}}]},"messages":[{"role":"user","content":[{"text":"caf\u00e9 \"quoted\" \n","x":0.1}]}],"n":-3,"big":18446744073709551615}"#;
        let sorted = String::from_utf8(sorted_json(body).unwrap()).unwrap();
        assert_eq!(
            sorted,
            r#"{"big":18446744073709551615,"messages":[{"content":[{"text":"café \"quoted\" \n","x":0.1}],"role":"user"}],"n":-3,"toolConfig":{"tools":[{"toolSpec":{"inputSchema":{"json":{"properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["b","a"],"type":"object"}},"name":"w"}}]}}"#
        );
        assert_eq!(
            serde_json::from_slice::<Value>(body).unwrap(),
            serde_json::from_str::<Value>(&sorted).unwrap(),
            "the same JSON value"
        );
    }

    #[test]
    fn the_same_objects_in_any_order_give_the_same_bytes() {
        let a = sorted_json(br#"{"x":{"b":1,"a":[{"d":2,"c":3}]},"y":true}"#).unwrap();
        let b = sorted_json(br#"{"y":true,"x":{"a":[{"c":3,"d":2}],"b":1}}"#).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn a_body_that_is_not_json_is_left_alone() {
        assert_eq!(sorted_json(b"not json"), None);
        assert_eq!(sorted_json(b""), None);
    }
}
