//! `tools/list`: the registry's MCP catalogue as MCP tools. Pure.

use rmcp::model::{Tool, ToolAnnotations};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;
use tools::ToolDef;

/// The MCP tool for `def`: its name, description and JSON Schema as the model sees them, and
/// annotations from its flags — `readOnlyHint` (and `idempotentHint`, which holds for a tool
/// that changes nothing) from `read_only`; `destructiveHint` on a tool that changes things,
/// true when the confirmation policy may call its calls risky (`may_be_risky`).
pub fn mcp_tool(def: &ToolDef, may_be_risky: &BTreeSet<String>) -> Tool {
    let schema = def.input_schema.as_object().cloned().unwrap_or_default();
    let annotations = if def.read_only {
        ToolAnnotations::new().read_only(true).idempotent(true)
    } else {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(may_be_risky.contains(&def.name))
    };
    Tool::new(
        Cow::Owned(def.name.clone()),
        Cow::Owned(def.description.clone()),
        Arc::new(schema),
    )
    .with_annotations(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn flags_become_annotations() {
        let risky = BTreeSet::from(["cancel".to_owned()]);
        let schema = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        let list = ToolDef::new("list", "List them.", schema.clone()).read_only();
        let cancel = ToolDef::new("cancel", "Cancel one.", schema.clone());
        let create = ToolDef::new("create", "Create one.", schema.clone());

        let wire = |def: &ToolDef| serde_json::to_value(mcp_tool(def, &risky)).unwrap();
        let list = wire(&list);
        assert_eq!(list["name"], "list");
        assert_eq!(list["description"], "List them.");
        assert_eq!(list["inputSchema"], schema);
        assert_eq!(
            list["annotations"],
            json!({"readOnlyHint": true, "idempotentHint": true})
        );
        assert_eq!(
            wire(&cancel)["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true})
        );
        assert_eq!(
            wire(&create)["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": false})
        );
    }
}
