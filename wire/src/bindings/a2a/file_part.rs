//! A2A parts that are not text or CAP data: a part's media type in either spelling,
//! and a file part (inline bytes or a URL) as a `cap.artifact`.

use serde_json::Value;

use super::spelling::Part;
use crate::protocol::CapEvent;

/// A part's media type: 1.0's `mediaType`, 0.3's `file.mimeType` or `metadata.mimeType`.
pub(super) fn media_type(part: &Value) -> Option<&str> {
    part.get("mediaType")
        .or_else(|| part.get("file").and_then(|f| f.get("mimeType")))
        .or_else(|| part.get("metadata").and_then(|m| m.get("mimeType")))
        .and_then(Value::as_str)
}

/// The artifact id of a message's part: a named file's is the message id and its name.
pub(super) fn part_id(message_id: &str, part: &Value) -> String {
    match Part::read(part) {
        Part::File { name: Some(n), .. } => format!("{message_id}/{n}"),
        _ => message_id.to_owned(),
    }
}

/// A file part as a `cap.artifact`: inline bytes as content (base64), a URL as `uri`.
pub(super) fn file_artifact(id: &str, part: &Value) -> Option<CapEvent> {
    let Part::File {
        media_type: mime,
        name,
        inline,
        url,
    } = Part::read(part)
    else {
        return None;
    };
    let mime = mime.unwrap_or("application/octet-stream");
    let mut event = CapEvent::artifact(
        id,
        mime,
        name.map(str::to_owned),
        inline.map_or(Value::Null, Value::from),
    );
    if let (CapEvent::Artifact(a), Some(url)) = (&mut event, url) {
        a.uri = Some(url.to_owned()).into();
        a.content = None.into();
    }
    Some(event)
}
